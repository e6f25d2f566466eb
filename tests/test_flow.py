"""The Prefect flow runs the same pipeline, one task per unit, and writes the same bytes."""

import hashlib
import json

import pytest


from conftest import ROOT, text_config


def _digest(out):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.parquet"))} | {
        "manifest": hashlib.sha256((out / "_manifest.json").read_bytes()).hexdigest()}


def _cli_reference(tmp_path, monkeypatch, text=lambda i, j: f"doc {j % 9}"):
    """Three small inputs, the CLI's run of them into ``a``, and the flow's config writing ``b``
    (Prefect in ephemeral mode, its home in the test's folder)."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_API_URL", "")
    from corpusforge import runner

    for i in range(3):
        (tmp_path / f"in{i}.jsonl").write_text("".join(json.dumps({"text": text(i, j)}) + "\n" for j in range(30)))
    cfg = text_config([{"format": "jsonl", "paths": [str(tmp_path / "in*.jsonl")], "source": "web"}], tmp_path / "a",
                      [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}], unit_bytes=1)
    runner.run(cfg)
    return dict(cfg, output={"path": str(tmp_path / "b")})


def test_prefect_flow_matches_cli_run(tmp_path, monkeypatch):
    from corpusforge.flows.pipeline import pipeline_flow

    cfg_b = _cli_reference(tmp_path, monkeypatch)
    result = pipeline_flow(cfg_b)
    assert result["totals"]["kept"] == 9 and result["totals"]["accounting_ok"]
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_flow_reruns_write_their_files(tmp_path, monkeypatch):
    """Issue 16: a rerun (in place, after deleting the output, with --resume) used to finish its
    units from Prefect's cache without writing anything, then fail or leave no dataset."""
    import shutil

    from corpusforge.flows.pipeline import pipeline_flow

    cfg_b = _cli_reference(tmp_path, monkeypatch, text=lambda i, j: f"doc {j % 9} {i}")
    reference = _digest(tmp_path / "a")
    pipeline_flow(cfg_b)
    pipeline_flow(cfg_b)                                  # in place
    assert _digest(tmp_path / "b") == reference
    shutil.rmtree(tmp_path / "b")
    pipeline_flow(cfg_b)                                  # after deleting the output
    assert _digest(tmp_path / "b") == reference
    pipeline_flow(cfg_b, resume=True)                     # resume of a complete run
    assert _digest(tmp_path / "b") == reference


def test_report_links_open_through_the_loopback_report_server(tmp_path, monkeypatch):
    """Issue 16: file:// report links on the Prefect UI's http page do not open in browsers."""
    import urllib.error
    import urllib.request

    from corpusforge import runner
    from corpusforge.flows import reports

    monkeypatch.delenv(reports.ENV, raising=False)
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "hello world"}) + "\n")
    runner.run(text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "s"}], tmp_path / "d"))
    assert reports.report_link(str(tmp_path / "d" / "_report.html")).startswith("file://")
    server, url = reports.start("127.0.0.1", 0)
    monkeypatch.setenv(reports.ENV, url)            # restored after the test
    try:
        link = reports.report_link(str(tmp_path / "d" / "_report.html"))
        assert link.startswith(url + "/report?path=")
        with urllib.request.urlopen(link, timeout=10) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
        (tmp_path / "secret.txt").write_text("no")
        for other in (str(tmp_path / "secret.txt"), "/etc/hostname", str(tmp_path / "d" / "_manifest.json")):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"{url}/report?path={other}", timeout=10)
            assert err.value.code == 403
    finally:
        server.shutdown()


def test_flow_modules_import_one_way():
    """flows/: reports <- artifacts <- pipeline <- corpus <- serve, and server beside them: no module
    imports one that imports it back (also through imports inside functions), and none imports a
    private name from another."""
    import ast

    graph = {}
    for path in (ROOT / "flows").glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corpusforge.flows."):
                deps.add(node.module.rsplit(".", 1)[1])
                assert not any(a.name.startswith("_") for a in node.names), (path.name, node.module)
        graph[path.stem] = deps

    def reaches(start, target, seen=()):
        return any(d == target or (d not in seen and reaches(d, target, seen + (d,))) for d in graph.get(start, ()))
    assert not [m for m in graph if reaches(m, m)], graph
