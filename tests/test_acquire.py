"""Acquisition readers: WARC/WET with HTML extraction and charsets, conversations, CSV/TSV,
save_to_disk folders, COCO, image archives, KITTI scans with boxes, LAS/LAZ, meshes; and the
demo configs that ingest one file of each family from data_samples."""

import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import ROOT, SAMPLES
from corpusforge import runner
from corpusforge.io.readers.coco import CocoReader
from corpusforge.io.readers.images import ImageFolderReader
from corpusforge.io.readers.jsonl import JsonlReader
from corpusforge.io.readers.lidar import KittiReader, LasReader
from corpusforge.io.readers.mesh import MeshReader
from corpusforge.io.readers.tabular import CsvReader, HfDiskReader
from corpusforge.io.readers.warc import WarcReader, decode_html
from corpusforge.pointcloud.clouds import arrays

sys.path.insert(0, str(ROOT / "bench"))
from web_pages import pages, write_warc  # noqa: E402

ACQ = SAMPLES / "acquire"


def read_all(reader_cls, path: Path, **cfg):
    reader = reader_cls(reader_cls.Config(paths=[str(path)], source="s", **cfg), kind=reader_cls.kinds[0])
    kept, rejected = [], []
    for file in reader.files():
        for batch in reader.read(file):
            kept += batch.records.to_pylist()
            rejected += batch.rejected.to_pylist() if batch.rejected is not None else []
    return kept, rejected


# --- web archives -----------------------------------------------------------------------------

def test_warc_utf8_gbk_lying_charset_and_non_html(tmp_path):
    ps = pages(6, seed=2)
    zh = next(p for p in ps if p["lang"] == "zh")
    gbk = zh["html"].replace('charset="utf-8"', 'charset="gbk"').encode("gbk", "replace")
    liar = zh["html"].replace('<meta charset="utf-8">', "").encode("gbk", "replace")
    responses = [{"url": p["url"], "body": p["html"].encode()} for p in ps]
    responses += [{"url": "http://gbk/", "body": gbk, "content_type": "text/html; charset=gbk"},
                  {"url": "http://liar/", "body": liar, "content_type": "text/html; charset=iso-8859-1"},
                  {"url": "http://none/", "body": liar, "content_type": "text/html"},
                  {"url": "http://x/a.pdf", "body": b"%PDF-1.4", "content_type": "application/pdf"},
                  {"url": "http://x/moved", "body": b"", "status": 302},
                  {"url": "http://x/empty", "body": b"<html><body></body></html>"}]
    warc = write_warc(tmp_path / "c.warc.gz", responses)
    kept, rejected = read_all(WarcReader, warc)
    by_url = {json.loads(r["meta"])["url"]: r for r in kept}
    assert len(kept) == len(ps) + 3
    # the main text is there, the boilerplate is not
    for p in ps:
        text = by_url[p["url"]]["text"]
        assert p["main"][0][:30].strip() in text
        assert "cookie" not in text.lower() and "Cookie" not in text
    for url in ("http://gbk/", "http://liar/", "http://none/"):
        assert zh["main"][0][:15] in by_url[url]["text"], url
    assert json.loads(by_url["http://liar/"]["meta"])["charset_corrected"] is True
    assert json.loads(by_url["http://gbk/"]["meta"])["charset"] == "gb18030"
    reasons = {}
    for r in rejected:
        reasons[r["reject_reason"]] = reasons.get(r["reject_reason"], 0) + 1
    assert reasons == {"warc_warcinfo": 1, "warc_request": len(responses), "not_html": 1, "http_status": 1,
                       "no_main_text": 1}
    # provenance: the offset finds the record again
    from warcio.archiveiterator import ArchiveIterator

    row = by_url[ps[0]["url"]]
    with open(warc, "rb") as fh:
        fh.seek(row["src_row"])
        record = next(iter(ArchiveIterator(fh)))
        assert record.rec_headers.get_header("WARC-Target-URI") == ps[0]["url"]


def test_warc_truncated_and_not_a_warc(tmp_path):
    kept, rejected = read_all(WarcReader, ACQ / "web" / "cut_short.warc.gz")
    assert kept and rejected[-1]["reject_reason"] == "truncated_file"
    assert "cut short" in rejected[-1]["reject_detail"]
    (tmp_path / "junk.warc.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10)
    kept, rejected = read_all(WarcReader, tmp_path / "junk.warc.gz")
    assert not kept and [r["reject_reason"] for r in rejected] in (["not_a_warc"], ["truncated_file"])


def test_wet_conversion_records_and_resiliparse(tmp_path):
    from warcio.warcwriter import WARCWriter

    with open(tmp_path / "x.warc.wet.gz", "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for i, text in enumerate(["First extracted page text.", "第二页的文字。", ""]):
            w.write_record(w.create_warc_record(f"http://e/{i}", "conversion", payload=io.BytesIO(text.encode()),
                                                warc_headers_dict={"Content-Type": "text/plain"}))
    kept, rejected = read_all(WarcReader, tmp_path / "x.warc.wet.gz")
    assert [r["text"] for r in kept] == ["First extracted page text.", "第二页的文字。"]
    assert [r["reject_reason"] for r in rejected] == ["no_main_text"]
    p = pages(2, seed=5)[0]
    warc = write_warc(tmp_path / "r.warc", [{"url": p["url"], "body": p["html"].encode()}], gzip=False)
    kept, _ = read_all(WarcReader, warc, extractor="resiliparse")
    assert p["main"][0][:30].strip() in kept[0]["text"]


def test_decode_html_prefers_valid_declared_multibyte():
    html = ("<html><head><meta charset='gb2312'></head><body>中文内容，编码测试。网页常常声明一种编码却用另一种，"
            "读取器必须先相信声明，解码失败时再检测真实的编码，并记录下来。</body></html>")
    text, codec, declared, corrected = decode_html(html.encode("gb2312"), None)
    assert "中文内容" in text and codec == "gb18030" and declared == "gb2312" and not corrected
    text, codec, _, corrected = decode_html(html.replace("gb2312", "utf-8").encode("gbk"), "utf-8")
    assert "中文内容" in text and corrected          # declared UTF-8, bytes GBK


# --- documents --------------------------------------------------------------------------------

def test_conversations_csv_tsv(tmp_path):
    kept, rejected = read_all(JsonlReader, ACQ / "chat", turns_field="messages")
    assert len(kept) == 6 and kept[0]["text"].startswith("user: ") and "\n\nassistant: " in kept[0]["text"]
    assert [r["reject_reason"] for r in rejected] == ["bad_turns"] and rejected[0]["src_row"] == 6
    kept, _ = read_all(JsonlReader, ACQ / "chat", turns_field="messages", turn_template="<|{role}|>{content}",
                       turn_separator="\n")
    assert kept[0]["text"].startswith("<|user|>")
    kept, rejected = read_all(CsvReader, ACQ / "tables")
    assert len(kept) == 8 and json.loads(kept[0]["meta"]) == {"review_id": "0", "stars": "1"}
    assert [(r["reject_reason"], r["src_row"]) for r in rejected] == [("bad_row", 8)]
    (tmp_path / "t.tsv").write_text("id\ttext\n1\tfirst, with a comma\n2\t\"quoted\ttab\"\n")
    kept, _ = read_all(CsvReader, tmp_path / "t.tsv")
    assert [r["text"] for r in kept] == ["first, with a comma", "quoted\ttab"]
    kept, rejected = read_all(CsvReader, tmp_path / "t.tsv", text_field="body")
    assert not kept and rejected[0]["reject_reason"] == "missing_text_field"


def test_hf_save_to_disk_read_directly(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": [f"document {i}" for i in range(50)] + [None], "n": list(range(51))})
    ds.save_to_disk(str(tmp_path / "one"), max_shard_size="1KB")
    kept, rejected = read_all(HfDiskReader, tmp_path / "one")
    assert sorted(r["text"] for r in kept) == sorted(f"document {i}" for i in range(50))
    assert [r["reject_reason"] for r in rejected] == ["missing_text_field"]
    assert len({r["src_path"] for r in kept}) > 1                       # several Arrow shards, all read
    # large_string text (what datasets writes for long documents) is text: it used to be rejected
    # row by row as "not text"; numbers are never cast into text
    big = datasets.Dataset.from_dict({"text": ["a long document", None], "n": [1, 2]},
                                     features=datasets.Features({"text": datasets.Value("large_string"),
                                                                 "n": datasets.Value("int64")}))
    big.save_to_disk(str(tmp_path / "large"))
    kept, rejected = read_all(HfDiskReader, tmp_path / "large")
    assert [r["text"] for r in kept] == ["a long document"]
    assert [r["reject_reason"] for r in rejected] == ["missing_text_field"]
    kept, rejected = read_all(HfDiskReader, tmp_path / "large", text_field="n")
    assert not kept and [r["reject_reason"] for r in rejected] == ["wrong_column_type"] * 2
    dd = datasets.DatasetDict({"train": ds.select(range(5)), "test": ds.select(range(5, 8))})
    dd.save_to_disk(str(tmp_path / "dict"))
    kept, _ = read_all(HfDiskReader, tmp_path / "dict")
    assert sorted(json.loads(r["meta"])["split"] for r in kept) == ["test"] * 3 + ["train"] * 5


# --- images -----------------------------------------------------------------------------------

def test_coco_boxes_labels_missing_image_and_orphans():
    kept, rejected = read_all(CocoReader, ACQ / "coco" / "annotations.json")
    assert len(kept) == 6
    meta = json.loads(kept[2]["meta"])
    assert meta["annotations"][0]["bbox"] == [0, 12, 40, 30] and meta["annotations"][0]["segmentation"]
    assert kept[2]["label"] == max(meta["categories"], key=meta["categories"].get)
    assert sorted(r["reject_reason"] for r in rejected) == ["missing_file", "orphan_annotations"]


def test_image_archives_stream_members(tmp_path):
    kept, rejected = read_all(ImageFolderReader, ACQ / "photos.tar", label_from_parent=True)
    assert {r["label"] for r in kept} == {"indoor", "outdoor"}
    assert all(json.loads(r["meta"])["member"].endswith(".jpg") for r in kept)
    assert [r["reject_reason"] for r in rejected] == ["truncated_image"]
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.write(SAMPLES / "images" / "photo_01.jpg", "cats/photo_01.jpg")
        z.writestr("notes.txt", "not an image")
    kept, _ = read_all(ImageFolderReader, tmp_path / "a.zip", label_from_parent=True)
    assert [r["label"] for r in kept] == ["cats"] and kept[0]["src_path"] == str(tmp_path / "a.zip")
    data = (ACQ / "photos.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    kept, rejected = read_all(ImageFolderReader, tmp_path / "cut.tar")
    assert rejected[-1]["reject_reason"] in ("truncated_file", "truncated_image")


# --- point clouds -----------------------------------------------------------------------------

def test_kitti_scan_boxes_in_lidar_frame_and_bad_length():
    kept, rejected = read_all(KittiReader, ACQ / "kitti" / "velodyne")
    assert [r["reject_reason"] for r in rejected] == ["bad_length"] and "multiple of 16" in rejected[0]["reject_detail"]
    (row,) = kept
    (box,) = json.loads(row["meta"])["boxes"]
    assert box["label"] == "Car" and box["center"] == pytest.approx([12.0, 2.0, -0.95], abs=1e-6)
    assert box["yaw"] == pytest.approx(0.0, abs=1e-3) and box["size"] == [4.0, 1.6, 1.5]
    import pyarrow as pa

    cloud = arrays(pa.Table.from_pylist([row]), 0)
    from corpusforge.pointcloud.augment import in_box

    inside = in_box(cloud.xyz, box)
    assert inside[-600:].all() and 600 <= inside.sum() < 650 and cloud.intensity is not None   # the car (+ ground under it)


def test_las_laz_tile():
    kept, _ = read_all(LasReader, ACQ / "lidar")
    (row,) = kept
    meta = json.loads(row["meta"])
    assert row["n_points"] == 4000 and meta["classification"] == {"2": 3203, "5": 797}
    assert meta["xyz_offset"][:2] == [500000.0, 4100000.0]
    assert row["colors"] is not None and max(max(c) for c in row["colors"]) <= 255


@pytest.mark.parametrize("sampling", ["uniform", "poisson"])
def test_meshes_sampled_on_the_surface(sampling):
    kept, rejected = read_all(MeshReader, ACQ / "meshes", sampling=sampling, points=500)
    assert [r["reject_reason"] for r in rejected] == ["no_faces"]
    by_name = {Path(r["src_path"]).name: r for r in kept}
    cube = np.array(by_name["cube.off"]["points"])
    assert len(cube) == 500 and np.allclose(np.abs(cube - 0.5).max(axis=1), 0.5, atol=1e-5)   # on the faces
    mesh = json.loads(by_name["pyramid_degenerate.obj"]["meta"])["mesh"]
    assert mesh["degenerate_removed"] == 2 and mesh["triangles_kept"] == 6
    again, _ = read_all(MeshReader, ACQ / "meshes", sampling=sampling, points=500)
    assert again[0]["points"] == kept[0]["points"]                                       # seeded


# --- the demo ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["text", "images", "pointclouds"])
def test_demo_acquisition_configs_account_for_everything(tmp_path, name):
    cfg = yaml.safe_load((SAMPLES / "configs" / f"demo_acquire_{name}.yaml").read_text())
    for inp in cfg["inputs"]:
        inp["paths"] = [str(ROOT / p) for p in inp["paths"]]
    cfg["output"]["path"] = str(tmp_path / "out")
    runner.run(cfg)
    stats = json.loads((tmp_path / "out" / "_stats.json").read_text())
    kept = pq.read_table(list((tmp_path / "out").glob("*.parquet"))).num_rows
    rejected = sum(pq.read_metadata(f).num_rows for f in (tmp_path / "out" / "_rejected").glob("*.parquet"))
    created = sum(s.get("created", 0) for s in stats["stages"].values())
    assert stats["read"]["records"] + stats["read"]["rejected"] + created == kept + rejected
    assert kept > 0 and rejected > 0


def test_http_payload_undoes_chunked_and_gzip():
    import gzip as gz

    from corpusforge.io.readers.warc import http_payload, parse_http

    html = b"<html><body><p>" + b"hello " * 50 + b"</p></body></html>"
    packed = gz.compress(html)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(packed[i:i + 100]), packed[i:i + 100]) for i in range(0, len(packed), 100))
    block = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
             + chunked + b"0\r\n\r\n")
    status, headers, body = parse_http(block)
    assert status == 200 and headers["content-type"] == "text/html"
    assert http_payload(body, headers) == html


def test_stl_and_ply_meshes_and_markdown_folders(tmp_path):
    import open3d as o3d

    from corpusforge.io.readers.text import TextReader

    box = o3d.geometry.TriangleMesh.create_box(2.0, 1.0, 1.0)
    box.compute_triangle_normals()
    o3d.io.write_triangle_mesh(str(tmp_path / "box.stl"), box)
    o3d.io.write_triangle_mesh(str(tmp_path / "box.ply"), box)
    kept, rejected = read_all(MeshReader, tmp_path, points=300)
    assert not rejected and sorted(Path(r["src_path"]).name for r in kept) == ["box.ply", "box.stl"]
    for r in kept:
        pts = np.array(r["points"])
        assert pts.min(axis=0) == pytest.approx([0, 0, 0], abs=1e-5) and pts.max(axis=0) == pytest.approx([2, 1, 1], abs=1e-5)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Title\n\nSome *markdown* text.\n")
    kept, _ = read_all(TextReader, tmp_path / "notes")
    assert kept[0]["text"].startswith("# Title")
