"""The reader contract and the helpers readers share."""

from __future__ import annotations

import codecs
import glob
import gzip
import io
import json
import os
import re
import shutil
import tempfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, ClassVar, Iterator

import numpy as np
import pyarrow as pa
import xxhash
import zstandard
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from corpusforge.errors import ConfigError
from corpusforge.io.storage import is_url, scratch_dir
from corpusforge.stage import REJECT_DETAIL, REJECT_REASON


class ReaderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: list[str] = Field(min_length=1, description="Files, folders (searched recursively) or glob patterns; "
                             "local, or fsspec URLs (s3://bucket/prefix/*.jsonl.gz).")
    source: str = Field(min_length=1, description="Dataset/domain name written to every record's `source`.")


@dataclass
class ReadBatch:
    records: pa.Table                   # rows of the record schema
    rejected: pa.Table | None = None    # same, plus reject_reason / reject_detail


def record_id(source: str, payload: bytes | str) -> str:
    """Stable record id: xxh3-128 of source, NUL, payload."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    return xxhash.xxh3_128_hexdigest(source.encode() + b"\0" + payload)


def with_reasons(table: pa.Table, reasons: list[str], details: list[str | None]) -> pa.Table:
    return table.append_column(REJECT_REASON, pa.array(reasons, pa.string())).append_column(
        REJECT_DETAIL, pa.array(details, pa.string()))


class Reader:
    """Base reader. Subclasses set ``format``, ``kinds``, ``Config``, ``suffixes`` and
    implement ``read(path)``."""

    format: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]]
    Config: ClassVar[type[ReaderConfig]] = ReaderConfig
    suffixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ReaderConfig, *, kind: str, batch_rows: int = 4096, index: int = 0,
                 base: Path | None = None):
        self.config = config
        self.kind = kind
        self.batch_rows = batch_rows
        self.index = index
        self.base = Path(base) if base else Path.cwd()

    def output_columns(self) -> dict[str, pa.DataType]:
        return {}

    def files(self) -> list[Path]:
        """Every input file, sorted, deduplicated. A pattern that matches nothing is a config error."""
        found: list[Path] = []
        for pattern in self.config.paths:
            if is_url(pattern):
                try:
                    matches = self._remote_files(pattern)
                except Exception as exc:  # noqa: BLE001 - fsspec back ends raise their own types
                    raise ConfigError(f"inputs.{self.index}.paths: cannot list {pattern!r}: "
                                      f"{type(exc).__name__}: {exc}") from exc
            else:
                p = Path(pattern)
                if not p.is_absolute():
                    p = self.base / p
                if p.is_dir():
                    matches = [q for q in sorted(p.rglob("*")) if q.is_file() and self._wanted(q)]
                elif any(ch in pattern for ch in "*?["):
                    matches = [Path(q) for q in sorted(glob.glob(str(p), recursive=True)) if Path(q).is_file()]
                else:
                    matches = [p] if p.exists() else []
            if not matches:
                raise ConfigError(f"inputs.{self.index}.paths: {pattern!r} matches no {self.format} file")
            found.extend(matches)
        seen, out = set(), []
        for f in found:
            if f not in seen:
                seen.add(f)
                out.append(f)
        return out

    def _remote_files(self, pattern: str) -> list[Path]:
        """Files of an fsspec URL (a file, a folder searched recursively, or a glob), as
        ``UPath`` objects: readers use the pathlib methods they use on local files. Their sizes
        come with the listing and are kept for ``file_size``: one request per page of a
        listing, not one per file (every worker plans the units again)."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(pattern)
        fs.invalidate_cache()
        if any(ch in pattern for ch in "*?["):
            listed = fs.glob(path, detail=True)
        elif fs.isdir(path):
            listed = {n: i for n, i in fs.find(path, detail=True).items() if self._wanted(PurePosixPath(n))}
        else:
            listed = {path: fs.info(path)} if fs.exists(path) else {}
        files = {fs.unstrip_protocol(n): i["size"] for n, i in listed.items() if i["type"] == "file"}
        _LISTED_SIZES.update(files)
        return [input_path(url) for url in sorted(files)]

    def _wanted(self, path: Path) -> bool:
        name = path.name.lower()
        return not self.suffixes or name.endswith(self.suffixes)

    def read(self, path: Path) -> Iterator[ReadBatch]:  # pragma: no cover - interface
        raise NotImplementedError


def input_path(path: str | Path) -> Path:
    """An input file as a path object: ``pathlib.Path`` for a local file, ``upath.UPath`` (the
    pathlib API over fsspec) for a URL, so that ``str(path)`` is always what the user wrote."""
    if is_url(path):
        from upath import UPath

        return UPath(str(path))
    return Path(path)


@contextmanager
def local_copy(path: Path):
    """A local filesystem path for ``path``, for libraries that only open file names (open3d,
    Arrow memory maps): the path itself, or a scratch copy of a remote file, removed after."""
    if not is_url(path):
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="input-", dir=scratch_dir()))
    local = folder / path.name
    try:
        with path.open("rb") as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# what reading a damaged file raises: I/O errors, a cut stream (EOFError), and the decompressors'
# own errors for corrupt data inside the stream (zlib.error, ZstdError are not OSErrors)
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, zstandard.ZstdError)


def open_maybe_compressed(path: Path) -> io.BufferedIOBase:
    """Open ``path`` (local or remote) for binary reading, decompressing .gz and .zst transparently."""
    name = path.name.lower()
    if is_url(path):
        # fsspec's own readline scans a whole block per line (measured 60x slower than a local
        # file on 10k JSONL lines); io.BufferedReader's C readline over 8 MB range reads is not
        raw = io.BufferedReader(path.open("rb", block_size=8 << 20), 8 << 20)
    else:
        raw = open(path, "rb", buffering=1 << 20)
    try:
        if name.endswith(".gz"):
            gz = gzip.GzipFile(fileobj=raw, mode="rb")
            gz.myfileobj = raw     # GzipFile closes the file it opened itself: make it own this one too
            return gz
        if name.endswith((".zst", ".zstd")):
            return io.BufferedReader(ZstdFrames(raw), 1 << 20)
    except BaseException:
        raw.close()
        raise
    return raw


# -- text encodings --------------------------------------------------------------------------
# Byte-order marks, longest first (UTF-32-LE's begins with UTF-16-LE's). A mark decides the
# codec of its file whatever ``encoding`` says (it cannot open text in another codec), and is
# not part of the text.
BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def check_encoding(name: str) -> str:
    try:
        codecs.lookup(name)
    except LookupError:
        raise ValueError(f"unknown encoding {name!r} (Python's codec names: utf-8, gb18030, big5, shift_jis, "
                         "cp1252, utf-16 ...)") from None
    return name


Encoding = Annotated[str, AfterValidator(check_encoding)]
ENCODING_HELP = ("Codec of the input files (Python's names: utf-8, gb18030, big5, shift_jis, cp1252, utf-16 ...); "
                 "a byte-order mark (UTF-8, UTF-16, UTF-32) decides over it.")


def file_codec(fh, encoding: str) -> str:
    """The codec to read ``fh`` with: its byte-order mark's (consumed), else ``encoding``."""
    head = fh.peek(4)[:4]
    for bom, codec in BOMS:
        if head.startswith(bom):
            fh.read(len(bom))
            return codec
    return encoding


def decode_reason(codec: str) -> str:
    return "invalid_utf8" if codecs.lookup(codec).name in ("utf-8", "utf-8-sig") else "invalid_encoding"


def encoding_hint(raw: bytes) -> str:
    """For bytes that are not UTF-8, the codec they read as, said in the reject's detail: Western
    text in cp1252 (Latin-1), Chinese in GB18030 (GBK, GB2312) or Big5. Nothing when none reads
    as text. A hint from one line: the file's other lines tell more."""
    # cp1252 first: a short accented word (na\xefve) is a valid GB18030 character too, while
    # Chinese in cp1252 almost always reads as signs and undefined bytes
    for codec, looks_right in (("cp1252", _latin_letters), ("gb18030", _mostly_han), ("big5", _mostly_han)):
        try:
            text = codecs.getincrementaldecoder(codec)().decode(raw)     # a cut character at the end is fine
        except UnicodeDecodeError:
            continue
        if looks_right([ch for ch in text if not ch.isascii()]):
            return f" (the bytes read as {codec}: set the input's encoding)"
    return ""


def _mostly_han(chars: list[str]) -> bool:
    return bool(chars) and sum("\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef"
                               for ch in chars) >= 0.9 * len(chars)


def _latin_letters(chars: list[str]) -> bool:
    return bool(chars) and all(ch.isalpha() or ch in "\u2018\u2019\u201c\u201d\u2013\u2014\u20ac\u00a0\u00b0" for ch in chars)


def decoded_lines(fh, codec: str, chunk: int = 1 << 20) -> Iterator[tuple[str | None, str, str]]:
    """Each line of ``fh`` (end of line kept): ``(text, "", "")``, or for a line that does not
    decode ``(None, the line as far as it is legible, what is wrong)``.

    ASCII-compatible codecs (UTF-8, GB18030/GBK, Big5, Shift-JIS, the single-byte ones) never
    use byte 0x0A inside a character: lines are split as bytes and decoded one by one, so a bad
    byte costs only its line. UTF-16 and UTF-32 do (a newline is ``0A 00``): they are decoded as
    a stream and split as text; a lone surrogate costs its line, a cut character at the end the
    last line.
    """
    if "\nA".encode(codec).endswith(b"\nA"):
        for raw in fh:
            try:
                yield raw.decode(codec), "", ""
            except UnicodeDecodeError as exc:
                hint = encoding_hint(raw) if decode_reason(codec) == "invalid_utf8" else ""
                yield None, raw.decode(codec, "replace"), f"invalid {codec} byte at offset {exc.start}{hint}"
        return
    decoder = codecs.getincrementaldecoder(codec)("surrogatepass")
    rest = ""
    while True:
        data = fh.read(chunk)
        try:
            text = rest + decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            yield None, rest, f"{codec}: {exc.reason} at the end of the file"
            return
        lines = text.split("\n")
        rest = lines.pop()
        if LONE_SURROGATE.search(text) is None:         # one scan of the chunk, not one per line
            for line in lines:
                yield line + "\n", "", ""
        else:
            for line in lines:
                yield _checked_line(line + "\n", codec)
        if not data:
            break
    if rest:
        yield _checked_line(rest, codec)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked_line(line: str, codec: str) -> tuple[str | None, str, str]:
    if LONE_SURROGATE.search(line) is None:
        return line, "", ""
    return None, LONE_SURROGATE.sub("\ufffd", line), f"{codec}: lone surrogate"


class ZstdFrames(io.RawIOBase):
    """A .zst file's frames decompressed in turn, raising EOFError when the file ends inside a
    frame (zstandard's stream reader returns a cut file's bytes as if it were whole)."""

    def __init__(self, raw, chunk: int = 1 << 20):
        self._dctx = zstandard.ZstdDecompressor()
        self._raw, self._chunk = raw, chunk
        self._obj = self._dctx.decompressobj()
        self._pending, self._pos, self._started, self._done = b"", 0, False, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pos >= len(self._pending) and not self._done:
            self._pending, self._pos = b"", 0
            data = self._raw.read(self._chunk)
            if not data:
                if self._started and not self._obj.eof:
                    raise EOFError("zstd: file ends inside a frame (truncated)")
                self._done = True
                break
            while data:
                if self._obj.eof:                 # next frame
                    self._obj = self._dctx.decompressobj()
                self._started = True
                self._pending += self._obj.decompress(data)
                data = self._obj.unused_data if self._obj.eof else b""
        n = min(len(buffer), len(self._pending) - self._pos)
        buffer[:n] = memoryview(self._pending)[self._pos:self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def text_table(source: str, texts: list[str], *, ids: list[str] | None = None, src_path: str | None = None,
               src_rows: list[int | None] | None = None, metas: list[str | None] | None = None,
               langs: list[str | None] | None = None) -> pa.Table:
    """Build a text-record table (columns of schemas/text.json that readers fill)."""
    n = len(texts)
    if ids is None:
        ids = [record_id(source, t) for t in texts]
    return pa.table({
        "id": pa.array(ids, pa.string()),
        "source": pa.array([source] * n, pa.string()),
        "text": pa.array(texts, pa.string()),
        "lang": pa.array(langs if langs is not None else [None] * n, pa.string()),
        "src_path": pa.array([src_path] * n, pa.string()),
        "src_row": pa.array(src_rows if src_rows is not None else [None] * n, pa.int64()),
        "meta": pa.array(metas if metas is not None else [None] * n, pa.string()),
    })


def bad_rows(source: str, src_path: str, bad: list[tuple[str, int, str, str]]) -> pa.Table | None:
    """Rejected text rows for (raw text, line or row number, reason, detail) entries, ids keyed by
    the file and the position; None when there are none."""
    if not bad:
        return None
    return with_reasons(text_table(source, [b[0] for b in bad], src_path=src_path, src_rows=[b[1] for b in bad],
                                   ids=[record_id(source, f"{src_path}\0{b[1]}\0{b[0]}") for b in bad]),
                        [b[2] for b in bad], [b[3] for b in bad])


def text_column(column: pa.Array | pa.ChunkedArray, offset: int,
                name: str) -> tuple[pa.Array, dict[int, tuple[str, str]]]:
    """An Arrow column read as document text (any string type, or bytes decoded as UTF-8), and
    {row in the batch: (reason, detail)} for rows that hold none: ``missing_text_field`` (null),
    ``invalid_utf8``, ``wrong_column_type`` (numbers, lists: never cast into text). Rows are
    numbered from ``offset`` in the details."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    base = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    bad: dict[int, tuple[str, str]] = {}
    if pa.types.is_binary(base) or pa.types.is_large_binary(base):
        texts = []
        for i, v in enumerate(col.to_pylist()):
            try:
                texts.append(None if v is None else v.decode("utf-8"))
            except UnicodeDecodeError as exc:
                texts.append(None)
                bad[i] = ("invalid_utf8", f"row {offset + i}: invalid UTF-8 at byte {exc.start}")
        col = pa.array(texts, pa.string())
    elif pa.types.is_string(base) or pa.types.is_large_string(base):
        col = col.cast(pa.string())
    else:
        why = f"column {name!r} is {column.type}, expected text"
        return pa.nulls(len(col), pa.string()), {i: ("wrong_column_type", why) for i in range(len(col))}
    for i in np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)):
        bad.setdefault(int(i), ("missing_text_field", f"row {offset + i}: {name!r} is null"))
    return col, bad


def file_error_row(kind: str, source: str, path: Path, reason: str, detail: str, row: int | None = None,
                   payload: bytes = b"") -> pa.Table:
    """One rejected row standing for a file (or the rest of a file) that could not be read,
    so that the failure is in rejected/ and in the stats, never silently dropped."""
    rid = record_id(source, str(path).encode() + b"\0" + str(row).encode() + b"\0" + payload)
    common = {"id": [rid], "source": [source], "src_path": [str(path)], "src_row": pa.array([row], pa.int64()),
              "meta": pa.array([None], pa.string())}
    if kind == "text":       # the same columns, in the same order, as text_table's rejected lines
        return with_reasons(text_table(source, [payload.decode("utf-8", "replace")], ids=[rid], src_path=str(path),
                                       src_rows=[row]), [reason], [detail])
    if kind == "image":
        cols = dict(common, image=pa.array([payload], pa.binary()),
                    content_hash=[xxhash.xxh3_128_hexdigest(payload)])
    else:
        pts = pa.array([[]], pa.list_(pa.list_(pa.float32(), 3)))
        cols = dict(common, points=pts, n_points=pa.array([0], pa.int64()))
    return with_reasons(pa.table(cols), [reason], [detail])


def truncated_batch(batch: ReadBatch, source: str, path: Path, lineno: int, exc: BaseException) -> ReadBatch:
    """The lines read before a file broke off, plus one rejected row for the rest."""
    err = file_error_row("text", source, path, "truncated_file",
                         f"after line {lineno + 1}: {describe_os_error(exc)}", row=lineno + 1)
    batch.rejected = err if batch.rejected is None else pa.concat_tables([batch.rejected, err])
    return batch


def describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def dumps_meta(obj: dict) -> str | None:
    """``meta`` as JSON; NaN and infinities (which JSON lacks, and strict parsers refuse) as strings."""
    if not obj:
        return None
    try:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(obj), ensure_ascii=False, sort_keys=True, default=str)


def _finite(value):
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_LISTED_SIZES: dict[str, int] = {}     # URL -> size, from the listings of Reader.files


def file_size(path: Path | str) -> int:
    try:
        if not is_url(path):
            return os.path.getsize(path)
        if str(path) not in _LISTED_SIZES:
            _LISTED_SIZES[str(path)] = input_path(path).stat().st_size
        return _LISTED_SIZES[str(path)]
    except OSError:
        return 0


def file_stamp(path: Path | str) -> str:
    """What identifies an input file's content without reading it: size and modification time
    of a local file, size and ETag (an MD5 on S3 and GCS) of an object; "missing" when gone."""
    try:
        if not is_url(path):
            st = os.stat(path)
            return f"{st.st_size}:{st.st_mtime_ns}"
        import fsspec

        fs, p = fsspec.core.url_to_fs(str(path))
        fs.invalidate_cache(p)
        info = fs.info(p)
        stamp = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("LastModified") \
            or info.get("mtime") or info.get("created")
        return f"{info.get('size')}:{stamp}"
    except (OSError, ValueError):
        return "missing"
