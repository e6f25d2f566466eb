"""Mutation fuzzing of the readers: does a damaged file ever kill the process or end its file early?

Each reader gets valid sample files (data_samples/, plus meshes and clouds written here by Open3D
and a Parquet file by pyarrow), mutated --cases times each with a seeded mix of byte flips,
inserted bytes (NUL, 0xFF, newlines, long digit runs, int32/int64 maxima), deletions, repeats and
cuts. Every mutated file is read by ``guarded_read`` (as a run reads it) in a forked child, and
counted as:

  died       the child was killed by a signal or exited without answering (a run would lose its
             unit on every retry: the run fails)
  fallback   the reader raised and ``guarded_read`` closed the file with one `unreadable_file` row
             ("reader ... failed after n row(s)"): the rows after the error are lost
  crashed    the reader rejected the file as `parser_crashed` (its helper process died; the run
             goes on)

    .venv/bin/python bench/fuzz_readers.py [--cases 60] [--seed 0] [--readers mesh,las,...]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import open3d as o3d  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from corpusforge.registry import reader_class  # noqa: E402
from corpusforge.runner.step import guarded_read  # noqa: E402

SAMPLES = ROOT / "data_samples"
INSERTS = [b"\0", b"\xff", b"\n", b"-1", b"9" * 12, b" ", b"9" * 30, b"\r", b"\xc3", b'"', b"\\", b"{",
           b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\xff\xff\xff\x7f"]


def samples(folder: Path) -> dict[str, tuple[str, list[Path], dict]]:
    """reader format -> (kind, files, config extras)."""
    sphere = o3d.geometry.TriangleMesh.create_sphere(radius=1.0, resolution=6)
    sphere.compute_triangle_normals()                # STL stores face normals
    meshes = []
    for name, ascii_ in [("sphere.obj", True), ("sphere.off", True), ("sphere.ply", True), ("sphere_bin.ply", False),
                         ("sphere_bin.stl", False)]:
        o3d.io.write_triangle_mesh(str(folder / name), sphere, write_ascii=ascii_)
        meshes.append(folder / name)
    cloud = sphere.sample_points_uniformly(500)
    clouds = [SAMPLES / "pointclouds" / "crate_view0.pcd", SAMPLES / "pointclouds" / "torus_noisy.ply"]
    for name in ("cloud_bin.pcd", "cloud_bin.ply", "cloud.xyz"):
        o3d.io.write_point_cloud(str(folder / name), cloud, write_ascii=name.endswith(".xyz"))
        clouds.append(folder / name)
    table = pa.table({"text": [f"document {i} " * 5 for i in range(3000)], "n": list(range(3000))})
    pq.write_table(table, folder / "docs.parquet", row_group_size=500)
    return {
        "jsonl": ("text", [SAMPLES / "text" / "web_en.jsonl", SAMPLES / "text" / "news_zh.jsonl.gz"], {}),
        "csv": ("text", [SAMPLES / "acquire" / "tables" / "reviews.csv"], {"text_field": "review"}),
        "text": ("text", [SAMPLES / "text" / "books" / "book_00.txt"], {}),
        "warc": ("text", [SAMPLES / "acquire" / "web" / "crawl.warc.gz"], {"extractor": "resiliparse"}),
        "hf_disk": ("text", [SAMPLES / "acquire" / "hf_dataset" / "train" / "data-00000-of-00001.arrow"], {}),
        "parquet": ("text", [folder / "docs.parquet"], {}),
        "coco": ("image", [SAMPLES / "acquire" / "coco" / "annotations.json"], {}),
        "kitti": ("pointcloud", [SAMPLES / "acquire" / "kitti" / "velodyne" / "000000.bin"], {"labels": False}),
        "las": ("pointcloud", [SAMPLES / "acquire" / "lidar" / "tile.laz"], {}),
        "mesh": ("pointcloud", meshes, {"points": 256}),
        "pointcloud": ("pointcloud", clouds, {}),
    }


def mutate(data: bytes, rng: random.Random, gzipped: bool) -> bytes:
    if gzipped and rng.random() < 0.7:          # damage the content, not only the compression
        return gzip.compress(mutate(gzip.decompress(data), rng, False), mtime=0)
    b = bytearray(data)
    kind = rng.choice(["flip", "insert", "overwrite", "delete", "repeat", "cut"])
    for _ in range(rng.choice([1, 1, 2, 5, 20])):
        if not b:
            break
        i = rng.randrange(len(b))
        if kind == "flip":
            b[i] = rng.randrange(256)
        elif kind == "insert":
            b[i:i] = rng.choice(INSERTS)
        elif kind == "overwrite":
            s = rng.choice(INSERTS)
            b[i:i + len(s)] = s
        elif kind == "delete":
            del b[i:i + rng.randrange(1, 50)]
        elif kind == "repeat":
            b[i:i] = b[max(0, i - 100):i]
        else:
            del b[i:]
            break
    return bytes(b)


def read_in_child(cls, kind: str, extra: dict, path: Path) -> str:
    """'ok', 'fallback', 'crashed' or 'died' for reading ``path`` in a forked child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child: read, answer one word, exit
        os.close(r)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        verdict = "ok"
        reader = cls(cls.Config(paths=[str(path)], source="fuzz", **extra), kind=kind)
        for batch in guarded_read(reader, str(path)):
            if batch.rejected is not None:
                reasons = batch.rejected.column("reject_reason").to_pylist()
                details = batch.rejected.column("reject_detail").to_pylist()
                if any(d and " failed after " in d for d in details):
                    verdict = "fallback"
                elif "parser_crashed" in reasons and verdict == "ok":
                    verdict = "crashed"
        os.write(w, verdict.encode())
        os._exit(0)
    os.close(w)
    answer = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return answer or "died"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=60, help="mutated files per sample file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--readers", default="", help="comma-separated formats (default: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        table = samples(tmp)
        wanted = [f for f in (args.readers.split(",") if args.readers else table)]
        print("| reader | sample files | mutated files | died | fallback | parser_crashed |")
        print("|---|---|---|---|---|---|")
        for fmt in wanted:
            kind, files, extra = table[fmt]
            cls = reader_class(fmt)
            rng = random.Random(f"{args.seed}:{fmt}")
            counts = collections.Counter()
            for sample in files:
                data = sample.read_bytes()
                for case in range(args.cases):
                    folder = tmp / "cases" / f"{fmt}_{sample.name}_{case}"
                    folder.mkdir(parents=True)
                    if fmt in ("hf_disk", "coco"):          # the files beside it: dataset info, images
                        shutil.copytree(sample.parent, folder, dirs_exist_ok=True)
                    target = folder / sample.name
                    target.write_bytes(mutate(data, rng, sample.suffix == ".gz"))
                    counts[read_in_child(cls, kind, extra, target)] += 1
                    shutil.rmtree(folder)
            n = sum(counts.values())
            print(f"| {fmt} | {len(files)} | {n} | {counts['died']} | {counts['fallback']} | {counts['crashed']} |",
                  flush=True)


if __name__ == "__main__":
    main()
