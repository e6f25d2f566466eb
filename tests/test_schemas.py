
import pyarrow as pa
import pytest

from corpusforge import schemas
from corpusforge.errors import SchemaError
from corpusforge.io.readers.base import text_table


@pytest.mark.parametrize("name", schemas.RECORD_KINDS)
def test_schema_files_load_with_versions(name):
    s = schemas.load(name)
    assert s.version.count(".") == 2
    assert s.arrow.field("id").type == pa.string() and not s.arrow.field("id").nullable
    assert s.arrow.metadata[b"corpusforge.schema"] == name.encode()
    # every field is documented: the schema files are the contract
    assert all(s.descriptions[f.name] for f in s.arrow)


def test_pointcloud_points_are_fixed_size_float32_triples():
    s = schemas.load("pointcloud")
    assert s.arrow.field("points").type == pa.list_(pa.list_(pa.float32(), 3))
    assert s.arrow.field("colors").type == pa.list_(pa.list_(pa.uint8(), 3))


def test_text_token_ids_are_uint32():
    assert schemas.load("text").arrow.field("token_ids").type == pa.list_(pa.uint32())


def test_manifest_schema_is_json_schema():
    m = schemas.manifest_json_schema()
    assert m["$schema"].startswith("https://json-schema.org") and "shards" in m["required"]


def test_unknown_schema_is_clear_error():
    with pytest.raises(SchemaError, match="unknown record schema 'audio'"):
        schemas.load("audio")


def _text():
    return text_table("web", ["hello", "world"])


def test_conform_fills_optional_fields_and_orders_columns():
    s = schemas.load("text")
    target = schemas.dataset_schema(s, {"score_quality": pa.float64()})
    t = schemas.conform(_text(), target)
    assert t.schema.names == [f.name for f in s.arrow] + ["score_quality"]
    assert t.column("token_ids").null_count == 2


def test_conform_accepts_large_string_and_casts_to_canonical():
    s = schemas.load("text")
    t = _text()
    t = t.set_column(t.schema.get_field_index("text"), "text", t.column("text").cast(pa.large_string()))
    out = schemas.conform(t, schemas.dataset_schema(s))
    assert out.schema.field("text").type == pa.string()


def test_missing_required_field_names_it():
    s = schemas.load("text")
    with pytest.raises(SchemaError, match="missing field 'source'"):
        schemas.conform(_text().drop_columns(["source"]), schemas.dataset_schema(s))


def test_wrong_type_names_field():
    s = schemas.load("text")
    t = _text()
    t = t.set_column(t.schema.get_field_index("text"), "text", pa.array([1, 2]))
    with pytest.raises(SchemaError, match="field 'text' has type int64, expected string"):
        schemas.conform(t, schemas.dataset_schema(s))


def test_null_in_non_nullable_field_names_it():
    s = schemas.load("text")
    t = _text()
    t = t.set_column(t.schema.get_field_index("id"), "id", pa.array(["a", None]))
    with pytest.raises(SchemaError, match="field 'id' is not nullable but has 1 null"):
        schemas.conform(t, schemas.dataset_schema(s))


def test_undeclared_column_rejected():
    s = schemas.load("text")
    with pytest.raises(SchemaError, match="unexpected column"):
        schemas.conform(_text().append_column("foo", pa.array([1, 2])), schemas.dataset_schema(s))


def test_extension_names_and_types_enforced():
    s = schemas.load("text")
    with pytest.raises(SchemaError, match="neither a schema field nor an extension"):
        schemas.dataset_schema(s, {"quality": pa.float64()})
    with pytest.raises(SchemaError, match="must be double"):
        schemas.dataset_schema(s, {"score_x": pa.string()})
    with pytest.raises(SchemaError):
        schemas.dataset_schema(s, {"score_Bad-Name": pa.float64()})


def test_validate_rejected_tables_need_reason_columns():
    s = schemas.load("text")
    with pytest.raises(SchemaError, match="reject_stage"):
        schemas.validate(_text(), s, rejected=True)
