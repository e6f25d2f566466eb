"""Completion of clouds with holes (optional, off unless configured): Poisson surface
reconstruction (Open3D, normals estimated where missing), then points sampled uniformly on the
surface where the cloud was sparse.

What it does: fills small holes and gaps between scan lines by interpolating the surface that
the existing points imply. Its limits: it cannot invent parts that were never seen (a missing
side of an object closes as a smooth cap, not the true shape); watertight Poisson surfaces bulge
past open boundaries, so new points farther than ``max_distance_factor`` x spacing from every
original point are discarded; colours, intensity are not given to new points (normals are).
New points are counted in ``count_complete_added``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusforge.pointcloud.clouds import Cloud, one_open3d_thread, arrays, spacing, with_arrays
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split


class CompleteConfig(StageConfig):
    depth: int = Field(8, ge=4, le=12, description="Poisson octree depth.")
    samples_factor: float = Field(0.25, gt=0, description="Surface samples as a fraction of the cloud's points.")
    max_distance_factor: float = Field(3.0, gt=0)
    min_distance_factor: float = Field(0.75, ge=0, description="Skip samples this close to existing points.")
    min_points: int = Field(100, ge=10, description="Smaller clouds are passed through unchanged.")
    deterministic: bool = Field(True, description="One thread for normals and Poisson, so the output repeats "
                                "bit for bit; false uses all threads.")


class Complete(Stage):
    name = "pointcloud.complete"
    kinds = ("pointcloud",)
    Config = CompleteConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"count_complete_added": pa.int64()}

    def fill(self, cloud: Cloud, seed: int = 0) -> tuple[Cloud, int]:
        with one_open3d_thread(self.config.deterministic):
            return self._fill(cloud, seed)

    def _fill(self, cloud: Cloud, seed: int) -> tuple[Cloud, int]:
        import open3d as o3d
        from scipy.spatial import cKDTree

        c: CompleteConfig = self.config
        if len(cloud.xyz) < c.min_points:
            return cloud, 0
        s = spacing(cloud.xyz)
        pc = cloud.to_o3d()
        if not pc.has_normals():
            pc.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(20))
            pc.orient_normals_consistent_tangent_plane(10)
        # one thread: Poisson's parallel solve differs in the last bits from run to run
        mesh, _ = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(pc, depth=c.depth,
                                                                       n_threads=1 if c.deterministic else -1)
        # sample the surface with our own seeded generator: Open3D's sampler ignores its seed
        sampled = sample_surface(mesh, int(len(cloud.xyz) * c.samples_factor), np.random.default_rng(seed))
        if sampled is None:              # no usable surface (coordinates that overflow, a flat mesh)
            return cloud, 0
        new, new_normals = sampled
        d, _ = cKDTree(cloud.xyz).query(new)
        keep = (d <= c.max_distance_factor * s) & (d >= c.min_distance_factor * s)
        if not keep.any():
            return cloud, 0
        add = new[keep]
        add_n = new_normals[keep]
        normals = None if cloud.normals is None else np.vstack([cloud.normals, add_n])
        pad = lambda a, fill: None if a is None else np.concatenate([a, np.full((len(add),) + a.shape[1:], fill, a.dtype)])  # noqa: E731
        return Cloud(np.vstack([cloud.xyz, add]), pad(cloud.colors, 0), normals, pad(cloud.intensity, np.nan)), len(add)

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        clouds, added = [], []
        for i in range(table.num_rows):
            cloud, n = self.fill(arrays(table, i))
            clouds.append(cloud)
            added.append(n)
            stats.counters["points_added"] += n
        table = with_arrays(table, clouds).append_column("count_complete_added", pa.array(added, pa.int64()))
        return split(table, pa.nulls(table.num_rows, pa.string()), None, stats)


def sample_surface(mesh, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """``n`` points uniform over a triangle mesh's area, with the triangles' normals; None when the
    mesh has no finite, positive area to sample."""
    v = np.asarray(mesh.vertices)
    tri = np.asarray(mesh.triangles)
    if not len(tri) or not np.isfinite(v).all():
        return None
    a, b, cc = v[tri[:, 0]], v[tri[:, 1]], v[tri[:, 2]]
    with np.errstate(over="ignore", invalid="ignore"):
        cross = np.cross(b - a, cc - a)
        area = np.linalg.norm(cross, axis=1)
        total = area.sum()
    if not np.isfinite(total) or total <= 0:
        return None
    pick = rng.choice(len(tri), size=n, p=area / area.sum())
    r1, r2 = np.sqrt(rng.random(n))[:, None], rng.random(n)[:, None]
    pts = (1 - r1) * a[pick] + r1 * (1 - r2) * b[pick] + r1 * r2 * cc[pick]
    normals = cross[pick] / np.maximum(area[pick, None], 1e-30)
    return pts.astype(np.float32), normals.astype(np.float32)
