"""``image.quality``: low-quality removal by configurable rules, each with a score on the record.

Every image larger than a working size (``working_pixels``, about 256 x 256, aspect kept) is
shrunk to it first (OpenCV's area interpolation; a JPEG of more than 16 working sizes is first
decoded at a DCT-scaled draft, with a 4x-per-side margin because DCT scaling smooths more than
an area resize), so scores and thresholds do not depend on the image's resolution: the
sharpness of a 4x enlargement is 0.81 to 1.24 times the photo's on scikit-image's photos, PNG
and JPEG alike. Smaller images are measured as they are (never interpolated up, which would
blur what is measured); the resolution rule is the one for them. Scores are written for every
row; the first failing rule, in the order below, is the reject reason, and its detail names
the score and the threshold. A rule whose threshold is ``null`` only scores.

| rule | score column | reason |
|---|---|---|
| resolution: ``min_width``, ``min_height``, ``min_pixels`` | (width, height) | ``low_resolution`` |
| aspect: ``max_aspect_ratio`` (long side / short side) | ``score_image_aspect`` | ``extreme_aspect_ratio`` |
| under-exposure: ``max_dark_share``, ``min_brightness`` | ``score_image_dark_share`` (share of pixels <= ``dark_level``), ``score_image_brightness`` (mean grey / 255) | ``underexposed`` |
| over-exposure: ``max_bright_share``, ``max_brightness`` | ``score_image_bright_share`` (share >= ``bright_level``) | ``overexposed`` |
| contrast: ``min_contrast`` | ``score_image_contrast``: RMS contrast, std of grey / 255 | ``low_contrast`` |
| blur: ``min_sharpness`` | ``score_image_sharpness``: variance of the Laplacian (OpenCV, 3x3) of the grey image at the working size, intensities in 0..255 | ``blurry`` |
| hooks (watermark, ads, ...): ``hooks`` | ``score_image_<name>`` | ``<name>`` |

Defaults are calibrated on scikit-image's images (``bench/bench_image_quality.py``, table in
bench/RESULTS.md): all of its photographs pass, a night sky, a black-background silhouette and a
low-contrast moon included; of its 21 images only the microscopy ``cell`` and the synthetic
``colorwheel`` fail (sharpness below 10: almost no edges). Uniform images, banners, an 8x
darkening of most photos and a 3x brightening of bright ones fail. Sharpness is relative by
nature: a Gaussian blur of sigma 2 divides it by 3 to 100, but the absolute default (10) only
catches strong blur on detailed photos; raise ``min_sharpness`` for a corpus of sharp photos,
lower it for microscopy, medical or remote-sensing sets, and read the score histograms in the
run report before choosing.

A hook is ``module:function`` taking a list of RGB ``uint8`` arrays (working size) and the
batch's Arrow table, and returning one float per image; an image is rejected with the
hook's name as the reason when its score is at least the hook's ``threshold``.
"""

from __future__ import annotations

from typing import Callable

import cv2
import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from corpusforge.errors import ConfigError
from corpusforge.image.decode import DEFAULT_MAX_PIXELS, ImageProblem, analysis_image, rgb_array
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split


class HookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Score column score_image_<name> and reject reason.")
    function: str = Field(description="module:function(images: list[np.ndarray], table: pa.Table) -> list[float]")
    threshold: float | None = Field(0.5, description="Reject when the score is >= this; null only scores.")


class QualityConfig(StageConfig):
    working_pixels: int = Field(65_536, ge=1024, description="Images are analysed resized to about this many pixels.")
    min_width: int | None = Field(64, ge=1)
    min_height: int | None = Field(64, ge=1)
    min_pixels: int | None = Field(None, ge=1)
    max_aspect_ratio: float | None = Field(4.0, ge=1)
    min_sharpness: float | None = Field(10.0, ge=0, description="Variance of the Laplacian at the working size.")
    dark_level: int = Field(10, ge=0, le=254)
    bright_level: int = Field(245, ge=1, le=255)
    max_dark_share: float | None = Field(0.7, ge=0, le=1)
    min_brightness: float | None = Field(0.06, ge=0, le=1)
    max_bright_share: float | None = Field(0.7, ge=0, le=1)
    max_brightness: float | None = Field(0.9, ge=0, le=1)
    min_contrast: float | None = Field(0.02, ge=0, le=1)
    hooks: list[HookConfig] = Field(default_factory=list)
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)


SCORES = ("aspect", "sharpness", "brightness", "dark_share", "bright_share", "contrast")


def image_scores(grey: np.ndarray) -> dict[str, float]:
    """Sharpness, exposure and contrast of an 8-bit grey image already at the working size."""
    g = grey.astype(np.float32)
    return {
        "sharpness": float(cv2.Laplacian(g, cv2.CV_32F, ksize=1).var()),
        "brightness": float(g.mean() / 255.0),
        "contrast": float(g.std() / 255.0),
    }


def working_size(w: int, h: int, pixels: int) -> tuple[int, int]:
    scale = (pixels / (w * h)) ** 0.5
    return max(1, round(w * scale)), max(1, round(h * scale))


class Quality(Stage):
    name = "image.quality"
    kinds = ("image",)
    Config = QualityConfig

    def __init__(self, config=None, *, seed: int = 0):
        super().__init__(config, seed=seed)
        self._hooks: list[tuple[HookConfig, Callable]] = [(h, _import_hook(h)) for h in self.config.hooks]

    def output_columns(self) -> dict[str, pa.DataType]:
        cols = {f"score_image_{s}": pa.float64() for s in SCORES}
        cols.update({f"score_image_{h.name}": pa.float64() for h in self.config.hooks})
        return cols

    def analyse(self, data: bytes) -> tuple[dict[str, float], np.ndarray]:
        c: QualityConfig = self.config
        # a JPEG draft (DCT scaling) smooths more than an area resize: keep 4x per side of margin
        im = analysis_image(data, min_pixels=16 * c.working_pixels, max_pixels=c.max_pixels, box_reduce=False)
        w, h = im.size
        rgb = rgb_array(im)
        if w * h > c.working_pixels:       # only ever shrink: interpolating up would blur what it measures
            rgb = cv2.resize(rgb, working_size(w, h, c.working_pixels), interpolation=cv2.INTER_AREA)
        grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY) if im.mode == "RGB" else rgb[..., 0]
        scores = image_scores(grey)
        scores["dark_share"] = float((grey <= c.dark_level).mean())
        scores["bright_share"] = float((grey >= c.bright_level).mean())
        scores["aspect"] = max(w, h) / min(w, h)
        return scores, rgb

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        n = table.num_rows
        images = table.column("image").to_pylist()
        width = table.column("width").to_pylist()
        height = table.column("height").to_pylist()
        scores = {s: np.full(n, np.nan) for s in SCORES}
        reason, detail, arrays = [None] * n, [None] * n, [None] * n
        for i, data in enumerate(images):
            try:
                sc, arrays[i] = self.analyse(data or b"")
            except ImageProblem as p:
                reason[i], detail[i] = p.reason, p.detail
                continue
            for k, v in sc.items():
                scores[k][i] = v
            reason[i], detail[i] = self.first_failure(sc, width[i], height[i])
        cols = dict(scores)
        for hook, fn in self._hooks:
            idx = [i for i in range(n) if arrays[i] is not None]
            values = np.full(n, np.nan)
            if idx:
                out = np.asarray(fn([arrays[i] for i in idx], table.take(pa.array(idx, pa.int64()))), dtype=np.float64)
                if out.shape != (len(idx),):
                    raise ValueError(f"hook {hook.name} returned {out.shape[0] if out.ndim else 'a scalar'} scores for {len(idx)} images")
                values[idx] = out
            cols[hook.name] = values
            for i in idx:
                if reason[i] is None and hook.threshold is not None and values[i] >= hook.threshold:
                    reason[i], detail[i] = hook.name, f"{hook.name} score {values[i]:.3f} >= {hook.threshold}"
        for name, values in cols.items():
            table = table.append_column(f"score_image_{name}", pa.array(values, pa.float64(), mask=np.isnan(values)))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)

    def first_failure(self, s: dict[str, float], w: int | None, h: int | None) -> tuple[str | None, str | None]:
        c: QualityConfig = self.config
        if w is not None and h is not None:
            if (c.min_width and w < c.min_width) or (c.min_height and h < c.min_height):
                return "low_resolution", f"{w}x{h} below {c.min_width}x{c.min_height}"
            if c.min_pixels and w * h < c.min_pixels:
                return "low_resolution", f"{w * h} pixels < min_pixels {c.min_pixels}"
        # a dark image also has low contrast, and a uniform or dark one no edges: specific reasons first
        checks = (
            ("extreme_aspect_ratio", "aspect", ">", c.max_aspect_ratio),
            ("underexposed", "dark_share", ">", c.max_dark_share),
            ("underexposed", "brightness", "<", c.min_brightness),
            ("overexposed", "bright_share", ">", c.max_bright_share),
            ("overexposed", "brightness", ">", c.max_brightness),
            ("low_contrast", "contrast", "<", c.min_contrast),
            ("blurry", "sharpness", "<", c.min_sharpness),
        )
        for reason, score, op, limit in checks:
            if limit is not None and (s[score] > limit if op == ">" else s[score] < limit):
                return reason, f"{score} {s[score]:.4g} {op} {limit}"
        return None, None


def _import_hook(hook: HookConfig) -> Callable:
    from corpusforge.registry import load_plugin

    try:
        return load_plugin(hook.function, "hook")
    except KeyError as exc:
        raise ConfigError(f"hooks[{hook.name}].function: {exc.args[0]}") from None
