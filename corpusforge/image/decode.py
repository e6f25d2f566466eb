"""Decoding helpers the image stages share: open with limits, orient, and reduce any mode
(alpha, palette, CMYK, 16-bit, float) to 8-bit RGB or grey for analysis.

Analysis (quality scores, hashes, SSIM thumbnails) never needs full resolution, so
:func:`analysis_image` asks Pillow's JPEG decoder for a DCT-scaled draft (1/2, 1/4 or 1/8 of
the size, decoded in a fraction of the time) no smaller than the size the caller needs.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageOps

# Pillow's default limit (it warns above it and refuses above twice it) is ours by default.
# Pillow's check is switched off so that ``max_pixels`` is the one limit: a remote-sensing
# pipeline can raise it past Pillow's 179 M refusal, and every open here goes through
# :func:`open_image`, which checks it from the header before decoding a pixel.
DEFAULT_MAX_PIXELS = 89_478_485
Image.MAX_IMAGE_PIXELS = None


class ImageProblem(Exception):
    """A decoded-bytes problem with a reject reason (``decompression_bomb``, ``decode_error``, ...)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def open_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Open (header only) with a pixel limit checked before any pixel is decoded."""
    if not data:
        raise ImageProblem("empty_image", "0 bytes")
    try:
        im = Image.open(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad headers
        raise ImageProblem("decode_error", f"{type(exc).__name__}: {exc}") from None
    w, h = im.size
    if w <= 0 or h <= 0:
        raise ImageProblem("decode_error", f"image has size {w}x{h}")
    if w * h > max_pixels:
        raise ImageProblem("decompression_bomb", f"{w}x{h} = {w * h} pixels > max_pixels {max_pixels}")
    return im


def load(im: Image.Image) -> Image.Image:
    """Decode every pixel; a truncated or corrupt stream raises ImageProblem."""
    try:
        im.load()
    except OSError as exc:
        reason = "truncated_image" if "truncated" in str(exc) else "decode_error"
        raise ImageProblem(reason, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001
        raise ImageProblem("decode_error", f"{type(exc).__name__}: {exc}") from None
    return im


def to_8bit(im: Image.Image, background: tuple[int, int, int] = (255, 255, 255)) -> Image.Image:
    """Any Pillow mode as 8-bit ``RGB`` or ``L``, alpha flattened onto ``background``.

    16-bit and 32-bit integer images are scaled by their type's range (Pillow's own ``convert``
    would clip 16-bit values at 255), float images by their min..max.
    """
    mode = im.mode
    if mode in ("RGB", "L"):
        return im
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        a = np.asarray(im).astype(np.float64)
        top = 65535.0 if mode.startswith("I;16") or a.max(initial=0) > 255 else 255.0
        return Image.fromarray(np.clip(a / top * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
    if mode == "F":
        a = np.nan_to_num(np.asarray(im, dtype=np.float64))
        lo, hi = a.min(initial=0), a.max(initial=0)
        return Image.fromarray(((a - lo) / (hi - lo or 1) * 255).astype(np.uint8), "L")
    if mode in ("RGBA", "LA", "PA", "La", "RGBa") or (mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, background + (255,))
        return Image.alpha_composite(canvas, rgba).convert("RGB")
    if mode == "1":
        return im.convert("L")
    return im.convert("RGB")      # P, CMYK, YCbCr, LAB, HSV


def has_alpha(im: Image.Image) -> bool:
    return im.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (im.mode == "P" and "transparency" in im.info)


def analysis_image(data: bytes, min_side: int = 0, min_pixels: int = 0, max_pixels: int = DEFAULT_MAX_PIXELS,
                   background: tuple[int, int, int] = (255, 255, 255), box_reduce: bool = True) -> Image.Image:
    """The image as 8-bit RGB or L, EXIF-oriented, alpha flattened, first frame only.

    With ``min_side`` or ``min_pixels``, the image may come back smaller, but never with a side
    under ``min_side`` nor fewer than ``min_pixels`` pixels: a JPEG is decoded at the smallest
    sufficient DCT scale (Pillow's ``draft``), and any image is then box-reduced by the largest
    sufficient integer factor (``Image.reduce``, unless ``box_reduce`` is false), so that the
    conversions after it work on a small image. (A box reduce followed by another resize
    smooths more than one area resize: measurements of sharpness ask for ``box_reduce=False``.)
    """
    im = open_image(data, max_pixels)
    w, h = im.size
    scale = max(min_side / w, min_side / h, (min_pixels / (w * h)) ** 0.5)
    if 0 < scale < 1 and im.format == "JPEG":
        im.draft(im.mode if im.mode in ("RGB", "L") else None, (int(w * scale) + 1, int(h * scale) + 1))
    load(im)
    if box_reduce and 0 < scale < 1 and im.mode in ("RGB", "L", "RGBA", "LA"):
        w, h = im.size
        factor = int(min(w / max(min_side, 1), h / max(min_side, 1), (w * h / max(min_pixels, 1)) ** 0.5))
        if factor >= 2:
            im = im.reduce(factor)
    try:
        im = ImageOps.exif_transpose(im)
    except Exception:  # noqa: BLE001 - a broken EXIF block must not lose the image
        pass
    return to_8bit(im, background)


def rgb_array(im: Image.Image) -> np.ndarray:
    return np.asarray(im if im.mode == "RGB" else im.convert("RGB"))


def encode(im: Image.Image, fmt: str, quality: int = 90) -> bytes:
    """Encode for storage: JPEG/WebP at ``quality`` (JPEG needs RGB or L), PNG losslessly."""
    buf = io.BytesIO()
    fmt = fmt.upper()
    if fmt == "JPEG":
        if im.mode not in ("RGB", "L"):
            im = to_8bit(im)
        im.save(buf, "JPEG", quality=quality, optimize=False)
    elif fmt == "WEBP":
        im.save(buf, "WEBP", quality=quality)
    else:
        im.save(buf, fmt)
    return buf.getvalue()


# the formats an extension promises (content is detected from the bytes, not the name)
EXTENSION_FORMATS = {
    ".jpg": "JPEG", ".jpeg": "JPEG", ".jpe": "JPEG", ".png": "PNG", ".gif": "GIF", ".webp": "WEBP",
    ".bmp": "BMP", ".tif": "TIFF", ".tiff": "TIFF",
}
