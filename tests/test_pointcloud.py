"""Point-cloud stages on the real PCL clouds in ../shared/data: denoising, registration,
completion, augmentation, and the pipeline around them."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from conftest import SAMPLES, shared
from corpusforge import runner
from corpusforge.io.readers.pointcloud import PointCloudReader, pointcloud_table
from corpusforge.pointcloud.augment import PointAugment, in_box
from corpusforge.pointcloud.clouds import Cloud, arrays, bbox_diagonal, spacing
from corpusforge.pointcloud.complete import Complete
from corpusforge.pointcloud.denoise import Denoise
from corpusforge.pointcloud.register import RegisterConfig, register_pair, transform
from corpusforge.stage import StageStats


def load(name: str) -> Cloud:
    reader = PointCloudReader(PointCloudReader.Config(paths=["x"], source="s"), kind="pointcloud")
    (batch,) = list(reader.read(shared("pointcloud", name)))
    return arrays(batch.records, 0)


def table_of(*clouds: Cloud, meta=None) -> pa.Table:
    return pa.concat_tables([pointcloud_table("s", c.xyz, colors=c.colors, normals=c.normals, intensity=c.intensity,
                                              meta=meta, rid=f"c{i}") for i, c in enumerate(clouds)])


# --- denoising ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["car6.pcd", "milk_color.pcd", "bunny.pcd", "bun4.pcd"])
def test_planted_outliers_removed_with_little_loss(name):
    cloud = load(name)
    rng = np.random.default_rng(1)
    lo, hi = cloud.xyz.min(axis=0), cloud.xyz.max(axis=0)
    pad = 0.2 * (hi - lo)
    s = spacing(cloud.xyz)
    # outliers scattered around the cloud, each more than 5 spacings from the surface
    cand = rng.uniform(lo - pad, hi + pad, size=(20 * max(len(cloud.xyz) // 50, 10), 3)).astype(np.float32)
    cand = cand[cKDTree(cloud.xyz).query(cand)[0] > 5 * s][: max(len(cloud.xyz) // 50, 10)]
    noisy = Cloud(np.vstack([cloud.xyz, cand]))
    stage = Denoise(Denoise.Config())
    out, removed, _ = stage.clean(noisy)
    kept = {tuple(p) for p in out.xyz.tolist()}
    recall = 1 - sum(tuple(p) in kept for p in cand.tolist()) / len(cand)
    lost = 1 - sum(tuple(p) in kept for p in cloud.xyz.tolist()) / len(cloud.xyz)
    assert recall >= 0.95, recall
    assert lost <= 0.02, lost
    assert removed["sor"] + removed["ror"] == len(noisy.xyz) - len(out.xyz)


def test_denoise_keeps_attributes_aligned_and_smooths():
    cloud = load("milk_color.pcd")
    stage = Denoise(Denoise.Config(voxel=True, smooth="gaussian"))
    stats = StageStats("pointcloud.denoise")
    res = stage.process(table_of(cloud), stats)
    out = arrays(res.kept, 0)
    assert len(out.colors) == len(out.xyz) < len(cloud.xyz)
    assert res.kept.column("count_denoise_voxel_removed")[0].as_py() > 0
    assert stats.counters["voxel_removed"] == res.kept.column("count_denoise_voxel_removed")[0].as_py()


def test_denoise_radius_scales_with_the_cloud():
    # the same cloud at 1000x scale loses the same points: radii come from its spacing
    cloud = load("bunny.pcd")
    stage = Denoise(Denoise.Config())
    a, ra, _ = stage.clean(cloud)
    b, rb, _ = stage.clean(Cloud(cloud.xyz * 1000))
    assert ra == rb and np.allclose(a.xyz * 1000, b.xyz, rtol=1e-5)


def test_denoise_rejects_degenerate_clouds():
    stage = Denoise(Denoise.Config())
    t = table_of(Cloud(np.zeros((50, 3), np.float32)), Cloud(np.ones((1, 3), np.float32)), load("bunny.pcd"))
    res = stage.process(t, StageStats("d"))
    assert res.rejected.column("reject_reason").to_pylist() == ["degenerate_cloud", "too_few_points"]
    assert res.kept.num_rows == 1


# --- registration ---------------------------------------------------------------------------

def test_bun0_to_bun4_matches_pcl_reference():
    cfg = RegisterConfig(coarse="none", icp="point_to_point", icp_distance=0.05, icp_iterations=50, icp_epsilon=1e-8)
    T, fitness, rmse = register_pair(load("bun0.pcd"), load("bun4.pcd"), cfg)
    assert np.allclose(T[0, :3], [0.8806, 0.0365, -0.4724], atol=1e-3)
    assert np.allclose(T[:3, 3], [0.03453, -0.00152, 0.04116], atol=1e-3)
    assert fitness > 0.5 and rmse < 0.05


@pytest.mark.parametrize("name,seed", [("bun4.pcd", 0), ("car6.pcd", 1), ("milk_color.pcd", 2)])
def test_random_rigid_transform_recovered_without_initial_guess(name, seed):
    cloud = load(name)
    rng = np.random.default_rng(seed)
    diag = bbox_diagonal(cloud.xyz)
    R = Rotation.random(random_state=seed).as_matrix()
    t = rng.uniform(-0.5, 0.5, 3) * diag
    moved = cloud.xyz.astype(np.float64) @ R.T + t
    moved += rng.normal(0, 0.1 * spacing(cloud.xyz), moved.shape)         # sensor noise
    src = Cloud(moved.astype(np.float32))
    T, fitness, _ = register_pair(src, cloud, RegisterConfig(seed=seed))
    # T should undo the motion: T = [R^T, -R^T t]
    angle = np.degrees(Rotation.from_matrix(T[:3, :3] @ R).magnitude())
    err = np.linalg.norm(T[:3, :3] @ t + T[:3, 3])
    assert angle < 1.0, angle
    assert err < 0.01 * diag, err / diag
    assert fitness > 0.8


@pytest.mark.parametrize("options", [{"coarse": "fgr"}, {"icp": "point_to_point"}, {"robust_kernel": "tukey"}])
def test_registration_options_recover_a_transform(options):
    cloud = load("bun4.pcd")
    R = Rotation.from_euler("zyx", [70, -20, 15], degrees=True).as_matrix()
    t = np.array([0.05, -0.02, 0.03])
    src = Cloud((cloud.xyz.astype(np.float64) @ R.T + t).astype(np.float32))
    T, fitness, _ = register_pair(src, cloud, RegisterConfig(**options))
    assert np.degrees(Rotation.from_matrix(T[:3, :3] @ R).magnitude()) < 1.0
    assert np.linalg.norm(T[:3, :3] @ t + T[:3, 3]) < 0.01 * bbox_diagonal(cloud.xyz)
    assert fitness > 0.8


def test_registration_is_deterministic_for_a_seed():
    src, tgt = load("bun0.pcd"), load("bun4.pcd")
    cfg = RegisterConfig(seed=3)
    a, b = register_pair(src, tgt, cfg), register_pair(src, tgt, cfg)
    assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]


def test_transform_moves_normals_with_points():
    cloud = load("bun0.pcd")
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("z", 90, degrees=True).as_matrix()
    out = transform(cloud, T)
    assert np.allclose(out.normals, cloud.normals @ T[:3, :3].T, atol=1e-5)


def _run(tmp_path, inputs, stages):
    cfg = {"name": "pc", "kind": "pointcloud", "inputs": inputs, "stages": stages,
           "output": {"path": str(tmp_path / "out")}}
    summary = runner.run(cfg)
    kept = pq.read_table([p for p in (tmp_path / "out").glob("*.parquet")])
    rej_files = list((tmp_path / "out" / "_rejected").glob("*.parquet"))
    rejected = pq.read_table(rej_files) if rej_files else None
    return summary, kept, rejected


def test_pipeline_registers_views_of_a_group(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    bun4 = load("bun4.pcd")
    R = Rotation.from_euler("zyx", [40, 10, -5], degrees=True).as_matrix()
    np.save(src / "bunny_view0.npy", bun4.xyz)
    np.save(src / "bunny_view1.npy", (bun4.xyz @ R.T + 0.05).astype(np.float32))
    np.save(src / "lone_view0.npy", load("bunny.pcd").xyz)
    _, kept, rejected = _run(tmp_path, [{"format": "pointcloud", "paths": [str(src)], "source": "scans",
                                         "group_pattern": r"^(.*)_view\d+$"}],
                             [{"stage": "pointcloud.register", "min_fitness": 0.5}])
    assert rejected is None or rejected.num_rows == 0
    rows = {Path(p).stem: i for i, p in enumerate(kept.column("src_path").to_pylist())}
    fit = kept.column("score_register_fitness").to_pylist()
    assert fit[rows["bunny_view1"]] > 0.9
    a = arrays(kept, rows["bunny_view0"]).xyz
    b = arrays(kept, rows["bunny_view1"]).xyz
    assert np.abs(a - b).max() < 0.01 * bbox_diagonal(a)        # the moved view is put back
    T = np.asarray(json.loads(kept.column("tag_register_transform")[rows["bunny_view1"]].as_py()))
    assert T.shape == (4, 4)


@pytest.mark.parametrize("action", ["reject", "flag"])
def test_pipeline_rejects_or_flags_badly_fitting_views(tmp_path, action):
    src = tmp_path / "in"
    src.mkdir()
    np.save(src / "x_view0.npy", load("car6.pcd").xyz)
    np.save(src / "x_view1.npy", load("bun4.pcd").xyz)   # not the same object
    _, kept, rejected = _run(tmp_path, [{"format": "pointcloud", "paths": [str(src)], "source": "s",
                                         "group_pattern": r"^(.*)_view\d+$"}],
                             [{"stage": "pointcloud.register", "min_fitness": 0.9, "action": action}])
    if action == "reject":
        assert kept.num_rows == 1 and rejected.num_rows == 1
        assert rejected.column("reject_reason").to_pylist() == ["low_fitness"]
    else:
        assert kept.num_rows == 2 and (rejected is None or rejected.num_rows == 0)
        assert min(kept.column("score_register_fitness").to_pylist()) < 0.9
        flags = kept.column("tag_register_flag").to_pylist()
        assert sum(f is not None and f.startswith("low_fitness") for f in flags) == 1


# --- completion -----------------------------------------------------------------------------

def test_completion_fills_a_hole():
    cloud = load("bun4.pcd")
    centre = cloud.xyz[len(cloud.xyz) // 2]
    d = np.linalg.norm(cloud.xyz - centre, axis=1)
    radius = 4 * spacing(cloud.xyz)
    holed = cloud.take(np.flatnonzero(d > radius))
    stage = Complete(Complete.Config())
    filled, added = stage.fill(holed)
    assert added > 0 and len(filled.xyz) == len(holed.xyz) + added
    new = filled.xyz[len(holed.xyz):]
    # some new points land in the hole, and all of them lie near the true surface
    assert (np.linalg.norm(new - centre, axis=1) < radius).any()
    assert cKDTree(cloud.xyz).query(new)[0].max() < 4 * spacing(cloud.xyz)
    again, _ = stage.fill(holed)
    assert np.array_equal(again.xyz, filled.xyz)


def test_completion_pads_attributes():
    cloud = load("milk_color.pcd")
    filled, added = Complete(Complete.Config()).fill(cloud)
    assert len(filled.colors) == len(filled.xyz) == len(cloud.xyz) + added


def test_completion_leaves_a_cloud_without_a_usable_surface_as_it_is():
    # coordinates near float32's range overflow in Poisson's solve: no surface, the cloud passes
    # unchanged (this used to raise "Probabilities contain NaN" and fail the run)
    cloud = load("bun0.pcd")
    huge = Cloud((cloud.xyz * 1e30).astype(np.float32), None, None, None)
    filled, added = Complete(Complete.Config()).fill(huge)
    assert added == 0 and np.array_equal(filled.xyz, huge.xyz)


# --- augmentation ---------------------------------------------------------------------------

def test_augment_ops_deterministic_and_linked_to_parent():
    cloud = load("bun0.pcd")
    stage = PointAugment(PointAugment.Config(ops=["rotate", "translate", "scale", "jitter", "dropout", "flip"]))
    res = stage.process(table_of(cloud), StageStats("a"))
    assert res.kept.num_rows == 7 and res.created == 6
    again = stage.process(table_of(cloud), StageStats("a"))
    assert res.kept.equals(again.kept)
    t = res.kept
    assert t.column("tag_augment_parent").to_pylist()[1:] == ["c0"] * 6
    ops = t.column("tag_augment_op").to_pylist()
    by_op = {op: arrays(t, i) for i, op in enumerate(ops) if op}
    # rotation keeps distances; dropout drops about 10%; flips mirror y; jitter is clipped
    rot = by_op["rotate"].xyz
    assert np.allclose(np.linalg.norm(rot - rot.mean(0), axis=1), np.linalg.norm(cloud.xyz - cloud.xyz.mean(0), axis=1),
                       atol=1e-5)
    assert 0.8 * len(cloud.xyz) < len(by_op["dropout"].xyz) < len(cloud.xyz)
    assert len(by_op["dropout"].normals) == len(by_op["dropout"].xyz)
    assert np.allclose(by_op["flip"].xyz[:, 1] - cloud.xyz[:, 1].mean(), -(cloud.xyz[:, 1] - cloud.xyz[:, 1].mean()),
                       atol=1e-5)
    assert np.abs(by_op["jitter"].xyz - cloud.xyz).max() <= 1.5 * spacing(cloud.xyz) + 1e-6
    assert len(set(t.column("id").to_pylist())) == 7


def test_object_augmentation_moves_points_with_their_box():
    rng = np.random.default_rng(0)
    ground = np.c_[rng.uniform(-5, 5, (2000, 2)), np.full(2000, -0.05)]    # just under the box
    obj = rng.uniform([-0.5, -0.5, 0], [0.5, 0.5, 1], (500, 3)) + [2, 1, 0]
    cloud = Cloud(np.vstack([ground, obj]).astype(np.float32))
    box = {"center": [2, 1, 0.5], "size": [1.01, 1.01, 1.01], "yaw": 0.0}
    stage = PointAugment(PointAugment.Config(ops=["objects"]))
    res = stage.process(table_of(cloud, meta=json.dumps({"boxes": [box]})), StageStats("a"))
    out = arrays(res.kept, 1)
    new_box = json.loads(res.kept.column("meta")[1].as_py())["boxes"][0]
    assert in_box(out.xyz[2000:], new_box).all()                 # the object went with its box
    assert np.array_equal(out.xyz[:2000], cloud.xyz[:2000])      # the rest stayed
    assert new_box["center"][2] == pytest.approx(0.5)


# --- the demo -------------------------------------------------------------------------------

def test_demo_config_runs_every_stage(tmp_path):
    import yaml

    cfg = yaml.safe_load((SAMPLES / "configs" / "demo_pointclouds.yaml").read_text())
    cfg["inputs"][0]["paths"] = [str(SAMPLES / "pointclouds")]
    cfg["output"]["path"] = str(tmp_path / "out")
    summary = runner.run(cfg)
    stages = {v["stage"]: v for v in summary.stats["stages"].values()}
    assert set(stages) == {"pointcloud.denoise", "pointcloud.register", "pointcloud.complete", "pointcloud.augment"}
    assert stages["pointcloud.denoise"]["counters"]["sor_removed"] > 0
    assert stages["pointcloud.complete"]["counters"]["points_added"] > 0
    assert stages["pointcloud.augment"]["created"] > 0
    kept = pq.read_table(list((tmp_path / "out").glob("*.parquet")))
    assert kept.column("count_denoise_sor_removed").to_pylist()[0] is not None
    assert any(f is not None for f in kept.column("score_register_fitness").to_pylist())
    assert summary.rejected_rows >= 2        # the broken header and the empty file are quarantined


def test_georeferenced_views_register_like_centred_ones(tmp_path):
    """Issue 16: clouds in UTM coordinates (~5e5, 5.4e6 m) failed registration (fitness 0); the
    readers now move them near the origin (meta.xyz_offset) before any stage sees them."""
    src = tmp_path / "in"
    src.mkdir()
    bun4 = load("bun4.pcd").xyz.astype(np.float64) * 100          # a 15 m object, in metres
    R = Rotation.from_euler("zyx", [25, 5, -5], degrees=True).as_matrix()
    utm = np.array([512_345.0, 5_412_345.0, 310.0])
    np.savetxt(src / "site_view0.xyz", bun4 + utm, fmt="%.4f")
    np.savetxt(src / "site_view1.xyz", (bun4 - bun4.mean(0)) @ R.T + bun4.mean(0) + utm + [0.5, -0.3, 0.2], fmt="%.4f")
    _, kept, rejected = _run(tmp_path, [{"format": "pointcloud", "paths": [str(src)], "source": "scans",
                                         "group_pattern": r"^(.*)_view\d+$"}],
                             [{"stage": "pointcloud.register", "min_fitness": 0.5}])
    assert rejected is None or rejected.num_rows == 0
    rows = {Path(p).stem: i for i, p in enumerate(kept.column("src_path").to_pylist())}
    assert kept.column("score_register_fitness").to_pylist()[rows["site_view1"]] > 0.9
    metas = [json.loads(m) for m in kept.column("meta").to_pylist()]
    assert all("xyz_offset" in m for m in metas)
