"""Point-cloud augmentation: new records derived from existing ones, deterministic per seed.

Each op makes one new record per input cloud (``tag_augment_parent``, ``tag_augment_op``):

| op | what (parameters) |
|---|---|
| ``rotate`` | about the up axis (z) by a uniform angle in [-``max_yaw``, ``max_yaw``] degrees, plus tilts about x and y up to ``max_tilt`` |
| ``translate`` | by a normal offset of ``translate_std`` x the bounding-box diagonal |
| ``scale`` | anisotropic: each axis by a factor in [``scale_min``, ``scale_max``] |
| ``jitter`` | normal noise of ``jitter_std`` x the mean spacing, clipped at ``jitter_clip`` x the spacing |
| ``dropout`` | each point dropped with probability ``dropout`` |
| ``flip`` | mirror across the x-z plane (y -> -y) |
| ``objects`` | every 3D box in ``meta.boxes`` (``{center: [x,y,z], size: [l,w,h], yaw}``) is rotated, scaled and moved together with the points inside it |

Colours, normals and intensity follow their points (normals are rotated, and renormalised after
scaling). Randomness is seeded per (seed, parent id, op).
"""

from __future__ import annotations

import json
from typing import Literal

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import Field

from corpusforge.pointcloud.clouds import Cloud, arrays, bbox_diagonal, spacing, with_arrays
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, empty_rejected

OPS = ("rotate", "translate", "scale", "jitter", "dropout", "flip", "objects")


class PointAugmentConfig(StageConfig):
    ops: list[Literal["rotate", "translate", "scale", "jitter", "dropout", "flip", "objects"]] = Field(min_length=1)
    max_yaw: float = Field(180.0, ge=0, le=180)
    max_tilt: float = Field(5.0, ge=0, le=90)
    translate_std: float = Field(0.05, ge=0)
    scale_min: float = Field(0.9, gt=0)
    scale_max: float = Field(1.1, gt=0)
    jitter_std: float = Field(0.5, ge=0)
    jitter_clip: float = Field(1.5, ge=0)
    dropout: float = Field(0.1, ge=0, lt=1)
    object_translate_std: float = Field(0.25, ge=0, description="objects: box moves by this x its size.")
    seed: int = 0


def rotation(yaw: float, tilt_x: float = 0.0, tilt_y: float = 0.0) -> np.ndarray:
    cz, sz, cx, sx, cy, sy = np.cos(yaw), np.sin(yaw), np.cos(tilt_x), np.sin(tilt_x), np.cos(tilt_y), np.sin(tilt_y)
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    return rz @ ry @ rx


def in_box(xyz: np.ndarray, box: dict) -> np.ndarray:
    """Points inside an oriented box (center, size, yaw about z)."""
    local = (xyz - np.asarray(box["center"])) @ rotation(box.get("yaw", 0.0))
    return np.all(np.abs(local) <= np.asarray(box["size"]) / 2, axis=1)


class PointAugment(Stage):
    name = "pointcloud.augment"
    kinds = ("pointcloud",)
    Config = PointAugmentConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_augment_parent": pa.string(), "tag_augment_op": pa.string()}

    def apply(self, op: str, cloud: Cloud, meta: dict, rng: np.random.Generator) -> tuple[Cloud, dict] | None:
        c: PointAugmentConfig = self.config
        xyz = cloud.xyz
        if op in ("rotate", "scale", "flip"):
            center = xyz.mean(axis=0, dtype=np.float64)
            if op == "rotate":
                m = rotation(np.radians(rng.uniform(-c.max_yaw, c.max_yaw)), np.radians(rng.uniform(-c.max_tilt, c.max_tilt)),
                             np.radians(rng.uniform(-c.max_tilt, c.max_tilt)))
            elif op == "scale":
                m = np.diag(rng.uniform(c.scale_min, c.scale_max, 3))
            else:
                m = np.diag([1.0, -1.0, 1.0])
            new = Cloud(((xyz - center) @ m.T + center).astype(np.float32), cloud.colors, _normals(cloud.normals, m),
                        cloud.intensity)
            boxes = [dict(b, center=((np.asarray(b["center"]) - center) @ m.T + center).tolist()) for b in meta.get("boxes", [])]
            return new, dict(meta, boxes=boxes) if boxes else meta
        if op == "translate":
            t = rng.normal(0, c.translate_std * bbox_diagonal(cloud.xyz), 3)
            boxes = [dict(b, center=(np.asarray(b["center"]) + t).tolist()) for b in meta.get("boxes", [])]
            return Cloud((xyz + t).astype(np.float32), cloud.colors, cloud.normals, cloud.intensity), \
                dict(meta, boxes=boxes) if boxes else meta
        if op == "jitter":
            s = spacing(cloud.xyz, sample=2_000)       # a scale for the noise: a small sample is enough
            noise = np.clip(rng.normal(0, c.jitter_std * s, xyz.shape), -c.jitter_clip * s, c.jitter_clip * s)
            return Cloud((xyz + noise).astype(np.float32), cloud.colors, cloud.normals, cloud.intensity), meta
        if op == "dropout":
            keep = rng.random(len(xyz)) >= c.dropout
            return (cloud.take(keep), meta) if keep.any() else None
        if op == "objects":
            boxes = meta.get("boxes") or []
            if not boxes:
                return None
            xyz = xyz.astype(np.float64)
            out, new_boxes = xyz.copy(), []
            normals = None if cloud.normals is None else cloud.normals.astype(np.float64).copy()
            for b in boxes:
                inside = in_box(cloud.xyz, b)
                yaw = np.radians(rng.uniform(-c.max_yaw, c.max_yaw))
                scale = rng.uniform(c.scale_min, c.scale_max)
                shift = rng.normal(0, c.object_translate_std * np.asarray(b["size"]))
                shift[2] = 0.0                                   # objects stay on the ground
                m = rotation(yaw) * scale
                bc = np.asarray(b["center"])
                out[inside] = (xyz[inside] - bc) @ m.T + bc + shift
                if normals is not None:
                    normals[inside] = normals[inside] @ rotation(yaw).T
                new_boxes.append({**b, "center": (bc + shift).tolist(), "size": (np.asarray(b["size"]) * scale).tolist(),
                                  "yaw": float(b.get("yaw", 0.0) + yaw)})
            return Cloud(out.astype(np.float32), cloud.colors, None if normals is None else normals.astype(np.float32),
                         cloud.intensity), dict(meta, boxes=new_boxes)
        raise AssertionError(op)

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        c: PointAugmentConfig = self.config
        ids = table.column("id").to_pylist()
        metas = table.column("meta").to_pylist()
        new_clouds, parents, ops, new_meta = [], [], [], []
        for i in range(table.num_rows):
            cloud = arrays(table, i)
            meta = json.loads(metas[i]) if metas[i] else {}
            for slot, op in enumerate(c.ops):
                rng = np.random.default_rng(xxhash.xxh64_intdigest(f"{c.seed}\0{ids[i]}\0{slot}\0{op}".encode()))
                res = self.apply(op, cloud, meta, rng)
                if res is None:
                    stats.counters[f"unchanged_{op}"] += 1
                    continue
                new_clouds.append(res[0])
                new_meta.append(json.dumps(res[1], sort_keys=True) if res[1] else None)
                parents.append(i)
                ops.append((slot, op))
                stats.counters[f"created_{op}"] += 1
        table = table.append_column("tag_augment_parent", pa.nulls(table.num_rows, pa.string())) \
                     .append_column("tag_augment_op", pa.nulls(table.num_rows, pa.string()))
        if not new_clouds:
            return StageResult(table, empty_rejected(table))
        # take the light columns only: the parents' point arrays would be copied just to be replaced
        heavy = ["points", "colors", "normals", "intensity"]
        derived = table.drop_columns(heavy).take(pa.array(parents, pa.int64()))
        for name in heavy:
            derived = derived.append_column(table.schema.field(name), pa.nulls(len(parents), table.schema.field(name).type))
        derived = with_arrays(derived, new_clouds)
        keep = {"source", "group", "src_path", "src_row", "points", "colors", "normals", "intensity", "n_points"}
        cols = {}
        for name in derived.column_names:
            if name == "id":
                cols[name] = pa.array([xxhash.xxh3_128_hexdigest(f"{ids[p]}\0{s}\0{o}\0{c.seed}".encode())
                                       for p, (s, o) in zip(parents, ops)], pa.string())
            elif name == "meta":
                cols[name] = pa.array(new_meta, pa.string())
            elif name == "tag_augment_parent":
                cols[name] = pa.array([ids[p] for p in parents], pa.string())
            elif name == "tag_augment_op":
                cols[name] = pa.array([o for _, o in ops], pa.string())
            elif name in keep:
                cols[name] = derived.column(name)
            else:
                cols[name] = pa.nulls(derived.num_rows, derived.schema.field(name).type)
        out = pa.concat_tables([table, pa.table(cols, schema=table.schema)])
        return StageResult(out, empty_rejected(out), created=len(new_clouds))


def _normals(normals, m):
    if normals is None:
        return None
    n = normals.astype(np.float64) @ np.linalg.inv(m)       # normals transform by the inverse transpose
    return (n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)).astype(np.float32)
