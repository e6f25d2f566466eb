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
import yaml

from conftest import ROOT, SAMPLES, text_config
from corpusforge import runner
from corpusforge.config import from_dict, load_config
from corpusforge.errors import ConfigError, CorpusforgeError
from corpusforge.io.dataset import Dataset

HELPERS = str(Path(__file__).parent / "helpers")


def _docs(tmp_path, n_files=6, per_file=50, dup_every=7):
    paths = []
    for f in range(n_files):
        p = tmp_path / "in" / f"part{f:02d}.jsonl"
        p.parent.mkdir(exist_ok=True)
        with open(p, "w") as fh:
            for i in range(per_file):
                k = f * per_file + i
                text = f"shared document {k % dup_every}" if k % 5 == 0 else f"document {k}  with\ttext"
                fh.write(json.dumps({"text": text}) + "\n")
            fh.write("{broken\n")
        paths.append(p)
    return paths


def _tree_bytes(out: Path) -> dict:
    """Hashes of the dataset's files: shards and manifests. _stats.json (timings) and the report
    (which names the output folder) are views of the run, not the dataset."""
    views = {"_stats.json", "_report.json", "_report.html"}
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and p.name not in views and "_work" not in p.parts}


def _cfg(tmp_path, out="out", stages=None, **kw):
    _docs(tmp_path)
    stages = stages if stages is not None else [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}]
    return text_config([{"format": "jsonl", "paths": [str(tmp_path / "in")], "source": "web"}],
                       tmp_path / out, stages, unit_bytes=1, **kw)


def test_accounting_and_outputs(tmp_path):
    s = runner.run(_cfg(tmp_path))
    t = s.stats["totals"]
    assert t["entered"] == 6 * 51 and t["accounting_ok"]
    assert t["kept"] + t["rejected"] == t["entered"]
    assert s.stats["read"]["rejected_by_reason"] == {"invalid_json": 6}
    dedup = s.stats["stages"]["01:text.exact_dedup"]
    # 60 docs share 7 texts across files: 53 duplicates removed across units
    assert dedup["rejected_by_reason"] == {"duplicate": 53} and dedup["counters"]["duplicate_groups"] == 7
    kept = Dataset.open(tmp_path / "out")
    rejected = Dataset.open(tmp_path / "out" / "_rejected")
    assert kept.verify() == [] and rejected.verify() == []
    assert kept.num_rows == t["kept"] and rejected.num_rows == t["rejected"]
    texts = kept.read().column("text").to_pylist()
    assert len(texts) == len(set(texts))
    assert "document 1 with text" in texts        # normalized whitespace
    assert not (tmp_path / "out" / "_work").exists()
    rej = rejected.read()
    assert set(rej.column("reject_stage").to_pylist()) == {"read", "text.exact_dedup"}
    assert all(d.startswith("exact duplicate of ") for d, r in
               zip(rej.column("reject_detail").to_pylist(), rej.column("reject_reason").to_pylist()) if r == "duplicate")


def test_first_occurrence_in_input_order_is_kept(tmp_path):
    runner.run(_cfg(tmp_path))
    kept = Dataset.open(tmp_path / "out").read()
    shared0 = [r for r in kept.to_pylist() if r["text"] == "shared document 0"]
    assert len(shared0) == 1 and shared0[0]["src_row"] == 0 and shared0[0]["src_path"].endswith("part00.jsonl")


def test_deterministic_and_independent_of_workers(tmp_path):
    cfg = _cfg(tmp_path)
    runner.run(cfg)
    a = _tree_bytes(tmp_path / "out")
    runner.run(cfg)
    assert _tree_bytes(tmp_path / "out") == a
    cfg2 = dict(cfg, output={"path": str(tmp_path / "out2")})
    runner.run(cfg2, workers=2)
    assert _tree_bytes(tmp_path / "out2") == a


def test_resume_skips_finished_steps_and_gives_same_bytes(tmp_path):
    cfg = _cfg(tmp_path)
    runner.run(cfg)
    reference = _tree_bytes(tmp_path / "out")
    cfg_keep = dict(cfg, output={"path": str(tmp_path / "out"), "keep_work": True})
    runner.run(cfg_keep)
    # simulate a crash after some units: drop the manifest, later done markers and their shards
    out = tmp_path / "out"
    (out / "_manifest.json").unlink()
    for p in (out / "_work" / "seg1").glob("u0000[3-5].done.json"):
        p.unlink()
    for p in out.glob("part-0000[45]-*.parquet"):
        p.unlink()
    summary = runner.run(cfg_keep, resume=True)
    assert summary.skipped_steps == 6 + 3
    assert _tree_bytes(out) == reference


def test_resume_refuses_changed_config(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["output"]["keep_work"] = True
    runner.run(cfg)
    (tmp_path / "out" / "_manifest.json").unlink()
    cfg["stages"] = [{"stage": "text.normalize", "form": "NFC"}]
    with pytest.raises(CorpusforgeError, match="config changed"):
        runner.run(cfg, resume=True)


def test_refuses_to_overwrite_foreign_folder(tmp_path):
    cfg = _cfg(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("user data")
    with pytest.raises(CorpusforgeError, match="not a corpusforge output folder"):
        runner.run(cfg)


def test_kill_9_mid_run_then_resume_is_byte_identical(tmp_path):
    stages = [{"stage": "text.normalize"}, {"stage": "slow_stage:Sleep", "seconds": 0.4}, {"stage": "text.exact_dedup"}]
    cfg = _cfg(tmp_path, stages=stages)
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=HELPERS)
    cmd = [sys.executable, "-m", "corpusforge", "run", str(cfg_path), "-q"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seg0 = tmp_path / "out" / "_work" / "seg0"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(seg0.glob("*.done.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "out" / "_manifest.json").exists(), "run finished before it could be killed"
    assert 2 <= len(list(seg0.glob("*.done.json"))) < 6
    # nothing half-written is visible under a final name
    for p in (tmp_path / "out").rglob("*.parquet"):
        pq.read_metadata(p)
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stdout
    resumed = _tree_bytes(tmp_path / "out")
    cfg["output"]["path"] = str(tmp_path / "ref")
    cfg_path.write_text(yaml.safe_dump(cfg))
    assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
    assert _tree_bytes(tmp_path / "ref") == resumed


def test_config_errors_name_the_field(tmp_path):
    _docs(tmp_path)
    base = text_config([{"format": "jsonl", "paths": [str(tmp_path / "in")], "source": "web"}], tmp_path / "o")
    cases = [
        (dict(base, stages=[{"stage": "text.normalize", "form": "NFX"}]), "stages.0.form"),
        (dict(base, stages=[{"stage": "text.normalise"}]), "stages.0.stage: unknown stage 'text.normalise'"),
        (dict(base, stages=[{"stage": "text.normalize", "min_char": 3}]), "stages.0.min_char: unknown key"),
        (dict(base, inputs=[{"format": "jsonl", "paths": ["x"], "source": "web", "txt_field": "t"}]),
         "inputs.0.txt_field: unknown key"),
        (dict(base, inputs=[{"format": "csvx", "paths": ["x"], "source": "web"}]), "inputs.0.format: unknown input format"),
        (dict(base, output={"path": "o", "shard_rows": -1}), "output.shard_rows"),
        (dict(base, kind="audio"), "kind"),
        (dict(base, batch_rowz=3), "batch_rowz: unknown key"),
        (dict(base, inputs=[{"format": "images", "paths": ["x"], "source": "p"}]), "inputs.0.format: 'images' reads image"),
    ]
    for cfg, msg in cases:
        with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            from_dict(cfg)


def test_missing_input_is_config_error(tmp_path):
    cfg = text_config([{"format": "jsonl", "paths": [str(tmp_path / "nope*.jsonl")], "source": "web"}], tmp_path / "o")
    with pytest.raises(ConfigError, match="inputs.0.paths: .* matches no jsonl file"):
        runner.run(cfg)


def test_demo_text_config_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    # the demo runs the shipped classifiers at threshold 0 (its English is template-made, see the
    # config): they score, and the planted duplicates reach the dedup stages this test checks
    cfg = load_config(SAMPLES / "configs" / "demo_text.yaml", {"output.path": str(tmp_path / "demo")})
    s = runner.run(cfg)
    t = s.stats["totals"]
    assert t["accounting_ok"] and t["kept"] > 200
    read = s.stats["read"]["rejected_by_reason"]
    assert read["invalid_json"] == 1 and read["invalid_utf8"] == 2 and read["empty_file"] == 1
    stages = s.stats["stages"]
    assert stages["03:text.line_dedup"]["counters"]["lines_removed"] > 100        # site footers
    assert stages["02:text.pii"]["counters"]["found_EMAIL_ADDRESS"] > 0 and stages["02:text.pii"]["counters"]["found_CN_MOBILE"] > 0
    assert stages["04:text.quality"]["rejected"] >= 5                              # the junk pages
    assert stages["06:text.exact_dedup"]["rejected"] >= 10
    assert stages["07:text.near_dedup"]["rejected"] >= 5
    assert stages["08:text.partial_dedup"]["rejected_by_reason"] == {"partial_copy": 1}
    assert stages["09:text.substring_dedup"]["counters"]["documents_with_cuts"] == 1       # the page quoting 60 words
    m = Dataset.open(tmp_path / "demo").manifest
    assert set(m["sources"]) == {"web", "news", "books"}


def test_a_units_decisions_are_located_once_not_per_batch(tmp_path, monkeypatch):
    """On an object store locating the decisions is a remote read of done.json: once per unit."""
    calls = []
    located = runner.Plan.local_resolve_dir

    def counting(self, segment):
        calls.append(segment)
        return located(self, segment)
    monkeypatch.setattr(runner.Plan, "local_resolve_dir", counting)
    summary = runner.run(_cfg(tmp_path, batch_rows=5))          # 6 units of 50 documents: 10 batches each
    assert summary.kept_rows > 0
    assert len(calls) == 6 and set(calls) == {1}


def test_every_executor_collects_alike(tmp_path):
    """runner.collect: failed units go round again (and only they), the others' results stay;
    what still fails after the last round is listed, unit by unit."""
    from corpusforge.errors import UnitsFailed
    from corpusforge.runner import Unit, collect

    units = [Unit(i, (), 0) for i in range(4)]
    rounds, done = [], []

    def flaky(pending):
        rounds.append([u.index for u in pending])
        for u in pending:
            yield u, (RuntimeError(f"unit {u.index} broke\nsecond line") if u.index == 3 or
                      (u.index == 1 and len(rounds) == 1) else f"result {u.index}")
    with pytest.raises(UnitsFailed) as err:
        collect(0, units, 3, flaky, progress=lambda seg, u: done.append(u.index))
    assert rounds == [[0, 1, 2, 3], [1, 3], [3]] and sorted(done) == [0, 1, 2]
    assert err.value.failures == {3: "RuntimeError: unit 3 broke"}
    rounds.clear()
    assert collect(0, units[:3], 2, flaky) == ["result 0", "result 1", "result 2"]


@pytest.mark.parametrize("recipe", ["recipe_en_web", "recipe_zh_web", "recipe_books"])
def test_quality_recipes_run_on_the_samples(recipe, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(SAMPLES / "configs" / f"{recipe}.yaml", {"output.path": str(tmp_path / "out")})
    s = runner.run(cfg)
    t = s.stats["totals"]
    assert t["accounting_ok"] and t["entered"] > 0
    if recipe == "recipe_en_web":
        # the samples' English is template-made: every document is rejected before the dedup
        # stages, which then have nothing to decide (this crashed once: no fingerprint file to scan)
        assert t["kept"] == 0 and any("rejected" in w for w in s.stats.get("warnings", []))
    else:
        assert t["kept"] > 0
