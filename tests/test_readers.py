import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from conftest import shared
from corpusforge.io.readers.images import ImageFolderReader
from corpusforge.io.readers.jsonl import JsonlReader
from corpusforge.io.readers.parquet import ParquetReader
from corpusforge.io.readers.pointcloud import PointCloudReader
from corpusforge.pointcloud.clouds import arrays
from corpusforge.io.readers.text import TextReader


def _read(reader, path):
    recs, rejs = [], []
    for b in reader.read(Path(path)):
        recs.append(b.records)
        if b.rejected is not None:
            rejs.append(b.rejected)
    recs = pa.concat_tables(recs, promote_options="default") if recs else None
    rejs = pa.concat_tables(rejs, promote_options="default") if rejs else None
    return recs, rejs


def jsonl(**kw):
    return JsonlReader(JsonlReader.Config(paths=["x"], source="web", **kw), kind="text", batch_rows=3)


def test_jsonl_plain_gz_zst_give_same_records(tmp_path):
    lines = b"".join(json.dumps({"text": f"doc {i}", "url": f"u{i}"}).encode() + b"\n" for i in range(10))
    (tmp_path / "a.jsonl").write_bytes(lines)
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(lines))
    (tmp_path / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    results = [_read(jsonl(), tmp_path / n)[0] for n in ("a.jsonl", "a.jsonl.gz", "a.jsonl.zst")]
    for r in results:
        assert r.column("text").to_pylist() == [f"doc {i}" for i in range(10)]
        assert r.column("src_row").to_pylist() == list(range(10))
        assert json.loads(r.column("meta")[3].as_py()) == {"url": "u3"}
    assert results[0].column("id") == results[1].column("id")


def test_jsonl_bad_lines_are_rejected_with_line_numbers(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "good"}\n{not json\n[1, 2]\n{"title": "x"}\n{"text": "bad \xff byte"}\n'
                     b'\n{"text": 5}\n{"text": "lone \\ud800 surrogate"}\n{"text": "good 2"}\n')
    recs, rejs = _read(jsonl(), path)
    assert recs.column("text").to_pylist() == ["good", "good 2"]
    got = dict(zip(rejs.column("src_row").to_pylist(), rejs.column("reject_reason").to_pylist()))
    assert got == {1: "invalid_json", 2: "not_an_object", 3: "missing_text_field", 4: "invalid_utf8",
                   5: "empty_line", 6: "missing_text_field", 7: "invalid_utf8"}
    assert "line 2" in rejs.column("reject_detail")[0].as_py()
    assert recs.num_rows + rejs.num_rows == 9          # every line accounted for


def test_jsonl_empty_and_truncated_files(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    recs, rejs = _read(jsonl(), tmp_path / "e.jsonl")
    assert recs.num_rows == 0 and rejs.column("reject_reason").to_pylist() == ["empty_file"]
    data = gzip.compress(b"".join(json.dumps({"text": f"doc {i} " * 50}).encode() + b"\n" for i in range(200)))
    (tmp_path / "t.jsonl.gz").write_bytes(data[: len(data) // 2])
    recs, rejs = _read(jsonl(), tmp_path / "t.jsonl.gz")
    assert 0 < recs.num_rows < 200
    assert rejs.column("reject_reason").to_pylist() == ["truncated_file"]


def test_jsonl_unreadable_file(tmp_path):
    recs, rejs = _read(jsonl(), tmp_path / "missing.jsonl")
    assert rejs.column("reject_reason").to_pylist() == ["unreadable_file"]


def test_text_reader_file_and_line_modes(tmp_path):
    (tmp_path / "a.txt").write_text("first line\n\nsecond para\n")
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    r = TextReader(TextReader.Config(paths=["x"], source="books"), kind="text")
    recs, _ = _read(r, tmp_path / "a.txt")
    assert recs.column("text").to_pylist() == ["first line\n\nsecond para\n"]
    _, rejs = _read(r, tmp_path / "latin.txt")
    assert rejs.column("reject_reason").to_pylist() == ["invalid_utf8"]
    _, rejs = _read(r, tmp_path / "blank.txt")
    assert rejs.column("reject_reason").to_pylist() == ["empty_file"]
    lines = TextReader(TextReader.Config(paths=["x"], source="b", mode="line"), kind="text")
    recs, _ = _read(lines, tmp_path / "a.txt")
    assert recs.column("text").to_pylist() == ["first line", "second para"]
    assert recs.column("src_row").to_pylist() == [0, 2]
    latin = TextReader(TextReader.Config(paths=["x"], source="b", encoding="latin-1"), kind="text")
    recs, _ = _read(latin, tmp_path / "latin.txt")
    assert recs.column("text").to_pylist() == ["café\n"]


def test_text_reader_on_real_corpora():
    path = shared("text", "zhwiki_sample.zh.txt")
    r = TextReader(TextReader.Config(paths=["x"], source="wiki", mode="line"), kind="text", batch_rows=1000)
    recs, rejs = _read(r, path)
    assert recs.num_rows > 2000 and rejs is None
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in "".join(recs.column("text").to_pylist()[:50])) > 500


def test_parquet_reader_maps_columns_and_keeps_meta(tmp_path):
    pq.write_table(pa.table({"content": ["a", "b"], "url": ["u1", "u2"]}), tmp_path / "in.parquet")
    r = ParquetReader(ParquetReader.Config(paths=["x"], source="s", columns={"text": "content"}), kind="text")
    recs, _ = _read(r, tmp_path / "in.parquet")
    assert recs.column("text").to_pylist() == ["a", "b"] and recs.column("src_row").to_pylist() == [0, 1]
    assert json.loads(recs.column("meta")[1].as_py()) == {"url": "u2"}
    r2 = ParquetReader(ParquetReader.Config(paths=["x"], source="s"), kind="text")
    _, rejs = _read(r2, tmp_path / "in.parquet")
    assert rejs.column("reject_reason").to_pylist() == ["missing_column"]
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    _, rejs = _read(r2, tmp_path / "junk.parquet")
    assert rejs.column("reject_reason").to_pylist() == ["unreadable_file"]


def test_image_reader_reads_headers_and_quarantines_bad_files(tmp_path):
    from PIL import Image
    from skimage import data

    Image.fromarray(data.astronaut()).save(tmp_path / "astronaut.jpg")
    Image.fromarray(data.camera()).save(tmp_path / "camera.png")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "text.png").write_bytes(b"not an image")
    for name in ("astronaut.jpg", "camera.png"):
        whole = (tmp_path / name).read_bytes()
        (tmp_path / f"cut_{name}").write_bytes(whole[: len(whole) * 2 // 3])
    r = ImageFolderReader(ImageFolderReader.Config(paths=["x"], source="p"), kind="image")
    recs, _ = _read(r, tmp_path / "astronaut.jpg")
    assert recs.to_pylist()[0] | {"image": None} == recs.to_pylist()[0] | {"image": None}
    row = recs.to_pylist()[0]
    assert (row["format"], row["width"], row["height"], row["mode"]) == ("JPEG", 512, 512, "RGB")
    recs, _ = _read(r, tmp_path / "camera.png")
    assert recs.column("mode").to_pylist() == ["L"]
    for name, reason in (("empty.jpg", "empty_file"), ("text.png", "corrupt_image"),
                         ("cut_astronaut.jpg", "truncated_image"), ("cut_camera.png", "truncated_image")):
        _, rejs = _read(r, tmp_path / name)
        assert rejs.column("reject_reason").to_pylist() == [reason]
    _, rejs = _read(r, tmp_path / "text.png")
    assert rejs.column("image").to_pylist() == [b"not an image"]   # quarantined with its bytes


def pc_reader(**kw):
    return PointCloudReader(PointCloudReader.Config(paths=["x"], source="scans", **kw), kind="pointcloud")


@pytest.mark.parametrize("name", ["bun0.pcd", "bun4.pcd", "bunny.pcd", "car6.pcd", "milk_color.pcd",
                                  "noisy_slice_displaced.pcd", "office1.pcd", "table_scene_mug_stereo_textured.pcd"])
def test_reads_every_real_pcl_cloud(name):
    path = shared("pointcloud", name)
    recs, rejs = _read(pc_reader(), path)
    assert rejs is None and recs.num_rows == 1
    pts = arrays(recs, 0).xyz
    assert pts.dtype == np.float32 and pts.shape == (recs.column("n_points")[0].as_py(), 3)
    assert np.isfinite(pts).all()
    header = path.read_bytes()[:600].decode("ascii", "replace")
    declared = int(header.split("POINTS")[1].split()[0])
    assert len(pts) + recs.column("count_read_nonfinite")[0].as_py() == declared


def test_binary_compressed_pcd_with_nans_and_colours():
    path = shared("pointcloud", "table_scene_mug_stereo_textured.pcd")
    recs, _ = _read(pc_reader(), path)
    nonfinite = recs.column("count_read_nonfinite")[0].as_py()
    assert nonfinite > 0
    assert recs.column("n_points")[0].as_py() == 307200 - nonfinite
    colors = recs.column("colors")[0].values.flatten().to_numpy().reshape(-1, 3)
    assert colors.dtype == np.uint8 and len(colors) == 307200 - nonfinite and colors.std() > 0


def test_bun0_keeps_normals():
    recs, _ = _read(pc_reader(), shared("pointcloud", "bun0.pcd"))
    normals = recs.column("normals")[0].values.flatten().to_numpy().reshape(-1, 3)
    assert normals.shape == (397, 3) and np.allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-3)


def test_pointcloud_bad_inputs(tmp_path):
    (tmp_path / "hdr.pcd").write_text("VERSION 0.7\nFIELDS x y z\nSIZE 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 1\n"
                                      "HEIGHT 1\nPOINTS 1\nDATA ascii\n0 0 0\n")
    (tmp_path / "empty.ply").write_bytes(b"")
    (tmp_path / "nan.xyz").write_text("nan nan nan\ninf 0 0\n")
    (tmp_path / "two.npy").write_bytes(b"")
    np.save(tmp_path / "flat.npy", np.zeros(5, np.float32))
    (tmp_path / "garbage.ply").write_bytes(b"ply\nformat nonsense\n")
    expected = {"hdr.pcd": "corrupt_header", "empty.ply": "empty_file", "nan.xyz": "empty_cloud",
                "two.npy": "empty_file", "flat.npy": "unreadable_file", "garbage.ply": "corrupt_file"}
    for name, reason in expected.items():
        recs, rejs = _read(pc_reader(), tmp_path / name)
        assert rejs.column("reject_reason").to_pylist() == [reason], name


def test_pointcloud_group_from_file_name(tmp_path):
    np.save(tmp_path / "chair_view3.npy", np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32))
    recs, _ = _read(pc_reader(group_pattern=r"^(.*)_view\d+$"), tmp_path / "chair_view3.npy")
    assert recs.column("group").to_pylist() == ["chair"]
