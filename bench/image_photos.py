"""Real photographs from scikit-image and the near-duplicate variants the image benchmarks and
tests make of them (resize, JPEG re-encode, crop, brightness, mirror, blur)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

# skimage.data images bundled with the wheel (no download). 'cat' is 'chelsea' again: left out.
PHOTOS = ("astronaut", "camera", "chelsea", "coffee", "clock", "coins", "horse", "hubble_deep_field",
          "immunohistochemistry", "moon", "page", "retina", "rocket", "text", "brick", "grass", "gravel",
          "cell", "colorwheel", "logo", "motorcycle")


def photo(name: str) -> Image.Image:
    import skimage.data as data

    a = data.stereo_motorcycle()[0] if name == "motorcycle" else getattr(data, name)()
    if a.dtype != np.uint8:
        a = (a.astype(np.float64) / max(1, a.max()) * 255).astype(np.uint8)
    im = Image.fromarray(a)
    return im.convert("RGB") if im.mode == "RGBA" else im


def encode(im: Image.Image, fmt: str = "JPEG", quality: int = 92) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **({"quality": quality} if fmt in ("JPEG", "WEBP") else {}))
    return buf.getvalue()


def variants(im: Image.Image) -> dict[str, bytes]:
    """Near-duplicates of one photo, encoded."""
    w, h = im.size
    cw, ch = int(w * 0.02), int(h * 0.02)
    return {
        "resized_half": encode(im.resize((w // 2, h // 2), Image.Resampling.LANCZOS)),
        "jpeg_q20": encode(im, quality=20),
        "crop_2pct": encode(im.crop((cw, ch, w - cw, h - ch))),
        "brighter": encode(ImageEnhance.Brightness(im).enhance(1.25)),
        "png": encode(im, "PNG"),
        "mirror": encode(im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
    }


def blurred(im: Image.Image, sigma: float) -> bytes:
    return encode(im.filter(ImageFilter.GaussianBlur(sigma)), "PNG")
