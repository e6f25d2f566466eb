"""The report: numbers equal the run's stats, it is self-contained, and a browser renders it."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, SAMPLES
from corpusforge import runner
from corpusforge.config import load_config
from corpusforge.io.dataset import Dataset


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rep")
    cfg = load_config(SAMPLES / "configs" / "demo_text.yaml", {"output.path": str(tmp / "text")})
    cfg.stages = [s for s in cfg.stages if s["stage"] != "text.quality_classifier"]   # no model needed here
    summary = runner.run(cfg, base=ROOT)
    images = load_config(SAMPLES / "configs" / "demo_images.yaml", {"output.path": str(tmp / "images")})
    runner.run(images, base=ROOT)
    return tmp, summary


def test_report_numbers_equal_the_stats(run):
    tmp, summary = run
    rep = json.loads((tmp / "text" / "_report.json").read_text())
    stats = json.loads((tmp / "text" / "_stats.json").read_text())
    assert rep["totals"] == stats["totals"]
    stages = {f["stage"]: f for f in rep["funnel"]}
    for v in stats["stages"].values():
        f = stages[v["stage"]]
        assert (f["in"], f["kept"], f["rejected"], f["by_reason"]) == (v["rows_in"], v["kept"], v["rejected"],
                                                                         v["rejected_by_reason"])
    assert rep["rows"] == Dataset.open(tmp / "text").num_rows == summary.kept_rows
    pii_counts = {k: n for k, n in stats["stages"]["02:text.pii"]["counters"].items() if k.startswith("found_")}
    assert {f"found_{k}": n for k, n in rep["pii"]["replaced_by_type"].items() if n} == pii_counts
    assert "EMAIL_ADDRESS" in rep["pii"]["active_entities"] and "PERSON" not in rep["pii"]["active_entities"]
    assert rep["dedup"]["clusters"] == stats["stages"]["06:text.near_dedup"]["counters"]["clusters"]
    html = (tmp / "text" / "_report.html").read_text()
    assert f"{stats['totals']['kept']:,} kept" in html


def test_report_is_self_contained(run):
    tmp, _ = run
    for name in ("text", "images"):
        html = (tmp / name / "_report.html").read_text()
        assert "<script" not in html.lower()
        assert not re.search(r"""(src|href)\s*=\s*['"](https?:)?//""", html), "external reference"
    assert "data:image/jpeg;base64," in (tmp / "images" / "_report.html").read_text()


def test_report_opens_in_headless_chromium_without_network(run, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium not installed (make test installs it where it can)")
    tmp, _ = run
    shot = tmp_path / "report.png"
    # every network request would fail loudly: no proxy reachable, no name resolves
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9",
                        "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
                        "--window-size=1100,3000", f"--screenshot={shot}", (tmp / "text" / "_report.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 20_000
    assert "net::ERR" not in r.stderr and "Uncaught" not in r.stderr, r.stderr[-2000:]
