"""What running native parsers in a helper process costs: the mesh and LAS/LAZ readers' parse step
(``corpusforge.io.native.Isolated``) vs the same library call in this process, same files, same run.

Meshes: the Stanford bunny (real scan, ../shared/data/pointcloud/bunny.pcd) meshed by Poisson
reconstruction and written as binary PLY, ASCII PLY and OFF, and small CAD-like meshes (spheres
of 80-1,300 triangles, ModelNet's range) written as OFF, and a binary PLY sphere of 319,200
triangles; LAS: the sample tile (LAZ) and the same
points uncompressed, and a tile of --las-points points. Each file is parsed --repeats times;
the helper is started once per reader, as in a run (its start is reported apart).

    .venv/bin/python bench/bench_native_isolation.py [--repeats 5] [--las-points 2000000]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--las-points", type=int, default=2_000_000)
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
    print("| files | parse | in-process s | helper process s | ratio | helper start s |")
    print("|---|---|---|---|---|---|")
    for label, name, direct, isolated, start in rows:
        print(f"| {label} | `{name}` | {direct:.4f} | {isolated:.4f} | {isolated / direct:.2f}x | {start:.2f} |")


if __name__ == "__main__":
    main()
