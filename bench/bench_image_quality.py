"""Calibrate ``image.quality`` defaults on scikit-image's images, and check that the scores do
not depend on image size.

For each image: its scores, what the default rules say of it, and of degraded copies (Gaussian
blur sigma 2, darkened 8x, brightened 3x); the sharpness of a 4x enlargement (PNG and JPEG)
relative to the original.

    .venv/bin/python bench/bench_image_quality.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_photos import PHOTOS, blurred, encode, photo  # noqa: E402

from corpusforge.image.quality import Quality  # noqa: E402


def main() -> None:
    q = Quality()

    def verdict(data: bytes, im: Image.Image) -> tuple[dict, str]:
        s, _ = q.analyse(data)
        reason, _ = q.first_failure(s, *im.size)
        return s, reason or "kept"

    print("| image | sharpness | brightness | dark share | bright share | contrast | default | blur 2 | dark /8 | bright x3 | 4x PNG / JPEG sharpness |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in PHOTOS:
        im = photo(name)
        s, v = verdict(encode(im, "PNG"), im)
        _, vb = verdict(blurred(im, 2), im)
        dark = Image.fromarray((np.asarray(im) // 8).astype(np.uint8))
        _, vd = verdict(encode(dark, "PNG"), im)
        _, vo = verdict(encode(ImageEnhance.Brightness(im).enhance(3.0), "PNG"), im)
        big = im.resize((im.width * 4, im.height * 4), Image.Resampling.LANCZOS)
        sp, _ = q.analyse(encode(big, "PNG"))
        sj, _ = q.analyse(encode(big, quality=95))
        print(f"| {name} | {s['sharpness']:.0f} | {s['brightness']:.2f} | {s['dark_share']:.2f} | {s['bright_share']:.2f} "
              f"| {s['contrast']:.3f} | {v} | {vb} | {vd} | {vo} | {sp['sharpness'] / s['sharpness']:.2f} / "
              f"{sj['sharpness'] / s['sharpness']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
