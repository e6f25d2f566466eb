"""Denoising defaults, re-derived: real points lost and planted outliers removed, per setting.

Real scans (../shared/data/pointcloud: PCL's bunny scans, an office room, a car, a milk carton,
a stereo RGB-D table scene, a noisy slice) plus two sparser views of each: a uniform 20% sample
and a LiDAR-like one whose density falls with distance from a sensor at one corner (kept with
probability (d_min / d)^2). Outliers: points scattered in the box around the cloud, each more than
5 spacings (mean nearest-neighbour distance) from every real point, 2% of the cloud's size.
A setting is good when it removes >= 95% of them on every cloud and loses few real points.
The stage's radii use the median nearest-neighbour spacing s (the planted outliers would inflate a
mean: on the small clouds that alone let 60% of them through a 5s radius).

    .venv/bin/python bench/bench_denoise_defaults.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "pointcloud"

from corpusforge.io.readers.pointcloud import _load  # noqa: E402
from corpusforge.pointcloud.clouds import Cloud, spacing  # noqa: E402
from corpusforge.pointcloud.denoise import Denoise  # noqa: E402

SCANS = ["bun0.pcd", "bun4.pcd", "bunny.pcd", "milk_color.pcd", "office1.pcd", "car6.pcd",
         "table_scene_mug_stereo_textured.pcd", "noisy_slice_displaced.pcd"]


def clouds(seed: int = 0):
    rng = np.random.default_rng(seed)
    for name in SCANS:
        xyz = _load(DATA / name, ".pcd")["positions"].astype(np.float64)
        xyz = xyz[np.isfinite(xyz).all(axis=1)]
        if len(xyz) > 60_000:
            xyz = xyz[rng.choice(len(xyz), 60_000, replace=False)]
        yield name, xyz
        yield name + " 20%", xyz[rng.random(len(xyz)) < 0.2]
        sensor = xyz.min(axis=0) - 0.1 * (xyz.max(axis=0) - xyz.min(axis=0))
        d = np.linalg.norm(xyz - sensor, axis=1)
        yield name + " lidar-like", xyz[rng.random(len(xyz)) < (d.min() / d) ** 2 * 4]


def plant(xyz: np.ndarray, rng) -> np.ndarray:
    lo, hi = xyz.min(axis=0), xyz.max(axis=0)
    pad = 0.2 * (hi - lo)
    s = spacing(xyz.astype(np.float32))
    want = max(len(xyz) // 50, 10)
    cand = rng.uniform(lo - pad, hi + pad, size=(40 * want, 3))
    return cand[cKDTree(xyz).query(cand)[0] > 5 * s][:want]


def evaluate(settings: dict, data) -> list[tuple[str, float, float]]:
    import corpusforge.pointcloud.denoise as module

    settings = dict(settings)
    statistic = settings.pop("_spacing", "median")
    stage = Denoise(Denoise.Config(**settings))
    original = module.spacing
    module.spacing = lambda xyz, statistic_=statistic, **kw: original(xyz, statistic=statistic_)
    try:
        return _evaluate(stage, data)
    finally:
        module.spacing = original


def _evaluate(stage, data) -> list[tuple[str, float, float]]:
    out = []
    for name, xyz, outliers in data:
        noisy = Cloud(np.vstack([xyz, outliers]).astype(np.float32))
        cleaned, _, _ = stage.clean(noisy)
        kept = cKDTree(cleaned.xyz.astype(np.float64)).query(np.vstack([xyz, outliers]))[0] < 1e-6
        lost = 1 - kept[: len(xyz)].mean()
        recall = 1 - kept[len(xyz):].mean()
        out.append((name, lost, recall))
    return out


SETTINGS = {
    "**default**: SOR k20 std2 + ROR 5s/2": {},
    "former default: SOR k20 std2 + ROR 4s/6, mean spacing": {"ror_radius_factor": 4.0, "ror_nb_points": 6,
                                                              "_spacing": "mean"},
    "SOR k20 std2 + ROR 4s/6, median spacing": {"ror_radius_factor": 4.0, "ror_nb_points": 6},
    "SOR k20 std2 only": {"sor_nb_neighbors": 20, "sor_std_ratio": 2.0, "ror": False},
    "SOR k20 std3 only": {"sor_nb_neighbors": 20, "sor_std_ratio": 3.0, "ror": False},
    "SOR k30 std3 only": {"sor_nb_neighbors": 30, "sor_std_ratio": 3.0, "ror": False},
    "SOR k20 std2 + ROR 5s/3": {"ror_radius_factor": 5.0, "ror_nb_points": 3},
    "SOR k20 std3 + ROR 4s/3": {"sor_std_ratio": 3.0, "ror_radius_factor": 4.0, "ror_nb_points": 3},
    "SOR k20 std3 + ROR 5s/2": {"sor_nb_neighbors": 20, "sor_std_ratio": 3.0, "ror": True,
                                "ror_radius_factor": 5.0, "ror_nb_points": 2},
    "SOR k20 std3 + ROR 5s/1": {"sor_nb_neighbors": 20, "sor_std_ratio": 3.0, "ror": True,
                                "ror_radius_factor": 5.0, "ror_nb_points": 1},
    "ROR 5s/1 only": {"sor": False, "ror": True, "ror_radius_factor": 5.0, "ror_nb_points": 1},
    "ROR 5s/2 only": {"sor": False, "ror": True, "ror_radius_factor": 5.0, "ror_nb_points": 2},
}


def main():
    rng = np.random.default_rng(1)
    data = [(name, xyz, plant(xyz, rng)) for name, xyz in clouds()]
    print(f"{len(data)} clouds: {', '.join(n for n, _, _ in data)}\n")
    print("| setting | real points lost: mean | max | max on the scans as captured | worst cloud | outliers removed: min | mean |")
    print("|---|---|---|---|---|---|---|")
    for label, settings in SETTINGS.items():
        res = evaluate(settings, data)
        lost = np.array([r[1] for r in res])
        rec = np.array([r[2] for r in res])
        worst = res[int(lost.argmax())][0]
        captured = max(r[1] for r in res if r[0] in SCANS)
        print(f"| {label} | {lost.mean():.2%} | {lost.max():.2%} | {captured:.2%} | {worst} | {rec.min():.3f} | "
              f"{rec.mean():.3f} |")


if __name__ == "__main__":
    main()
