"""Orchestration costs: the Prefect flow against the CLI on the same pipeline and data, Dask with
2 workers against 1, and the growth from 10k to 1M documents on Dask.

Data: ``bench_dedup_scale.make_input`` documents (sentences of the real corpora in ../shared/data,
5% planted near-duplicates), 10,000 per file (one unit each). Pipeline: normalize -> quality ->
exact dedup -> MinHash near dedup. A Prefect server is started on loopback for the run (Dask
workers report task states to it). Peak memory per worker: the largest resident set size seen
in any one process of the run (sampled every 0.2 s with psutil).

    .venv/bin/python bench/bench_orchestration.py [--overhead-docs 200000] [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_dedup_scale import make_input  # noqa: E402

WORK = ROOT / "bench" / "_data" / "orchestration"
STAGES = [{"stage": "text.normalize"}, {"stage": "text.quality"}, {"stage": "text.exact_dedup"},
          {"stage": "text.near_dedup"}]


def config(data: Path, out: Path) -> Path:
    cfg = {"name": "bench", "kind": "text", "inputs": [{"format": "jsonl", "paths": [str(data)], "source": "web"}],
           "stages": STAGES, "output": {"path": str(out)}, "unit_bytes": 1}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def measured(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and the peak RSS (MB) of any single process of the command's tree."""
    peak = [0.0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                for p in [root] + root.children(recursive=True):
                    peak[0] = max(peak[0], p.memory_info().rss / 1e6)
            except psutil.Error:
                pass
            time.sleep(0.2)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = proc.communicate()
    stop.set()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return time.perf_counter() - t, peak[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--overhead-docs", type=int, default=200_000)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    args = ap.parse_args()
    from corpusforge.flows.server import local_server

    home = WORK / "prefect_home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = dict(os.environ, PREFECT_HOME=str(home), DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_LOGGING_LEVEL="WARNING")
    with local_server(env) as url:
        env["PREFECT_API_URL"] = url
        cli = [sys.executable, "-m", "corpusforge", "run"]
        flow = [sys.executable, "-m", "corpusforge.flows.pipeline"]
        n = args.overhead_docs
        data = WORK / f"docs_{n}"
        mb = make_input(n, data, per_file=10_000)
        runs = WORK / "runs"
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir()
        print(f"{n:,} documents ({mb:.0f} MB) in {n // 10_000} files\n")
        print("| run | seconds | peak MB (one process) | ratio |")
        print("|---|---|---|---|")
        t_cli, m_cli = measured(cli + [str(config(data, runs / "cli")), "-q"], env)
        print(f"| CLI, one process | {t_cli:.1f} | {m_cli:.0f} | 1.00 |", flush=True)
        t_flow, m_flow = measured(flow + [str(config(data, runs / "flow")), "--threads", "1"], env)
        print(f"| Prefect flow, one task at a time | {t_flow:.1f} | {m_flow:.0f} | {t_flow / t_cli:.2f} |", flush=True)
        t1, m1 = measured(flow + [str(config(data, runs / "dask1")), "--dask-workers", "1"], env)
        print(f"| Prefect flow on Dask, 1 worker | {t1:.1f} | {m1:.0f} | {t1 / t_cli:.2f} |", flush=True)
        t2, m2 = measured(flow + [str(config(data, runs / "dask2")), "--dask-workers", "2"], env)
        print(f"| Prefect flow on Dask, 2 workers | {t2:.1f} | {m2:.0f} | {t2 / t_cli:.2f} (2 vs 1 worker: {t1 / t2:.2f}x faster) |",
              flush=True)
        same = all((runs / r / "_manifest.json").read_text() == (runs / "cli" / "_manifest.json").read_text()
                   for r in ("flow", "dask1", "dask2"))
        print(f"\nmanifests identical to the CLI's (shard sha256s included): {same}\n")
        print("| documents | MB | Dask, 2 workers: seconds | peak MB per process | s per 10k docs |")
        print("|---|---|---|---|---|")
        for size in (int(x) for x in args.sizes.split(",")):
            data = WORK / f"docs_{size}"
            mb = make_input(size, data, per_file=10_000)
            out = runs / f"grow_{size}"
            t, m = measured(flow + [str(config(data, out)), "--dask-workers", "2"], env)
            print(f"| {size:,} | {mb:.0f} | {t:.1f} | {m:.0f} | {t / size * 10_000:.2f} |", flush=True)
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
