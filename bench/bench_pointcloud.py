"""Point-cloud stages vs calling Open3D directly for the same operations, in the same run.

For each cloud (the real PCL clouds in ../shared/data, and a synthetic cloud of --points points:
a noisy torus surface with 1% outliers) and each stage:

  pipeline  the stage as the runner calls it: Arrow row -> numpy -> Open3D -> Arrow row, with
            radii derived from the cloud's spacing, attributes kept aligned, counts recorded;
  raw       the same Open3D calls written out by hand on a numpy array, with the same radii
            given as constants (computed outside the timing), default Open3D threading;
Registration and completion run on one Open3D thread by default so that their output repeats
(``deterministic: true``); they are timed both ways, each against raw Open3D on the same threads.

    .venv/bin/python bench/bench_pointcloud.py [--points 1000000] [--repeats 3] [--skip-complete-large]
        [--stages denoise,register,complete,augment] [--no-real]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

import open3d as o3d  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

from corpusforge.io.readers.pointcloud import PointCloudReader, pointcloud_table  # noqa: E402
from corpusforge.pointcloud.augment import PointAugment, rotation  # noqa: E402
from corpusforge.pointcloud.clouds import Cloud, arrays, bbox_diagonal, one_open3d_thread, spacing, with_arrays  # noqa: E402
from corpusforge.pointcloud.complete import Complete  # noqa: E402
from corpusforge.pointcloud.denoise import Denoise  # noqa: E402
from corpusforge.pointcloud.register import RegisterConfig, register_pair, transform  # noqa: E402
from corpusforge.stage import StageStats  # noqa: E402

o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
reg = o3d.pipelines.registration
SHARED = ROOT.parent / "shared" / "data" / "pointcloud"
REAL = ["bun4.pcd", "bunny.pcd", "car6.pcd", "milk_color.pcd", "office1.pcd", "table_scene_mug_stereo_textured.pcd"]


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def pcd(xyz: np.ndarray) -> o3d.geometry.PointCloud:
    return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(xyz.astype(np.float64)))


def synthetic(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    R, r = 1.0, 0.35
    xyz = np.c_[(R + r * np.cos(v)) * np.cos(u), (R + r * np.cos(v)) * np.sin(u), r * np.sin(v)]
    xyz += rng.normal(0, 0.002, xyz.shape)
    out = rng.uniform(-1.5, 1.5, (n // 100, 3))
    return np.vstack([xyz, out]).astype(np.float32)


# --- raw Open3D, the same operations ----------------------------------------------------------

def raw_denoise(xyz, s, cfg):
    pc = pcd(xyz)
    pc, _ = pc.remove_statistical_outlier(cfg.sor_nb_neighbors, cfg.sor_std_ratio)
    pc, _ = pc.remove_radius_outlier(cfg.ror_nb_points, cfg.ror_radius_factor * s)
    return np.asarray(pc.points, np.float32)


def raw_register(src, tgt, cfg: RegisterConfig):
    voxel = cfg.voxel_fraction * bbox_diagonal(tgt)
    s, t = pcd(src), pcd(tgt)

    def features(pc):
        down = pc.voxel_down_sample(voxel)
        down.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel, max_nn=30))
        return down, reg.compute_fpfh_feature(down, o3d.geometry.KDTreeSearchParamHybrid(radius=5 * voxel, max_nn=100))
    ds, fs = features(s)
    dt, ft = features(t)
    best_run = None
    for k in range(cfg.ransac_runs):
        o3d.utility.random.seed(cfg.seed + k)
        res = reg.registration_ransac_based_on_feature_matching(
            ds, dt, fs, ft, True, 1.5 * voxel, reg.TransformationEstimationPointToPoint(False), 3,
            [reg.CorrespondenceCheckerBasedOnEdgeLength(0.9), reg.CorrespondenceCheckerBasedOnDistance(1.5 * voxel)],
            reg.RANSACConvergenceCriteria(cfg.ransac_iterations, cfg.ransac_confidence))
        if best_run is None or res.fitness > best_run.fitness:
            best_run = res
    t.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel, max_nn=30))
    res = reg.registration_icp(s, t, 0.4 * voxel, best_run.transformation, reg.TransformationEstimationPointToPlane(),
                               reg.ICPConvergenceCriteria(1e-8, 1e-8, 50))
    s.transform(res.transformation)
    return np.asarray(s.points, np.float32)


def raw_complete(xyz, s, cfg):
    pc = pcd(xyz)
    pc.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(20))
    pc.orient_normals_consistent_tangent_plane(10)
    mesh, _ = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(pc, depth=cfg.depth)
    new = np.asarray(mesh.sample_points_uniformly(int(len(xyz) * cfg.samples_factor)).points)
    d, _ = cKDTree(xyz).query(new)
    new = new[(d <= cfg.max_distance_factor * s) & (d >= cfg.min_distance_factor * s)]
    return np.vstack([xyz, new.astype(np.float32)])


def raw_augment(xyz, s, rng):
    c = xyz.mean(axis=0)
    rot = (xyz - c) @ rotation(rng.uniform(-np.pi, np.pi), 0.05, -0.05).T + c
    jit = xyz + np.clip(rng.normal(0, 0.5 * s, xyz.shape), -1.5 * s, 1.5 * s)
    drop = xyz[rng.random(len(xyz)) >= 0.1]
    return rot.astype(np.float32), jit.astype(np.float32), drop


# --- the bench ------------------------------------------------------------------------------

def bench_cloud(name: str, cloud: Cloud, repeats: int, stages: list[str]) -> list[dict]:
    rows = []
    table = pointcloud_table("b", cloud.xyz, colors=cloud.colors, normals=cloud.normals, intensity=cloud.intensity)
    xyz = cloud.xyz
    s = spacing(xyz)

    def row(stage, pipe, raw):
        rows.append({"cloud": name, "points": len(xyz), "stage": stage, "pipeline": pipe, "raw": raw,
                     "ratio": pipe / raw})
        print(f"{name:36s} {len(xyz):>9,d} {stage:28s} pipeline {pipe:8.3f}s  raw {raw:8.3f}s  x{pipe / raw:5.2f}",
              flush=True)

    def one_thread(fn):
        def run():
            with one_open3d_thread():
                fn()
        return run

    if "denoise" in stages:
        st = Denoise(Denoise.Config())
        row("denoise", best(lambda: st.process(table, StageStats("d")), repeats),
            best(lambda: raw_denoise(xyz, s, st.config), repeats))
    if "register" in stages:
        rng = np.random.default_rng(0)
        T = np.eye(4)
        T[:3, :3] = Rotation.random(random_state=0).as_matrix()
        T[:3, 3] = rng.uniform(-0.3, 0.3, 3) * bbox_diagonal(xyz)
        moved = transform(Cloud(xyz), T).xyz
        src_table = pointcloud_table("b", moved)
        reps = max(1, repeats - 1)
        for det in (True, False):
            cfg = RegisterConfig(deterministic=det)

            def pipeline():   # what the stage does per view: rows apart, register, transform, rows back
                src, tgt = arrays(src_table, 0), arrays(table, 0)
                M, _, _ = register_pair(src, tgt, cfg)
                with_arrays(src_table, [transform(src, M)])
            raw = (lambda: raw_register(moved, xyz, cfg))
            row("register " + ("(deterministic, 1 thread)" if det else "(all threads)"), best(pipeline, reps),
                best(one_thread(raw) if det else raw, reps))
    if "complete" in stages:
        for det in (True, False):
            st = Complete(Complete.Config(deterministic=det))
            raw = (lambda: raw_complete(xyz, s, st.config))
            row("complete " + ("(deterministic, 1 thread)" if det else "(all threads)"),
                best(lambda: st.process(table, StageStats("c")), 1), best(one_thread(raw) if det else raw, 1))
    if "augment" in stages:
        st = PointAugment(PointAugment.Config(ops=["rotate", "jitter", "dropout"]))
        row("augment", best(lambda: st.process(table, StageStats("a")), repeats),
            best(lambda: raw_augment(xyz, s, np.random.default_rng(0)), repeats))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-complete-large", action="store_true",
                    help="skip Poisson completion on the synthetic cloud (minutes on one thread)")
    ap.add_argument("--stages", default="denoise,register,complete,augment")
    ap.add_argument("--no-real", action="store_true", help="only the synthetic cloud")
    args = ap.parse_args()
    reader = PointCloudReader(PointCloudReader.Config(paths=["x"], source="b"), kind="pointcloud")
    all_stages = args.stages.split(",")
    rows = []
    for name in [] if args.no_real else REAL:
        path = SHARED / name
        if not path.exists():
            print(f"skip {name}: ../shared/data absent")
            continue
        (batch,) = list(reader.read(path))
        rows += bench_cloud(name, arrays(batch.records, 0), args.repeats, all_stages)
    big = synthetic(args.points)
    stages = [s for s in all_stages if not (args.skip_complete_large and s == "complete")]
    rows += bench_cloud(f"synthetic torus + 1% outliers", Cloud(big), args.repeats, stages)
    print("\n| cloud | points | stage | pipeline s | raw Open3D s | ratio |")
    print("|---|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['cloud']} | {r['points']:,} | {r['stage']} | {r['pipeline']:.3f} | {r['raw']:.3f} | "
              f"{r['ratio']:.2f}x |")


if __name__ == "__main__":
    main()
