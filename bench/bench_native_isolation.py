"""What the readers' safety costs. (1) Native parsers in a helper process: the mesh and LAS/LAZ
readers' parse step (``corpusforge.io.native.Isolated``) vs the same library call in this process,
same files, same run. (2) Full validation of every Arrow record batch the ``hf_disk`` reader reads
(``RecordBatch.validate(full=True)``), timed alone against the whole reader on the same file.

Meshes: the Stanford bunny (real scan, ../shared/data/pointcloud/bunny.pcd) meshed by Poisson
reconstruction and written as binary PLY, ASCII PLY and OFF, and small CAD-like meshes (spheres
of 80-1,300 triangles, ModelNet's range) written as OFF, and a binary PLY sphere of 319,200
triangles; LAS: the sample tile (LAZ) and the same
points uncompressed, and a tile of --las-points points. Each file is parsed --repeats times;
the helper is started once per reader, as in a run (its start is reported apart). The Arrow file:
--docs documents of 200-4,000 characters (English and Chinese text from ../shared/data when present,
repeated), written as ``datasets`` writes them (an IPC stream, 1,000 rows a batch).

    .venv/bin/python bench/bench_native_isolation.py [--repeats 5] [--las-points 2000000] [--docs 200000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import laspy  # noqa: E402
import open3d as o3d  # noqa: E402

from bench.timing import best  # noqa: E402
from corpusforge.io.native import Isolated  # noqa: E402
from corpusforge.io.readers.lidar import parse_las  # noqa: E402
from corpusforge.io.readers.mesh import parse_mesh  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "pointcloud"


def meshes(folder: Path) -> list[tuple[str, list[Path]]]:
    groups = []
    bunny = SHARED / "bunny.pcd"
    if bunny.exists():
        pcd = o3d.io.read_point_cloud(str(bunny))
        pcd.estimate_normals()
        mesh, _ = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(pcd, depth=8)
        files = []
        for name, ascii_ in [("bunny_bin.ply", False), ("bunny_ascii.ply", True), ("bunny.off", True)]:
            o3d.io.write_triangle_mesh(str(folder / name), mesh, write_ascii=ascii_)
            files.append(folder / name)
        groups.append((f"bunny, Poisson mesh ({len(mesh.triangles):,} triangles), 3 files", files))
    big = o3d.geometry.TriangleMesh.create_sphere(radius=1.0, resolution=400)
    o3d.io.write_triangle_mesh(str(folder / "sphere_big.ply"), big, write_ascii=False)
    groups.append((f"large binary PLY ({len(big.triangles):,} triangles)", [folder / "sphere_big.ply"]))
    small = []
    for i in range(200):
        m = o3d.geometry.TriangleMesh.create_sphere(radius=1.0, resolution=3 + i % 24)
        small.append(folder / f"cad_{i:03d}.off")
        o3d.io.write_triangle_mesh(str(small[-1]), m)
    groups.append(("200 small OFF meshes (80-1,300 triangles)", small))
    return groups


def las_files(folder: Path, n_points: int) -> list[tuple[str, list[Path]]]:
    tile = ROOT / "data_samples" / "acquire" / "lidar" / "tile.laz"
    las = laspy.read(tile)
    las.write(folder / "tile.las")
    rng = np.random.default_rng(0)
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.scales, header.offsets = [0.01] * 3, [500_000.0, 5_400_000.0, 0.0]
    big = laspy.LasData(header)
    big.x = 500_000 + rng.random(n_points) * 1000
    big.y = 5_400_000 + rng.random(n_points) * 1000
    big.z = rng.random(n_points) * 50
    big.intensity = rng.integers(0, 65535, n_points, dtype=np.uint16)
    big.write(folder / "big.laz")
    return [(f"sample tile, LAZ ({las.header.point_count:,} points)", [tile]),
            ("sample tile, LAS", [folder / "tile.las"]),
            (f"synthetic tile, LAZ ({n_points:,} points)", [folder / "big.laz"])]


def arrow_validation(folder: Path, n_docs: int, repeats: int) -> tuple[float, float, int]:
    """(seconds validating every batch, seconds of the whole hf_disk reader, file bytes)."""
    import pyarrow as pa

    from corpusforge.io.readers.tabular import HfDiskReader

    corpus = "".join(f.read_text(errors="replace")[:5_000_000] for f in sorted((SHARED.parent / "text").glob("*.txt")))
    corpus = corpus or "The quick brown fox jumps over the lazy dog. 数据清洗与去重。" * 200_000
    rng = np.random.default_rng(0)
    starts, lengths = rng.integers(0, len(corpus) - 4000, n_docs), rng.integers(200, 4000, n_docs)
    texts = [corpus[s:s + n] for s, n in zip(starts, lengths)]
    path = folder / "hf" / "data-00000-of-00001.arrow"
    path.parent.mkdir()
    schema = pa.schema([("text", pa.large_string()), ("id", pa.int64())])
    with pa.ipc.new_stream(str(path), schema) as w:
        for i in range(0, n_docs, 1000):
            w.write_batch(pa.record_batch([pa.array(texts[i:i + 1000], pa.large_string()),
                                           pa.array(range(i, min(i + 1000, n_docs)), pa.int64())], schema=schema))

    def validate_all():
        for batch in pa.ipc.open_stream(pa.memory_map(str(path))):
            batch.validate(full=True)

    reader = HfDiskReader(HfDiskReader.Config(paths=[str(path)], source="bench"), kind="text")
    validate, _ = best(validate_all, repeats)
    whole, _ = best(lambda: sum(b.records.num_rows for b in reader.read(path)), repeats)
    return validate, whole, path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--las-points", type=int, default=2_000_000)
    ap.add_argument("--docs", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        for fn, groups in [(parse_mesh, meshes(folder)), (parse_las, las_files(folder, args.las_points))]:
            helper = Isolated()
            t = time.perf_counter()
            helper.call(fn, str(groups[-1][1][0]))          # start the helper and import its library
            start = time.perf_counter() - t
            for label, files in groups:
                direct, _ = best(lambda: [fn(str(f)) for f in files], args.repeats)
                isolated, _ = best(lambda: [helper.call(fn, str(f)) for f in files], args.repeats)
                rows.append((label, fn.__name__, direct, isolated, start))
            helper.close()
        validate, whole, size = arrow_validation(folder, args.docs, max(1, args.repeats // 2))
    print("| files | parse | in-process s | helper process s | ratio | helper start s |")
    print("|---|---|---|---|---|---|")
    for label, name, direct, isolated, start in rows:
        print(f"| {label} | `{name}` | {direct:.4f} | {isolated:.4f} | {isolated / direct:.2f}x | {start:.2f} |")
    print()
    print("| Arrow file | validate every batch s | whole hf_disk reader s | validation share |")
    print("|---|---|---|---|")
    print(f"| {args.docs:,} documents, {size / 1e6:.0f} MB | {validate:.3f} | {whole:.3f} | {validate / whole:.1%} |")


if __name__ == "__main__":
    main()
