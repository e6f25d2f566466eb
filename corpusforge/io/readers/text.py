"""Plain-text reader: one document per file, or one per line.

Files that do not decode are rejected (file mode) or rejected line by line (line mode), with
the byte offset of the first bad byte. ``encoding`` reads other codecs (GB18030, Big5,
Shift-JIS, UTF-16 ...); a byte-order mark decides over it and is not part of the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field

from corpusforge.io.readers.base import (ENCODING_HELP, READ_ERRORS, Encoding, ReadBatch, Reader, ReaderConfig,
                                         bad_rows, decode_reason, decoded_lines, describe_os_error, encoding_hint,
                                         file_codec, file_error_row, open_maybe_compressed, text_table,
                                         truncated_batch)


class TextConfig(ReaderConfig):
    mode: Literal["file", "line"] = Field("file", description="file: one document per file; line: one per line.")
    encoding: Encoding = Field("utf-8", description=ENCODING_HELP)
    skip_blank_lines: bool = Field(True, description="line mode: blank lines are separators, not documents.")


class TextReader(Reader):
    format = "text"
    kinds = ("text",)
    Config = TextConfig
    suffixes = (".txt", ".txt.gz", ".txt.zst", ".md", ".text")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: TextConfig = self.config
        src = str(path)
        try:
            fh = open_maybe_compressed(path)
        except OSError as exc:
            yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "unreadable_file",
                                                                       describe_os_error(exc)))
            return
        if cfg.mode == "file":
            try:
                with fh:
                    codec = file_codec(fh, cfg.encoding)
                    data = fh.read()
            except READ_ERRORS as exc:
                yield ReadBatch(text_table(cfg.source, []), file_error_row(
                    "text", cfg.source, path, "truncated_file", describe_os_error(exc)))
                return
            if not data.strip():
                yield ReadBatch(text_table(cfg.source, []), file_error_row(
                    "text", cfg.source, path, "empty_file", f"{len(data)} bytes, no text"))
                return
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as exc:
                reason = decode_reason(codec)
                hint = encoding_hint(data[:65536]) if reason == "invalid_utf8" else ""
                yield ReadBatch(text_table(cfg.source, []), file_error_row(
                    "text", cfg.source, path, reason, f"{codec}: invalid byte at offset {exc.start}{hint}", payload=data))
                return
            yield ReadBatch(text_table(cfg.source, [text], src_path=src))
            return

        texts, rows, bad = [], [], []
        lineno, blank = -1, 0

        def flush():
            nonlocal texts, rows, bad
            out = ReadBatch(text_table(cfg.source, texts, src_path=src, src_rows=rows), bad_rows(cfg.source, src, bad))
            texts, rows, bad = [], [], []
            return out

        try:
            with fh:
                codec = file_codec(fh, cfg.encoding)
                reason = decode_reason(codec)
                for lineno, (line, shown, problem) in enumerate(decoded_lines(fh, codec)):
                    if line is None:
                        bad.append((shown.rstrip("\r\n"), lineno, reason, f"line {lineno + 1}: {problem}"))
                        continue
                    s = line.rstrip("\r\n")
                    if not s.strip() and cfg.skip_blank_lines:
                        blank += 1
                        continue
                    texts.append(s)
                    rows.append(lineno)
                    if len(texts) + len(bad) >= self.batch_rows:
                        yield flush()
        except READ_ERRORS as exc:
            yield truncated_batch(flush(), cfg.source, path, lineno, exc)
            return
        if blank == lineno + 1:   # no lines at all, or only blank ones
            yield ReadBatch(text_table(cfg.source, []), file_error_row(
                "text", cfg.source, path, "empty_file", f"{lineno + 1} line(s), all blank"))
            return
        if texts or bad:
            yield flush()
