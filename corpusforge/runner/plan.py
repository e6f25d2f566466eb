"""The plan of a run: its units (input files grouped by size), its segments (the stage list cut
before each global stage), and what every step needs, rebuilt from the config alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from corpusforge import schemas
from corpusforge.config import PipelineConfig, from_dict
from corpusforge.errors import CorpusforgeError
from corpusforge.io.dataset import REJECTED
from corpusforge.io.readers.base import Reader, file_size
from corpusforge.io.storage import Store
from corpusforge.runner.layout import Layout
from corpusforge.stage import GlobalStage, Stage, StageStats

READ_STAGE = "read"


@dataclass(frozen=True)
class Unit:
    index: int
    files: tuple[tuple[int, str], ...]   # (input index, path)
    bytes: int


@dataclass
class Segment:
    index: int
    global_stage: GlobalStage | None     # filtered at the start of this segment (None for segment 0)
    global_position: int | None          # its index in the config's stage list
    stages: list[tuple[int, Stage]]      # (index in the config's stage list, stage)


@dataclass
class UnitResult:
    segment: int
    unit: int
    kept: list[dict]
    rejected: list[dict]
    stats: dict                          # stage key -> StageStats dict
    read: dict = field(default_factory=dict)


class Plan(Layout):
    """Everything a worker needs to run one step, rebuilt from the config alone."""

    def __init__(self, config: PipelineConfig, base: Path | None = None):
        self.config = config
        self.base = Path(base) if base else Path.cwd()
        self.store = Store(config.output.path, base=self.base)
        self.out = self.store.root                      # paths below are paths of self.store
        self.rejected_dir = self.store.join(REJECTED)
        self.work = self.store.join("_work")
        self.record_schema = schemas.load(config.kind)
        self.readers: list[Reader] = config.readers(base=self.base)
        self.stages: list[Stage] = config.stage_objects()
        ext: dict[str, pa.DataType] = {}
        for component in [*self.readers, *self.stages]:
            for name, typ in component.output_columns().items():
                if ext.get(name, typ) != typ:
                    raise CorpusforgeError(f"column {name!r} declared with two types ({ext[name]}, {typ})")
                ext[name] = typ
        self.kept_schema = schemas.dataset_schema(self.record_schema, ext)
        self.rejected_schema = schemas.dataset_schema(self.record_schema, ext, rejected=True)
        self.segments = self._segments()
        self.config_hash = config.config_hash()
        self._units: list[Unit] | None = None

    @classmethod
    def from_dict(cls, raw: dict, base: Path | None = None) -> "Plan":
        return cls(from_dict(raw), base=base)

    # -- planning --------------------------------------------------------------------
    def _segments(self) -> list[Segment]:
        segments = [Segment(0, None, None, [])]
        for i, stage in enumerate(self.stages):
            if stage.is_global:
                segments.append(Segment(len(segments), stage, i, []))
            else:
                segments[-1].stages.append((i, stage))
        return segments

    @property
    def units(self) -> list[Unit]:
        if self._units is None:
            self._units = plan_units(self.readers, self.config.unit_bytes)
        return self._units

    def rejected_text(self, table: pa.Table) -> pa.Table:
        """Rejected text rows as ``output.rejected_text`` says: kept, scrubbed or emptied."""
        mode = self.config.output.rejected_text
        if mode == "keep" or "text" not in table.column_names:
            return table
        at = table.schema.get_field_index("text")
        if mode == "drop":
            return table.set_column(at, "text", pa.array([""] * table.num_rows, pa.string()))
        if getattr(self, "_scrubber", None) is None:
            from corpusforge.text.pii import Pii

            configs = [s.config for s in self.stages if s.name == "text.pii"]
            self._scrubber = Pii(configs[-1] if configs else None)
        n = table.num_rows
        probe = pa.table({"text": table.column("text"), "lang": pa.nulls(n, pa.string()),
                          "__row": pa.array(range(n), pa.int64())})
        res = self._scrubber.process(probe, StageStats())
        texts = [""] * n             # a row the scrubber would drop whole (policy drop) keeps no text
        for row, text in zip(res.kept.column("__row").to_pylist(), res.kept.column("text").to_pylist()):
            texts[row] = text
        return table.set_column(at, "text", pa.array(texts, pa.string()))

    def stage_key(self, position: int, stage: Stage) -> str:
        return f"{position:02d}:{stage.name}"


def plan_units(readers: list[Reader], unit_bytes: int) -> list[Unit]:
    """Group input files into units of about ``unit_bytes`` (never splitting a file, never
    mixing inputs), in a deterministic order."""
    units: list[Unit] = []
    for reader in readers:
        current, size = [], 0
        for path in reader.files():
            n = file_size(path)
            if current and size + n > unit_bytes:
                units.append(Unit(len(units), tuple(current), size))
                current, size = [], 0
            current.append((reader.index, str(path)))
            size += n
        if current:
            units.append(Unit(len(units), tuple(current), size))
    return units
