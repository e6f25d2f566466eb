"""Image-folder reader: every image file under the given folders, as encoded bytes.

The reader reads the header (format, size, mode) with Pillow and checks the file's end
marker (truncation); full decoding, EXIF orientation and quality checks are stages. Files that are empty, unreadable, larger than
``max_bytes``, whose header Pillow cannot parse (``corrupt_image``) or promises more than
``max_pixels`` (``decompression_bomb``) are rejected with the error, their
bytes kept in rejected/ so they can be inspected (the quarantine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import xxhash
from pydantic import Field

from corpusforge import schemas
from corpusforge.image.decode import DEFAULT_MAX_PIXELS, ImageProblem, open_image
from corpusforge.io.readers.base import ReadBatch, Reader, ReaderConfig, describe_os_error, file_error_row, record_id


class ImageFolderConfig(ReaderConfig):
    label_from_parent: bool = Field(False, description="Use the parent folder's name as the record's label.")
    max_bytes: int = Field(64 << 20, gt=0, description="Files larger than this are rejected unread.")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0, description="Decompression-bomb limit on width x height, from the header.")


class ImageFolderReader(Reader):
    format = "images"
    kinds = ("image",)
    Config = ImageFolderConfig
    suffixes = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: ImageFolderConfig = self.config
        schema = schemas.load("image")

        def reject(reason: str, detail: str, payload: bytes = b"") -> ReadBatch:
            return ReadBatch(schema.empty_table(), file_error_row("image", cfg.source, path, reason, detail,
                                                                  payload=payload))
        try:
            size = path.stat().st_size
            if size > cfg.max_bytes:
                yield reject("too_large", f"{size} bytes > max_bytes {cfg.max_bytes}")
                return
            data = path.read_bytes()
        except OSError as exc:
            yield reject("unreadable_file", describe_os_error(exc))
            return
        if not data:
            yield reject("empty_file", "0 bytes")
            return
        try:
            with open_image(data, cfg.max_pixels) as im:
                fmt, (w, h), mode = im.format, im.size, im.mode
        except ImageProblem as p:
            yield reject("corrupt_image" if p.reason == "decode_error" else p.reason, p.detail, data)
            return
        problem = truncation(fmt, data)
        if problem:
            yield reject("truncated_image", problem, data)
            return
        table = pa.table({
            "id": [record_id(cfg.source, data)], "source": [cfg.source],
            "image": pa.array([data], pa.binary()), "format": [fmt],
            "width": pa.array([w], pa.int32()), "height": pa.array([h], pa.int32()), "mode": [mode],
            "content_hash": [xxhash.xxh3_128_hexdigest(data)],
            "label": pa.array([path.parent.name if cfg.label_from_parent else None], pa.string()),
            "src_path": [str(path)], "src_row": pa.array([None], pa.int64()), "meta": pa.array([None], pa.string()),
        })
        yield ReadBatch(table)


def truncation(fmt: str | None, data: bytes) -> str | None:
    """A cheap, byte-level check that a file was not cut short: JPEG ends with the EOI marker
    (FF D9 cannot occur inside entropy-coded data, where FF is stuffed with 00), PNG with its
    IEND chunk, GIF with its 0x3B trailer. Trailing padding after the marker is tolerated.
    Full decoding belongs to the image validation stage."""
    tail = data[-4096:]
    if fmt == "JPEG" and b"\xff\xd9" not in tail:
        return "JPEG has no end-of-image marker (file cut short)"
    if fmt == "PNG" and b"IEND" not in tail:
        return "PNG has no IEND chunk (file cut short)"
    if fmt == "GIF" and b"\x3b" not in tail[-16:]:
        return "GIF has no trailer byte (file cut short)"
    return None
