"""Meshes sampled into point clouds: ``.off``, ``.obj``, ``.ply`` (with faces), ``.stl``
(ModelNet / ShapeNet style CAD models), through Open3D.

Faces naming a vertex the file does not have (counted as ``bad_faces_removed``), degenerate
triangles (repeated vertex indices), duplicated triangles and vertices, and
unreferenced vertices are removed first and counted in ``meta.mesh``; a mesh left with no
triangles is rejected as ``no_faces`` (a PLY that is only points belongs to the ``pointcloud``
reader). ``sampling``: ``uniform`` (area-weighted: every surface element equally likely) or
``poisson`` (Poisson-disk: evenly spread samples, Yuksel 2015, from 5x as many uniform ones),
``points`` samples per mesh, normals from the triangles. Seeded per file (``seed`` and the file
name), so a run repeats. Open3D's parsers run in a helper process (``corpusforge.io.native``):
its PLY and OFF readers crash on some corrupt face lists, and such a file is rejected as
``parser_crashed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import xxhash
from pydantic import Field

from corpusforge.io.native import ParserCrashed
from corpusforge.io.readers.base import ReadBatch, ReaderConfig, describe_os_error, local_copy
from corpusforge.io.readers.pointcloud import CloudReader, check_ply_size, cloud_batch


class MeshConfig(ReaderConfig):
    points: int = Field(2048, ge=1, description="Samples per mesh.")
    sampling: Literal["uniform", "poisson"] = "uniform"
    seed: int = 0


class MeshReader(CloudReader):
    format = "mesh"
    Config = MeshConfig
    suffixes = (".off", ".obj", ".ply", ".stl")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        import open3d as o3d

        cfg: MeshConfig = self.config
        if not path.exists() or path.stat().st_size == 0:
            yield self.reject(path, "empty_file", "0 bytes or missing")
            return
        if path.suffix.lower() == ".ply":
            problem = check_ply_size(path)
            if problem:
                yield self.reject(path, "truncated_file", problem)
                return
        try:
            with local_copy(path) as local:          # open3d opens file names only
                verts, tri = self.parse_isolated(parse_mesh, str(local))
        except ParserCrashed as exc:
            yield self.reject(path, "parser_crashed", f"Open3D: {exc}")
            return
        except (OSError, RuntimeError, ValueError) as exc:
            yield self.reject(path, "unreadable_file", describe_os_error(exc))
            return
        before_t, before_v = len(tri), len(verts)
        mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(verts), o3d.utility.Vector3iVector(tri))
        # a face naming a vertex the file does not have: Open3D keeps the index, and its mesh
        # operations then read past the vertex array (crashes, or garbage that differs per run)
        out_of_range = (tri < 0).any(axis=1) | (tri >= before_v).any(axis=1) if len(tri) else np.zeros(0, bool)
        bad_faces = int(out_of_range.sum())
        if bad_faces:
            mesh.triangles = o3d.utility.Vector3iVector(np.ascontiguousarray(tri[~out_of_range]))
            tri = np.asarray(mesh.triangles)
        degenerate = int(((tri[:, 0] == tri[:, 1]) | (tri[:, 1] == tri[:, 2]) | (tri[:, 0] == tri[:, 2])).sum()) if len(tri) else 0
        mesh.remove_degenerate_triangles()
        mesh.remove_duplicated_triangles()
        mesh.remove_duplicated_vertices()
        mesh.remove_unreferenced_vertices()
        # zero-area faces with distinct vertices (collinear points) carry no surface either
        tri, verts = np.asarray(mesh.triangles), np.asarray(mesh.vertices)
        if len(tri):
            area = 0.5 * np.linalg.norm(np.cross(verts[tri[:, 1]] - verts[tri[:, 0]], verts[tri[:, 2]] - verts[tri[:, 0]]), axis=1)
            if (area <= 0).any():
                mesh.remove_triangles_by_mask(area <= 0)
                mesh.remove_unreferenced_vertices()
        info = {"triangles": before_t, "vertices": before_v, "bad_faces_removed": bad_faces,
                "degenerate_removed": degenerate,
                "triangles_kept": len(mesh.triangles), "vertices_kept": len(mesh.vertices), "sampling": cfg.sampling}
        if len(mesh.triangles) == 0:
            yield self.reject(path, "no_faces", f"{before_v} vertices, {before_t} triangles, none with area")
            return
        o3d.utility.random.seed(xxhash.xxh32_intdigest(f"{cfg.seed}\0{path.name}".encode()) & 0x7FFFFFFF)
        mesh.compute_triangle_normals()
        if cfg.sampling == "uniform":
            pcd = mesh.sample_points_uniformly(number_of_points=cfg.points, use_triangle_normal=True)
        else:
            pcd = mesh.sample_points_poisson_disk(number_of_points=cfg.points, init_factor=5, use_triangle_normal=True)
        attrs = {"normals": np.asarray(pcd.normals, np.float32)}
        yield cloud_batch(cfg.source, path, np.asarray(pcd.points, np.float32), attrs, meta={"mesh": info})


def parse_mesh(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (n, 3) float64 and triangles (m, 3) int32 as Open3D reads them; runs in the helper."""
    import open3d as o3d

    with o3d.utility.VerbosityContextManager(o3d.utility.VerbosityLevel.Error):
        mesh = o3d.io.read_triangle_mesh(path)
    return (np.asarray(mesh.vertices, np.float64).reshape(-1, 3),
            np.asarray(mesh.triangles, np.int32).reshape(-1, 3))
