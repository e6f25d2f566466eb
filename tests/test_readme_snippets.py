"""README's snippets for reading a dataset folder without corpusforge, run as written (with the
folder's path), on a run that has rejected rows: every reader sees the kept rows and only them."""

import re
from pathlib import Path

import pytest

from conftest import ROOT, text_config
from corpusforge import runner


def _snippet() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index("No corpusforge is"):]
    block = block[block.index("```python") + len("```python"):]
    return [line for line in block[:block.index("```")].strip().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    (tmp / "in.jsonl").write_text("".join(f'{{"text": "document number {i}"}}\n' for i in range(50)) + "{broken\n" * 3)
    out = tmp / "out" / "demo" / "text"
    summary = runner.run(text_config([{"format": "jsonl", "paths": [str(tmp / "in.jsonl")], "source": "s"}], out,
                                     [{"stage": "text.exact_dedup"}]))
    assert summary.stats["totals"]["rejected"] == 3 and (out / "_report.html").exists()
    return out, summary.stats["totals"]["kept"]


@pytest.mark.parametrize("line", _snippet(), ids=lambda line: line.split(";")[0].split()[-1])
def test_readme_line_reads_exactly_the_kept_rows(folder, line, monkeypatch, tmp_path):
    out, kept = folder
    if "duckdb" in line:
        pytest.importorskip("duckdb")
    if "load_dataset" in line:
        pytest.importorskip("datasets")
        monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.chdir(out.parents[2])                                  # README paths are relative: out/demo/text
    namespace: dict = {}
    imports, expression = re.split(r";\s*", line.split("#")[0].strip(), maxsplit=1)
    exec(imports, namespace)                                           # noqa: S102 - the README's own line
    obj = eval(expression, namespace)                                  # noqa: S307
    if "duckdb" in line:
        rows = obj.fetchall()[0][0]                                    # SELECT count(*)
    elif "scan_parquet" in line:
        rows = obj.collect().height
    elif "pyarrow.dataset" in line:
        rows = obj.count_rows()
    else:
        rows = len(obj)
    assert rows == kept


def test_arrow_dataset_of_the_folder_skips_rejected_and_metadata(folder):
    import pyarrow.dataset as ds

    out, kept = folder
    assert ds.dataset(out, format="parquet").count_rows() == kept
    assert ds.dataset(out, format="parquet", exclude_invalid_files=True).count_rows() == kept
    assert ds.dataset(out / "_rejected", format="parquet").count_rows() == 3
