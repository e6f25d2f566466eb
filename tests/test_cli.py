import json
import subprocess
import sys

import yaml

from conftest import text_config


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "corpusforge", *args], capture_output=True, text=True, cwd=cwd)


def _setup(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"doc {i % 20}"}) + "\n" for i in range(50)) + "oops\n")
    cfg = text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "web"}], tmp_path / "out",
                      [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}])
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "cfg.yaml"


def test_run_inspect_validate(tmp_path):
    cfg = _setup(tmp_path)
    r = _run("run", str(cfg))
    assert r.returncode == 0, r.stderr
    assert "51 records in, 20 kept, 31 rejected" in r.stdout and "_manifest.json" in r.stdout
    r = _run("inspect", str(tmp_path / "out"), "--rows", "2")
    assert r.returncode == 0 and "text v1.1.0" in r.stdout and "20 in 1 shard" in r.stdout and "doc 0" in r.stdout
    r = _run("inspect", str(tmp_path / "out" / "_rejected"), "--rows", "1")
    assert "reject_reason: invalid_json" in r.stdout
    r = _run("validate", str(tmp_path / "out"))
    assert r.returncode == 0 and r.stdout.count("OK") == 2


def test_validate_detects_altered_shard(tmp_path):
    cfg = _setup(tmp_path)
    assert _run("run", str(cfg), "-q").returncode == 0
    shard = next((tmp_path / "out").glob("part-*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    r = _run("validate", str(tmp_path / "out"))
    assert r.returncode == 1 and "INVALID" in r.stdout and "sha256" in r.stdout
    shard.write_bytes(bytes(data[:-100]))
    r = _run("validate", str(tmp_path / "out"), "--no-checksums")
    assert r.returncode == 1 and "truncated" in r.stdout


def test_exit_codes_for_bad_config_and_missing_dataset(tmp_path):
    cfg = _setup(tmp_path)
    r = _run("run", str(cfg), "--set", "stages.0.form=XYZ")
    assert r.returncode == 2 and "stages.0.form" in r.stderr and "Traceback" not in r.stderr
    r = _run("run", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "not found" in r.stderr
    r = _run("inspect", str(tmp_path / "nothing"))
    assert r.returncode == 1 and "no manifest" in r.stderr


def test_serve_and_compress_commands_parse():
    from corpusforge.cli import build_parser

    args = build_parser().parse_args(["serve", "--port", "4311", "--no-server"])
    assert (args.host, args.port, args.no_server) == ("127.0.0.1", 4311, True)     # loopback by default
    args = build_parser().parse_args(["compress", "prune", "c.yaml", "--set", "prune.sparsity=0.3"])
    assert (args.method, args.config, args.set) == ("prune", "c.yaml", ["prune.sparsity=0.3"])
