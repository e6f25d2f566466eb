"""Image-folder reader: every image file under the given folders, as encoded bytes.

The reader reads the header (format, size, mode) with Pillow and checks the file's end
marker (truncation); full decoding, EXIF orientation and quality checks are stages. Files that are empty, unreadable, larger than
``max_bytes``, whose header Pillow cannot parse (``corrupt_image``) or promises more than
``max_pixels`` (``decompression_bomb``) are rejected with the error, their
bytes kept in rejected/ so they can be inspected (the quarantine).
"""

from __future__ import annotations

import json

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import xxhash
from pydantic import Field

from corpusforge import schemas
from corpusforge.image.decode import DEFAULT_MAX_PIXELS, ImageProblem, open_image
from corpusforge.io.readers.base import (READ_ERRORS, ReadBatch, Reader, ReaderConfig, describe_os_error, record_id,
                                         with_reasons)


class ImageFolderConfig(ReaderConfig):
    label_from_parent: bool = Field(False, description="Use the parent folder's name as the record's label.")
    max_bytes: int = Field(64 << 20, gt=0, description="Files larger than this are rejected unread.")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0, description="Decompression-bomb limit on width x height, from the header.")


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".apng", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".ppm",
                  ".pgm", ".pbm", ".pnm", ".tga", ".ico", ".qoi", ".avif")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".zip")


class ImageFolderReader(Reader):
    """Image files, and image members of tar/zip archives (read as a stream, member by member:
    ``src_path`` is the archive, ``meta.member`` the member's name; with ``label_from_parent`` the
    member's folder is the label)."""

    format = "images"
    kinds = ("image",)
    Config = ImageFolderConfig
    suffixes = IMAGE_SUFFIXES + ARCHIVE_SUFFIXES

    def _wanted(self, path: Path) -> bool:
        """Every file of a folder but hidden ones: a file of another format (SVG, HEIC, a stray
        text file) is listed and rejected as ``unsupported_format``, never skipped unseen."""
        return not path.name.startswith(".")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: ImageFolderConfig = self.config
        if path.name.lower().endswith(ARCHIVE_SUFFIXES):
            yield from self._archive(path)
            return
        if not path.name.lower().endswith(IMAGE_SUFFIXES):
            yield image_batch(cfg.source, b"", str(path), reject=(
                "unsupported_format", f"{path.suffix or 'no suffix'}: not an image format the reader decodes "
                                      f"({', '.join(IMAGE_SUFFIXES)})"))
            return
        try:
            size = path.stat().st_size
            if size > cfg.max_bytes:
                yield image_batch(cfg.source, b"", str(path), reject=("too_large", f"{size} bytes > max_bytes {cfg.max_bytes}"))
                return
            data = path.read_bytes()
        except OSError as exc:
            yield image_batch(cfg.source, b"", str(path), reject=("unreadable_file", describe_os_error(exc)))
            return
        yield image_batch(cfg.source, data, str(path), path.parent.name if cfg.label_from_parent else None,
                          max_pixels=cfg.max_pixels)

    def _archive(self, path: Path) -> Iterator[ReadBatch]:
        import tarfile
        import zipfile

        cfg: ImageFolderConfig = self.config
        seen = 0
        try:
            if path.name.lower().endswith(".zip"):
                with path.open("rb") as fh, zipfile.ZipFile(fh) as zf:
                    for info in zf.infolist():
                        if info.is_dir():
                            continue
                        seen += 1
                        if (info.external_attr >> 16) & 0o170000 == 0o120000:
                            yield self._skipped(path, info.filename, "symlink_member", "a symbolic link, not a file")
                        elif not info.filename.lower().endswith(IMAGE_SUFFIXES):
                            yield self._skipped(path, info.filename, "unsupported_format", "not an image format")
                        else:
                            yield self._member(path, info.filename, info.file_size, lambda: zf.read(info))
            else:
                with path.open("rb") as fh, tarfile.open(fileobj=fh, mode="r|*") as tf:   # a stream: no index
                    for member in tf:
                        if member.isdir():
                            continue
                        seen += 1
                        if member.issym() or member.islnk():
                            yield self._skipped(path, member.name, "symlink_member",
                                                f"a {'symbolic' if member.issym() else 'hard'} link to "
                                                f"{member.linkname!r}, not read")
                        elif not member.isfile():
                            yield self._skipped(path, member.name, "unsupported_format", "not a regular file")
                        elif not member.name.lower().endswith(IMAGE_SUFFIXES):
                            yield self._skipped(path, member.name, "unsupported_format", "not an image format")
                        else:
                            yield self._member(path, member.name, member.size, lambda: tf.extractfile(member).read())
        except (*READ_ERRORS, tarfile.TarError, zipfile.BadZipFile) as exc:
            yield image_batch(cfg.source, b"", str(path), meta={"members_read": seen},
                              reject=("truncated_file", f"after {seen} members: {describe_os_error(exc)}"))
            return
        if seen == 0:
            yield image_batch(cfg.source, b"", str(path), reject=("empty_file", "archive has no members"))

    def _skipped(self, path: Path, name: str, reason: str, detail: str) -> ReadBatch:
        return image_batch(self.config.source, b"", str(path), meta={"member": name}, reject=(reason, f"{name}: {detail}"))

    def _member(self, path: Path, name: str, size: int, read) -> ReadBatch:
        cfg: ImageFolderConfig = self.config
        label = Path(name).parent.name or None if cfg.label_from_parent else None
        meta = {"member": name}
        if size > cfg.max_bytes:
            return image_batch(cfg.source, b"", str(path), meta=meta, reject=("too_large", f"{size} bytes > max_bytes {cfg.max_bytes}"))
        return image_batch(cfg.source, read(), str(path), label, meta, cfg.max_pixels)


def image_batch(source: str, data: bytes, src_path: str, label: str | None = None, meta: dict | None = None,
                max_pixels: int = DEFAULT_MAX_PIXELS, reject: tuple[str, str] | None = None) -> ReadBatch:
    """One image as a record, or as a rejected row with its bytes (the quarantine) when it is
    empty, its header does not parse (``corrupt_image``), it promises too many pixels
    (``decompression_bomb``) or it was cut short (``truncated_image``)."""
    fmt = w = h = mode = None
    if reject is None:
        if not data:
            reject = ("empty_file", "0 bytes")
        else:
            try:
                with open_image(data, max_pixels) as im:
                    fmt, (w, h), mode = im.format, im.size, im.mode
                problem = truncation(fmt, data)
                if problem:
                    reject = ("truncated_image", problem)
            except ImageProblem as p:
                reject = ("corrupt_image" if p.reason == "decode_error" else p.reason, p.detail)
    key = data if data else f"{src_path}\0{(meta or {}).get('member', '')}".encode()
    table = pa.table({
        "id": [record_id(source, key if reject is None else src_path.encode() + b"\0" + key)], "source": [source],
        "image": pa.array([data], pa.binary()), "format": pa.array([fmt], pa.string()),
        "width": pa.array([w], pa.int32()), "height": pa.array([h], pa.int32()), "mode": pa.array([mode], pa.string()),
        "content_hash": [xxhash.xxh3_128_hexdigest(data)], "label": pa.array([label], pa.string()),
        "src_path": [src_path], "src_row": pa.array([None], pa.int64()),
        "meta": pa.array([json.dumps(meta, sort_keys=True) if meta else None], pa.string()),
    })
    if reject is None:
        return ReadBatch(table)
    return ReadBatch(schemas.load("image").empty_table(), with_reasons(table, [reject[0]], [reject[1]]))


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
