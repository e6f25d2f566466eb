import hashlib
import json
import os

import polars as pl
import pyarrow.parquet as pq
import pytest

from corpusforge import schemas
from corpusforge.errors import ManifestError
from corpusforge.io.dataset import Dataset, build_manifest, write_manifest
from corpusforge.io.readers.base import text_table
from corpusforge.io.writer import ShardWriter, WriterOptions

TEXT = schemas.load("text")
TARGET = schemas.dataset_schema(TEXT)


def _rows(n, start=0):
    return text_table("web", [f"document number {i} " * 20 for i in range(start, start + n)])


def _write(tmp_path, tables, **opts):
    w = ShardWriter(tmp_path, "part-00000", TARGET, WriterOptions(**opts))
    for t in tables:
        w.write(t)
    shards = w.close()
    m = build_manifest(schema=TEXT, target=TARGET, shards=shards, dataset="kept", config_hash="0" * 64,
                       lineage={"stages": []})
    write_manifest(tmp_path, m)
    return shards


def test_rolls_shards_by_rows_and_keeps_order(tmp_path):
    shards = _write(tmp_path, [_rows(250), _rows(250, 250)], shard_rows=100, row_group_rows=40)
    assert [s.rows for s in shards] == [100, 100, 100, 100, 100]
    assert pq.ParquetFile(tmp_path / shards[0].path).metadata.num_row_groups == 3
    ds = Dataset.open(tmp_path)
    texts = ds.read().column("text").to_pylist()
    assert texts == [f"document number {i} " * 20 for i in range(500)]


def test_rolls_shards_by_file_bytes(tmp_path):
    shards = _write(tmp_path, [_rows(3000)], shard_bytes=20_000, row_group_rows=200, compression="none")
    assert len(shards) > 3
    assert all(s.bytes >= 20_000 for s in shards[:-1])


def test_checksums_sizes_and_manifest(tmp_path):
    shards = _write(tmp_path, [_rows(100)])
    m = json.loads((tmp_path / "_manifest.json").read_text())
    assert m["format"] == "corpusforge.dataset" and m["schema"] == {"name": "text", "version": TEXT.version}
    assert m["rows"] == 100 and m["shards"][0]["sha256"] == hashlib.sha256((tmp_path / shards[0].path).read_bytes()).hexdigest()
    assert m["shards"][0]["bytes"] == (tmp_path / shards[0].path).stat().st_size
    assert Dataset.open(tmp_path).verify() == []


def test_verify_detects_truncation_and_alteration(tmp_path):
    shards = _write(tmp_path, [_rows(200)], shard_rows=100)
    p0, p1 = tmp_path / shards[0].path, tmp_path / shards[1].path
    p0.write_bytes(p0.read_bytes()[:-10])
    data = bytearray(p1.read_bytes())
    data[100] ^= 0xFF
    p1.write_bytes(bytes(data))
    problems = [str(p) for p in Dataset.open(tmp_path).verify()]
    assert any("size" in p and shards[0].path in p for p in problems)
    assert any("sha256" in p and shards[1].path in p for p in problems)
    with pytest.raises(ManifestError, match="sha256"):
        Dataset.open(tmp_path).read_shard(1, verify=True)


def test_crash_mid_shard_leaves_no_file_under_final_name(tmp_path):
    w = ShardWriter(tmp_path, "part-00000", TARGET, WriterOptions(row_group_rows=10, shard_rows=1000))
    w.write(_rows(50))        # row groups flushed into a shard that is not finished
    # the process dies here: nothing calls close()
    assert not list(tmp_path.glob("*.parquet"))
    assert [p.name for p in tmp_path.iterdir()] == [f".part-00000-00000.parquet.{os.getpid()}.tmp"]
    w.abort()
    assert not list(tmp_path.iterdir())


def test_disk_full_names_path_and_leaves_nothing(tmp_path, monkeypatch):
    from corpusforge.io import atomic

    def full(self, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(atomic.HashingFile, "write", full)
    w = ShardWriter(tmp_path, "part-00000", TARGET)
    w.write(_rows(5))
    with pytest.raises(OSError, match="part-00000-00000.parquet") as err:
        w.close()
    assert "No space left" in str(err.value)
    assert not list(tmp_path.iterdir())


def test_schema_mismatch_refused_on_write(tmp_path):
    w = ShardWriter(tmp_path, "p", TARGET)
    with pytest.raises(Exception, match="missing field 'text'"):
        w.write(_rows(3).drop_columns(["text"]))


def test_reads_in_polars_pyarrow_dataset_and_hf_datasets(tmp_path):
    _write(tmp_path, [_rows(300)], shard_rows=100)
    files = sorted(str(p) for p in tmp_path.glob("*.parquet"))
    assert pl.scan_parquet(files).select(pl.len()).collect().item() == 300
    import pyarrow.dataset as pads

    assert pads.dataset(files, format="parquet").count_rows() == 300
    datasets = pytest.importorskip("datasets")
    hf = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "hf"))
    assert len(hf) == 300 and hf[0]["text"].startswith("document number 0")


def test_open_refuses_other_major_schema_version(tmp_path):
    _write(tmp_path, [_rows(3)])
    m = json.loads((tmp_path / "_manifest.json").read_text())
    m["schema"]["version"] = "2.0.0"
    (tmp_path / "_manifest.json").write_text(json.dumps(m))
    with pytest.raises(ManifestError, match="not compatible"):
        Dataset.open(tmp_path)


def test_open_without_manifest_is_clear(tmp_path):
    with pytest.raises(ManifestError, match="no manifest"):
        Dataset.open(tmp_path)
