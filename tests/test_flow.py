"""The Prefect flow runs the same pipeline, one task per unit, and writes the same bytes."""

import hashlib
import json


from conftest import text_config


def _digest(out):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.parquet"))} | {
        "manifest": hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()}


def test_prefect_flow_matches_cli_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_API_URL", "")
    from corpusforge import runner
    from flows.pipeline import pipeline_flow

    for i in range(3):
        (tmp_path / f"in{i}.jsonl").write_text("".join(json.dumps({"text": f"doc {j % 9}"}) + "\n" for j in range(30)))
    cfg = text_config([{"format": "jsonl", "paths": [str(tmp_path / "in*.jsonl")], "source": "web"}], tmp_path / "a",
                      [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}], unit_bytes=1)
    runner.run(cfg)
    cfg_b = dict(cfg, output={"path": str(tmp_path / "b")})
    result = pipeline_flow(cfg_b)
    assert result["totals"]["kept"] == 9 and result["totals"]["accounting_ok"]
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def _key(cfg, base, segment=0, unit=0):
    from flows.pipeline import unit_cache_key

    return unit_cache_key(None, {"raw": cfg, "base": str(base), "segment": segment, "unit_index": unit})


def test_unit_cache_key_follows_content_config_and_done_marker(tmp_path):
    import os

    from corpusforge import runner

    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"text": "alpha"}) + "\n")
    cfg = text_config([{"format": "jsonl", "paths": [str(path)], "source": "web"}], tmp_path / "out",
                      [{"stage": "text.normalize"}])
    first = _key(cfg, tmp_path)
    assert _key(cfg, tmp_path) == first
    # same size, same modification time, other bytes: a checksum sees it, a stat would not
    st = os.stat(path)
    path.write_text(json.dumps({"text": "omega"}) + "\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = _key(cfg, tmp_path)
    assert changed != first
    assert _key(dict(cfg, stages=[{"stage": "text.normalize", "form": "NFC"}]), tmp_path) != changed
    runner.run(dict(cfg, output=dict(cfg["output"], keep_work=True)))      # the unit's done marker now exists
    assert _key(cfg, tmp_path) != changed


def test_unit_cache_key_of_an_object_follows_its_etag(s3, tmp_path):
    fs, bucket = s3
    fs.pipe_file(f"{bucket[5:]}/in.jsonl", json.dumps({"text": "alpha"}).encode() + b"\n")
    cfg = text_config([{"format": "jsonl", "paths": [f"{bucket}/in.jsonl"], "source": "web"}], tmp_path / "out",
                      [{"stage": "text.normalize"}])
    first = _key(cfg, tmp_path)
    assert _key(cfg, tmp_path) == first
    fs.pipe_file(f"{bucket[5:]}/in.jsonl", json.dumps({"text": "omega"}).encode() + b"\n")
    assert _key(cfg, tmp_path) != first
