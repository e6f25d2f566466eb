"""Record schemas: the contract between the pipeline and trainer/.

The JSON files in ``schemas/`` are the source of truth. They ship inside the package as
``corpusforge/record_schemas`` (a link to ``schemas/`` in the repository, copied into wheels) and
are read with ``importlib.resources``, so an installed corpusforge needs no checkout. This module turns them into
``pyarrow.Schema`` objects and checks tables against them. A table conforms when

* every schema field is present with its type (string-like and list-like variants that
  differ only in offset width, e.g. ``large_string`` or ``string_view``, are accepted
  and cast to the canonical type on write);
* non-nullable fields contain no nulls;
* every other column is an extension column (``score_*``, ``tag_*``, ``count_*``) of the
  declared type, or one of the rejection columns of a ``rejected/`` dataset.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

import pyarrow as pa
import pyarrow.compute as pc

from corpusforge.errors import SchemaError

SCHEMA_DIR = files("corpusforge") / "record_schemas"
RECORD_KINDS = ("text", "image", "pointcloud")

# Columns that a rejected/ dataset adds to its record schema.
REJECT_FIELDS = [
    pa.field("reject_stage", pa.string(), nullable=False),
    pa.field("reject_reason", pa.string(), nullable=False),
    pa.field("reject_detail", pa.string(), nullable=True),
]


def parse_type(spec: str) -> pa.DataType:
    """Parse the small type language used in schemas/*.json.

    ``string``, ``binary``, ``int32``, ``int64``, ``uint32``, ``float32``, ``float64``, ``bool``,
    ``list<T>`` and ``fixed_size_list<T,N>``.
    """
    spec = spec.replace(" ", "")
    if spec.startswith("list<") and spec.endswith(">"):
        return pa.list_(parse_type(spec[5:-1]))
    if spec.startswith("fixed_size_list<") and spec.endswith(">"):
        inner, _, size = spec[16:-1].rpartition(",")
        return pa.list_(parse_type(inner), int(size))
    simple = {
        "string": pa.string(), "binary": pa.binary(), "bool": pa.bool_(),
        "int32": pa.int32(), "int64": pa.int64(), "uint8": pa.uint8(), "uint32": pa.uint32(),
        "float32": pa.float32(), "float64": pa.float64(),
    }
    if spec not in simple:
        raise ValueError(f"unknown type in schema file: {spec!r}")
    return simple[spec]


@dataclass(frozen=True)
class RecordSchema:
    name: str
    version: str
    arrow: pa.Schema
    extensions: tuple[tuple[str, pa.DataType], ...]  # (prefix, type)
    descriptions: dict

    def extension_type(self, column: str) -> pa.DataType | None:
        for prefix, typ in self.extensions:
            if column.startswith(prefix) and re.fullmatch(r"[a-z0-9_]+", column[len(prefix):] or "-"):
                return typ
        return None

    def with_reject_fields(self) -> pa.Schema:
        schema = self.arrow
        for f in REJECT_FIELDS:
            schema = schema.append(f)
        return schema

    def empty_table(self) -> pa.Table:
        return self.arrow.empty_table()


@lru_cache(maxsize=None)
def load(name: str) -> RecordSchema:
    """Load ``schemas/<name>.json`` as a :class:`RecordSchema`."""
    path = SCHEMA_DIR / f"{name}.json"
    if name not in RECORD_KINDS or not path.is_file():
        raise SchemaError(f"unknown record schema {name!r}; expected one of {', '.join(RECORD_KINDS)}")
    spec = json.loads(path.read_text())
    fields = [pa.field(f["name"], parse_type(f["type"]), nullable=f["nullable"]) for f in spec["fields"]]
    meta = {b"corpusforge.schema": spec["name"].encode(), b"corpusforge.schema_version": spec["version"].encode()}
    return RecordSchema(
        name=spec["name"],
        version=spec["version"],
        arrow=pa.schema(fields, metadata=meta),
        extensions=tuple((e["prefix"], parse_type(e["type"])) for e in spec.get("extensions", [])),
        descriptions={f["name"]: f["description"] for f in spec["fields"]},
    )


def manifest_json_schema() -> dict:
    return json.loads((SCHEMA_DIR / "manifest.json").read_text())


def _canonical(t: pa.DataType) -> pa.DataType:
    """Map offset-width variants onto the canonical type used in schema files."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_canonical(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_canonical(t.value_type))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_canonical(t.value_type), t.list_size)
    return t


def dataset_schema(schema: RecordSchema, extension_columns: dict[str, pa.DataType] | None = None,
                   *, rejected: bool = False) -> pa.Schema:
    """The exact Arrow schema of a dataset's shards: the record schema's fields (plus the
    rejection columns for a ``rejected/`` dataset), then the declared extension columns
    sorted by name. Every shard of a dataset has this schema, so that polars, pyarrow.dataset
    and Hugging Face ``datasets`` read them as one table.
    """
    base = schema.with_reject_fields() if rejected else schema.arrow
    fields = list(base)
    for name in sorted(extension_columns or {}):
        declared = extension_columns[name]
        allowed = schema.extension_type(name)
        if allowed is None:
            raise SchemaError(
                f"{schema.name} schema v{schema.version}: column {name!r} is neither a schema field nor an "
                f"extension column (extension columns are named "
                f"{', '.join(p + '<name>' for p, _ in schema.extensions)}, lowercase letters, digits, underscores)")
        if declared != allowed:
            raise SchemaError(f"{schema.name}: extension column {name!r} must be {allowed}, declared {declared}")
        if name in base.names:
            raise SchemaError(f"{schema.name}: extension column {name!r} clashes with a schema field")
        fields.append(pa.field(name, allowed, nullable=True))
    return pa.schema(fields, metadata=base.metadata)


def conform(table: pa.Table, target: pa.Schema, *, schema_name: str = "record") -> pa.Table:
    """Return ``table`` with exactly the columns of ``target`` (built by :func:`dataset_schema`),
    in its order and canonical types. Missing nullable columns are filled with nulls;
    everything else that does not fit raises :class:`SchemaError` naming the field.
    """
    names = set(table.column_names)
    extra = names - set(target.names)
    if extra:
        raise SchemaError(
            f"{schema_name}: unexpected column(s) {sorted(extra)}: not in the schema and not declared by any stage")
    columns = []
    for field in target:
        if field.name not in names:
            if not field.nullable:
                raise SchemaError(f"{schema_name}: missing field {field.name!r}")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        col = table.column(field.name)
        if col.type != field.type:
            if pa.types.is_null(col.type):
                col = pa.nulls(len(col), field.type)
            elif _canonical(col.type) == field.type or field.name.startswith(("score_", "count_")):
                try:
                    col = pc.cast(col, field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(f"{schema_name}: field {field.name!r} cannot be cast to {field.type}: {exc}")
            else:
                raise SchemaError(
                    f"{schema_name}: field {field.name!r} has type {col.type}, expected {field.type}")
        if not field.nullable and col.null_count:
            raise SchemaError(
                f"{schema_name}: field {field.name!r} is not nullable but has {col.null_count} null value(s)")
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=target)


def validate(table: pa.Table, schema: RecordSchema, *, rejected: bool = False) -> None:
    """Raise :class:`SchemaError` if ``table`` does not conform to ``schema`` (extension
    columns are accepted when their names and types fit the schema's extension rules)."""
    ext = {n: table.schema.field(n).type for n in table.column_names
           if n not in schema.with_reject_fields().names}
    ext = {n: (schema.extension_type(n) or t) for n, t in ext.items()}
    conform(table, dataset_schema(schema, ext, rejected=rejected),
            schema_name=f"{schema.name} schema v{schema.version}")
