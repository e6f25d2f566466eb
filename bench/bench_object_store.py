"""Object-store output: a run writing straight to S3 against the obvious alternative, a run on a
local disk followed by an upload of the finished folder (what one does without object-store
support: `aws s3 sync`), and against the local run alone.

S3 here is moto's server on loopback (a single-threaded Python implementation of the S3 API),
so absolute upload speeds say nothing about a real bucket; the ratios say what the runner's
staging, final-key commits and done markers cost next to a plain upload of the same bytes.

Data: ``bench_dedup_scale.make_input`` documents (sentences of the real corpora in
../shared/data, 5% planted near-duplicates), 10,000 per file. Pipeline: normalize -> quality ->
exact dedup -> MinHash near dedup, `corpusforge run --workers 2`.

    .venv/bin/python bench/bench_object_store.py [--docs 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_dedup_scale import make_input  # noqa: E402

WORK = ROOT / "bench" / "_data" / "object_store"
STAGES = [{"stage": "text.normalize"}, {"stage": "text.quality"}, {"stage": "text.exact_dedup"},
          {"stage": "text.near_dedup"}]
VIEWS = {"_stats.json", "_report.json", "_report.html"}


def run(inputs: str, out: str, env: dict) -> float:
    cfg = {"name": "bench", "kind": "text", "inputs": [{"format": "jsonl", "paths": [inputs], "source": "web"}],
           "stages": STAGES, "output": {"path": out}, "unit_bytes": 1}
    path = WORK / f"{abs(hash(out))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "corpusforge", "run", str(path), "-q", "--workers", "2"], env=env,
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return time.perf_counter() - t


def digests(fs, root: str) -> dict:
    fs.invalidate_cache()
    return {p[len(root) + 1:]: hashlib.sha256(fs.cat_file(p)).hexdigest() for p in fs.find(root)
            if p.rsplit("/", 1)[1] not in VIEWS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    args = ap.parse_args()
    from moto.server import ThreadedMotoServer

    import fsspec

    WORK.mkdir(parents=True, exist_ok=True)
    data = WORK / f"docs{args.docs}"
    mb = make_input(args.docs, data, per_file=10_000)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)      # one line per request otherwise
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    s3env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
             "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    os.environ.update(s3env)
    env = dict(os.environ, DO_NOT_TRACK="1")
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("bench")
    fs.put(str(data) + "/", "bench/in/", recursive=True)

    local_out = WORK / "local"
    shutil.rmtree(local_out, ignore_errors=True)
    t_local = run(str(data), str(local_out), env)
    t = time.perf_counter()
    fs.put(str(local_out) + "/", "bench/synced/", recursive=True)
    t_upload = time.perf_counter() - t
    t_direct = run(str(data), "s3://bench/direct", env)
    t_remote_in = run("s3://bench/in", "s3://bench/remote_in", env)
    fetched = WORK / "fetched"
    shutil.rmtree(fetched, ignore_errors=True)
    t = time.perf_counter()
    fs.get("bench/in/", str(fetched) + "/", recursive=True)
    t_download = time.perf_counter() - t
    same = digests(fs, "bench/direct") == digests(fs, "bench/synced")
    srv.stop()

    sync = t_local + t_upload
    print(f"{args.docs:,} documents ({mb:.0f} MB of JSONL), corpusforge run --workers 2, S3 = moto on loopback")
    print("| run | seconds | vs local disk | vs the alternative |")
    print("|---|---|---|---|")
    print(f"| local disk | {t_local:.1f} | 1.00x | |")
    print(f"| local disk, then upload the folder (fs.put) | {sync:.1f} ({t_upload:.1f} upload) | "
          f"{sync / t_local:.2f}x | 1.00x |")
    print(f"| output straight to s3:// | {t_direct:.1f} | {t_direct / t_local:.2f}x | {t_direct / sync:.2f}x |")
    staged = t_download + sync
    print(f"| download the inputs (fs.get), local disk, upload | {staged:.1f} ({t_download:.1f} download) | "
          f"{staged / t_local:.2f}x | 1.00x |")
    print(f"| inputs and output on s3:// | {t_remote_in:.1f} | {t_remote_in / t_local:.2f}x | "
          f"{t_remote_in / staged:.2f}x |")
    print(f"direct output byte-identical to the uploaded local output: {same}")


if __name__ == "__main__":
    main()
