"""Build a training set: select rows from each source to meet the target shares of a budget,
order them (shuffled, or by a curriculum), write shards and a manifest that records the mixture.

Selection, per source with target t units (tokens for text, records otherwise) and n available:
``floor(t / n)`` full passes (each a fresh seeded permutation: upsampling), then a seeded random
subset of rows until the remaining units are met (downsampling, or the last partial pass). A
source that would need more than ``max_epochs`` passes is capped there: an error by default,
or a warning with what was achieved (``on_shortfall: warn``). Shares come from weights, from a
temperature (p_i proportional to n_i^(1/T)), or from a named preset of domain shares.

Order (``curriculum``): ``sorted`` by difficulty; ``smooth`` (a noisy sort: the share of hard
examples rises over training but neighbours differ); ``phases`` (consecutive phases, each its
own mixture and token count, each sorted by difficulty or shuffled). Rows are then shuffled
within windows of ``window`` rows. Without a curriculum the whole set is shuffled. The order is
the order of the shards and of the rows in them, and the manifest's ``order`` describes it, so
any reader that follows the manifest (the trainer does) sees the curriculum.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import xxhash

from corpusforge import schemas
from corpusforge.errors import ConfigError, CorpusforgeError
from corpusforge.io.dataset import STATS, Dataset, build_manifest, write_manifest
from corpusforge.io.storage import Store, is_url
from corpusforge.io.writer import ShardWriter, WriterOptions
from corpusforge.mix.config import PRESETS, Holdout, MixConfig

HEAVY = ("text", "token_ids", "image", "points", "colors", "normals", "intensity", "meta")


@dataclass
class SourceIndex:
    name: str
    dataset: Dataset
    rows: pl.DataFrame              # shard, row, units, and the light columns (scores, counts, n_tokens)
    unit: str                       # tokens | records
    warnings: list[str] = field(default_factory=list)

    @property
    def available(self) -> int:
        return int(self.rows["units"].sum())


def heldout_mask(ids: list[str], fraction: float, seed: int) -> np.ndarray:
    """True for the records in the held-out part: a hash of (seed, id), so the split does not
    depend on the shard layout or the row order and is the same in every run."""
    scale = float(2 ** 64)
    return np.fromiter((xxhash.xxh64_intdigest(i.encode(), seed) / scale < fraction for i in ids), bool, len(ids))


def index_source(name: str, path: str, select_source: str | None, holdout: Holdout | None = None,
                 field: str | None = None) -> SourceIndex:
    """The light columns of one source's rows; errors name ``field`` (default: sources.NAME)."""
    field = field or f"sources.{name}"
    ds = Dataset.open(path)
    parts = []
    for i in range(len(ds.manifest["shards"])):
        names = [n for n in ds.shard_schema(i).names if n not in HEAVY]
        df = pl.from_arrow(ds.read_shard(i, columns=names)).with_row_index("row").with_columns(pl.lit(i).alias("shard"))
        parts.append(df)
    rows = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
    if select_source is not None:
        rows = rows.filter(pl.col("source") == select_source)
    if holdout is not None:
        mask = heldout_mask(rows["id"].to_list(), holdout.fraction, holdout.seed)
        rows = rows.filter(pl.Series(mask if holdout.part == "heldout" else ~mask))
    if rows.height == 0:
        raise ConfigError(f"{field}: no rows in {path}" + (f" with source {select_source!r}" if select_source else "")
                          + (f" in the {holdout.part} part of its holdout" if holdout else ""))
    if ds.schema_name == "text":
        if "n_tokens" not in rows.columns or rows["n_tokens"].null_count() == rows.height:
            raise ConfigError(f"{field}: {path} has no token counts; text is mixed by tokens: run text.tokenize first")
        rows = rows.with_columns(pl.col("n_tokens").fill_null(0).alias("units"))
        unit = "tokens"
    else:
        rows = rows.with_columns(pl.lit(1, pl.Int64).alias("units"))
        unit = "records"
    return SourceIndex(name, ds, rows, unit)


def shares(cfg: MixConfig, sizes: dict[str, int]) -> dict[str, float]:
    if cfg.temperature is not None:
        raw = {n: sizes[n] ** (1.0 / cfg.temperature) for n in cfg.sources}
    elif cfg.preset is not None:
        preset = PRESETS[cfg.preset]
        domains = {n: s.domain or n for n, s in cfg.sources.items()}
        unknown = sorted({d for d in domains.values() if d not in preset})
        if unknown:
            raise ConfigError(f"preset {cfg.preset}: no share for domain {unknown[0]!r} (domains: {', '.join(preset)}); "
                              f"set sources.<name>.domain")
        per_domain = {}
        for n, d in domains.items():
            per_domain.setdefault(d, []).append(n)
        raw = {n: preset[domains[n]] / len(per_domain[domains[n]]) for n in cfg.sources}
    else:
        raw = {n: s.weight for n, s in cfg.sources.items()}
    total = sum(raw.values())
    return {n: v / total for n, v in raw.items()}


def select(units: np.ndarray, target: float, max_epochs: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (repeats allowed) and their pass number, meeting ``target`` units."""
    n = units.sum()
    passes = min(target / n, max_epochs) if n else 0.0
    full = int(math.floor(passes + 1e-12))
    picks, pass_no = [], []
    for p in range(full):
        picks.append(rng.permutation(len(units)))
        pass_no.append(np.full(len(units), p))
    remainder = target - full * n if passes < max_epochs else (passes - full) * n
    if remainder > 0 and full < max_epochs:
        order = rng.permutation(len(units))
        cum = np.cumsum(units[order])
        k = int(np.searchsorted(cum, remainder))       # the row that crosses the remainder...
        if k < len(order) and cum[k] - remainder < remainder - (cum[k - 1] if k else 0):
            k += 1                                       # ...is taken when that lands closer
        picks.append(order[:k])
        pass_no.append(np.full(k, full))
    if not picks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(picks), np.concatenate(pass_no)


def difficulty(df: pl.DataFrame, score: str) -> np.ndarray:
    try:
        expr = pl.col(score) if score in df.columns else pl.sql_expr(score)
        values = df.select(expr.cast(pl.Float64)).to_series()
    except Exception as exc:  # noqa: BLE001 - polars raises several types for bad expressions
        raise ConfigError(f"curriculum.score: {score!r} cannot be computed from the columns "
                          f"({', '.join(c for c in df.columns if c not in ('shard', 'row'))}): {exc}") from None
    return values.fill_null(values.median() if values.null_count() < len(values) else 0.0).to_numpy()


def window_shuffle(n: int, window: int, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(n)
    for lo in range(0, n, window):
        rng.shuffle(idx[lo:lo + window])
    return idx


def build(cfg: MixConfig, base: Path | None = None, log=print, report: bool = True) -> dict:
    started = time.perf_counter()
    base = Path(base) if base else Path.cwd()
    # local paths are relative to base; object-store URLs (s3://...) are taken as they are
    resolve = lambda p: p if is_url(p) else str(Path(p) if Path(p).is_absolute() else base / p)  # noqa: E731
    sources = {n: index_source(n, resolve(s.path), s.select_source, s.holdout) for n, s in cfg.sources.items()}
    kinds = {s.dataset.schema_name for s in sources.values()}
    if len(kinds) > 1:
        raise ConfigError(f"sources mix record kinds {sorted(kinds)}: one training set holds one kind")
    kind = kinds.pop()
    sizes = {n: s.available for n, s in sources.items()}
    share = shares(cfg, sizes)
    budget = cfg.budget or sum(sizes.values())
    rng = np.random.default_rng(cfg.seed)
    warnings: list[str] = []

    def take(name: str, target: float, phase: int) -> pl.DataFrame:
        src = sources[name]
        units = src.rows["units"].to_numpy()
        cap = cfg.sources[name].max_epochs
        if target > cap * src.available + 1e-9:
            msg = (f"source {name}: {target:,.0f} {src.unit} requested, {src.available:,} available x max_epochs "
                   f"{cap:g} = {cap * src.available:,.0f}")
            if cfg.on_shortfall == "error":
                raise CorpusforgeError(msg + "; lower its share or budget, raise max_epochs, or set on_shortfall: warn")
            warnings.append(msg + "; capped")
        pos, passes = select(units, target, cap, rng)
        return src.rows[pos].with_columns(pl.lit(name).alias("mix_source"), pl.Series("mix_pass", passes),
                                          pl.lit(phase).alias("mix_phase"))

    cur = cfg.curriculum
    if cur and cur.mode == "phases":
        chosen = [take(n, ph.tokens * w, i) for i, ph in enumerate(cur.phases) for n, w in ph.weights.items() if w > 0]
        requested = {n: sum(ph.tokens * ph.weights.get(n, 0) for ph in cur.phases) for n in cfg.sources}
        budget = sum(ph.tokens for ph in cur.phases)
    else:
        chosen = [take(n, share[n] * budget, 0) for n in cfg.sources]
        requested = {n: share[n] * budget for n in cfg.sources}
    mix = pl.concat(chosen, how="diagonal_relaxed")

    # ---- order ---------------------------------------------------------------------------------
    order_info: dict = {"kind": "shuffled", "description": "rows shuffled uniformly (no curriculum)"}
    if cur is None:
        order = rng.permutation(mix.height)
    else:
        d = difficulty(mix, cur.score)
        if cur.mode == "sorted":
            base_order = np.argsort(d, kind="stable")
        elif cur.mode == "smooth":
            rank = np.argsort(np.argsort(d, kind="stable"), kind="stable") / max(mix.height - 1, 1)
            base_order = np.argsort(rank + rng.normal(0, cur.noise, mix.height), kind="stable")
        else:
            ph = mix["mix_phase"].to_numpy()
            key = d if cur.within_phase == "sorted" else rng.random(mix.height)
            base_order = np.lexsort((key, ph))
        order = base_order[window_shuffle(mix.height, cur.window, rng)]
        order_info = {"kind": "curriculum", "score": cur.score, "mode": cur.mode, "window": cur.window,
                      "description": f"easy to hard by {cur.score} ({cur.mode}), shuffled within windows of "
                                     f"{cur.window} rows; read shards and rows in manifest order"}
    mix = mix[order]
    if cur is not None:
        mix = mix.with_columns(pl.Series("mix_difficulty", difficulty(mix, cur.score)))
    if cur and cur.mode == "phases":
        units_cum = np.cumsum(mix["units"].to_numpy())
        bounds = [int(np.searchsorted(mix["mix_phase"].to_numpy(), i, side="right")) for i in range(len(cur.phases))]
        order_info["phases"] = [{"phase": i, "rows_end": b, "units_end": int(units_cum[b - 1]) if b else 0}
                                for i, b in enumerate(bounds)]

    # ---- write ---------------------------------------------------------------------------------
    store = Store(resolve(cfg.output.path))
    out = store.root
    record = schemas.load(kind)
    ext: dict[str, pa.DataType] = {"tag_mix_source": pa.string(), "tag_mix_pass": pa.string()}
    for s in sources.values():
        for col in s.dataset.arrow_schema():
            if col.name not in record.with_reject_fields().names and record.extension_type(col.name) is not None:
                ext[col.name] = record.extension_type(col.name)
    target = schemas.dataset_schema(record, ext)
    writer = ShardWriter(out, "part-00000", target, WriterOptions(cfg.output.shard_rows, cfg.output.shard_bytes),
                         record.name, store=store)
    tables: dict[tuple[str, int], pa.Table] = {}
    chunk = 4096
    for lo in range(0, mix.height, chunk):
        part = mix[lo:lo + chunk]
        pieces = []
        for (name, shard), grp in part.with_row_index("pos").group_by(["mix_source", "shard"], maintain_order=True):
            key = (name, int(shard))
            if key not in tables:
                tables[key] = sources[name].dataset.read_shard(int(shard))
            t = tables[key].take(pa.array(grp["row"].to_numpy()))
            t = t.append_column("tag_mix_source", pa.array([name] * t.num_rows, pa.string()))
            t = t.append_column("tag_mix_pass", pa.array(grp["mix_pass"].cast(pl.String).to_list(), pa.string()))
            pieces.append((grp["pos"].to_numpy(), t))
        positions = np.concatenate([p for p, _ in pieces])
        table = pa.concat_tables([t.select(sorted(t.column_names)) for _, t in pieces], promote_options="permissive")
        writer.write(table.take(pa.array(np.argsort(positions, kind="stable"))))
    shards = writer.close()

    achieved_units = mix.group_by("mix_source").agg(pl.col("units").sum()).to_dict(as_series=False)
    achieved = dict(zip(achieved_units["mix_source"], achieved_units["units"]))
    total = sum(achieved.values()) or 1
    mixture = {n: {"requested_share": requested[n] / max(sum(requested.values()), 1),
                   "achieved_share": achieved.get(n, 0) / total, "requested": requested[n],
                   "achieved": achieved.get(n, 0), "available": sizes[n],
                   "repeats": achieved.get(n, 0) / sizes[n] if sizes[n] else 0.0}
               for n in cfg.sources}
    unit = next(iter(sources.values())).unit
    lineage = {"mix": cfg.model_dump(mode="json"), "sources": {n: s.dataset.manifest.get("config_hash") for n, s in sources.items()}}
    import hashlib
    import json

    config_hash = hashlib.sha256(json.dumps(cfg.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
    manifest = build_manifest(schema=record, target=target, shards=shards, dataset="kept", config_hash=config_hash,
                              lineage=lineage, sources=_sources(mix, unit), order=order_info,
                              artifacts=_tokenizer(sources, store))
    manifest["mixture"] = {"unit": unit, "budget": budget, "sources": mixture, "warnings": warnings}
    curve = None
    if cur is not None:
        dv = mix["mix_difficulty"].to_numpy()
        bins = np.array_split(dv, min(100, max(1, len(dv))))
        curve = [float(np.mean(b)) for b in bins if len(b)]
    stats = {"pipeline": cfg.name, "kind": kind, "mixture": manifest["mixture"], "order": order_info,
             "difficulty_curve": curve, "rows": mix.height, "wall_seconds": round(time.perf_counter() - started, 3)}
    store.write_json(store.join(STATS), stats)
    write_manifest(out, manifest, store=store)
    if report:
        from corpusforge.runner import write_report

        write_report(store.url)
    for w in warnings:
        log(f"warning: {w}")
    return stats


def _sources(mix: pl.DataFrame, unit: str) -> dict:
    agg = mix.group_by("mix_source").agg(pl.len().alias("rows"), pl.col("units").sum().alias("units"))
    out = {}
    for r in agg.sort("mix_source").iter_rows(named=True):
        out[r["mix_source"]] = {"rows": r["rows"], **({"tokens": int(r["units"])} if unit == "tokens" else {})}
    return out


def _tokenizer(sources: dict, store: Store) -> dict:
    """Carry the sources' tokenizer into the training set (they must share one)."""
    contents = {s.dataset.artifact_bytes("tokenizer") for s in sources.values()} - {None}
    if not contents:
        return {}
    if len(contents) > 1:
        raise ConfigError("the sources were tokenized with different tokenizers: token ids would not mean the same")
    store.write_bytes(store.join("tokenizer.json"), contents.pop())
    return {"tokenizer": "tokenizer.json"}
