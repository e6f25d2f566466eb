"""Denoising: statistical and radius outlier removal, voxel downsampling, smoothing (Open3D).

Steps run in this order, each optional; each records how many points it removed
(``count_denoise_<step>_removed``). Radii not given are derived from the cloud's own scale, the
median nearest-neighbour spacing s (``clouds.spacing``; the median, because the outliers being
removed would inflate a mean), since fixed absolute radii fail across scans of different sizes
and densities:

* statistical outlier removal: a point whose mean distance to its ``sor_nb_neighbors`` (20)
  neighbours is more than ``sor_std_ratio`` (2) standard deviations above the cloud's mean.
* radius outlier removal: a point with fewer than ``ror_nb_points`` (2) other points within
  ``ror_radius_factor`` x s (5) is removed: an isolated point, far from any surface. Defaults
  derived on 24 real and sparser real scans (``bench/bench_denoise_defaults.py``): the former
  4s / 6 points lost up to 4.5% of the real points in sparse regions (a disc of 4s holds ~50
  points at the mean density, far fewer where a scanner's density falls off).
* voxel downsampling (off by default): voxel = ``voxel_factor`` x s (default 2: about 4x fewer points).
* smoothing (off by default): each point moves to the Gaussian-weighted mean of its ``smooth_k``
  nearest neighbours, sigma = ``smooth_sigma_factor`` x s; or to their median (``median``).

A cloud left with fewer than ``min_points`` is rejected as ``too_few_points``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusforge.pointcloud.clouds import bbox_diagonal, Cloud, arrays, spacing, with_arrays
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split


class DenoiseConfig(StageConfig):
    sor: bool = True
    sor_nb_neighbors: int = Field(20, ge=2)
    sor_std_ratio: float = Field(2.0, gt=0)
    ror: bool = True
    ror_nb_points: int = Field(2, ge=1)
    ror_radius: float | None = Field(None, gt=0, description="Absolute radius; default ror_radius_factor x spacing.")
    ror_radius_factor: float = Field(5.0, gt=0)
    voxel: bool = False
    voxel_size: float | None = Field(None, gt=0)
    voxel_factor: float = Field(2.0, gt=0)
    smooth: Literal["none", "gaussian", "median"] = "none"
    smooth_k: int = Field(10, ge=2)
    smooth_sigma_factor: float = Field(2.0, gt=0)
    min_points: int = Field(10, ge=1)


class Denoise(Stage):
    name = "pointcloud.denoise"
    kinds = ("pointcloud",)
    Config = DenoiseConfig
    STEPS = ("sor", "ror", "voxel")

    def output_columns(self) -> dict[str, pa.DataType]:
        return {**{f"count_denoise_{s}_removed": pa.int64() for s in self.STEPS},
                "score_denoise_spacing": pa.float64()}

    def clean(self, cloud: Cloud) -> tuple[Cloud, dict[str, int], float]:
        c: DenoiseConfig = self.config
        removed = {s: 0 for s in self.STEPS}
        s = spacing(cloud.xyz, statistic="median")
        if c.sor and len(cloud.xyz) > c.sor_nb_neighbors:
            _, idx = cloud.to_o3d().remove_statistical_outlier(c.sor_nb_neighbors, c.sor_std_ratio)
            removed["sor"] = len(cloud.xyz) - len(idx)
            cloud = cloud.take(np.asarray(idx))
        if c.ror and len(cloud.xyz) and s > 0:
            radius = c.ror_radius or c.ror_radius_factor * s
            _, idx = cloud.to_o3d().remove_radius_outlier(c.ror_nb_points, radius)
            removed["ror"] = len(cloud.xyz) - len(idx)
            cloud = cloud.take(np.asarray(idx))
        if c.voxel and len(cloud.xyz) and s > 0:
            size = c.voxel_size or c.voxel_factor * s
            down, _, traces = cloud.to_o3d().voxel_down_sample_and_trace(
                size, cloud.xyz.min(axis=0).astype(np.float64) - size, cloud.xyz.max(axis=0).astype(np.float64) + size)
            members = [np.asarray(t) for t in traces]
            avg = lambda a: None if a is None else np.stack([a[m].mean(axis=0) for m in members])  # noqa: E731
            new = Cloud(np.asarray(down.points, np.float32), None, avg(cloud.normals), avg(cloud.intensity))
            if cloud.colors is not None:
                new.colors = np.clip(np.rint(avg(cloud.colors.astype(np.float64))), 0, 255).astype(np.uint8)
            removed["voxel"] = len(cloud.xyz) - len(new.xyz)
            cloud = new
        if self.config.smooth != "none" and len(cloud.xyz) > c.smooth_k:
            cloud = Cloud(smooth(cloud.xyz, c.smooth_k, c.smooth_sigma_factor * s, c.smooth), cloud.colors,
                          cloud.normals, cloud.intensity)
        return cloud, removed, s

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        clouds, counts, spacings, reason, detail = [], {k: [] for k in self.STEPS}, [], [], []
        for i in range(table.num_rows):
            before = arrays(table, i)
            cloud, removed, s = self.clean(before)
            clouds.append(cloud)
            spacings.append(s)
            for k in self.STEPS:
                counts[k].append(removed[k])
                stats.counters[f"{k}_removed"] += removed[k]
            if len(before.xyz) >= self.config.min_points and bbox_diagonal(before.xyz) == 0:
                reason.append("degenerate_cloud")
                detail.append(f"all {len(before.xyz)} points identical")
            elif len(cloud.xyz) < self.config.min_points:
                reason.append("too_few_points")
                detail.append(f"{len(cloud.xyz)} points left < min_points {self.config.min_points}")
            else:
                reason.append(None)
                detail.append(None)
        table = with_arrays(table, clouds)
        for k in self.STEPS:
            table = table.append_column(f"count_denoise_{k}_removed", pa.array(counts[k], pa.int64()))
        table = table.append_column("score_denoise_spacing", pa.array(spacings, pa.float64()))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)


def smooth(xyz: np.ndarray, k: int, sigma: float, method: str) -> np.ndarray:
    """Move every point to the (Gaussian-weighted mean | median) of its k nearest neighbours."""
    from scipy.spatial import cKDTree

    dist, idx = cKDTree(xyz).query(xyz, k=k)
    neigh = xyz[idx]                                   # (N, k, 3)
    if method == "median":
        return np.median(neigh, axis=1).astype(np.float32)
    w = np.exp(-(dist ** 2) / (2 * max(sigma, 1e-12) ** 2))
    return (np.einsum("nk,nkd->nd", w, neigh) / w.sum(axis=1, keepdims=True)).astype(np.float32)
