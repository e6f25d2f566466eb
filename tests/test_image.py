"""Image stages on real photographs (scikit-image): validation, quality rules, the Hamming
search, near-duplicate removal and augmentation, and the demo pipeline around them."""

import io
import json
import sys
import zlib
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from PIL import Image, ImageEnhance

from conftest import ROOT, SAMPLES
from corpusforge import runner, schemas
from corpusforge.errors import ConfigError
from corpusforge.image.augment import ImageAugment, RANDAUGMENT_OPS
from corpusforge.image.hamming import brute_force_pairs, near_pairs
from corpusforge.image.near_dedup import ImageNearDedup
from corpusforge.image.quality import Quality
from corpusforge.image.validate import Validate
from corpusforge.stage import StageStats, run_checked

sys.path.insert(0, str(ROOT / "bench"))
from image_photos import blurred, encode, photo, variants  # noqa: E402

DISTINCT = ("astronaut", "camera", "chelsea", "coffee", "rocket", "coins", "moon", "page", "retina", "clock")


def image_table(items: list[tuple[bytes, str]], labels: list[str | None] | None = None) -> pa.Table:
    """Rows of the image schema for (bytes, file name) pairs, sizes from the header when it parses."""
    rows = []
    for k, (data, name) in enumerate(items):
        try:
            with Image.open(io.BytesIO(data)) as im:
                fmt, (w, h), mode = im.format, im.size, im.mode
        except Exception:  # noqa: BLE001 - the stages must cope with what the header cannot say
            fmt = w = h = mode = None
        rows.append({"id": f"r{k}", "source": "s", "image": data, "format": fmt, "width": w, "height": h, "mode": mode,
                     "content_hash": xxhash.xxh3_128_hexdigest(data), "label": labels[k] if labels else None,
                     "src_path": name, "src_row": None, "meta": None})
    return pa.Table.from_pylist(rows, schema=schemas.load("image").empty_table().schema)


def run(stage, table):
    stats = StageStats()
    return run_checked(stage, table, stats, lambda t: stage.process(t, stats)), stats


def png_bomb(side: int) -> bytes:
    """A real decompression bomb: a tiny PNG whose header promises side x side grey pixels."""
    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    z = zlib.compressobj(9)
    row = b"\0" * (side // 8 + 1)
    body = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", body) + chunk(b"IEND", b""))


# --- validation -------------------------------------------------------------------------------

def test_validate_rejects_bad_input_with_reasons_and_handles_odd_modes():
    astro = photo("astronaut")
    jpeg = encode(astro)
    rgba = astro.convert("RGBA")
    rgba.putalpha(128)
    frames = [astro.resize((64, 64)), photo("camera").resize((64, 64)).convert("RGB")]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:])
    items = [
        (b"", "empty.jpg"),
        (jpeg[: len(jpeg) // 2], "truncated.jpg"),
        (b"not an image at all", "text.png"),
        (png_bomb(20_000), "bomb.png"),
        (gif.getvalue(), "animated.gif"),
        (encode(astro, "PNG"), "wrong_extension.jpg"),
        (encode(Image.fromarray(np.arange(256 * 64, dtype=np.uint16).reshape(64, 256) * 4), "PNG"), "depth16.png"),
        (encode(astro.convert("CMYK")), "cmyk.jpg"),
        (encode(photo("camera"), "PNG"), "grey.png"),
        (encode(rgba, "PNG"), "alpha.png"),
        (encode(astro, "BMP"), "old.bmp"),
    ]
    out, stats = run(Validate(Validate.Config(formats=["JPEG", "PNG", "GIF"])), image_table(items))
    rej = dict(zip(out.rejected.column("src_path").to_pylist(), out.rejected.column("reject_reason").to_pylist()))
    assert rej == {"empty.jpg": "empty_image", "truncated.jpg": "truncated_image", "text.png": "decode_error",
                   "bomb.png": "decompression_bomb", "animated.gif": "animated", "old.bmp": "excluded_format"}
    detail = dict(zip(out.rejected.column("src_path").to_pylist(), out.rejected.column("reject_detail").to_pylist()))
    assert "400000000 pixels > max_pixels" in detail["bomb.png"]
    kept = {r["src_path"]: r for r in out.kept.to_pylist()}
    assert kept["depth16.png"]["mode"].startswith("I") and kept["cmyk.jpg"]["mode"] == "CMYK"
    assert kept["alpha.png"]["mode"] == "RGBA" and kept["grey.png"]["mode"] == "L"
    assert kept["wrong_extension.jpg"]["format"] == "PNG"
    assert kept["wrong_extension.jpg"]["tag_validate_note"] == "extension says JPEG, content is PNG"
    assert stats.rejected_by_reason["truncated_image"] == 1 and stats.counters["extension_mismatch"] == 1

    # options: reject mismatches, keep the first frame of animations
    out, _ = run(Validate(Validate.Config(extension_mismatch="reject", animated="first_frame")), image_table(items[4:6]))
    assert out.rejected.column("reject_reason").to_pylist() == ["extension_mismatch"]
    (first,) = out.kept.to_pylist()
    assert first["format"] == "PNG" and "first of 2 frames" in first["tag_validate_note"]
    assert Image.open(io.BytesIO(first["image"])).size == (64, 64)


def test_validate_applies_exif_orientation_and_reencodes():
    im = photo("rocket")                       # 640 x 427
    exif = Image.Exif()
    exif[0x0112] = 6                           # rotate 90 clockwise to display
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95, exif=exif)
    out, stats = run(Validate(), image_table([(buf.getvalue(), "phone.jpg")]))
    (row,) = out.kept.to_pylist()
    assert (row["width"], row["height"]) == (427, 640) and "EXIF orientation 6 applied" in row["tag_validate_note"]
    stored = Image.open(io.BytesIO(row["image"]))
    assert stored.size == (427, 640) and stored.getexif().get(0x0112, 1) == 1
    assert row["content_hash"] == xxhash.xxh3_128_hexdigest(row["image"])
    # re-encoding on request: smaller at lower quality, alpha flattened for JPEG
    rgba = im.convert("RGBA")
    out, _ = run(Validate(Validate.Config(reencode="JPEG", quality=50)), image_table([(encode(rgba, "PNG"), "a.png")]))
    (row,) = out.kept.to_pylist()
    assert row["format"] == "JPEG" and row["mode"] == "RGB" and len(row["image"]) < len(encode(im, quality=95))


def test_reader_quarantines_bomb_with_reason(tmp_path):
    from corpusforge.io.readers.images import ImageFolderReader

    (tmp_path / "bomb.png").write_bytes(png_bomb(20_000))
    reader = ImageFolderReader(ImageFolderReader.Config(paths=[str(tmp_path)], source="s"), kind="image")
    (batch,) = list(reader.read(tmp_path / "bomb.png"))
    assert batch.records.num_rows == 0
    assert batch.rejected.column("reject_reason").to_pylist() == ["decompression_bomb"]


# --- quality ----------------------------------------------------------------------------------

def test_quality_rules_each_reject_with_scores():
    astro, camera = photo("astronaut"), photo("camera")
    items = [
        (encode(astro), "ok.jpg"),
        (encode(astro.resize((48, 48))), "tiny.jpg"),
        (encode(astro.resize((512, 100))), "banner.jpg"),
        (blurred(astro, 8), "blurred.png"),
        (encode(Image.fromarray((np.asarray(camera) // 10).astype(np.uint8))), "dark.jpg"),
        (encode(ImageEnhance.Brightness(photo("chelsea")).enhance(3.0)), "bright.jpg"),
        (encode(Image.new("RGB", (200, 200), (120, 130, 140)), "PNG"), "flat.png"),
    ]
    out, stats = run(Quality(), image_table(items))
    rej = dict(zip(out.rejected.column("src_path").to_pylist(), out.rejected.column("reject_reason").to_pylist()))
    assert rej == {"tiny.jpg": "low_resolution", "banner.jpg": "extreme_aspect_ratio", "blurred.png": "blurry",
                   "dark.jpg": "underexposed", "bright.jpg": "overexposed", "flat.png": "low_contrast"}
    assert out.kept.column("src_path").to_pylist() == ["ok.jpg"]
    # every row carries every score, rejected rows too
    for name in ("sharpness", "brightness", "contrast", "dark_share", "bright_share", "aspect"):
        assert out.rejected.column(f"score_image_{name}").null_count == 0
    assert stats.rejected_by_reason["blurry"] == 1


@pytest.mark.parametrize("name", ["astronaut", "camera", "coffee", "chelsea", "rocket"])
def test_blurred_copy_scores_blurrier_and_score_does_not_depend_on_size(name):
    im = photo(name)
    big = im.resize((im.width * 4, im.height * 4), Image.Resampling.LANCZOS)
    table = image_table([(encode(im, "PNG"), "a"), (blurred(im, 1.5), "b"), (encode(big, "PNG"), "c"),
                         (encode(big, quality=95), "d")])
    out, _ = run(Quality(Quality.Config(min_sharpness=None)), table)
    sharp = out.kept.column("score_image_sharpness").to_pylist()
    assert sharp[1] < sharp[0] / 3
    # the 4x enlargement scores like the original, as PNG and as a JPEG (decoded at a DCT-scaled draft)
    assert abs(sharp[2] - sharp[0]) / sharp[0] < 0.25 and abs(sharp[3] - sharp[2]) / sharp[2] < 0.1


def watermark_hook(images, table):
    """Test hook: 'detects' a white square stamped in the top-left corner."""
    return [float(a[:20, :20].mean() > 250) for a in images]


def test_quality_hook_scores_and_rejects_and_bad_hook_names_field():
    im = photo("coffee")
    stamped = im.copy()
    stamped.paste((255, 255, 255), (0, 0, 80, 80))
    cfg = Quality.Config(hooks=[{"name": "watermark", "function": "test_image:watermark_hook", "threshold": 0.5}])
    out, _ = run(Quality(cfg), image_table([(encode(im), "clean.jpg"), (encode(stamped), "stamped.jpg")]))
    assert out.rejected.column("reject_reason").to_pylist() == ["watermark"]
    assert out.kept.column("score_image_watermark").to_pylist() == [0.0]
    with pytest.raises(ConfigError, match=r"hooks\[ad\]\.function"):
        Quality(Quality.Config(hooks=[{"name": "ad", "function": "no_such_module:detect"}]))


# --- Hamming search ---------------------------------------------------------------------------

def test_near_pairs_equals_brute_force_with_planted_and_repeated_hashes():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**63, 3000, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 3000, dtype=np.uint64)
    planted = []
    for i in range(300):
        v = base[i]
        for b in rng.choice(64, rng.integers(1, 7), replace=False):
            v ^= np.uint64(1) << np.uint64(b)
        planted.append(v)
    hashes = np.concatenate([base, planted, base[:5], np.zeros(50, np.uint64)])   # repeats and a blank group
    for k in (0, 3, 6):
        edges, dist = near_pairs(hashes, k)
        assert (dist <= k).all()
        # same connected components as all pairs within k
        from corpusforge.clusters import clusters
        got = clusters(edges, len(hashes))
        want = clusters(brute_force_pairs(hashes, k), len(hashes))
        assert np.array_equal(got.members, want.members) and np.array_equal(got.rep, want.rep)
    edges, _ = near_pairs(hashes, 6)
    found = {tuple(e) for e in edges.tolist()}
    assert all((i, 3000 + i) in found for i in range(300))          # every planted pair, directly
    assert len(edges) < 450                                           # 50 blank hashes: a star, not 1225 pairs


def test_near_pairs_any_block_count_finds_all():
    rng = np.random.default_rng(4)
    hashes = rng.integers(0, 2**63, 2000, dtype=np.uint64)
    hashes = np.concatenate([hashes, hashes[:200] ^ np.uint64(0b1011)])
    want = {tuple(p) for p in brute_force_pairs(hashes, 4).tolist()}
    for m in (5, 8, 12):
        edges, _ = near_pairs(hashes, 4, m)
        assert {tuple(e) for e in edges.tolist()} == want
    with pytest.raises(ValueError, match="blocks"):
        near_pairs(hashes, 4, 4)


# --- near-duplicate removal -------------------------------------------------------------------

def dedup_run(table, tmp_path, **cfg):
    stage = ImageNearDedup(ImageNearDedup.Config(**cfg))
    fp = stage.fingerprint(table)
    fp = fp.append_column("unit", pa.array(np.zeros(table.num_rows, np.int32))).append_column(
        "row", pa.array(np.arange(table.num_rows)))
    pq.write_table(fp, tmp_path / "fp.parquet")
    stats = StageStats()
    stage.resolve([tmp_path / "fp.parquet"], tmp_path, stats)
    return stage.filter(table, 0, 0, tmp_path, stats), stats


def test_dedup_finds_variants_of_real_photos_and_keeps_different_ones(tmp_path):
    items = []
    for name in DISTINCT:
        im = photo(name)
        items.append((encode(im), f"{name}.jpg"))
        for var, data in variants(im).items():
            items.append((data, f"{name}_{var}.jpg"))
    out, stats = dedup_run(image_table(items), tmp_path, flip_invariant=True)
    kept = out.kept.column("src_path").to_pylist()
    # one image per photo survives, and it is the full-size one (the largest; ties: earliest)
    assert sorted(kept) == sorted(f"{n}.jpg" for n in DISTINCT), kept
    assert stats.counters["clusters"] == len(DISTINCT)
    rej = out.rejected.to_pylist()
    assert len(rej) == len(DISTINCT) * 6 and {r["reject_reason"] for r in rej} == {"near_duplicate"}
    ids = {r["src_path"]: r["id"] for r in image_table(items).to_pylist()}
    for r in rej:
        owner = next(n for n in DISTINCT if r["src_path"].startswith(n + "_"))
        assert r["tag_image_cluster"] == ids[f"{owner}.jpg"]
        assert f"near-duplicate of {ids[f'{owner}.jpg']} ({owner}.jpg)" in r["reject_detail"]
        assert "SSIM" in r["reject_detail"] and "Hamming" in r["reject_detail"]


def test_dedup_without_flip_keeps_mirrors_and_verification_rejects(tmp_path):
    im = photo("coffee")
    table = image_table([(encode(im), "a.jpg"), (variants(im)["mirror"], "m.jpg"), (encode(im, quality=40), "q.jpg")])
    out, _ = dedup_run(table, tmp_path)
    assert sorted(out.kept.column("src_path").to_pylist()) == ["a.jpg", "m.jpg"]
    # an SSIM threshold above what a q40 copy reaches rejects the candidate pair: nothing merged
    out, stats = dedup_run(table, tmp_path, min_ssim=0.9999)
    assert out.rejected.num_rows == 0 and stats.counters["rejected_by_ssim"] >= 1
    # histogram verification as well
    out, stats = dedup_run(table, tmp_path, verify=["ssim", "histogram"])
    assert out.rejected.column("src_path").to_pylist() == ["q.jpg"]


@pytest.mark.parametrize("hash_name", ["phash", "ahash", "whash"])
def test_dedup_other_hashes(tmp_path, hash_name):
    items = [(encode(photo(n)), f"{n}.jpg") for n in ("astronaut", "camera", "rocket")]
    items.append((encode(photo("camera"), quality=30), "camera_q30.jpg"))
    out, _ = dedup_run(image_table(items), tmp_path, hash=hash_name, max_distance=8)
    assert out.rejected.column("src_path").to_pylist() == ["camera_q30.jpg"]


def test_dedup_rejects_undecodable_and_picks_sharper_of_equal_size(tmp_path):
    im = photo("chelsea")
    table = image_table([(blurred(im, 0.8), "soft.png"), (encode(im, "PNG"), "sharp.png"), (b"garbage", "bad.png")])
    table, _ = run(Quality(Quality.Config(min_sharpness=None)), table)
    table = pa.concat_tables([table.kept, table.rejected.drop_columns(["reject_reason", "reject_detail"])])
    out, _ = dedup_run(table, tmp_path)
    assert out.kept.column("src_path").to_pylist() == ["sharp.png"]
    rej = dict(zip(out.rejected.column("src_path").to_pylist(), out.rejected.column("reject_reason").to_pylist()))
    assert rej == {"soft.png": "near_duplicate", "bad.png": "decode_error"}


# --- augmentation -----------------------------------------------------------------------------

def test_augment_every_op_deterministic_and_linked():
    ops = ["hflip", "vflip", "rotate", "scale", "translate", "crop", "color_jitter", "noise", "blur",
           "cutmix", "mixup", "mosaic", "randaugment"]
    names = ("astronaut", "coffee", "rocket", "chelsea")
    table = image_table([(encode(photo(n).resize((160, 120))), f"{n}.jpg") for n in names], labels=list(names))
    stage = ImageAugment(ImageAugment.Config(ops=ops, seed=7))
    out, stats = run(stage, table)
    assert out.kept.num_rows == 4 + 4 * len(ops) and out.created == 4 * len(ops)
    again, _ = run(ImageAugment(ImageAugment.Config(ops=ops, seed=7)), table)
    assert again.kept.column("image").to_pylist() == out.kept.column("image").to_pylist()
    other, _ = run(ImageAugment(ImageAugment.Config(ops=ops, seed=8)), table)
    assert other.kept.column("image").to_pylist()[4:] != out.kept.column("image").to_pylist()[4:]
    new = out.kept.to_pylist()[4:]
    parents = {r["id"]: r for r in table.to_pylist()}
    originals = {r["id"]: np.asarray(Image.open(io.BytesIO(r["image"])).convert("RGB"), np.int16) for r in parents.values()}
    for r in new:
        assert r["tag_augment_parent"] in parents and r["tag_augment_op"] in ops
        im = Image.open(io.BytesIO(r["image"]))
        assert im.size == (160, 120) == (r["width"], r["height"]) and r["format"] == "JPEG"
        meta = json.loads(r["meta"])
        assert meta["augment"]["op"] == r["tag_augment_op"]
        if r["tag_augment_op"] in ("cutmix", "mixup", "mosaic"):
            weights = meta["label_weights"]
            assert abs(sum(weights.values()) - 1) < 1e-4 and r["label"] == max(weights, key=weights.get)
            assert len(meta["augment"]["parents"]) == (4 if r["tag_augment_op"] == "mosaic" else 2)
        else:
            assert r["label"] == parents[r["tag_augment_parent"]]["label"]
        if r["tag_augment_op"] == "hflip":     # exactly the mirror, up to JPEG
            diff = np.abs(np.asarray(im.convert("RGB"), np.int16) - originals[r["tag_augment_parent"]][:, ::-1])
            assert diff.mean() < 4
    assert all(stats.counters[f"created_{op}"] == 4 for op in ops)


def test_augment_label_weights_follow_areas():
    a = Image.new("RGB", (100, 100), (255, 0, 0))
    b = Image.new("RGB", (100, 100), (0, 0, 255))
    table = image_table([(encode(a, "PNG"), "a.png"), (encode(b, "PNG"), "b.png")], labels=["red", "blue"])
    out, _ = run(ImageAugment(ImageAugment.Config(ops=["cutmix", "mixup"], seed=1)), table)
    for r in out.kept.to_pylist()[2:]:
        px = np.asarray(Image.open(io.BytesIO(r["image"])).convert("RGB"), np.float64)
        own = "red" if r["tag_augment_parent"] == table.column("id")[0].as_py() else "blue"
        share_red = px[..., 0].mean() / 255
        weights = json.loads(r["meta"])["label_weights"]
        assert abs(weights.get("red", 0) - share_red) < 0.02, (r["tag_augment_op"], weights, share_red)
        assert set(weights) <= {"red", "blue"} and own in weights


def test_randaugment_magnitude_zero_is_nearly_identity():
    im = photo("astronaut").resize((128, 128))
    stage = ImageAugment(ImageAugment.Config(ops=["randaugment"], randaugment_m=0))
    rng = np.random.default_rng(0)
    for name in RANDAUGMENT_OPS:
        if name in ("autocontrast", "equalize", "posterize", "solarize"):
            continue            # no magnitude (or a magnitude-0 that is still a change)
        out = stage.randaugment_op(name, im, 0.0, rng)
        assert np.abs(np.asarray(out, np.int16) - np.asarray(im, np.int16)).mean() < 1.0, name


def test_augment_config_errors_name_field():
    with pytest.raises(Exception, match="scale_min"):
        ImageAugment.Config(ops=["scale"], scale_min=1.5, scale_max=1.0)
    with pytest.raises(Exception, match="ops"):
        ImageAugment.Config(ops=["sharpen_everything"])


# --- the demo pipeline ------------------------------------------------------------------------

def test_demo_image_pipeline(tmp_path):
    import yaml

    cfg = yaml.safe_load((SAMPLES / "configs" / "demo_images.yaml").read_text())
    cfg["inputs"][0]["paths"] = [str(SAMPLES / "images")]
    cfg["output"]["path"] = str(tmp_path / "out")
    runner.run(cfg)
    stats = json.loads((tmp_path / "out" / "_stats.json").read_text())
    text = json.dumps(stats)
    for reason in ("truncated_image", "empty_file", "corrupt_image", "animated", "low_resolution", "low_contrast",
                   "blurry", "near_duplicate"):
        assert reason in text, reason
    assert '"clusters": 1' in text
    files = len(list((SAMPLES / "images").iterdir()))
    assert stats["read"]["files"] == files
    rejected = pq.read_table(list((tmp_path / "out" / "_rejected").glob("*.parquet")))
    kept = pq.read_table(list((tmp_path / "out").glob("*.parquet")))
    originals = kept.filter(pa.compute.is_null(kept.column("tag_augment_parent")))
    assert originals.num_rows + rejected.num_rows == files
    names = {Path(p).name for p in rejected.column("src_path").to_pylist()}
    assert {"photo_00_q40.jpg", "photo_00_mirror.jpg", "truncated.jpg", "zero_bytes.jpg"} <= names


def test_dedup_embedding_verification(tmp_path):
    im = photo("astronaut")
    table = image_table([(encode(im), "a.jpg"), (encode(im, quality=40), "b.jpg"), (encode(im, quality=30), "c.jpg")])
    table = table.append_column("features", pa.array([[1.0, 0.0], [0.99, 0.05], [0.0, 1.0]], pa.list_(pa.float32())))
    out, stats = dedup_run(table, tmp_path, verify=["ssim", "embedding"], embedding_column="features")
    assert out.rejected.column("src_path").to_pylist() == ["b.jpg"]      # c's features disagree
    assert stats.counters["rejected_by_embedding"] >= 1
    with pytest.raises(KeyError, match="embedding_column"):
        dedup_run(table, tmp_path, verify=["embedding"])


def test_dedup_across_units_matches_one_unit(tmp_path):
    """Map, reduce, map over several units (one file each) finds the same clusters as one unit."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("astronaut", "camera", "coffee"):
        im = photo(name)
        (folder / f"{name}.jpg").write_bytes(encode(im))
        (folder / f"{name}_small.jpg").write_bytes(variants(im)["resized_half"])
    results = {}
    for label, unit_bytes in (("one", 1 << 30), ("many", 1)):
        cfg = {"name": "d", "kind": "image", "unit_bytes": unit_bytes,
               "inputs": [{"format": "images", "paths": [str(folder)], "source": "s"}],
               "stages": [{"stage": "image.near_dedup"}], "output": {"path": str(tmp_path / label)}}
        runner.run(cfg)
        kept = pq.read_table(list((tmp_path / label).glob("*.parquet")))
        results[label] = sorted(Path(p).name for p in kept.column("src_path").to_pylist())
    assert results["one"] == results["many"] == ["astronaut.jpg", "camera.jpg", "coffee.jpg"]


def test_dedup_prefers_colour_over_a_larger_greyscale_copy(tmp_path):
    from PIL import Image

    im = photo("astronaut")
    grey_big = im.convert("L").convert("RGB").resize((im.width * 2, im.height * 2))   # more pixels, no colour
    table = image_table([(encode(grey_big), "grey_big.jpg"), (encode(im), "colour.jpg"),
                         (encode(im.resize((im.width // 2, im.height // 2), Image.Resampling.LANCZOS)), "colour_small.jpg")])
    out, _ = dedup_run(table, tmp_path)
    assert out.kept.column("src_path").to_pylist() == ["colour.jpg"]      # colour first, then the larger colour one
