"""Point clouds between Arrow rows and numpy / Open3D, and their scale.

A row holds ``points`` (list of float32 triples) and optional ``colors`` (uint8 triples),
``normals`` and ``intensity`` of the same length. Stages take a row apart with :func:`arrays`,
work on numpy/Open3D, and put it back with :func:`with_arrays`, keeping the attributes aligned
with the points that survive.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass
class Cloud:
    xyz: np.ndarray                      # (N, 3) float32
    colors: np.ndarray | None = None     # (N, 3) uint8
    normals: np.ndarray | None = None    # (N, 3) float32
    intensity: np.ndarray | None = None  # (N,) float32

    def take(self, idx: np.ndarray) -> "Cloud":
        idx = np.asarray(idx)
        if idx.dtype != bool:                          # a mask, or indices (Open3D hands back [] as float)
            idx = idx.astype(np.int64, copy=False)
        pick = lambda a: None if a is None else a[idx]  # noqa: E731
        return Cloud(self.xyz[idx], pick(self.colors), pick(self.normals), pick(self.intensity))

    def to_o3d(self):
        import open3d as o3d

        pc = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(self.xyz.astype(np.float64)))
        if self.colors is not None:
            pc.colors = o3d.utility.Vector3dVector(self.colors.astype(np.float64) / 255.0)
        if self.normals is not None:
            pc.normals = o3d.utility.Vector3dVector(self.normals.astype(np.float64))
        return pc


def _triples(col: pa.ChunkedArray, i: int, dtype) -> np.ndarray | None:
    v = col[i]
    if not v.is_valid:
        return None
    # flatten(), not .values: a sliced FixedSizeListArray's .values ignores the slice offset.
    flat = v.values.flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(-1, 3).astype(dtype, copy=False)


def arrays(table: pa.Table, i: int) -> Cloud:
    inten = table.column("intensity")[i]
    return Cloud(_triples(table.column("points"), i, np.float32), _triples(table.column("colors"), i, np.uint8),
                 _triples(table.column("normals"), i, np.float32),
                 inten.values.to_numpy(zero_copy_only=False).astype(np.float32) if inten.is_valid else None)


def list_of_triples(arrs: list[np.ndarray | None], value_type) -> pa.Array:
    offsets, flats, valid = [0], [], []
    for a in arrs:
        n = 0 if a is None else len(a)
        offsets.append(offsets[-1] + n)
        valid.append(a is not None)
        if a is not None:
            flats.append(np.ascontiguousarray(a).reshape(-1))
    flat = np.concatenate(flats) if flats else np.zeros(0)
    triples = pa.FixedSizeListArray.from_arrays(pa.array(flat.astype(value_type.to_pandas_dtype(), copy=False), value_type), 3)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), triples,
                                    mask=pa.array([not v for v in valid]))


def with_arrays(table: pa.Table, clouds: list[Cloud]) -> pa.Table:
    """``table`` with its point columns (and ``n_points``) replaced by ``clouds``, row by row."""
    def setc(t, name, arr):
        return t.set_column(t.schema.get_field_index(name), name, arr)
    t = setc(table, "points", list_of_triples([c.xyz for c in clouds], pa.float32()))
    t = setc(t, "colors", list_of_triples([c.colors for c in clouds], pa.uint8()))
    t = setc(t, "normals", list_of_triples([c.normals for c in clouds], pa.float32()))
    offs, flats, mask = [0], [], []
    for c in clouds:
        offs.append(offs[-1] + (0 if c.intensity is None else len(c.intensity)))
        mask.append(c.intensity is None)
        if c.intensity is not None:
            flats.append(c.intensity.astype(np.float32, copy=False))
    inten = pa.ListArray.from_arrays(pa.array(offs, pa.int32()),
                                     pa.array(np.concatenate(flats) if flats else np.zeros(0, np.float32)),
                                     mask=pa.array(mask))
    t = setc(t, "intensity", inten)
    return setc(t, "n_points", pa.array([len(c.xyz) for c in clouds], pa.int64()))


def spacing(xyz: np.ndarray, sample: int = 20_000, seed: int = 0, statistic: str = "mean") -> float:
    """Mean (or ``median``) distance from a point to its nearest neighbour (on a seeded sample of
    up to ``sample`` points for large clouds): the scale every derived radius is a multiple of.
    The median is what outliers cannot inflate (a few far points pull the mean up)."""
    import open3d as o3d

    if len(xyz) < 2:
        return 0.0
    pts = xyz
    if len(xyz) > sample:
        pts = xyz[np.random.default_rng(seed).choice(len(xyz), sample, replace=False)]
    d = np.asarray(o3d.geometry.PointCloud(o3d.utility.Vector3dVector(pts.astype(np.float64)))
                   .compute_nearest_neighbor_distance())
    d = d[d > 0]
    # a sample is sparser than the cloud: scale back by the cube root of the sampling ratio
    # would be for volumes; clouds are surfaces, so by the square root
    scale = np.sqrt(len(pts) / len(xyz)) if len(xyz) > sample else 1.0
    if not len(d):
        return 0.0
    return float((np.median(d) if statistic == "median" else d.mean()) * scale)


def bbox_diagonal(xyz: np.ndarray) -> float:
    return float(np.linalg.norm(xyz.max(axis=0) - xyz.min(axis=0))) if len(xyz) else 0.0





@contextmanager
def one_open3d_thread(enabled: bool = True):
    """Open3D on one thread: its parallel reductions (normals, Poisson, ICP) and parallel RANSAC
    sampling make results depend on thread timing; stages that promise a repeatable output use
    this (processes give the parallelism instead)."""
    import open3d as o3d

    if not enabled:
        yield
        return
    threads = o3d.utility.get_max_threads()
    o3d.utility.set_max_threads(1)
    try:
        yield
    finally:
        o3d.utility.set_max_threads(threads)
