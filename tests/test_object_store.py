"""Inputs, outputs and the global stages' spill files on an object store: fsspec's in-memory
filesystem in this process, and an S3 API on loopback (moto's server, through s3fs) for runs in
several processes. Every run is compared byte for byte with the same run on a local disk."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import ROOT, SAMPLES
from test_runner import HELPERS, _cfg, _tree_bytes

from corpusforge import runner
from corpusforge.io.dataset import Dataset

TEXT_STAGES = [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}, {"stage": "text.near_dedup"},
               {"stage": "text.line_dedup"}]
VIEWS = {"_stats.json", "_report.json", "_report.html"}


def _store_bytes(fs, root: str) -> dict:
    """_tree_bytes for a folder of an fsspec filesystem."""
    import fsspec

    root = fsspec.core.url_to_fs(root)[1].rstrip("/")
    fs.invalidate_cache()
    return {p[len(root) + 1:]: hashlib.sha256(fs.cat_file(p)).hexdigest() for p in sorted(fs.find(root))
            if p.rsplit("/", 1)[1] not in VIEWS and "/_work/" not in p}


def _upload(fs, local: Path, url: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), f"{url.split('://', 1)[1]}/{p.relative_to(local).as_posix()}")


def test_memory_store_text_with_every_global_stage_matches_local(tmp_path):
    import fsspec

    cfg = _cfg(tmp_path, out="local", stages=TEXT_STAGES)
    local = runner.run(cfg)
    url = "memory://cf-text/out"
    remote = runner.run(dict(cfg, output={"path": url}))
    fs = fsspec.filesystem("memory")
    assert remote.out == "memory:///cf-text/out" and remote.kept_rows == local.kept_rows > 0
    assert _store_bytes(fs, url) == _tree_bytes(tmp_path / "local")
    assert remote.stats["totals"] == local.stats["totals"]
    # nothing left behind: no _work, no staging files; the report was written beside the data
    names = {p.rsplit("/", 1)[1] for p in fs.find("/cf-text/out")}
    assert "_report.html" in names and not any(n.startswith(".") for n in names)
    assert not fs.exists("/cf-text/out/_work")
    ds = Dataset.open(url)
    assert ds.verify() == [] and ds.read().num_rows == local.kept_rows
    assert ds.read_shard(0, verify=True).num_rows == ds.manifest["shards"][0]["rows"]
    assert ds.scan_polars().select("id").collect()["id"].to_list() == ds.read(columns=["id"]).column(0).to_pylist()
    from corpusforge.cli import main as cli

    for command in (["validate", url], ["inspect", url, "--rows", "1"], ["report", url]):
        assert cli(command) == 0, command


def test_memory_store_images_with_near_dedup_matches_local(tmp_path):
    import fsspec

    cfg = {"name": "img", "kind": "image", "unit_bytes": 60_000,
           "inputs": [{"format": "images", "paths": [str(SAMPLES / "images")], "source": "photos"}],
           "stages": [{"stage": "image.validate"}, {"stage": "image.near_dedup", "flip_invariant": True}],
           "output": {"path": str(tmp_path / "local")}}
    local = runner.run(cfg)
    fs = fsspec.filesystem("memory")
    _upload(fs, SAMPLES / "images", "memory://cf-img/in")
    remote_cfg = dict(cfg, inputs=[{"format": "images", "paths": ["memory://cf-img/in"], "source": "photos"}],
                      output={"path": "memory://cf-img/out"})
    remote = runner.run(remote_cfg)
    assert len(runner.Plan.from_dict(cfg).units) > 1
    assert remote.stats["stages"]["01:image.near_dedup"]["rejected_by_reason"] == \
        local.stats["stages"]["01:image.near_dedup"]["rejected_by_reason"] != {}
    # the same rows and bytes of images; src_path names the URL the image was read from
    kept_l, kept_r = Dataset.open(tmp_path / "local").read(), Dataset.open("memory://cf-img/out").read()
    assert kept_l.column("image").to_pylist() == kept_r.column("image").to_pylist()
    assert all(p.startswith("memory://cf-img/in/") for p in kept_r.column("src_path").to_pylist())


def test_s3_inputs_and_output_in_worker_processes_match_local(s3, tmp_path):
    fs, bucket = s3
    cfg = _cfg(tmp_path, out="local", stages=TEXT_STAGES)
    runner.run(cfg)
    _upload(fs, tmp_path / "in", f"{bucket}/in")
    remote = dict(cfg, inputs=[{"format": "jsonl", "paths": [f"{bucket}/in/*.jsonl"], "source": "web"}],
                  output={"path": f"{bucket}/out"})
    summary = runner.run(remote, workers=2)           # spawned processes: they find the store by the environment
    assert summary.out == f"{bucket}/out"
    # the same bytes, except that src_path names the s3 object: compare the rows without it
    ds = Dataset.open(f"{bucket}/out")
    local = Dataset.open(tmp_path / "local").read()
    got = ds.read()
    assert got.drop_columns(["src_path"]).equals(local.drop_columns(["src_path"]))
    assert set(got.column("src_path").to_pylist()) <= {f"{bucket}/in/part{i:02d}.jsonl" for i in range(6)}
    r = subprocess.run([sys.executable, "-m", "corpusforge", "validate", f"{bucket}/out"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    # a truncated shard on the store is caught by size, an altered one by checksum
    first = f"{bucket}/out/{ds.manifest['shards'][0]['path']}".split("://", 1)[1]
    data = fs.cat_file(first)
    fs.pipe_file(first, data[:-10])
    r = subprocess.run([sys.executable, "-m", "corpusforge", "validate", f"{bucket}/out"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "truncated or altered" in r.stdout
    fs.pipe_file(first, data[:100] + bytes([data[100] ^ 1]) + data[101:])
    r = subprocess.run([sys.executable, "-m", "corpusforge", "validate", f"{bucket}/out"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "sha256" in r.stdout


def test_s3_output_killed_mid_run_resumes_byte_identical(s3, tmp_path):
    fs, bucket = s3
    stages = [{"stage": "text.normalize"}, {"stage": "slow_stage:Sleep", "seconds": 0.4}, {"stage": "text.exact_dedup"},
              {"stage": "text.near_dedup"}]
    cfg = _cfg(tmp_path, out="local", stages=stages)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HELPERS, str(ROOT)]))
    subprocess.run([sys.executable, "-m", "corpusforge", "run", str(_write(cfg, tmp_path / "local.yaml")), "-q"],
                   env=env, check=True, timeout=300, capture_output=True)
    remote = dict(cfg, output={"path": f"{bucket}/out"})
    path = _write(remote, tmp_path / "remote.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "corpusforge", "run", str(path), "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seg0 = f"{bucket}/out/_work/seg0".split("://", 1)[1]

    def done_markers() -> int:
        fs.invalidate_cache()
        return len(fs.glob(f"{seg0}/*.done.json"))

    deadline = time.time() + 120
    while time.time() < deadline and done_markers() < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = f"{bucket}/out".split("://", 1)[1]
    fs.invalidate_cache()
    assert not fs.exists(f"{out}/_manifest.json"), "run finished before it could be killed"
    assert 2 <= done_markers() < 6
    for p in fs.glob(f"{out}/**/*.parquet"):              # nothing half-written under a final key
        with fs.open(p, "rb") as f:
            pq.read_metadata(f)
    r = subprocess.run([sys.executable, "-m", "corpusforge", "run", str(path), "-q", "--resume"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _store_bytes(fs, f"{bucket}/out") == _tree_bytes(tmp_path / "local")


def test_unreachable_store_is_a_clear_error(tmp_path, monkeypatch):
    """A store that cannot be reached: the error names the field and the URL, no traceback."""
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")        # nothing listens on port 9
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    cfg = _cfg(tmp_path, out="unused")
    cfg["output"] = {"path": "s3://no-such-bucket/out"}
    path = _write(cfg, tmp_path / "c.yaml")
    r = subprocess.run([sys.executable, "-m", "corpusforge", "run", str(path), "-q"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 1
    assert "output.path s3://no-such-bucket/out: cannot use it" in r.stdout + r.stderr and "Traceback" not in r.stderr
    # the same for inputs: a config error naming the field, exit status 2
    cfg["inputs"][0]["paths"] = ["s3://no-such-bucket/in/*.jsonl"]
    cfg["output"] = {"path": str(tmp_path / "out")}
    r = subprocess.run([sys.executable, "-m", "corpusforge", "run", str(_write(cfg, path)), "-q"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 2 and "inputs.0.paths: cannot list 's3://no-such-bucket/in/*.jsonl'" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def _write(cfg: dict, path: Path) -> Path:
    path.write_text(json.dumps(cfg))
    return path



def test_mix_and_trainer_read_datasets_on_s3(s3, tmp_path):
    """The training set built from datasets on S3 into S3 has the shards of the same mix built
    locally, and the trainer's token stream (and the tokenizer) come from the bucket."""
    from test_mix import make_source
    from tokenizers import Tokenizer, models

    from corpusforge.mix.build import build
    from corpusforge.mix.config import from_dict
    from corpusforge.trainer.data import TokenStream

    fs, bucket = s3
    tok = Tokenizer(models.WordLevel({"<|endoftext|>": 0, "a": 1, "b": 2}, unk_token="a"))
    for name, n, mean, seed in (("web", 300, 60, 1), ("books", 80, 150, 2)):
        make_source(tmp_path / name, name, n, mean, seed)
        tok.save(str(tmp_path / name / "tokenizer.json"))
        manifest = json.loads((tmp_path / name / "_manifest.json").read_text())
        manifest["artifacts"] = {"tokenizer": "tokenizer.json"}
        (tmp_path / name / "_manifest.json").write_text(json.dumps(manifest))
        _upload(fs, tmp_path / name, f"{bucket}/{name}")

    def mix(root: str, out: str) -> None:
        build(from_dict({"name": "m", "seed": 0, "output": {"path": out},
                         "sources": {"web": {"path": f"{root}/web", "weight": 0.6},
                                     "books": {"path": f"{root}/books", "weight": 0.4}},
                         "curriculum": {"score": "n_tokens", "mode": "sorted", "window": 1}}), log=lambda m: None)

    mix(str(tmp_path), str(tmp_path / "mix"))
    mix(bucket, f"{bucket}/mix")
    shards = {k: v for k, v in _store_bytes(fs, f"{bucket}/mix").items() if k.endswith((".parquet", ".json"))
              and k != "_manifest.json"}                       # the manifest's lineage names the source paths
    assert shards == {k: v for k, v in _tree_bytes(tmp_path / "mix").items() if k in shards} and len(shards) > 1
    remote = TokenStream.open(f"{bucket}/mix", tmp_path / "cache_remote")
    local = TokenStream.open(tmp_path / "mix", tmp_path / "cache_local")
    assert remote.tokens.tolist() == local.tokens.tolist() and len(remote.tokens) > 0
    assert remote.vocab_size == 3 and remote.eos_id == 0 and remote.tokenizer_path.parent == tmp_path / "cache_remote"


@pytest.mark.parametrize("config", ["demo_acquire_text", "demo_acquire_images", "demo_acquire_pointclouds",
                                    "demo_pointclouds"])
def test_every_reader_reads_the_same_records_from_a_store(config, tmp_path):
    """The demo inputs of every format (WARC, chats, CSV, save_to_disk, COCO, tar, KITTI with its
    labels and calibration, LAZ, meshes, PLY/PCD/XYZ/NPY) read from memory:// give the records
    and rejections they give from the local files, with src_path naming the URL."""
    import fsspec
    import yaml

    cfg = yaml.safe_load((SAMPLES / "configs" / f"{config}.yaml").read_text())
    cfg["stages"] = []
    fs = fsspec.filesystem("memory")
    root = f"memory://{config.replace('_', '-')}"
    _upload(fs, SAMPLES, f"{root}/data_samples")
    local = dict(cfg, output={"path": str(tmp_path / "local")})
    remote = dict(cfg, inputs=[dict(i, paths=[f"{root}/{p}" for p in i["paths"]]) for i in cfg["inputs"]],
                  output={"path": f"{root}/out"})
    a, b = runner.run(local, base=ROOT), runner.run(remote, base=ROOT)
    assert a.stats["read"] == dict(b.stats["read"], bytes=a.stats["read"]["bytes"]) and a.kept_rows > 0
    payload = {"text": "text", "image": "image", "pointcloud": "points"}[cfg["kind"]]
    for sub in ("", "/_rejected"):
        x = Dataset.open(str(tmp_path / "local") + sub).read()
        y = Dataset.open(f"{root}/out{sub}").read()
        assert x.column(payload).to_pylist() == y.column(payload).to_pylist()
        if sub:
            assert x.column("reject_reason").to_pylist() == y.column("reject_reason").to_pylist()
        assert all(p is None or p.startswith(root) for p in y.column("src_path").to_pylist())


def test_tokenizer_trained_on_and_applied_from_a_store(tmp_path):
    """train-tokenizer on a dataset in a store writes the tokenizer there and names it in the
    manifest; the dataset reader reads that dataset and text.tokenize its tokenizer from their
    URLs, and the tokenizer is carried into the output."""
    import fsspec

    from corpusforge.cli import main as cli

    cfg = _cfg(tmp_path, out="unused")
    runner.run(dict(cfg, output={"path": "memory://cf-tok/clean"}))
    assert cli(["train-tokenizer", "memory://cf-tok/clean", "--vocab-size", "300"]) == 0
    ds = Dataset.open("memory://cf-tok/clean")
    assert ds.manifest["artifacts"] == {"tokenizer": "tokenizer.json"} and ds.verify() == []
    tok_url = "memory://cf-tok/clean/tokenizer.json"
    tokens = runner.run({"name": "tok", "kind": "text",
                         "inputs": [{"format": "dataset", "paths": ["memory://cf-tok/clean"]}],
                         "stages": [{"stage": "text.tokenize", "tokenizer": tok_url}],
                         "output": {"path": "memory://cf-tok/tokens"}})
    out = Dataset.open("memory://cf-tok/tokens")
    assert tokens.stats["stages"]["00:text.tokenize"]["counters"]["tokens"] > 0
    assert out.artifact_bytes("tokenizer") == fsspec.filesystem("memory").cat_file("/cf-tok/clean/tokenizer.json")


def test_scratch_left_by_killed_processes_is_pruned(tmp_path, monkeypatch):
    from corpusforge.io.storage import SCRATCH_MAX_IDLE_S, prune_scratch, scratch_dir

    monkeypatch.setenv("CORPUSFORGE_SCRATCH", str(tmp_path))
    root = scratch_dir()
    (root / "resolve-old").mkdir()
    (root / "resolve-old" / "decisions.parquet").write_bytes(b"x")
    (root / "upload-old.parquet").write_bytes(b"x")
    (root / "resolve-in-use").mkdir()
    old = time.time() - SCRATCH_MAX_IDLE_S - 60
    for p in ("resolve-old", "upload-old.parquet"):
        os.utime(root / p, (old, old))
    prune_scratch()
    assert sorted(p.name for p in root.iterdir()) == ["resolve-in-use"]
