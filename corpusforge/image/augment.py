"""``image.augment``: offline augmentation; every op makes one new record per input image.

Deterministic: each new image's randomness is seeded by (seed, parent id, op slot, op), and
partners of the multi-image ops are drawn from the same batch with that seed, so the same
input and config give the same bytes. New records keep their parent's ``source`` and
provenance, get a new ``id``, ``tag_augment_parent`` (the parent's id) and ``tag_augment_op``;
``meta.augment`` records the op and the parameters drawn. Scores of earlier stages are null on
new records (they were not measured). Inputs are passed through unchanged.

| op | what (config) |
|---|---|
| ``hflip`` / ``vflip`` | mirror left-right / top-bottom |
| ``rotate`` | by a uniform angle in [-``max_rotate``, ``max_rotate``] degrees, canvas kept, corners filled with ``fill`` |
| ``scale`` | zoom about the centre by a factor in [``scale_min``, ``scale_max``], canvas kept |
| ``translate`` | shift by up to ``max_translate`` x width / height |
| ``crop`` | random resized crop: area share in [``crop_min_area``, 1], aspect ratio in [3/4, 4/3] (log-uniform), resized back to the input size |
| ``color_jitter`` | brightness, contrast, saturation factors in [1 - x, 1 + x], hue shifted by up to ``hue`` of the circle |
| ``noise`` | additive Gaussian noise, sigma uniform in (0, ``noise_std``] (0..255 scale) |
| ``blur`` | Gaussian blur, sigma uniform in [``blur_min``, ``blur_max``] |
| ``cutmix`` | a box of a partner image pasted in; box area 1 - lambda, lambda ~ Beta(``cutmix_alpha``, ``cutmix_alpha``) |
| ``mixup`` | lambda x image + (1 - lambda) x partner, lambda ~ Beta(``mixup_alpha``, ``mixup_alpha``) |
| ``mosaic`` | four images (this one and three partners) in the quadrants around a random centre in the middle half, each resized to its quadrant |
| ``randaugment`` | ``randaugment_n`` ops drawn from the 14 of RandAugment (Cubuk et al. 2020) at magnitude ``randaugment_m`` of 30 |

Labels: a multi-image op mixes the records' ``label`` in proportion to the area (cutmix,
mosaic) or blend weight (mixup): ``meta.label_weights`` holds them, and ``label`` is the
heaviest. Partners are resized to the input's size; the new image has the input's size and
mode (RGB for multi-image ops). Encoded as the parent's format (PNG for GIF/BMP/TIFF), or
``format``, at ``quality``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Literal

import numpy as np
import pyarrow as pa
import xxhash
from PIL import Image, ImageEnhance, ImageFilter, ImageOps
from pydantic import Field, model_validator

from corpusforge.image.decode import ImageProblem, analysis_image, encode
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, empty_rejected

Op = Literal["hflip", "vflip", "rotate", "scale", "translate", "crop", "color_jitter", "noise", "blur",
             "cutmix", "mixup", "mosaic", "randaugment"]
PARTNERS = {"cutmix": 1, "mixup": 1, "mosaic": 3}
RANDAUGMENT_OPS = ("identity", "shear_x", "shear_y", "translate_x", "translate_y", "rotate", "brightness", "color",
                   "contrast", "sharpness", "posterize", "solarize", "autocontrast", "equalize")


class AugmentConfig(StageConfig):
    ops: list[Op] = Field(min_length=1)
    max_rotate: float = Field(15.0, ge=0, le=180)
    scale_min: float = Field(0.8, gt=0)
    scale_max: float = Field(1.2, gt=0)
    max_translate: float = Field(0.1, ge=0, lt=1)
    crop_min_area: float = Field(0.5, gt=0, le=1)
    brightness: float = Field(0.4, ge=0, lt=1)
    contrast: float = Field(0.4, ge=0, lt=1)
    saturation: float = Field(0.4, ge=0, lt=1)
    hue: float = Field(0.05, ge=0, le=0.5)
    noise_std: float = Field(10.0, gt=0)
    blur_min: float = Field(0.5, gt=0)
    blur_max: float = Field(2.0, gt=0)
    cutmix_alpha: float = Field(1.0, gt=0)
    mixup_alpha: float = Field(0.4, gt=0)
    randaugment_n: int = Field(2, ge=1, le=14)
    randaugment_m: float = Field(9, ge=0, le=30)
    fill: tuple[int, int, int] = Field((0, 0, 0), description="RGB for uncovered corners after rotation/shift.")
    format: Literal["same", "JPEG", "PNG", "WEBP"] = "same"
    quality: int = Field(90, ge=1, le=100)
    seed: int = 0

    @model_validator(mode="after")
    def _ranges(self):
        if self.scale_min > self.scale_max:
            raise ValueError(f"scale_min {self.scale_min} > scale_max {self.scale_max}")
        if self.blur_min > self.blur_max:
            raise ValueError(f"blur_min {self.blur_min} > blur_max {self.blur_max}")
        return self


def affine(im: Image.Image, angle: float = 0.0, scale: float = 1.0, tx: float = 0.0, ty: float = 0.0,
           shear_x: float = 0.0, shear_y: float = 0.0, fill=(0, 0, 0)) -> Image.Image:
    """Rotate (degrees, counter-clockwise), zoom, shear and shift (pixels) about the centre in one
    resampling, canvas size kept."""
    w, h = im.size
    a = np.radians(angle)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    m = rot @ np.array([[1.0, shear_x], [shear_y, 1.0]]) * scale          # forward map about the centre
    inv = np.linalg.inv(m)
    c = np.array([w / 2, h / 2])
    offset = c - inv @ (c + np.array([tx, ty]))                           # output -> input coordinates
    coeffs = (inv[0, 0], inv[0, 1], offset[0], inv[1, 0], inv[1, 1], offset[1])
    fillcolor = fill if im.mode == "RGB" else int(np.mean(fill))
    return im.transform((w, h), Image.Transform.AFFINE, coeffs, resample=Image.Resampling.BILINEAR, fillcolor=fillcolor)


class ImageAugment(Stage):
    name = "image.augment"
    kinds = ("image",)
    Config = AugmentConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_augment_parent": pa.string(), "tag_augment_op": pa.string()}

    # -- single-image ops ---------------------------------------------------------------------
    def single(self, op: str, im: Image.Image, rng: np.random.Generator) -> tuple[Image.Image, dict]:
        c: AugmentConfig = self.config
        w, h = im.size
        if op == "hflip":
            return im.transpose(Image.Transpose.FLIP_LEFT_RIGHT), {}
        if op == "vflip":
            return im.transpose(Image.Transpose.FLIP_TOP_BOTTOM), {}
        if op == "rotate":
            angle = rng.uniform(-c.max_rotate, c.max_rotate)
            return affine(im, angle=angle, fill=c.fill), {"angle": round(angle, 3)}
        if op == "scale":
            s = rng.uniform(c.scale_min, c.scale_max)
            return affine(im, scale=s, fill=c.fill), {"scale": round(s, 4)}
        if op == "translate":
            tx, ty = rng.uniform(-c.max_translate, c.max_translate, 2) * (w, h)
            return affine(im, tx=tx, ty=ty, fill=c.fill), {"tx": round(tx, 2), "ty": round(ty, 2)}
        if op == "crop":
            for _ in range(10):      # as RandomResizedCrop: retry until the box fits
                area = rng.uniform(c.crop_min_area, 1.0) * w * h
                ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
                cw, ch = int(round(np.sqrt(area * ratio))), int(round(np.sqrt(area / ratio)))
                if 0 < cw <= w and 0 < ch <= h:
                    break
            else:
                cw, ch = w, h
            x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            box = (x0, y0, x0 + cw, y0 + ch)
            return im.resize((w, h), Image.Resampling.BILINEAR, box=box), {"box": list(box)}
        if op == "color_jitter":
            b, ct, s = (rng.uniform(1 - x, 1 + x) for x in (c.brightness, c.contrast, c.saturation))
            hue = rng.uniform(-c.hue, c.hue)
            out = ImageEnhance.Contrast(ImageEnhance.Brightness(im).enhance(b)).enhance(ct)
            if out.mode == "RGB":
                out = ImageEnhance.Color(out).enhance(s)
                hsv = np.asarray(out.convert("HSV")).copy()
                hsv[..., 0] = (hsv[..., 0].astype(np.int16) + int(round(hue * 255))) % 256
                out = Image.fromarray(hsv, "HSV").convert("RGB")
            return out, {"brightness": round(b, 4), "contrast": round(ct, 4), "saturation": round(s, 4), "hue": round(hue, 4)}
        if op == "noise":
            sigma = rng.uniform(0, c.noise_std) or c.noise_std
            a = np.asarray(im, np.float32)
            a = np.clip(a + rng.normal(0, sigma, a.shape).astype(np.float32), 0, 255).astype(np.uint8)
            return Image.fromarray(a, im.mode), {"sigma": round(sigma, 3)}
        if op == "blur":
            sigma = rng.uniform(c.blur_min, c.blur_max)
            return im.filter(ImageFilter.GaussianBlur(sigma)), {"sigma": round(sigma, 3)}
        if op == "randaugment":
            names = [RANDAUGMENT_OPS[int(k)] for k in rng.integers(0, len(RANDAUGMENT_OPS), c.randaugment_n)]
            for name in names:
                im = self.randaugment_op(name, im, c.randaugment_m / 30.0, rng)
            return im, {"ops": names, "magnitude": c.randaugment_m}
        raise AssertionError(op)

    def randaugment_op(self, name: str, im: Image.Image, m: float, rng: np.random.Generator) -> Image.Image:
        """One RandAugment op at magnitude m in [0, 1] (of the paper's 30), a random sign where
        the op has one; ranges as in the paper and torchvision."""
        sign = 1.0 if rng.random() < 0.5 else -1.0
        w, h = im.size
        fill = self.config.fill
        if name == "identity":
            return im
        if name == "shear_x":
            return affine(im, shear_x=sign * 0.3 * m, fill=fill)
        if name == "shear_y":
            return affine(im, shear_y=sign * 0.3 * m, fill=fill)
        if name == "translate_x":
            return affine(im, tx=sign * 0.45 * m * w, fill=fill)
        if name == "translate_y":
            return affine(im, ty=sign * 0.45 * m * h, fill=fill)
        if name == "rotate":
            return affine(im, angle=sign * 30.0 * m, fill=fill)
        if name in ("brightness", "color", "contrast", "sharpness"):
            enhancer = {"brightness": ImageEnhance.Brightness, "color": ImageEnhance.Color,
                        "contrast": ImageEnhance.Contrast, "sharpness": ImageEnhance.Sharpness}[name]
            return enhancer(im).enhance(1.0 + sign * 0.9 * m)
        if name == "posterize":
            return ImageOps.posterize(im, max(1, 8 - int(4 * m)))
        if name == "solarize":
            return ImageOps.solarize(im, int(255 * (1 - m)))
        if name == "autocontrast":
            return ImageOps.autocontrast(im)
        if name == "equalize":
            return ImageOps.equalize(im)
        raise AssertionError(name)

    # -- multi-image ops ----------------------------------------------------------------------
    def multi(self, op: str, im: Image.Image, partners: list[Image.Image], rng: np.random.Generator
              ) -> tuple[Image.Image, list[float], dict]:
        """The new image, the weight of [self] + partners, and the parameters drawn."""
        c: AugmentConfig = self.config
        im = im.convert("RGB")
        w, h = im.size
        others = [p.convert("RGB").resize((w, h), Image.Resampling.BILINEAR) for p in partners]
        if op == "mixup":
            lam = float(rng.beta(c.mixup_alpha, c.mixup_alpha))
            return Image.blend(others[0], im, lam), [lam, 1 - lam], {"lambda": round(lam, 4)}
        if op == "cutmix":
            lam = float(rng.beta(c.cutmix_alpha, c.cutmix_alpha))
            cut = np.sqrt(1 - lam)
            bw, bh = int(w * cut), int(h * cut)
            cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
            x0, y0 = max(0, cx - bw // 2), max(0, cy - bh // 2)
            x1, y1 = min(w, cx + bw // 2), min(h, cy + bh // 2)
            out = im.copy()
            if x1 > x0 and y1 > y0:
                out.paste(others[0].crop((x0, y0, x1, y1)), (x0, y0))
            share = (x1 - x0) * (y1 - y0) / (w * h)        # the weights follow the box as clipped
            return out, [1 - share, share], {"box": [x0, y0, x1, y1]}
        if op == "mosaic":
            cx = int(rng.uniform(0.25, 0.75) * w)
            cy = int(rng.uniform(0.25, 0.75) * h)
            out = Image.new("RGB", (w, h))
            boxes = [(0, 0, cx, cy), (cx, 0, w, cy), (0, cy, cx, h), (cx, cy, w, h)]
            weights = []
            for tile, (x0, y0, x1, y1) in zip([im] + others, boxes):
                if x1 > x0 and y1 > y0:
                    out.paste(tile.resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR), (x0, y0))
                weights.append((x1 - x0) * (y1 - y0) / (w * h))
            return out, weights, {"centre": [cx, cy]}
        raise AssertionError(op)

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        c: AugmentConfig = self.config
        n = table.num_rows
        ids = table.column("id").to_pylist()
        labels = table.column("label").to_pylist()
        formats = table.column("format").to_pylist()
        metas = table.column("meta").to_pylist()
        data = table.column("image").to_pylist()
        decoded: dict[int, Image.Image | None] = {}

        def image(i: int) -> Image.Image | None:
            if i not in decoded:
                try:
                    decoded[i] = analysis_image(data[i] or b"")
                except ImageProblem:
                    decoded[i] = None
            return decoded[i]

        new = defaultdict(list)
        for i in range(n):
            if image(i) is None:
                stats.counters["undecodable_skipped"] += 1
                continue
            for slot, op in enumerate(c.ops):
                rng = np.random.default_rng(xxhash.xxh64_intdigest(f"{c.seed}\0{ids[i]}\0{slot}\0{op}".encode()))
                meta = json.loads(metas[i]) if metas[i] else {}
                if op in PARTNERS:
                    pool = [j for j in range(n) if j != i]
                    if not pool:
                        stats.counters[f"no_partner_{op}"] += 1
                        continue
                    picks = [pool[int(k)] for k in rng.integers(0, len(pool), PARTNERS[op])]
                    partners = [image(j) for j in picks]
                    if any(p is None for p in partners):
                        stats.counters[f"no_partner_{op}"] += 1
                        continue
                    out, weights, params = self.multi(op, image(i), partners, rng)
                    group = [i] + picks
                    meta["augment"] = {"op": op, **params, "parents": [ids[j] for j in group]}
                    mixed = defaultdict(float)
                    for j, wgt in zip(group, weights):
                        if labels[j] is not None:
                            mixed[labels[j]] += wgt
                    label = labels[i]
                    if mixed:
                        meta["label_weights"] = {k: round(v, 6) for k, v in sorted(mixed.items())}
                        label = max(sorted(mixed), key=lambda k: mixed[k])
                else:
                    out, params = self.single(op, image(i), rng)
                    meta["augment"] = {"op": op, **params}
                    label = labels[i]
                fmt = formats[i] if c.format == "same" and formats[i] in ("JPEG", "PNG", "WEBP") else \
                    ("PNG" if c.format == "same" else c.format)
                payload = encode(out, fmt, c.quality)
                new["parent"].append(i)
                new["id"].append(xxhash.xxh3_128_hexdigest(f"{ids[i]}\0{slot}\0{op}\0{c.seed}".encode()))
                new["image"].append(payload)
                new["format"].append(fmt)
                new["width"].append(out.size[0])
                new["height"].append(out.size[1])
                new["mode"].append(out.mode)
                new["content_hash"].append(xxhash.xxh3_128_hexdigest(payload))
                new["label"].append(label)
                new["meta"].append(json.dumps(meta, sort_keys=True))
                new["tag_augment_parent"].append(ids[i])
                new["tag_augment_op"].append(op)
                stats.counters[f"created_{op}"] += 1
        table = table.append_column("tag_augment_parent", pa.nulls(n, pa.string())) \
                     .append_column("tag_augment_op", pa.nulls(n, pa.string()))
        if not new:
            return StageResult(table, empty_rejected(table))
        parents = pa.array(new.pop("parent"), pa.int64())
        derived = table.drop_columns(["image"]).take(parents)
        cols = {}
        for f in table.schema:
            if f.name in new:
                cols[f.name] = pa.array(new[f.name], f.type)
            elif f.name in ("source", "src_path", "src_row"):
                cols[f.name] = derived.column(f.name)
            else:
                cols[f.name] = pa.nulls(derived.num_rows, f.type)
        out = pa.concat_tables([table, pa.table(cols, schema=table.schema)])
        return StageResult(out, empty_rejected(out), created=derived.num_rows)
