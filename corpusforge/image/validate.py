"""``image.validate``: decode every image fully and keep only what a trainer can read.

Rejections (``reject_reason``):

| reason | when |
|---|---|
| ``empty_image`` | zero bytes (a Parquet input can carry them; the folder reader already rejects empty files) |
| ``decode_error`` | Pillow cannot parse or decode the stream |
| ``truncated_image`` | the stream ends before the last pixel |
| ``decompression_bomb`` | width x height above ``max_pixels``, checked from the header before decoding |
| ``excluded_format`` | the detected format is not in ``formats`` |
| ``animated`` | more than one frame and ``animated: reject`` |
| ``extension_mismatch`` | content differs from the file extension and ``extension_mismatch: reject`` |

Kept images get their ``format``, ``width``, ``height`` and ``mode`` from the decoded pixels.
Bytes are kept as read unless something must change them: EXIF orientation applied
(``apply_exif_orientation``), the first frame of an animation (``animated: first_frame``), or
``reencode`` set; then ``content_hash`` is recomputed and ``tag_validate_note`` says why.
16-bit, CMYK, palette and grey images are valid and kept as they are (the analysis stages
convert them, see ``decode.to_8bit``); re-encoding to JPEG converts them to 8-bit RGB/L.
"""

from __future__ import annotations

import os
from typing import Literal

import pyarrow as pa
import xxhash
from PIL import Image, ImageOps
from pydantic import Field

from corpusforge.image.decode import (DEFAULT_MAX_PIXELS, EXTENSION_FORMATS, ImageProblem, encode, has_alpha, load,
                                      open_image, to_8bit)
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split

ALL_FORMATS = ["JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"]


class ValidateConfig(StageConfig):
    formats: list[str] = Field(default_factory=lambda: list(ALL_FORMATS),
                               description="Detected formats to keep (Pillow's names: JPEG, PNG, WEBP, GIF, BMP, TIFF, ...).")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0, description="Decompression-bomb limit on width x height.")
    animated: Literal["reject", "first_frame"] = "reject"
    extension_mismatch: Literal["tag", "reject"] = Field("tag", description="Content not matching the file extension.")
    apply_exif_orientation: bool = Field(True, description="Rotate/flip pixels by the EXIF orientation tag and re-encode.")
    reencode: Literal["JPEG", "PNG", "WEBP"] | None = Field(None, description="Re-encode every kept image to this format.")
    quality: int = Field(90, ge=1, le=100, description="JPEG/WebP quality when re-encoding.")
    background: tuple[int, int, int] = Field((255, 255, 255), description="RGB that alpha is flattened onto for JPEG.")


class Validate(Stage):
    name = "image.validate"
    kinds = ("image",)
    Config = ValidateConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_validate_note": pa.string()}

    def check(self, data: bytes, src_path: str | None, stats: StageStats) -> tuple[bytes, Image.Image, list[str]]:
        """Decode one image; returns (bytes to store, decoded image, notes) or raises ImageProblem."""
        c: ValidateConfig = self.config
        im = open_image(data, c.max_pixels)
        fmt = im.format
        if fmt not in c.formats:
            raise ImageProblem("excluded_format", f"{fmt} not in formats {c.formats}")
        notes = []
        expected = EXTENSION_FORMATS.get(os.path.splitext(src_path or "")[1].lower())
        if expected and expected != fmt:
            if c.extension_mismatch == "reject":
                raise ImageProblem("extension_mismatch", f"extension says {expected}, content is {fmt}")
            notes.append(f"extension says {expected}, content is {fmt}")
            stats.counters["extension_mismatch"] += 1
        frames = getattr(im, "n_frames", 1)
        if frames > 1:
            if c.animated == "reject":
                raise ImageProblem("animated", f"{frames} frames")
            notes.append(f"first of {frames} frames")
            stats.counters["animation_first_frame"] += 1
        load(im)
        if frames > 1:     # every frame must decode too, or the file is corrupt
            try:
                for i in range(1, frames):
                    im.seek(i)
                    im.load()
                im.seek(0)
                im.load()
            except (OSError, EOFError, ValueError) as exc:
                raise ImageProblem("truncated_image" if "truncated" in str(exc) else "decode_error",
                                   f"frame {i}: {type(exc).__name__}: {exc}") from None
        out_format = c.reencode or (("PNG" if fmt == "GIF" else fmt) if frames > 1 else None)
        orientation = im.getexif().get(0x0112, 1) if c.apply_exif_orientation else 1
        if orientation not in (1, None):
            im = ImageOps.exif_transpose(im)
            notes.append(f"EXIF orientation {orientation} applied")
            stats.counters["exif_oriented"] += 1
            out_format = out_format or fmt
        if out_format:
            im = im.copy() if frames == 1 else im.convert(im.mode)    # a single still frame
            if out_format == "JPEG" and (has_alpha(im) or im.mode not in ("RGB", "L")):
                im = to_8bit(im, c.background)
            data = encode(im, out_format, c.quality)
            if c.reencode:
                notes.append(f"re-encoded as {out_format}")
            stats.counters["reencoded"] += 1
            im = open_image(data, c.max_pixels)
        return data, im, notes

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        images = table.column("image").to_pylist()
        paths = table.column("src_path").to_pylist()
        n = table.num_rows
        reason, detail, notes = [None] * n, [None] * n, [None] * n
        fmt, width, height, mode = [None] * n, [None] * n, [None] * n, [None] * n
        new_bytes = list(images)
        hashes = table.column("content_hash").to_pylist()
        for i, data in enumerate(images):
            try:
                out, im, note = self.check(data or b"", paths[i], stats)
            except ImageProblem as p:
                reason[i], detail[i] = p.reason, p.detail
                continue
            fmt[i], (width[i], height[i]), mode[i] = im.format, im.size, im.mode
            if out is not data:
                new_bytes[i], hashes[i] = out, xxhash.xxh3_128_hexdigest(out)
            notes[i] = "; ".join(note) or None
            stats.counters[f"format_{im.format}"] += 1
            stats.counters[f"mode_{im.mode}"] += 1
        # rejected rows keep what they came with; kept rows get the decoded facts
        keep = [r is None for r in reason]
        table = _replace(table, "image", pa.array([b if k else o for b, o, k in zip(new_bytes, images, keep)], pa.binary()))
        table = _replace(table, "content_hash", pa.array(hashes, pa.string()))
        for name, values, typ in (("format", fmt, pa.string()), ("width", width, pa.int32()),
                                  ("height", height, pa.int32()), ("mode", mode, pa.string())):
            old = table.column(name).to_pylist()
            table = _replace(table, name, pa.array([v if k else o for v, o, k in zip(values, old, keep)], typ))
        table = table.append_column("tag_validate_note", pa.array(notes, pa.string()))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)


def _replace(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), values.cast(table.schema.field(i).type))
