"""LiDAR inputs: KITTI velodyne scans and LAS/LAZ tiles.

``kitti``: ``.bin`` files of float32 (x, y, z, reflectance) records; a file whose length is not
a multiple of 16 bytes is rejected as ``bad_length``. Reflectance becomes ``intensity``. With
``labels: true`` the object labels of the scan (``label_2/<stem>.txt`` beside the ``velodyne/``
folder, KITTI's layout) are read, and with the calibration (``calib/<stem>.txt``:
``R0_rect``, ``Tr_velo_to_cam``) converted from camera to LiDAR coordinates into
``meta.boxes`` = ``{center, size: [l, w, h], yaw, label}``: the boxes ``pointcloud.augment``'s
``objects`` op moves. ``DontCare`` labels are skipped; a scan without a label file gets no boxes.

``las``: ``.las`` and ``.laz`` (laspy, LAZ through its lazrs backend), scaled and offset
coordinates, ``intensity``, 16-bit RGB scaled to 8-bit where the point format has colour;
``meta``: point format, LAS version, classification counts, CRS (WKT) when present. laspy runs
in a helper process (``corpusforge.io.native``): lazrs aborts its process on some corrupt chunk
tables, and such a file is rejected as ``parser_crashed``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np
from pydantic import Field

from corpusforge.io.native import ParserCrashed
from corpusforge.io.readers.base import ReadBatch, ReaderConfig, describe_os_error, local_copy
from corpusforge.io.readers.pointcloud import CloudReader, cloud_batch


class KittiConfig(ReaderConfig):
    labels: bool = Field(True, description="Read label_2/<stem>.txt (+ calib/<stem>.txt) into meta.boxes.")


class KittiReader(CloudReader):
    format = "kitti"
    Config = KittiConfig
    suffixes = (".bin",)

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: KittiConfig = self.config
        try:
            raw = path.read_bytes()
        except OSError as exc:
            yield self.reject(path, "unreadable_file", describe_os_error(exc))
            return
        if not raw:
            yield self.reject(path, "empty_file", "0 bytes")
            return
        if len(raw) % 16:
            yield self.reject(path, "bad_length", f"{len(raw)} bytes is not a multiple of 16 (float32 x, y, z, reflectance)")
            return
        pts = np.frombuffer(raw, dtype="<f4").reshape(-1, 4)
        meta = {}
        if cfg.labels:
            try:
                boxes = kitti_boxes(path)
            except (OSError, ValueError, IndexError) as exc:
                yield self.reject(path, "bad_labels", describe_os_error(exc))
                return
            if boxes is not None:
                meta["boxes"] = boxes
        yield cloud_batch(cfg.source, path, pts[:, :3].copy(), {"intensity": pts[:, 3].copy()}, meta=meta)


def _calib(path: Path) -> dict[str, np.ndarray]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, values = line.partition(":")
        if values.strip():
            out[key.strip()] = np.array([float(v) for v in values.split()])
    return out


def kitti_boxes(bin_path: Path) -> list[dict] | None:
    """The scan's labelled objects as LiDAR-frame boxes, or None without a label file."""
    root = bin_path.parent.parent
    label = root / "label_2" / f"{bin_path.stem}.txt"
    if not label.exists():
        return None
    calib_file = root / "calib" / f"{bin_path.stem}.txt"
    if calib_file.exists():
        c = _calib(calib_file)
        r0 = np.eye(4)
        r0[:3, :3] = c["R0_rect"].reshape(3, 3)
        velo_to_cam = np.eye(4)
        velo_to_cam[:3, :4] = c["Tr_velo_to_cam"].reshape(3, 4)
        cam_to_velo = np.linalg.inv(r0 @ velo_to_cam)
    else:                                   # KITTI's nominal axes: x forward = cam z, y left = -cam x, z up = -cam y
        cam_to_velo = np.array([[0, 0, 1, 0], [-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, 0, 1]], float)
    boxes = []
    for line in label.read_text().splitlines():
        f = line.split()
        if not f or f[0] == "DontCare":
            continue
        h, w, l = (float(v) for v in f[8:11])
        x, y, z, ry = (float(v) for v in f[11:15])
        bottom = np.array([x, y, z, 1.0])                           # camera frame: y points down
        center = (cam_to_velo @ (bottom - np.array([0, h / 2, 0, 0])))[:3]
        boxes.append({"label": f[0], "center": center.round(4).tolist(), "size": [l, w, h],
                      "yaw": round(-ry - np.pi / 2, 6)})
    return boxes


class LasReader(CloudReader):
    format = "las"
    Config = ReaderConfig
    suffixes = (".las", ".laz")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg = self.config
        try:
            with local_copy(path) as local:
                xyz, attrs, meta = self.parse_isolated(parse_las, str(local))
        except ParserCrashed as exc:
            yield self.reject(path, "parser_crashed", f"laspy: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - laspy and lazrs raise their own types for a bad file
            yield self.reject(path, "unreadable_file", describe_os_error(exc))
            return
        # LAS coordinates are often large (UTM); float32 keeps ~1 cm at 1e5 m: the offset goes to meta
        offset = xyz.min(axis=0).round(0) if len(xyz) else np.zeros(3)
        meta["xyz_offset"] = offset.tolist()
        yield cloud_batch(cfg.source, path, (xyz - offset).astype(np.float32), attrs, meta=meta)


def parse_las(path: str) -> tuple[np.ndarray, dict, dict]:
    """Coordinates (float64), attributes and meta of a LAS/LAZ file; runs in the helper process."""
    import laspy

    las = laspy.read(path)
    xyz = np.stack([np.asarray(las.x), np.asarray(las.y), np.asarray(las.z)], axis=1)
    attrs = {"intensity": np.asarray(las.intensity, np.float32)}
    names = set(las.point_format.dimension_names)
    if {"red", "green", "blue"} <= names:
        rgb = np.stack([np.asarray(las.red), np.asarray(las.green), np.asarray(las.blue)], axis=1)
        attrs["colors"] = (rgb >> 8).astype(np.uint8) if rgb.max(initial=0) > 255 else rgb.astype(np.uint8)
    meta = {"las_version": str(las.header.version), "point_format": las.header.point_format.id,
            "classification": {str(k): v for k, v in sorted(Counter(np.asarray(las.classification).tolist()).items())}}
    try:
        crs = las.header.parse_crs()
        if crs is not None:
            meta["crs"] = crs.to_wkt()
    except Exception:  # noqa: BLE001 - pyproj is optional; a CRS we cannot parse is left out
        pass
    return xyz, attrs, meta
