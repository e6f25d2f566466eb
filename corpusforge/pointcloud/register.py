"""Registration of views that belong together (a global stage; views are grouped by ``group``).

Per group, the first view in input order is the reference; every other view is aligned to it:

1. coarse (no initial guess needed): FPFH features on voxel-downsampled clouds, matched by
   RANSAC (``coarse: ransac``) or Fast Global Registration (``fgr``); ``none`` starts from identity;
2. fine: ICP on the full clouds, point-to-point or point-to-plane, optionally with a Tukey robust kernel.

The transform, fitness and inlier RMSE are recorded (``tag_register_transform`` as JSON,
``score_register_fitness``, ``score_register_rmse``); views under ``min_fitness`` are rejected
(``action: reject``) or kept and flagged in ``tag_register_flag`` (``flag``); with ``apply`` the points (and normals) are
moved into the reference's frame.

Scale: the voxel is ``voxel_fraction`` x the reference's bounding-box diagonal unless given; the
feature radii and distances are multiples of it (normals 2x, FPFH 5x, RANSAC and ICP distance 1.5x
and 0.4x), as in Open3D's pipeline.

Determinism: Open3D's RANSAC samples in parallel threads and is not repeatable even with its seed.
Here it runs on one thread with Open3D's seed set, ``ransac_runs`` times with seeds seed..seed+k-1,
and the best run wins by a fixed rule (fitness, then RMSE, then the lower seed); ICP is
deterministic. The same input and seed give the same transform (tested).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from corpusforge.pointcloud.clouds import one_open3d_thread, Cloud, arrays, bbox_diagonal, with_arrays
from corpusforge.stage import DECISIONS, GlobalStage, StageConfig, StageResult, StageStats, split

POINTS = pa.list_(pa.list_(pa.float32(), 3))


class RegisterConfig(StageConfig):
    coarse: Literal["ransac", "fgr", "none"] = "ransac"
    voxel: float | None = Field(None, gt=0)
    voxel_fraction: float = Field(1 / 40, gt=0, le=1)
    ransac_runs: int = Field(3, ge=1)
    ransac_iterations: int = Field(100_000, ge=1)
    ransac_confidence: float = Field(0.999, gt=0, lt=1)
    icp: Literal["point_to_point", "point_to_plane"] = "point_to_plane"
    icp_distance: float | None = Field(None, gt=0, description="Default 0.4 x voxel.")
    icp_iterations: int = Field(50, ge=1)
    icp_epsilon: float = Field(1e-8, gt=0)
    robust_kernel: Literal["none", "tukey"] = "none"
    min_fitness: float = Field(0.3, ge=0, le=1)
    action: Literal["reject", "flag"] = "reject"
    apply: bool = True
    seed: int = 0
    deterministic: bool = Field(True, description="One Open3D thread, so a seed gives the same transform "
                                "every run; false uses all threads (faster with many cores; results vary in the last "
                                "bits and RANSAC picks may differ).")


def register_pair(src: Cloud, tgt: Cloud, cfg: RegisterConfig) -> tuple[np.ndarray, float, float]:
    """Transform (4x4) taking ``src`` onto ``tgt``, with ICP fitness and inlier RMSE. Runs on one
    Open3D thread: parallel reductions (normals, point-to-plane ICP) and parallel RANSAC sampling
    would make the result depend on thread timing."""
    with one_open3d_thread(cfg.deterministic):
        return _register(src, tgt, cfg)


def _register(src: Cloud, tgt: Cloud, cfg: RegisterConfig) -> tuple[np.ndarray, float, float]:
    import open3d as o3d

    reg = o3d.pipelines.registration
    voxel = cfg.voxel or cfg.voxel_fraction * max(bbox_diagonal(tgt.xyz), 1e-9)
    s, t = src.to_o3d(), tgt.to_o3d()
    init = np.eye(4)
    if cfg.coarse != "none":
        def features(pc):
            down = pc.voxel_down_sample(voxel)
            down.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel, max_nn=30))
            return down, reg.compute_fpfh_feature(down, o3d.geometry.KDTreeSearchParamHybrid(radius=5 * voxel,
                                                                                             max_nn=100))
        ds, fs = features(s)
        dt, ft = features(t)
        if cfg.coarse == "fgr":
            res = reg.registration_fgr_based_on_feature_matching(
                ds, dt, fs, ft, reg.FastGlobalRegistrationOption(maximum_correspondence_distance=0.5 * voxel))
            init = np.asarray(res.transformation)
        else:
            runs = []
            for k in range(cfg.ransac_runs):
                o3d.utility.random.seed(cfg.seed + k)
                res = reg.registration_ransac_based_on_feature_matching(
                    ds, dt, fs, ft, True, 1.5 * voxel, reg.TransformationEstimationPointToPoint(False), 3,
                    [reg.CorrespondenceCheckerBasedOnEdgeLength(0.9),
                     reg.CorrespondenceCheckerBasedOnDistance(1.5 * voxel)],
                    reg.RANSACConvergenceCriteria(cfg.ransac_iterations, cfg.ransac_confidence))
                runs.append((-res.fitness, res.inlier_rmse, k, np.asarray(res.transformation)))
            init = min(runs, key=lambda r: r[:3])[3]
    dist = cfg.icp_distance or 0.4 * voxel
    if cfg.icp == "point_to_plane":
        if not t.has_normals():
            t.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel, max_nn=30))
        kernel = reg.TukeyLoss(k=dist) if cfg.robust_kernel == "tukey" else None
        est = reg.TransformationEstimationPointToPlane(kernel) if kernel else reg.TransformationEstimationPointToPlane()
    else:
        est = reg.TransformationEstimationPointToPoint()
    res = reg.registration_icp(s, t, dist, init, est,
                               reg.ICPConvergenceCriteria(cfg.icp_epsilon, cfg.icp_epsilon, cfg.icp_iterations))
    return np.asarray(res.transformation), float(res.fitness), float(res.inlier_rmse)


def transform(cloud: Cloud, T: np.ndarray) -> Cloud:
    xyz = (cloud.xyz.astype(np.float64) @ T[:3, :3].T + T[:3, 3]).astype(np.float32)
    normals = None if cloud.normals is None else (cloud.normals.astype(np.float64) @ T[:3, :3].T).astype(np.float32)
    return Cloud(xyz, cloud.colors, normals, cloud.intensity)


class Register(GlobalStage):
    name = "pointcloud.register"
    kinds = ("pointcloud",)
    Config = RegisterConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_register_transform": pa.string(), "tag_register_reference": pa.string(),
                "tag_register_flag": pa.string(), "score_register_fitness": pa.float64(),
                "score_register_rmse": pa.float64()}

    def fingerprint(self, table: pa.Table) -> pa.Table:
        return table.select(["id", "group", "points", "normals"])

    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: RegisterConfig = self.config
        meta = pl.concat([pl.read_parquet(f, columns=["unit", "row", "id", "group"]).with_columns(
            pl.lit(i).alias("file")).with_row_index("frow") for i, f in enumerate(fingerprint_files)]) \
            if fingerprint_files else pl.DataFrame()
        rows = []
        if meta.height:
            meta = meta.filter(pl.col("group").is_not_null()).sort(["unit", "row"])
        tables = {}

        def cloud(rec) -> Cloud:
            f = int(rec["file"])
            if f not in tables:
                tables[f] = pq.read_table(fingerprint_files[f], columns=["points", "normals"]).append_column(
                    "colors", pa.nulls(pq.read_metadata(fingerprint_files[f]).num_rows, pa.list_(pa.list_(pa.uint8(), 3)))
                ).append_column("intensity", pa.nulls(pq.read_metadata(fingerprint_files[f]).num_rows, pa.list_(pa.float32())))
            return arrays(tables[f], int(rec["frow"]))
        for _, grp in (meta.group_by("group", maintain_order=True) if meta.height else []):
            recs = grp.to_dicts()
            ref = recs[0]
            target = cloud(ref)
            rows.append({"unit": ref["unit"], "row": ref["row"], "reason": None, "detail": None,
                         "tag_register_transform": json.dumps(np.eye(4).tolist()), "tag_register_reference": ref["id"],
                         "fitness": 1.0, "rmse": 0.0})
            for rec in recs[1:]:
                T, fit, rmse = register_pair(cloud(rec), target, c)
                low = fit < c.min_fitness
                stats.counters["pairs"] += 1
                stats.counters["low_fitness"] += int(low)
                rows.append({"unit": rec["unit"], "row": rec["row"],
                             "reason": "low_fitness" if low and c.action == "reject" else None,
                             "detail": f"fitness {fit:.3f} < {c.min_fitness} against {ref['id']}" if low else None,
                             "tag_register_transform": json.dumps(np.round(T, 10).tolist()),
                             "tag_register_reference": ref["id"], "fitness": fit, "rmse": rmse})
            stats.counters["groups"] += 1
        table = pa.Table.from_pylist(rows, schema=pa.schema([
            ("unit", pa.int32()), ("row", pa.int64()), ("reason", pa.string()), ("detail", pa.string()),
            ("tag_register_transform", pa.string()), ("tag_register_reference", pa.string()),
            ("fitness", pa.float64()), ("rmse", pa.float64())]))
        pq.write_table(table.sort_by([("unit", "ascending"), ("row", "ascending")]), Path(workdir) / DECISIONS)

    def filter(self, table: pa.Table, unit: int, row_offset: int, workdir: Path, stats: StageStats) -> StageResult:
        dec = pl.read_parquet(Path(workdir) / DECISIONS).filter(pl.col("unit") == unit)
        by_row = {r["row"]: r for r in dec.to_dicts()}
        clouds, cols = [], {k: [] for k in ("tag_register_transform", "tag_register_reference",
                                            "score_register_fitness", "score_register_rmse", "reason", "detail")}
        for i in range(table.num_rows):
            d = by_row.get(row_offset + i)
            cloud = arrays(table, i)
            if d is not None and self.config.apply:
                cloud = transform(cloud, np.array(json.loads(d["tag_register_transform"])))
            clouds.append(cloud)
            for k, src in (("tag_register_transform", "tag_register_transform"), ("tag_register_reference",
                           "tag_register_reference"), ("score_register_fitness", "fitness"),
                           ("score_register_rmse", "rmse"), ("reason", "reason"), ("detail", "detail")):
                cols[k].append(d[src] if d is not None else None)
        table = with_arrays(table, clouds)
        for k in ("tag_register_transform", "tag_register_reference"):
            table = table.append_column(k, pa.array(cols[k], pa.string()))
        # action: flag keeps a low-fitness view and says so here ("low_fitness: fitness ... < ...")
        flags = [f"low_fitness: {d}" if d and r is None else None for r, d in zip(cols["reason"], cols["detail"])]
        table = table.append_column("tag_register_flag", pa.array(flags, pa.string()))
        for k in ("score_register_fitness", "score_register_rmse"):
            table = table.append_column(k, pa.array(cols[k], pa.float64()))
        return split(table, pa.array(cols["reason"], pa.string()), pa.array(cols["detail"], pa.string()), stats)
