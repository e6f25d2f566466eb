"""The end of a run: the steps' results merged into stats (with the accounting check and the
quality-filter warnings), the kept and rejected manifests, the report; and the summary of a run
found already complete."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow.parquet as pq

from corpusforge import __version__
from corpusforge.errors import AccountingError, CorpusforgeError
from corpusforge.io.dataset import MANIFEST, STATS, build_manifest, write_manifest
from corpusforge.io.readers.base import file_size
from corpusforge.io.storage import Store
from corpusforge.io.writer import ShardInfo
from corpusforge.runner.layout import input_changes
from corpusforge.runner.plan import Plan, UnitResult
from corpusforge.stage import StageStats


@dataclass
class RunSummary:
    out: str                 # the output folder: a local path or an object-store URL
    kept_rows: int
    rejected_rows: int
    stats: dict
    skipped_steps: int = 0


def already_complete(plan: Plan) -> RunSummary:
    """``--resume`` of a run whose manifest exists: the dataset is complete (the manifest is
    written last), whatever state ``_work/`` was left in by a kill during the cleanup after it.
    It is never touched: a changed config or input listing is refused; else what is left of
    ``_work/`` is removed and the summary returned."""
    store = plan.store
    manifest = store.read_json(f"{plan.out}/{MANIFEST}")
    if manifest.get("config_hash") != plan.config_hash:
        raise CorpusforgeError(f"{store.url}: a completed run with another config is there (config hash "
                               f"{str(manifest.get('config_hash'))[:12]} -> {plan.config_hash[:12]}); "
                               "run without --resume to replace it")
    listed = {i["path"]: i["bytes"] for i in manifest.get("lineage", {}).get("inputs", [])}
    now = {p: file_size(p) for u in plan.units for _, p in u.files}
    changed = input_changes({p: str(b) for p, b in listed.items()}, {p: str(b) for p, b in now.items()})
    if changed:
        raise CorpusforgeError(f"{store.url}: the inputs changed since this run completed ({changed}); "
                               "run without --resume to rebuild")
    if not plan.config.output.keep_work and store.exists(plan.work):
        store.rm(plan.work)
    stats = store.read_json(f"{plan.out}/{STATS}")
    return RunSummary(store.url, manifest["rows"], stats["totals"]["rejected"], stats,
                      skipped_steps=len(plan.segments) * len(plan.units))


def finalize(plan: Plan, results: list[list[UnitResult]], wall_seconds: float = 0.0) -> RunSummary:
    """Merge the steps' results into manifests and stats, check the accounting, clean up."""
    last = results[-1]
    kept_shards = [ShardInfo(**s) for r in sorted(last, key=lambda r: r.unit) for s in r.kept]
    rejected_shards = sorted((ShardInfo(**s) for seg in results for r in seg for s in r.rejected),
                             key=lambda s: s.path)
    stats = merge_stats(plan, results)
    stats["wall_seconds"] = round(wall_seconds, 3)
    lineage = {
        "corpusforge_version": __version__,
        "inputs": [{"path": p, "bytes": file_size(p)} for u in plan.units for _, p in u.files],
        "stages": [{"name": s.name, "config": s.config.model_dump(mode="json")} for s in plan.stages],
        "seed": plan.config.seed,
    }
    store = plan.store
    sources = _source_counts(store, plan.out, kept_shards)
    artifacts = {}
    for stage in plan.stages:
        for key, path in stage.artifacts().items():
            path = path if path.is_absolute() else plan.base / path
            if not path.exists():
                raise CorpusforgeError(f"stage {stage.name}: artifact {key} {path} does not exist")
            store.write_bytes(f"{plan.out}/{path.name}", path.read_bytes())
            artifacts[key] = path.name
    kept_manifest = build_manifest(schema=plan.record_schema, target=plan.kept_schema, shards=kept_shards,
                                   dataset="kept", config_hash=plan.config_hash, lineage=lineage, sources=sources,
                                   artifacts=artifacts)
    rej_manifest = build_manifest(schema=plan.record_schema, target=plan.rejected_schema, shards=rejected_shards,
                                  dataset="rejected", config_hash=plan.config_hash, lineage=lineage,
                                  sources=_source_counts(store, plan.rejected_dir, rejected_shards))
    store.makedirs(plan.rejected_dir)
    write_manifest(plan.rejected_dir, rej_manifest, store=store)
    store.write_json(f"{plan.out}/{STATS}", stats)
    write_manifest(plan.out, kept_manifest, store=store)   # last: its presence means the run is complete
    if not plan.config.output.keep_work:
        store.rm(plan.work)
    write_report(store.url)
    return RunSummary(store.url, kept_manifest["rows"], rej_manifest["rows"], stats)


def write_report(out: str) -> None:
    """Every run ends with its report; the data is complete before, so a report failure only warns."""
    import warnings

    from corpusforge.report.build import generate

    try:
        generate(out)
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"the dataset is complete, but its report failed: {type(exc).__name__}: {exc}")


def _source_counts(store: Store, directory: str, shards: list[ShardInfo]) -> dict:
    """Rows per source, and tokens per source where the shards carry ``n_tokens``."""
    import polars as pl

    totals: dict[str, dict] = {}
    for s in shards:
        pf = pq.ParquetFile(f"{directory}/{s.path}", filesystem=store.arrow_fs)
        cols = ["source"] + (["n_tokens"] if "n_tokens" in pf.schema_arrow.names else [])
        df = pl.from_arrow(pf.read(columns=cols))
        aggs = [pl.len().alias("rows")] + ([pl.col("n_tokens").sum().alias("tokens")] if "n_tokens" in cols else [])
        for row in df.group_by("source").agg(aggs).iter_rows(named=True):
            entry = totals.setdefault(row["source"], {"rows": 0})
            entry["rows"] += row["rows"]
            if row.get("tokens"):
                entry["tokens"] = entry.get("tokens", 0) + int(row["tokens"])
    return dict(sorted(totals.items()))


# Quality decisions that keep nearly everything or nearly nothing are usually a model or a
# threshold from another domain (a classifier scoring every document 0.06-0.18): say so.
FILTER_STAGES = ("text.quality", "text.quality_classifier")
WARN_MIN_ROWS = 20            # fewer documents say nothing about a filter's share


def decision_warnings(stages: dict) -> list[str]:
    """Warnings for quality filters that reject more than 95% or keep more than 99% of the
    documents they see, and for single rules that reject more than 95% of them."""
    out = []
    for key, e in stages.items():
        n = e["rows_in"]
        if e["stage"] not in FILTER_STAGES or n < WARN_MIN_ROWS:
            continue
        if e["rejected"] > 0.95 * n:
            out.append(f"{key} rejected {e['rejected']:,} of {n:,} documents ({e['rejected'] / n:.1%}): "
                       f"check its thresholds or model against this data")
        elif e["kept"] > 0.99 * n:
            out.append(f"{key} kept {e['kept']:,} of {n:,} documents ({e['kept'] / n:.1%}): it decides almost "
                       f"nothing here; check its thresholds or model against this data")
        for reason, count in e["rejected_by_reason"].items():
            if count > 0.95 * n:
                out.append(f"{key}: rule {reason} alone rejected {count:,} of {n:,} documents ({count / n:.1%})")
    return out


def input_warnings(plan: Plan) -> list[str]:
    """A file that two inputs list (overlapping folders or globs) is read once per input: its
    records reach the output twice, under two sources and ids that exact dedup cannot match."""
    inputs_of: dict[str, list[int]] = {}
    for unit in plan.units:
        for index, path in unit.files:
            inputs_of.setdefault(path, []).append(index)
    twice = {path: ids for path, ids in inputs_of.items() if len(ids) > 1}
    if not twice:
        return []
    path, ids = next(iter(sorted(twice.items())))
    return [f"{len(twice):,} file(s) are read by more than one input, so their records are in the output once per "
            f"input (e.g. {path}: inputs {', '.join(map(str, ids))}); list each file under one input"]


def merge_stats(plan: Plan, results: list[list[UnitResult]]) -> dict:
    read = {"files": 0, "files_accounted": 0, "records": 0, "rejected": 0, "bytes": 0,
            "rejected_by_reason": Counter()}
    for r in results[0]:
        for k in ("files", "files_accounted", "records", "rejected", "bytes"):
            read[k] += r.read.get(k, 0)
        read["rejected_by_reason"].update(r.read["rejected_by_reason"])
    read["rejected_by_reason"] = dict(sorted(read["rejected_by_reason"].items()))
    stages: dict[str, StageStats] = {}
    for seg_results in results:
        for r in seg_results:
            for key, d in r.stats.items():
                stages.setdefault(key, StageStats()).merge(StageStats.from_dict(d))
    # stages that never saw a row still appear, in pipeline order
    ordered = {}
    for i, stage in enumerate(plan.stages):
        key = plan.stage_key(i, stage)
        st = stages.get(key, StageStats())
        entry = {"stage": stage.name, **st.to_dict()}
        seg = next((s for s in plan.segments if s.global_position == i), None)
        if seg is not None:
            resolved = plan.store.read_json_or_none(f"{plan.resolve_dir(seg.index)}/done.json")
            if resolved is not None:
                entry["counters"] = dict(sorted({**entry["counters"], **resolved["counters"]}.items()))
                entry["resolve_seconds"] = resolved["seconds"]
        ordered[key] = entry
    kept = sum(s["rows"] for r in results[-1] for s in r.kept)
    rejected = read["rejected"] + sum(e["rejected"] for e in ordered.values())
    created = sum(e["created"] for e in ordered.values())
    entered = read["records"] + read["rejected"]
    files_listed = sum(len(u.files) for u in plan.units)
    ok = entered + created == kept + rejected and read["files"] == read["files_accounted"] == files_listed
    stats = {
        "pipeline": plan.config.name, "kind": plan.config.kind, "config_hash": plan.config_hash,
        "units": len(plan.units), "read": read, "stages": ordered,
        "totals": {"entered": entered, "created": created, "kept": kept, "rejected": rejected,
                   "files_listed": files_listed, "files_accounted": read["files_accounted"], "accounting_ok": ok},
    }
    warnings = input_warnings(plan) + decision_warnings(ordered)
    if warnings:
        stats["warnings"] = warnings
    if not ok:
        raise AccountingError(f"run accounting failed: {entered} entered + {created} created vs {kept} kept + "
                              f"{rejected} rejected; {files_listed} files listed, {read['files']} read, "
                              f"{read['files_accounted']} accounted for")
    return stats
