"""Point-cloud reader: .ply and .pcd (ascii, binary, binary_compressed) through Open3D's
tensor I/O, which keeps every attribute; .xyz (text: x y z [r g b]) and .npy ((N, 3+) arrays)
through numpy.

Non-finite points (NaN/inf, common in organised depth-camera clouds) are removed and their
number written to ``count_read_nonfinite``. A PCD header whose FIELDS, SIZE, TYPE and COUNT
disagree, an empty cloud, or a file Open3D cannot parse is rejected with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusforge import schemas
from corpusforge.io.native import Isolated
from corpusforge.pointcloud.clouds import bbox_diagonal, list_of_triples, spacing
from corpusforge.io.readers.base import (ReadBatch, Reader, ReaderConfig, describe_os_error, dumps_meta, local_copy,
                                         file_error_row, record_id)

NONFINITE = "count_read_nonfinite"
SPACING = "score_read_spacing"        # density estimate: mean nearest-neighbour distance
DIAGONAL = "score_read_bbox_diagonal"


class PointCloudConfig(ReaderConfig):
    group: str | None = Field(None, description="Registration group for every cloud of this input.")
    group_pattern: str | None = Field(
        None, description="Regex on the file stem whose first capture group is the registration group, "
                          r"e.g. '^(.*)_view\d+$'.")


def cloud_reject(source: str, path: Path, reason: str, detail: str) -> ReadBatch:
    """A cloud file that could not be read, as one rejected row."""
    return ReadBatch(schemas.load("pointcloud").empty_table(),
                     file_error_row("pointcloud", source, path, reason, detail))


class CloudReader(Reader):
    """Base of the point-cloud readers: the columns every cloud record gets, and rejections."""

    kinds = ("pointcloud",)

    def output_columns(self) -> dict[str, pa.DataType]:
        return {NONFINITE: pa.int64(), SPACING: pa.float64(), DIAGONAL: pa.float64()}

    def reject(self, path: Path, reason: str, detail: str) -> ReadBatch:
        return cloud_reject(self.config.source, path, reason, detail)

    def parse_isolated(self, fn, *args):
        """``fn(*args)`` in this reader's helper process, started on first use and kept for the
        next files (``corpusforge.io.native``): for parsers that can crash on a damaged file."""
        if getattr(self, "_isolated", None) is None:
            self._isolated = Isolated()
        return self._isolated.call(fn, *args)


class PointCloudReader(CloudReader):
    format = "pointcloud"
    Config = PointCloudConfig
    suffixes = (".ply", ".pcd", ".xyz", ".npy")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: PointCloudConfig = self.config

        def reject(reason: str, detail: str) -> ReadBatch:
            return self.reject(path, reason, detail)

        try:
            if path.stat().st_size == 0:
                yield reject("empty_file", "0 bytes")
                return
            suffix = path.suffix.lower()
            if suffix == ".pcd":
                problem = check_pcd_header(path)
                if problem:
                    yield reject("corrupt_header", problem)
                    return
            if suffix == ".ply":
                problem = check_ply_size(path)
                if problem:                          # Open3D fills missing vertices with zeros or garbage
                    yield reject("truncated_file", problem)
                    return
            with local_copy(path) as local:          # open3d opens file names only
                attrs = _load(local, suffix)
        except (OSError, ValueError, EOFError) as exc:
            yield reject("unreadable_file", describe_os_error(exc))
            return
        xyz = attrs.pop("positions", None)
        group = cfg.group
        if cfg.group_pattern:
            m = re.search(cfg.group_pattern, path.stem)
            group = m.group(1) if m and m.groups() else group
        yield cloud_batch(cfg.source, path, xyz, attrs, group)


def cloud_batch(source: str, path: Path, xyz, attrs: dict, group: str | None = None, meta: dict | None = None,
                rid: str | None = None) -> ReadBatch:
    """A loaded cloud as a record: non-finite points removed and counted (attributes kept aligned),
    bbox in ``meta``, spacing and diagonal scores; ``corrupt_file`` / ``empty_cloud`` rejections."""
    def reject(reason: str, detail: str) -> ReadBatch:
        return cloud_reject(source, path, reason, detail)

    if xyz is None or xyz.ndim != 2 or xyz.shape[1] != 3:
        return reject("corrupt_file", "no xyz positions could be parsed")
    finite = np.isfinite(xyz).all(axis=1)
    nonfinite = int((~finite).sum())
    if nonfinite:
        xyz = xyz[finite]
        attrs = {k: v[finite] for k, v in attrs.items()}
    if len(xyz) == 0:
        return reject("empty_cloud", f"no finite points ({nonfinite} non-finite)")
    meta = dict(meta or {})
    if "xyz_offset" not in meta and np.abs(xyz).max() >= FAR_FROM_ORIGIN:
        # georeferenced coordinates (UTM: ~5e5, 5e6 m): float32 keeps only ~0.5 m at 5e6, and
        # registration's features fail that far out; the rounded offset goes to meta, as for LAS
        offset = np.floor(xyz.min(axis=0).astype(np.float64))
        meta["xyz_offset"] = offset.tolist()
        xyz = xyz.astype(np.float64) - offset
    xyz = xyz.astype(np.float32, copy=False)
    if attrs:
        meta["file_attributes"] = sorted(attrs)
    meta["bbox"] = [xyz.min(axis=0).tolist(), xyz.max(axis=0).tolist()]
    table = pointcloud_table(source, xyz, colors=attrs.get("colors"), normals=attrs.get("normals"),
                             intensity=attrs.get("intensity"), group=group, src_path=str(path),
                             meta=dumps_meta(meta), nonfinite=nonfinite, rid=rid)
    table = table.append_column(SPACING, pa.array([spacing(xyz)], pa.float64()))
    return ReadBatch(table.append_column(DIAGONAL, pa.array([bbox_diagonal(xyz)], pa.float64())))


def _load(path: Path, suffix: str) -> dict[str, np.ndarray]:
    if suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        if arr.ndim != 2 or arr.shape[1] < 3:
            raise ValueError(f"array of shape {arr.shape}, expected (N, 3+) with x, y, z first")
        out = {"positions": arr[:, :3]}
        if arr.shape[1] >= 6:
            out["colors"] = arr[:, 3:6]
        return out
    if suffix == ".xyz":
        arr = np.loadtxt(path, dtype=np.float64, ndmin=2, comments="#")
        if arr.size == 0:
            return {"positions": np.zeros((0, 3), np.float32)}
        if arr.shape[1] < 3:
            raise ValueError(f"{arr.shape[1]} column(s) per line, expected x y z [r g b]")
        out = {"positions": arr[:, :3]}
        if arr.shape[1] >= 6:
            out["colors"] = arr[:, 3:6]
        return out
    import open3d as o3d

    pc = o3d.t.io.read_point_cloud(str(path), remove_nan_points=False, remove_infinite_points=False)
    out = {}
    for name in pc.point:
        arr = pc.point[name].numpy()
        out[name] = arr
    return out


def _to_uint8_colors(colors: np.ndarray) -> np.ndarray:
    colors = np.asarray(colors)
    if colors.dtype == np.uint8:
        return colors[:, :3]
    c = colors[:, :3].astype(np.float64)
    if c.size and np.nanmax(c) <= 1.0:
        c = c * 255.0
    return np.clip(np.rint(np.nan_to_num(c)), 0, 255).astype(np.uint8)


def pointcloud_table(source: str, xyz: np.ndarray, *, colors=None, normals=None, intensity=None, group=None,
                     src_path=None, meta=None, nonfinite: int | None = None, rid: str | None = None) -> pa.Table:
    """One point cloud as a one-row table of the pointcloud schema."""
    xyz = np.ascontiguousarray(xyz, dtype=np.float32)
    cols = {
        "id": [rid or record_id(source, xyz.tobytes())], "source": [source],
        "points": list_of_triples([xyz], pa.float32()), "n_points": pa.array([len(xyz)], pa.int64()),
        "colors": list_of_triples([_to_uint8_colors(colors)], pa.uint8()) if colors is not None
        else pa.nulls(1, pa.list_(pa.list_(pa.uint8(), 3))),
        "normals": list_of_triples([np.asarray(normals, np.float32)[:, :3]], pa.float32()) if normals is not None
        else pa.nulls(1, pa.list_(pa.list_(pa.float32(), 3))),
        "intensity": pa.ListArray.from_arrays(pa.array([0, len(xyz)], pa.int32()),
                                              pa.array(np.asarray(intensity, np.float32).reshape(-1)))
        if intensity is not None else pa.nulls(1, pa.list_(pa.float32())),
        "group": pa.array([group], pa.string()), "src_path": pa.array([src_path], pa.string()),
        "src_row": pa.array([None], pa.int64()), "meta": pa.array([meta], pa.string()),
    }
    if nonfinite is not None:
        cols[NONFINITE] = pa.array([nonfinite], pa.int64())
    return pa.table(cols)



FAR_FROM_ORIGIN = 1e4          # metres; object, room and vehicle-frame scans are well inside
PLY_SIZES = {"char": 1, "int8": 1, "uchar": 1, "uint8": 1, "short": 2, "int16": 2, "ushort": 2, "uint16": 2,
             "int": 4, "int32": 4, "uint": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}


def check_ply_size(path: Path) -> str | None:
    """What is missing from a PLY file whose header declares more vertices than its body holds
    (binary: by bytes, for the elements up to the vertices when their rows have a fixed size;
    ascii: by lines), or None."""
    with path.open("rb") as f:
        head = f.read(64 << 10)
    end = head.find(b"end_header")
    if not head.startswith(b"ply") or end < 0:
        return None                                  # not our check: Open3D reports a bad header
    body_start = head.index(b"\n", end) + 1 if b"\n" in head[end:] else len(head)
    fmt, elements = None, []                         # [name, count, row bytes or None]
    for line in head[:end].decode("ascii", "replace").splitlines():
        parts = line.split()
        if parts[:1] == ["format"] and len(parts) > 1:
            fmt = parts[1]
        elif parts[:1] == ["element"] and len(parts) == 3 and parts[2].isdigit():
            elements.append([parts[1], int(parts[2]), 0])
        elif parts[:1] == ["property"] and elements and elements[-1][2] is not None:
            size = None if parts[1:2] == ["list"] else PLY_SIZES.get(parts[1] if len(parts) > 1 else "")
            elements[-1][2] = None if size is None else elements[-1][2] + size
    vertex = next((e for e in elements if e[0] == "vertex"), None)
    if vertex is None or vertex[1] == 0:
        return None
    size = path.stat().st_size
    if fmt in ("binary_little_endian", "binary_big_endian"):
        needed = 0
        for name, count, row in elements:
            if row is None:
                return None                          # a list before the vertices: sizes vary
            needed += count * row
            if name == "vertex":
                break
        if size - body_start < needed:
            return (f"header declares {vertex[1]} vertices ({needed} bytes with the elements before them), "
                    f"the body holds {size - body_start}")
        return None
    if fmt == "ascii" and elements[0][0] == "vertex":
        with path.open("rb") as f:
            f.seek(body_start)
            lines = sum(1 for line in f if line.strip())
        if lines < vertex[1]:
            return f"header declares {vertex[1]} vertices, the body has {lines} lines"
    return None


def check_pcd_header(path: Path) -> str | None:
    """Return what is wrong with a PCD header, or None when it is consistent."""
    header: dict[str, list[str]] = {}
    with path.open("rb") as f:
        for _ in range(64):
            raw = f.readline()
            if not raw:
                return "file ends before the DATA line"
            line = raw.decode("ascii", "replace").strip()
            if not line or line.startswith("#"):
                continue
            key, *values = line.split()
            header[key.upper()] = values
            if key.upper() == "DATA":
                break
        else:
            return "no DATA line in the first 64 header lines"
    for key in ("FIELDS", "SIZE", "TYPE", "POINTS", "DATA"):
        if key not in header:
            return f"header has no {key} line"
    n = len(header["FIELDS"])
    for key in ("SIZE", "TYPE", "COUNT"):
        if key in header and len(header[key]) != n:
            return f"{len(header['FIELDS'])} FIELDS but {len(header[key])} {key} values"
    if header["DATA"][:1] and header["DATA"][0] not in ("ascii", "binary", "binary_compressed"):
        return f"unknown DATA encoding {header['DATA'][0]!r}"
    try:
        points = int(header["POINTS"][0])
        if "WIDTH" in header and "HEIGHT" in header and int(header["WIDTH"][0]) * int(header["HEIGHT"][0]) != points:
            return f"WIDTH x HEIGHT != POINTS ({header['WIDTH'][0]} x {header['HEIGHT'][0]} != {points})"
    except (ValueError, IndexError):
        return "POINTS/WIDTH/HEIGHT are not integers"
    if not {"x", "y", "z"} <= set(header["FIELDS"]):
        return f"FIELDS {header['FIELDS']} lack x, y, z"
    return None
