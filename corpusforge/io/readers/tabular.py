"""Tabular text inputs: CSV/TSV files and Hugging Face datasets saved with ``save_to_disk``.

``csv``: one document per row (Python's csv module, streaming, RFC 4180 quoting; ``.tsv`` files
are tab-separated unless ``delimiter`` says otherwise); the ``text_field`` column is the text,
the other columns go to ``meta``. ``src_row`` is the 0-based data row. A row without the text
column or with a wrong number of fields, or with bytes invalid in ``encoding``, is rejected with
its row number. A byte-order mark decides the codec (Excel's "Unicode text" is UTF-16 with one).

``hf_disk``: the Arrow files a ``datasets`` ``save_to_disk`` folder holds (``data-*.arrow``, IPC
stream format), read directly with pyarrow, record batch by record batch, no ``datasets``
import; a ``DatasetDict`` folder gives every split (``meta.split``). ``src_path`` is the Arrow
file, ``src_row`` the row in it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from corpusforge.io.readers.base import (ENCODING_HELP, READ_ERRORS, Encoding, ReadBatch, Reader, ReaderConfig,
                                         bad_rows, decode_reason, describe_os_error, dumps_meta, encoding_hint,
                                         file_codec, file_error_row, open_maybe_compressed, text_column, text_table,
                                         truncated_batch)
from corpusforge.io.storage import is_url


class CsvConfig(ReaderConfig):
    text_field: str = Field("text", description="Column holding the document text.")
    delimiter: str | None = Field(None, description="Field separator; default ',' (.csv) or tab (.tsv).")
    keep_meta: bool = Field(True, description="Keep the other columns as a JSON object in `meta`.")
    encoding: Encoding = Field("utf-8", description=ENCODING_HELP)


class CsvReader(Reader):
    format = "csv"
    kinds = ("text",)
    Config = CsvConfig
    suffixes = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".csv.zst", ".tsv.zst")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: CsvConfig = self.config
        src = str(path)
        delimiter = cfg.delimiter or ("\t" if ".tsv" in path.name.lower() else ",")
        texts, rows, metas, bad = [], [], [], []

        def flush() -> ReadBatch:
            nonlocal texts, rows, metas, bad
            out = ReadBatch(text_table(cfg.source, texts, src_path=src, src_rows=rows, metas=metas),
                            bad_rows(cfg.source, src, bad))
            texts, rows, metas, bad = [], [], [], []
            return out

        try:
            raw = open_maybe_compressed(path)
        except OSError as exc:
            yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "unreadable_file",
                                                                       describe_os_error(exc)))
            return
        csv.field_size_limit(FIELD_LIMIT)      # Python's default (131,072 characters) ends a file at a long field
        row = -1
        try:
            # surrogateescape: an invalid byte becomes a lone surrogate in its field, so only the row
            # holding it is rejected (strict decoding would end the file there)
            with raw:
                codec = file_codec(raw, cfg.encoding)
                reason = decode_reason(codec)
                reader = csv.reader(io.TextIOWrapper(raw, encoding=codec, errors="surrogateescape", newline=""),
                                    delimiter=delimiter)
                header = next(reader, None)
                if header is None:
                    yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "empty_file",
                                                                               "no header row"))
                    return
                if cfg.text_field not in header:
                    yield ReadBatch(text_table(cfg.source, []), file_error_row(
                        "text", cfg.source, path, "missing_text_field",
                        f"no column {cfg.text_field!r} (columns: {_clean(', '.join(header))})"))
                    return
                at = header.index(cfg.text_field)
                while True:
                    row += 1
                    try:
                        fields = next(reader)
                    except StopIteration:
                        break
                    except csv.Error as exc:              # broken quoting in this row: the reader goes on
                        bad.append(("", row, "bad_row", f"row {row} (line {reader.line_num}): {exc}"))
                        continue
                    if len(fields) != len(header):
                        bad.append((_clean(delimiter.join(fields)), row, "bad_row",
                                    f"row {row}: {len(fields)} fields, header has {len(header)}"))
                        continue
                    if any(_has_surrogate(f) for f in fields):
                        line = delimiter.join(fields)
                        hint = encoding_hint(line.encode(codec, "surrogateescape")) if reason == "invalid_utf8" else ""
                        bad.append((_clean(line), row, reason,
                                    f"row {row} (line {reader.line_num}): invalid {codec} byte{hint}"))
                        continue
                    texts.append(fields[at])
                    rows.append(row)
                    metas.append(dumps_meta({k: v for k, v in zip(header, fields) if k != cfg.text_field})
                                 if cfg.keep_meta else None)
                    if len(texts) + len(bad) >= self.batch_rows:
                        yield flush()
        except READ_ERRORS as exc:     # truncated archive, I/O error
            yield truncated_batch(flush(), cfg.source, path, row - 1, exc)
            return
        yield flush()


FIELD_LIMIT = 1 << 30
# a corrupt batch gets one rejected row per row it claims, up to this many (its row count may be corrupt too)
CORRUPT_ROWS_LISTED = 100_000


def _has_surrogate(s: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in s) if not s.isascii() else False


def _clean(s: str) -> str:
    """Text with escaped invalid bytes shown as U+FFFD (a rejected row must still be valid UTF-8)."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if not s.isascii() else s


class HfDiskConfig(ReaderConfig):
    text_field: str = Field("text", description="Column holding the document text.")
    keep_meta: bool = Field(True, description="Keep the other columns as a JSON object in `meta`.")


class HfDiskReader(Reader):
    format = "hf_disk"
    kinds = ("text",)
    Config = HfDiskConfig
    suffixes = (".arrow",)

    def _wanted(self, path: Path) -> bool:
        return path.name.startswith("data-") and path.name.endswith(".arrow")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: HfDiskConfig = self.config
        src = str(path)
        split = path.parent.name if (path.parent.parent / "dataset_dict.json").exists() else None
        try:
            stream = pa.ipc.open_stream(path.open("rb") if is_url(path) else pa.memory_map(src))
        except (OSError, pa.ArrowInvalid, UnicodeDecodeError) as exc:    # the schema's names are UTF-8
            yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "unreadable_file",
                                                                       describe_os_error(exc)))
            return
        if cfg.text_field not in stream.schema.names:
            yield ReadBatch(text_table(cfg.source, []), file_error_row(
                "text", cfg.source, path, "missing_text_field",
                f"no column {cfg.text_field!r} (columns: {', '.join(stream.schema.names)})"))
            return
        start = 0
        try:
            for batch in stream:
                n = batch.num_rows
                try:
                    # IPC data is not validated on read: a corrupt offset would be followed into
                    # memory past the file (segfault, or SIGBUS on the memory map)
                    batch.validate(full=True)
                except pa.ArrowInvalid as exc:
                    yield ReadBatch(text_table(cfg.source, []), bad_rows(cfg.source, src, [
                        ("", row, "corrupt_batch", f"record batch of rows {start}-{start + n - 1}: {exc}")
                        for row in range(start, start + min(n, CORRUPT_ROWS_LISTED))]))
                    start += n
                    continue
                text = batch.column(cfg.text_field)
                rows = list(range(start, start + n))
                others = [c for c in batch.schema.names if c != cfg.text_field]
                metas = [None] * n
                if cfg.keep_meta and (others or split):
                    table = pa.Table.from_batches([batch.select(others)])
                    metas = [dumps_meta(dict(r, **({"split": split} if split else {}))) for r in table.to_pylist()]
                values, bad = text_column(text, start, cfg.text_field)
                good = [i for i in range(n) if i not in bad]
                texts = values.take(pa.array(good, pa.int64())).to_pylist() if good else []
                records = text_table(cfg.source, texts, src_path=src, src_rows=[rows[i] for i in good],
                                     metas=[metas[i] for i in good])
                yield ReadBatch(records, bad_rows(cfg.source, src, [("", rows[i], *bad[i]) for i in sorted(bad)]))
                start += n
        except (OSError, pa.ArrowInvalid) as exc:
            yield truncated_batch(ReadBatch(text_table(cfg.source, [])), cfg.source, path, start - 1, exc)
