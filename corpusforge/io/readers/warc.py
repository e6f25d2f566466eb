"""WARC and WET reader (``.warc``, ``.warc.gz``, ``.wet``, ``.wet.gz``), streaming with FastWARC.

FastWARC (resiliparse's C++ WARC parser) rather than warcio: on the same pages warcio's
pure-Python header parsing alone cost more than the 20% overhead budget over the extractor
(bench/RESULTS.md "WARC reader"). HTTP bodies sent with ``Content-Encoding`` gzip/deflate/br or
``Transfer-Encoding: chunked`` are decoded here (FastWARC hands over the payload as stored).

* ``response`` records with an HTML content type and HTTP status 200: the body is decoded (see
  charsets below) and its main text extracted by ``extractor``: ``trafilatura`` (default) or
  ``resiliparse`` (about 10x faster, lower precision; bench/RESULTS.md "WARC reader").
* ``conversion`` records (WET: text already extracted by the crawler) are kept as they are.
* Everything else is rejected with a reason, never dropped: ``warc_request``, ``warc_warcinfo``,
  ``warc_metadata`` ... (records that are not documents), ``not_html`` (with the content type),
  ``http_status`` (redirects, errors), ``no_main_text`` (the extractor found nothing; the start
  of the page is kept for inspection), ``truncated_file`` (a damaged or cut gzip member: the
  records before it are kept, one rejected row stands for the rest).

Provenance: ``src_path`` the file, ``src_row`` the record's byte offset in it (its gzip member
for ``.gz``: ``warcio extract FILE OFFSET`` shows the record), ``meta``: url, date, content_type, http_status,
record_id, title, charset used and charset declared.

Charsets: the charset of the HTTP header, then of the page's ``<meta>``, is tried strictly; a
declared multi-byte or UTF-8 charset that decodes is used. A declared single-byte charset
(ISO-8859-1, windows-1252, ...: they decode anything) or none, or one that fails, is checked
against resiliparse's detector, whose answer wins when it differs (``meta.charset_corrected``):
GBK pages declared as ISO-8859-1, or not declared at all, are common on Chinese sites.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field

from corpusforge.io.readers.base import (ReadBatch, Reader, ReaderConfig, describe_os_error, dumps_meta,
                                         file_error_row, record_id, text_table, with_reasons)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.-]+)""", re.I)
_SINGLE_BYTE = {"latin_1", "iso8859_1", "cp1252", "ascii", "iso8859_15", "cp1250", "cp1251", "iso8859_2"}
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "iso8859_1": "cp1252", "latin_1": "cp1252", "ascii": "cp1252"}


class WarcConfig(ReaderConfig):
    extractor: Literal["trafilatura", "resiliparse"] = Field(
        "trafilatura", description="Main-text extractor for HTML responses.")
    keep_title: bool = Field(True, description="Keep the page title in meta.title.")


def codec_name(label: str | None) -> str | None:
    """Python's codec name for a charset label, widened to its superset (GBK -> GB18030,
    ISO-8859-1 -> windows-1252, as browsers do); None when unknown."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'").lower()).name.replace("-", "_")
    except LookupError:
        return None
    return _SUPERSETS.get(name, name)


def decode_html(raw: bytes, http_charset: str | None) -> tuple[str, str, str | None, bool]:
    """(text, codec used, charset declared, corrected?)."""
    from resiliparse.parse.encoding import detect_encoding

    m = _META_CHARSET.search(raw[:4096])
    declared = [c for c in (http_charset, m.group(1).decode("ascii", "replace") if m else None) if c]
    first = declared[0] if declared else None
    single_byte = None
    for label in declared:
        codec = codec_name(label)
        if codec is None:
            continue
        try:
            text = raw.decode(codec)
        except (UnicodeDecodeError, LookupError):
            continue
        if codec not in _SINGLE_BYTE:
            return text, codec, first, False
        single_byte = single_byte or (text, codec)
    detected = codec_name(detect_encoding(raw)) or "utf_8"
    if single_byte and (detected in _SINGLE_BYTE or detected == single_byte[1]):
        return single_byte[0], single_byte[1], first, False
    return raw.decode(detected, errors="replace"), detected, first, bool(declared) and codec_name(first) != detected


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


def extract(html: str, extractor: str) -> tuple[str | None, str | None]:
    """(main text, title) of an HTML page. The title is the page's <title> (trafilatura's own
    metadata extraction would cost more than the text: it parses dates and authors)."""
    import html as html_lib

    m = _TITLE.search(html[:20_000])
    title = " ".join(html_lib.unescape(m.group(1)).split()) or None if m else None
    if extractor == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        return extract_plain_text(HTMLTree.parse(html), main_content=True) or None, title
    import trafilatura

    return trafilatura.extract(html, include_comments=False) or None, title


def http_payload(body: bytes, headers) -> bytes:
    """The entity as the server meant it: chunked transfer encoding undone, then gzip, deflate
    or brotli content encoding."""
    if (headers.get("transfer-encoding") or "").lower().strip() == "chunked":
        out, pos = bytearray(), 0
        while pos < len(body):
            end = body.find(b"\r\n", pos)
            if end < 0:
                break
            size = int(body[pos:end].split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += body[end + 2:end + 2 + size]
            pos = end + 2 + size + 2
        body = bytes(out)
    encoding = (headers.get("content-encoding") or "").lower().strip()
    if encoding in ("gzip", "x-gzip", "deflate"):
        import zlib

        body = zlib.decompress(body, 16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS)
    elif encoding == "br":
        import brotli

        body = brotli.decompress(body)
    return body


class WarcReader(Reader):
    format = "warc"
    kinds = ("text",)
    Config = WarcConfig
    suffixes = (".warc", ".warc.gz", ".wet", ".wet.gz", ".arc.gz")

    def read(self, path: Path) -> Iterator[ReadBatch]:
        from fastwarc.warc import ArchiveIterator

        cfg: WarcConfig = self.config
        src = str(path)
        keep: dict[str, list] = {"text": [], "row": [], "meta": []}
        bad: dict[str, list] = {"text": [], "row": [], "meta": [], "reason": [], "detail": []}

        def reject(offset: int, reason: str, detail: str, meta: dict, text: str = "") -> None:
            bad["text"].append(text)
            bad["row"].append(offset)
            bad["meta"].append(dumps_meta(meta))
            bad["reason"].append(reason)
            bad["detail"].append(detail)

        def flush() -> ReadBatch:
            records = text_table(cfg.source, keep["text"], src_path=src, src_rows=keep["row"], metas=keep["meta"])
            rejected = None
            if bad["text"]:
                ids = [record_id(cfg.source, f"{src}\0{r}") for r in bad["row"]]
                rejected = with_reasons(text_table(cfg.source, bad["text"], ids=ids, src_path=src, src_rows=bad["row"],
                                                   metas=bad["meta"]), bad["reason"], bad["detail"])
            for d in (keep, bad):
                for v in d.values():
                    v.clear()
            return ReadBatch(records, rejected)

        try:
            fh = path.open("rb")
        except OSError as exc:
            yield ReadBatch(text_table(cfg.source, []), file_error_row("text", cfg.source, path, "unreadable_file",
                                                                       describe_os_error(exc)))
            return
        seen = 0
        with fh:
            try:
                for record in ArchiveIterator(fh, parse_http=False):
                    block = record.reader.read()
                    seen += 1
                    if len(block) < record.content_length:             # a cut gzip member ends quietly
                        reject(record.stream_pos, "truncated_file",
                               f"record {seen} at byte {record.stream_pos} cut short: {len(block)} of "
                               f"{record.content_length} bytes", {"records_read": seen - 1,
                                                                  "url": record.headers.get("WARC-Target-URI")})
                        break
                    self._record(record, block, cfg, keep, reject)
                    if len(keep["text"]) + len(bad["text"]) >= self.batch_rows:
                        yield flush()
            except Exception as exc:  # noqa: BLE001 - a damaged gzip member or header: stop, keep what was read
                reject(seen, "truncated_file" if seen else "not_a_warc",
                       f"after {seen} records: {type(exc).__name__}: {exc}", {"records_read": seen})
        if seen == 0 and not bad["text"]:
            reject(0, "not_a_warc", "no WARC records", {})
        elif seen and not {"truncated_file", "not_a_warc"} & set(bad["reason"]):
            # FastWARC ends quietly when a file is cut inside a record's headers or a gzip
            # member's header or trailer: check that the file itself ends where a record does
            problem = cut_short(path)
            if problem:
                reject(seen, "truncated_file", f"after {seen} records: {problem}", {"records_read": seen})
        yield flush()

    def _record(self, record, block: bytes, cfg: WarcConfig, keep: dict, reject) -> None:  # noqa: C901
        from fastwarc.warc import WarcRecordType

        offset = record.stream_pos
        h = record.headers
        kind = str(record.record_type)                               # "response", "request", ...
        meta = {"url": h.get("WARC-Target-URI"), "date": h.get("WARC-Date"), "record_id": h.get("WARC-Record-ID"),
                "warc_type": kind}
        if record.record_type == WarcRecordType.conversion:          # WET: text extracted by the crawler
            text = block.decode("utf-8", errors="replace")
            meta["content_type"] = h.get("Content-Type")
            if text.strip():
                keep["text"].append(text)
                keep["row"].append(offset)
                keep["meta"].append(dumps_meta(meta))
            else:
                reject(offset, "no_main_text", "empty conversion record", meta)
            return
        if record.record_type != WarcRecordType.response:
            reject(offset, f"warc_{kind}", f"{kind} record (not a document)", meta)
            return
        status, http, body = parse_http(block)
        ctype = http.get("content-type") or ""
        meta.update(http_status=status, content_type=ctype or None)
        if status != 200:
            reject(offset, "http_status", f"HTTP {status}", meta)
            return
        mime = ctype.split(";")[0].strip().lower()
        if mime not in ("text/html", "application/xhtml+xml", ""):
            reject(offset, "not_html", f"content type {mime}", meta)
            return
        try:
            body = http_payload(body, http)
        except Exception as exc:  # noqa: BLE001 - zlib/brotli/int errors on a damaged body
            reject(offset, "bad_encoding", f"HTTP body: {type(exc).__name__}: {exc}", meta)
            return
        charset = None
        for part in ctype.split(";")[1:]:
            k, _, v = part.partition("=")
            if k.strip().lower() == "charset":
                charset = v.strip()
        html, used, declared, corrected = decode_html(body, charset)
        meta.update(charset=used, charset_declared=declared)
        if corrected:
            meta["charset_corrected"] = True
        text, title = extract(html, cfg.extractor)
        if cfg.keep_title and title:
            meta["title"] = title
        if not text or not text.strip():
            reject(offset, "no_main_text", f"{cfg.extractor} found no main text", meta, html[:10_000])
            return
        keep["text"].append(text)
        keep["row"].append(offset)
        keep["meta"].append(dumps_meta(meta))


def parse_http(block: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of an HTTP response block."""
    head, _, body = block.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers, body


def cut_short(path: Path) -> str | None:
    """Why the file does not end where a record ends, or None. ``.gz``: every gzip member must
    be complete (a streaming zlib pass, cheap next to the HTML extraction); plain WARC: the last
    record's block is followed by the blank line that closes it."""
    import zlib

    with path.open("rb") as fh:
        if not path.name.lower().endswith(".gz"):
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 4))
            closed = fh.read().endswith((b"\r\n\r\n", b"\n\n"))
            return None if closed else "the last record is not closed (file cut short)"
        obj, members, fed = zlib.decompressobj(31), 0, False
        while chunk := fh.read(1 << 20):
            while chunk:
                try:
                    obj.decompress(chunk)
                except zlib.error as exc:
                    return f"gzip member {members + 1} is damaged ({exc})"
                fed = True
                if not obj.eof:
                    break
                members, chunk, fed = members + 1, obj.unused_data, False
                obj = zlib.decompressobj(31)
        if fed and not obj.eof:
            return f"gzip member {members + 1} ends before its end (file cut short)"
    return None
