"""Pipeline configs: YAML in, validated pydantic models out.

A config names its record kind, its inputs (each read by a reader named by ``format``), its
stages (each named by ``stage``), and its output. Every part is validated by its own
pydantic model with unknown keys forbidden; errors name the field by its path, e.g.
``stages.1.form: Input should be 'NFC', 'NFKC', 'NFD' or 'NFKD'``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from corpusforge import registry
from corpusforge.config_base import StrictModel, format_errors, read_yaml
from corpusforge.errors import ConfigError
from corpusforge.io.writer import WriterOptions


class OutputConfig(StrictModel):
    path: str = Field(description="Folder of the output dataset; rejected rows go to <path>/rejected.")
    shard_rows: int | None = Field(None, gt=0, description="Roll to a new shard after this many rows.")
    shard_bytes: int | None = Field(256 << 20, gt=0, description="Roll to a new shard once the file reaches this size.")
    row_group_rows: int = Field(100_000, gt=0)
    row_group_bytes: int = Field(64 << 20, gt=0, description="Uncompressed Arrow bytes per Parquet row group.")
    compression: Literal["zstd", "snappy", "gzip", "lz4", "brotli", "none"] = "zstd"
    compression_level: int | None = 3
    keep_work: bool = Field(False, description="Keep <path>/_work (intermediate shards, fingerprints) after success.")
    rejected_text: Literal["keep", "scrub", "drop"] = Field(
        "keep", description="Text of rejected rows: keep it (a quarantine to inspect), scrub it with the pipeline's "
                            "text.pii config (or text.pii's defaults), or drop it (empty text; ids, reasons and "
                            "provenance stay).")

    def writer_options(self) -> WriterOptions:
        return WriterOptions(self.shard_rows, self.shard_bytes, self.row_group_rows, self.row_group_bytes,
                             self.compression, self.compression_level if self.compression != "none" else None)


class PipelineConfig(StrictModel):
    name: str
    kind: Literal["text", "image", "pointcloud"]
    inputs: list[dict[str, Any]] = Field(min_length=1)
    stages: list[dict[str, Any]] = Field(default_factory=list)
    output: OutputConfig
    seed: int = 0
    batch_rows: int = Field(4096, gt=0, description="Rows per batch handed to stages.")
    unit_bytes: int = Field(64 << 20, gt=0, description="Input files are grouped into work units of about this many bytes.")
    retries: int = Field(1, ge=0, description="Times a failing unit is retried before the run reports it and fails.")

    def readers(self, base: Path | None = None):
        """Instantiate the readers, in config order."""
        out = []
        for i, raw in enumerate(self.inputs):
            cls = registry.reader_class(raw["format"])
            cfg = cls.Config.model_validate({k: v for k, v in raw.items() if k != "format"})
            out.append(cls(cfg, kind=self.kind, batch_rows=self.batch_rows, index=i, base=base))
        return out

    def stage_objects(self):
        out = []
        for raw in self.stages:
            cls = registry.stage_class(raw["stage"])
            cfg = cls.Config.model_validate({k: v for k, v in raw.items() if k != "stage"})
            out.append(cls(cfg, seed=self.seed))
        return out

    def config_hash(self) -> str:
        """sha256 of what determines the output's content (not where it is written)."""
        d = self.model_dump(mode="json")
        d["output"].pop("path", None)
        d["output"].pop("keep_work", None)
        return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def from_dict(raw: dict, *, source: str = "config") -> PipelineConfig:
    """Validate a config dict, including every input's and stage's own options."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a pipeline config is a mapping, got {type(raw).__name__}")
    try:
        cfg = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_errors(exc)}") from None
    for section, key, table, lookup, verb in (("inputs", "format", registry.READERS, registry.reader_class, "reads"),
                                              ("stages", "stage", registry.STAGES, registry.stage_class, "works on")):
        for i, item in enumerate(getattr(cfg, section)):
            where = f"{source}: {section}.{i}"
            if key not in item:
                raise ConfigError(f"{where}.{key}: missing (one of {', '.join(sorted(table))})")
            try:
                cls = lookup(item[key])
            except KeyError as exc:
                raise ConfigError(f"{where}.{key}: {exc.args[0]}") from None
            if cfg.kind not in cls.kinds:
                raise ConfigError(f"{where}.{key}: {item[key]!r} {verb} {'/'.join(cls.kinds)} records, "
                                  f"not {cfg.kind!r} (the pipeline kind)")
            try:
                cls.Config.model_validate({k: v for k, v in item.items() if k != key})
            except ValidationError as exc:
                raise ConfigError(f"{source}: {format_errors(exc, f'{section}.{i}')}") from None
    return cfg


def load_config(path: str | Path, overrides: dict | None = None) -> PipelineConfig:
    """Load and validate a YAML (or JSON) pipeline config. Relative input and output paths
    are kept as written: they resolve against the working directory, like every CLI tool."""
    return from_dict(read_yaml(path, overrides, "config"), source=str(path))
