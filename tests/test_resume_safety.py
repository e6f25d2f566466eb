"""Reruns and resumes never mix input sets, never rebuild or damage a complete dataset, and
leave no stray worker behind (issue 16, items 2, 9, 10)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from corpusforge import runner
from corpusforge.errors import ConfigError, CorpusforgeError
from test_runner import HELPERS, _cfg, _tree_bytes


def test_resume_refuses_an_added_input_file_naming_it(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["output"]["keep_work"] = True
    runner.run(cfg)
    (tmp_path / "out" / "_manifest.json").unlink()                 # as if killed before the end
    (tmp_path / "in" / "part99.jsonl").write_text(json.dumps({"text": "arrived later"}) + "\n")
    with pytest.raises(CorpusforgeError, match=r"inputs changed.*added 1: .*part99\.jsonl"):
        runner.run(cfg, resume=True)


def test_resume_refuses_a_changed_input_file(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["output"]["keep_work"] = True
    runner.run(cfg)
    (tmp_path / "out" / "_manifest.json").unlink()
    with open(tmp_path / "in" / "part02.jsonl", "a") as f:
        f.write(json.dumps({"text": "appended"}) + "\n")
    with pytest.raises(CorpusforgeError, match=r"changed 1: .*part02\.jsonl"):
        runner.run(cfg, resume=True)


def test_resume_of_a_complete_run_refuses_changes_and_never_rebuilds(tmp_path):
    cfg = _cfg(tmp_path)
    runner.run(cfg)
    before = _tree_bytes(tmp_path / "out")
    with pytest.raises(CorpusforgeError, match="completed run with another config"):
        runner.run(dict(cfg, stages=[{"stage": "text.normalize", "form": "NFC"}]), resume=True)
    (tmp_path / "in" / "part99.jsonl").write_text(json.dumps({"text": "new"}) + "\n")
    with pytest.raises(CorpusforgeError, match="inputs changed since this run completed"):
        runner.run(cfg, resume=True)
    assert _tree_bytes(tmp_path / "out") == before


def test_killed_during_the_final_cleanup_resumes_to_the_complete_dataset(tmp_path):
    cfg = _cfg(tmp_path)
    cfg_keep = dict(cfg, output=dict(cfg["output"], keep_work=True))
    runner.run(cfg_keep)
    out = tmp_path / "out"
    before = _tree_bytes(out)
    # the cleanup of _work/ was cut short: some done markers gone, a spill file unreadable
    for p in sorted((out / "_work").rglob("*.done.json"))[::2]:
        p.unlink()
    for p in (out / "_work").rglob("*.parquet"):
        p.write_bytes(b"\0" * 10)
    summary = runner.run(cfg, resume=True)
    assert summary.stats["totals"]["accounting_ok"]
    assert _tree_bytes(out) == before and not (out / "_work").exists()


def test_workers_must_be_at_least_one(tmp_path):
    with pytest.raises(ConfigError, match="workers"):
        runner.run(_cfg(tmp_path), workers=0)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and ps")
def test_workers_die_with_a_killed_parent(tmp_path):
    stages = [{"stage": "slow_stage:Sleep", "seconds": 2.0}]
    cfg = _cfg(tmp_path, stages=stages)
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen([sys.executable, "-m", "corpusforge", "run", str(tmp_path / "cfg.yaml"), "-q",
                             "--workers", "2"], env=dict(os.environ, PYTHONPATH=HELPERS),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, workers = time.time() + 60, []
    while time.time() < deadline:
        # the pool's processes: children of the run (the resource tracker is one too, and also must go)
        workers = [c for c in _children(proc.pid)]
        if len(workers) >= 2 and (tmp_path / "out" / "_work").exists():
            break
        time.sleep(0.2)
    assert len(workers) >= 2
    time.sleep(1.0)                                               # the workers are inside a unit
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 15
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), [w for w in workers if _alive(w)]


def test_a_rerun_that_fails_leaves_no_stale_report(tmp_path):
    cfg = _cfg(tmp_path)
    runner.run(cfg)
    out = tmp_path / "out"
    assert (out / "_report.html").exists()
    bad = dict(cfg, stages=[{"stage": "slow_stage:Sleep", "seconds": 0, "fail_on_text": "document 3  with\ttext"}],
               retries=0)
    sys.path.insert(0, HELPERS)
    try:
        with pytest.raises(CorpusforgeError):
            runner.run(bad)
    finally:
        sys.path.remove(HELPERS)
    assert not (out / "_report.html").exists() and not (out / "_manifest.json").exists()


def test_resume_removes_staging_files_a_killed_writer_left(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["output"]["keep_work"] = True
    runner.run(cfg)
    out = tmp_path / "out"
    reference = _tree_bytes(out)
    (out / "_manifest.json").unlink()
    for p in (out / "_work" / "seg1").glob("u00002.done.json"):
        p.unlink()
    (out / ".part-00002-00000.parquet.999999.tmp").write_bytes(b"half a shard")   # a killed process's files
    (out / "_rejected" / ".part-00002-1-00000.parquet.999999.tmp").write_bytes(b"half")
    runner.run(cfg, resume=True)
    assert not list(out.rglob("*.tmp")) and _tree_bytes(out) == reference
