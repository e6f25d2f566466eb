"""Where a run's files are (the paths of its steps' shards, fingerprints, decisions and done
markers, as methods of the plan), and the output folder's preparation: refusing a folder that
is not ours, recording the config hash and the input listing that ``--resume`` checks."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from corpusforge.errors import CorpusforgeError, describe
from corpusforge.io.dataset import LEGACY_MANIFEST, MANIFEST, REPORT_HTML, REPORT_JSON, STATS
from corpusforge.io.readers.base import file_stamp
from corpusforge.io.storage import prune_scratch, scratch_dir

if TYPE_CHECKING:
    from corpusforge.runner.plan import Plan

RUN_FILE = "run.json"


class Layout:
    """The paths of a run's files; mixed into :class:`~corpusforge.runner.plan.Plan`, whose
    ``store``, ``work``, ``out``, ``segments`` and ``config_hash`` they use."""

    def done_path(self, segment: int, unit: int | str) -> str:
        """The marker of (segment, unit) finished; ``unit="*"`` gives the glob of all of them."""
        return f"{self.work}/seg{segment}/u{unit if isinstance(unit, str) else f'{unit:05d}'}.done.json"

    def resolve_dir(self, segment: int) -> str:
        return f"{self.work}/global{segment}"

    def fingerprint_path(self, segment: int, unit: int) -> str:
        """Fingerprints of unit's rows for the global stage that opens ``segment``."""
        return f"{self.work}/fp{segment}/u{unit:05d}.parquet"

    def kept_location(self, segment: int) -> tuple[str, str]:
        last = segment == len(self.segments) - 1
        return (self.out, "part") if last else (f"{self.work}/seg{segment}", "part")

    def local_resolve_dir(self, segment: int) -> Path:
        """The resolve step's output (decisions) as a local folder, for the global filter. On an
        object store it is downloaded once per machine and run (keyed by its done marker) and
        shared by the worker processes there."""
        path = self.resolve_dir(segment)
        if self.store.is_local:
            return Path(path)
        import xxhash

        marker = self.store.read_bytes(f"{path}/done.json")
        key = xxhash.xxh3_64_hexdigest(f"{self.store.display(path)}\0{self.config_hash}\0".encode() + marker)
        local = scratch_dir() / f"resolve-{key}"
        if local.exists():
            os.utime(local)                 # in use: see the pruning below
            return local
        staging = Path(tempfile.mkdtemp(prefix=f".resolve-{key}-", dir=scratch_dir()))
        self.store.get_dir(path, staging)
        try:
            staging.rename(local)           # another process on this machine may have won: fine
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
        prune_scratch()
        return local


def prepare_output(plan: Plan, resume: bool) -> None:
    """Check the output folder and record this run's config hash in _work/run.json. The first
    touch of the store: an unreachable or unwritable one fails here, named."""
    try:
        _prepare_output(plan, resume)
    except CorpusforgeError:
        raise
    except Exception as exc:  # noqa: BLE001 - fsspec back ends raise their own types (botocore, aiohttp)
        raise CorpusforgeError(f"output.path {plan.store.url}: cannot use it: {describe(exc)}") from exc


def _prepare_output(plan: Plan, resume: bool) -> None:
    store, out = plan.store, plan.out
    run_file = f"{plan.work}/{RUN_FILE}"
    manifest_path = f"{out}/{MANIFEST}"
    if resume and store.exists(run_file):
        previous = store.read_json(run_file)
        if previous.get("config_hash") != plan.config_hash:
            raise CorpusforgeError(
                f"{store.url}: the config changed since the interrupted run (config hash "
                f"{previous.get('config_hash', '?')[:12]} -> {plan.config_hash[:12]}); run without --resume to start over")
        changed = input_changes(previous.get("inputs"), input_stamps(plan))
        if changed:
            raise CorpusforgeError(f"{store.url}: the inputs changed since the interrupted run ({changed}); "
                                   "resuming would mix two input sets: run without --resume to start over")
        return
    if not store.is_empty_dir(out):
        ours = store.exists(manifest_path) or store.exists(f"{out}/{LEGACY_MANIFEST}") or store.exists(plan.work)
        if not ours:
            raise CorpusforgeError(f"{store.url} exists and is not a corpusforge output folder; choose an empty or new path")
        if resume and store.exists(manifest_path):
            if store.read_json(manifest_path).get("config_hash") == plan.config_hash:
                return   # already complete: finalize() rewrites nothing new
        stale = [manifest_path, f"{out}/{STATS}", f"{out}/{REPORT_HTML}", f"{out}/{REPORT_JSON}",
                 *(f"{out}/{name}" for name in (LEGACY_MANIFEST, "stats.json", "report.html", "report.json"))]
        for p in store.glob(f"{out}/*.parquet") + [p for p in stale if store.exists(p)]:
            store.rm(p)
        for d in (plan.rejected_dir, plan.work, f"{out}/rejected"):
            store.rm(d)
    store.makedirs(plan.work)
    store.write_json(run_file, {"config_hash": plan.config_hash, "config": plan.config.model_dump(mode="json"),
                                "inputs": input_stamps(plan)})


def input_stamps(plan: Plan) -> dict[str, str]:
    """The run's input listing as part of its identity: each file's size and modification time
    (local) or size and ETag (object store). Cheap: no byte of the inputs is read."""
    return {path: file_stamp(path) for unit in plan.units for _, path in unit.files}


def input_changes(before: dict[str, str] | None, now: dict[str, str]) -> str | None:
    """A description of the files added, removed or changed between two listings, or None."""
    if before is None:
        return None
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    changed = sorted(p for p in set(now) & set(before) if now[p] != before[p])
    parts = [f"{label} {len(files)}: {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}"
             for label, files in (("added", added), ("removed", removed), ("changed", changed)) if files]
    return "; ".join(parts) or None
