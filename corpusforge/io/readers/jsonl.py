"""JSON Lines reader (plain, .gz, .zst), one document per line.

Every line becomes a record or a rejected row: invalid UTF-8 (or bytes invalid in
``encoding``), invalid JSON, a line that is not an object, or an object without the text field
are rejected with the line's number. A byte-order mark (UTF-8, UTF-16, UTF-32) decides the codec.
Conversations: with ``turns_field`` the text is the list of turns, each written by
``turn_template`` (default ``{role}: {content}``) and joined by ``turn_separator`` (a blank
line); a missing or malformed list is rejected as ``bad_turns``.
A truncated compressed file keeps the lines read before the break and adds one rejected
row for the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from pydantic import Field

from corpusforge.io.readers.base import (ENCODING_HELP, READ_ERRORS, Encoding, ReadBatch, Reader, ReaderConfig, bad_rows,
                                         decode_reason, decoded_lines, describe_os_error, dumps_meta, file_codec,
                                         file_error_row, open_maybe_compressed, text_table, truncated_batch)


class JsonlConfig(ReaderConfig):
    text_field: str = Field("text", description="Field holding the document text.")
    turns_field: str | None = Field(None, description="Field holding a conversation: a list of turns, joined into the text.")
    turn_template: str = Field("{role}: {content}", description="How one turn is written ({role}, {content}).")
    turn_separator: str = Field("\n\n", description="Between turns.")
    role_key: str = Field("role", description="Key of a turn's speaker (OpenAI/ShareGPT style: role or from).")
    content_key: str = Field("content", description="Key of a turn's text (content or value).")
    lang_field: str | None = Field(None, description="Field holding a language code, if the input has one.")
    keep_meta: bool = Field(True, description="Keep the other fields as a JSON object in `meta`.")
    encoding: Encoding = Field("utf-8", description=ENCODING_HELP)


class JsonlReader(Reader):
    format = "jsonl"
    kinds = ("text",)
    Config = JsonlConfig
    suffixes = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson", ".jsonl.zstd")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: JsonlConfig = self.config
        src = str(path)
        texts, rows, metas, langs = [], [], [], []
        bad: list[tuple[str, int, str, str]] = []   # (raw text, row, reason, detail)
        lineno = -1

        def flush():
            nonlocal texts, rows, metas, langs, bad
            records = text_table(cfg.source, texts, src_path=src, src_rows=rows, metas=metas, langs=langs)
            rejected = bad_rows(cfg.source, src, bad)
            texts, rows, metas, langs, bad = [], [], [], [], []
            return ReadBatch(records, rejected)

        try:
            fh = open_maybe_compressed(path)
        except OSError as exc:
            yield ReadBatch(text_table(cfg.source, []), file_error_row(
                "text", cfg.source, path, "unreadable_file", describe_os_error(exc)))
            return
        try:
            with fh:
                codec = file_codec(fh, cfg.encoding)
                reason = decode_reason(codec)
                for lineno, (s, shown, problem) in enumerate(decoded_lines(fh, codec)):
                    if s is None:
                        bad.append((shown.rstrip("\n"), lineno, reason, f"line {lineno + 1}: {problem}"))
                        continue
                    if not s.strip():
                        bad.append(("", lineno, "empty_line", f"line {lineno + 1}: blank line"))
                        continue
                    try:
                        obj = json.loads(s)
                    except json.JSONDecodeError as exc:
                        bad.append((s.rstrip("\n"), lineno, "invalid_json", f"line {lineno + 1}: {exc.msg} at column {exc.colno}"))
                        continue
                    except ValueError as exc:       # an integer beyond Python's 4,300-digit conversion limit
                        bad.append((s.rstrip("\n"), lineno, "invalid_json", f"line {lineno + 1}: {exc}"))
                        continue
                    except RecursionError:
                        bad.append((s[:10_000], lineno, "invalid_json", f"line {lineno + 1}: JSON nested too deeply"))
                        continue
                    if ("\\ud" in s or "\\uD" in s) and _has_surrogates(json.dumps(obj, ensure_ascii=False)):
                        # a lone surrogate anywhere (text, language, metadata) cannot be stored as UTF-8
                        bad.append((s.rstrip("\n"), lineno, "invalid_utf8",
                                    f"line {lineno + 1}: lone surrogate escape in a JSON string"))
                        continue
                    if not isinstance(obj, dict):
                        bad.append((s.rstrip("\n"), lineno, "not_an_object",
                                    f"line {lineno + 1}: JSON {type(obj).__name__}, expected an object"))
                        continue
                    if cfg.turns_field:
                        text, problem = _join_turns(obj.pop(cfg.turns_field, None), cfg)
                        if problem:
                            bad.append((s.rstrip("\n"), lineno, "bad_turns", f"line {lineno + 1}: {problem}"))
                            continue
                    else:
                        text = obj.pop(cfg.text_field, None)
                    if not isinstance(text, str):
                        bad.append((s.rstrip("\n"), lineno, "missing_text_field",
                                    f"line {lineno + 1}: field {cfg.text_field!r} is "
                                    f"{'missing' if text is None else type(text).__name__}"))
                        continue
                    lang = obj.pop(cfg.lang_field, None) if cfg.lang_field else None
                    texts.append(text)
                    rows.append(lineno)
                    langs.append(lang if isinstance(lang, str) else None)
                    metas.append(dumps_meta(obj) if cfg.keep_meta else None)
                    if len(texts) + len(bad) >= self.batch_rows:
                        yield flush()
        except READ_ERRORS as exc:   # truncated gzip/zstd, I/O error mid-file
            yield truncated_batch(flush(), cfg.source, path, lineno, exc)
            return
        if lineno < 0:
            yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "empty_file",
                                                                       "file has no lines"))
            return
        if texts or bad:
            yield flush()


def _join_turns(turns, cfg: JsonlConfig) -> tuple[str | None, str | None]:
    """A conversation's turns as one text by the template; (None, why) when it is not one."""
    if not isinstance(turns, list) or not turns:
        return None, f"field {cfg.turns_field!r} is {'missing' if turns is None else 'not a non-empty list'}"
    parts = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get(cfg.content_key), str):
            return None, f"turn {i} has no string {cfg.content_key!r}"
        parts.append(cfg.turn_template.format(role=turn.get(cfg.role_key, ""), content=turn[cfg.content_key]))
    return cfg.turn_separator.join(parts), None


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True
