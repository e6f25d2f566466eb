"""Exact-substring deduplication (Lee et al. 2021), a global stage.

Every span of at least ``min_tokens`` tokens that occurs more than once in the corpus is kept
at its first occurrence (input order: unit, then row, then position) and cut from the later
ones. A span occurs twice exactly when each of its windows of ``min_tokens`` tokens does, so
the stage works on windows (tokens and hashes in ``substring_tokens.py``):

fingerprint (map): the 128-bit hash of every window of ``min_tokens`` tokens inside each
    document (windows never cross documents).
resolve (reduce): the windows are spilled into P hash partitions, P chosen so that one
    partition fits ``memory_mb``; in each, windows whose hash occurs more than once are
    duplicates, and all but the first occurrence are cut (``keep: none`` cuts every
    occurrence, as deduplicate-text-datasets' ``collect`` does). A document's cut windows are
    merged into token intervals; the document holding the first occurrence of most of its
    cut windows is its source.
filter (map): the intervals are cut from the text, each from its first token's first
    character to the first character of the token after it (punctuation and spacing inside
    the copy go with it; in ``bytes`` units, exactly those bytes, widened to whole
    characters). A document left with fewer than ``min_remaining`` tokens is rejected as
    ``substring_duplicate`` (its text as it came in); ``action: flag`` keeps every document
    unchanged. Each row gets ``count_substring_dup_spans``, ``count_substring_dup_bytes``
    and ``tag_substring_dup_of`` (the source's id).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, model_validator

from corpusforge.clusters import gather_column, spills
from corpusforge.stage import DECISIONS, GlobalStage, StageConfig, StageResult, StageStats, split
from corpusforge.text.substring_tokens import Tokens, tokens, window_hashes

WINDOW_BYTES = 128    # measured working set per window in a partition (hashes, ids, sort, flags)
TOP_SPANS = 20        # most repeated spans: their text goes into the stats and the report
TOP_SPANS_FILE = "top_spans.json"


class SubstringDedupConfig(StageConfig):
    min_tokens: int = Field(50, ge=2, description="Shortest repeated span cut, in `unit`s (Lee et al.: 50 tokens).")
    unit: Literal["words", "bytes", "tokenizer"] = Field(
        "words", description="words: letter/digit runs, each CJK character one token; bytes: UTF-8 bytes; "
                             "tokenizer: ids of the `tokenizer` file.")
    tokenizer: str | None = Field(None, description="tokenizers JSON file, for unit: tokenizer.")
    keep: Literal["first", "none"] = Field("first", description="first: the first occurrence stays; none: every "
                                                                "occurrence is cut (deduplicate-text-datasets).")
    min_remaining: int = Field(20, ge=0, description="Documents left with fewer tokens than this are rejected.")
    action: Literal["remove", "flag"] = "remove"
    memory_mb: int = Field(1024, ge=1, description="Memory for one hash partition in the resolve step.")

    @model_validator(mode="after")
    def _tokenizer(self):
        if (self.unit == "tokenizer") != (self.tokenizer is not None):
            raise ValueError("tokenizer: set it exactly when unit is 'tokenizer'")
        return self


class SubstringDedup(GlobalStage):
    name = "text.substring_dedup"
    kinds = ("text",)
    Config = SubstringDedupConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_substring_dup_of": pa.string(), "count_substring_dup_spans": pa.int64(),
                "count_substring_dup_bytes": pa.int64()}

    def _tokens(self, texts: pa.Array) -> Tokens:
        tok = None
        if self.config.unit == "tokenizer":
            tok = getattr(self, "_tok", None)
            if tok is None:
                from corpusforge.text.tokenize import load_tokenizer

                tok = self._tok = load_tokenizer(self.config.tokenizer, self.name)
        return tokens(texts, self.config.unit, tok)

    # -- map ------------------------------------------------------------------------------
    def fingerprint(self, table: pa.Table) -> pa.Table:
        tok = self._tokens(table.column("text").combine_chunks())
        h1, h2, doc = window_hashes(tok, self.config.min_tokens)
        offsets = pa.array(np.r_[0, np.cumsum(np.bincount(doc, minlength=tok.n_docs))], pa.int64())
        return pa.table({"id": table.column("id"), "n_tokens": pa.array(tok.counts(), pa.int64()),
                         "h1": pa.LargeListArray.from_arrays(offsets, pa.array(h1, pa.uint64())),
                         "h2": pa.LargeListArray.from_arrays(offsets, pa.array(h2, pa.uint64()))})

    # -- reduce ---------------------------------------------------------------------------
    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: SubstringDedupConfig = self.config
        sp = spills(fingerprint_files)
        n_tokens = sp.column("n_tokens").to_numpy() if sp.n else np.zeros(0, np.int64)
        windows = int(np.maximum(n_tokens - c.min_tokens + 1, 0).sum())
        parts = max(1, math.ceil(windows * WINDOW_BYTES / (c.memory_mb << 20)))
        stats.counters["windows"], stats.counters["partitions"] = windows, parts
        scratch = Path(workdir) / "_partitions"
        buckets = _find_repeats(_partition(sp, scratch, parts), scratch, parts, sp.n, c.keep, stats)
        top = _write_decisions(workdir, sp, n_tokens, buckets, c, stats)
        shutil.rmtree(scratch, ignore_errors=True)
        (Path(workdir) / TOP_SPANS_FILE).write_text(json.dumps(top))

    # -- filter ---------------------------------------------------------------------------
    def filter(self, table: pa.Table, unit: int, row_offset: int, workdir: Path, stats: StageStats) -> StageResult:
        c: SubstringDedupConfig = self.config
        dec = self._unit_cuts(workdir, unit)
        lo, hi = np.searchsorted(dec["row"], [row_offset, row_offset + table.num_rows])
        n = table.num_rows
        spans, cut_bytes = np.zeros(n, np.int64), np.zeros(n, np.int64)
        source = np.full(n, None, dtype=object)
        reason, detail = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
        texts = table.column("text").to_pylist()
        rows = dec["row"][lo:hi] - row_offset
        top = [t for t in self._listed_spans(workdir) if t["unit"] == unit and 0 <= t["row"] - row_offset < n]
        need = sorted(set(rows.tolist()) | {t["row"] - row_offset for t in top})
        starts = {}
        if need:
            tok = self._tokens(pa.array([texts[i] for i in need], pa.large_string()))
            bounds = np.r_[0, np.cumsum(tok.counts())]
            starts = {i: tok.starts[bounds[k]:bounds[k + 1]] for k, i in enumerate(need)}
        for t in top:           # the text of the most repeated spans, for the report
            i = t["row"] - row_offset
            span = _span_text(texts[i], starts[i], t["start"], t["end"], c.unit)
            stats.counters[f"repeated_span: {span[:300]}"] = t["count"]
        for k, i in enumerate(rows):
            d = lo + k
            new = _cut(texts[i], starts[i], dec["starts"][d], dec["ends"][d], c.unit)
            spans[i] = len(dec["starts"][d])
            cut_bytes[i] = len(texts[i].encode()) - len(new.encode())
            source[i] = dec["source"][d]
            stats.counters["spans_cut"] += int(spans[i])
            stats.counters["bytes_cut"] += int(cut_bytes[i])
            stats.counters[f"bytes_cut[{table.column('source')[i].as_py()}]"] += int(cut_bytes[i])
            if dec["reason"][d] is not None and c.action == "remove":
                reason[i], detail[i] = dec["reason"][d], dec["detail"][d]
            elif c.action == "remove":
                texts[i] = new
        if len(rows) and c.action == "remove":
            table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
        table = (table.append_column("tag_substring_dup_of", pa.array(source, pa.string()))
                 .append_column("count_substring_dup_spans", pa.array(spans))
                 .append_column("count_substring_dup_bytes", pa.array(cut_bytes)))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)

    def _listed_spans(self, workdir: Path) -> list[dict]:
        cache = getattr(self, "_top_cache", None)
        if cache is None or cache[0] != str(workdir):
            cache = self._top_cache = (str(workdir), json.loads((Path(workdir) / TOP_SPANS_FILE).read_text()))
        return cache[1]

    def _unit_cuts(self, workdir: Path, unit: int) -> dict:
        cache = getattr(self, "_cut_cache", None)
        if cache is not None and cache[0] == (str(workdir), unit):
            return cache[1]
        t = pq.read_table(Path(workdir) / DECISIONS, filters=[("unit", "=", unit)]).sort_by("row")
        out = {"row": t.column("row").to_numpy(), "starts": t.column("starts").to_pylist(),
               "ends": t.column("ends").to_pylist(), "source": t.column("source").to_pylist(),
               "reason": t.column("reason").to_pylist(), "detail": t.column("detail").to_pylist()}
        self._cut_cache = ((str(workdir), unit), out)
        return out


def _partition(sp, scratch: Path, parts: int) -> list[Path]:
    """Spill every window as (h1, h2, gid, pos) into the partition ``h1 mod parts``, reading each
    fingerprint file once, a row group (one runner batch) at a time; returns the partition files."""
    scratch.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("h1", pa.uint64()), ("h2", pa.uint64()), ("gid", pa.int64()), ("pos", pa.int64())])
    paths = [scratch / f"p{p:05d}.arrow" for p in range(parts)]
    writers = [pa.ipc.new_file(str(p), schema) for p in paths]
    gid0 = 0
    for f in sp.files:
        pf = pq.ParquetFile(f)
        # (read_row_group, not iter_batches: the latter's memory grew with every batch, measured)
        for t in (pf.read_row_group(i, columns=["h1", "h2"]) for i in range(pf.metadata.num_row_groups)):
            h1 = t.column(0).combine_chunks()
            lengths = h1.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
            gid = np.repeat(np.arange(gid0, gid0 + t.num_rows, dtype=np.int64), lengths)
            pos = np.arange(len(gid), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            v1 = h1.flatten().to_numpy()
            v2 = t.column(1).combine_chunks().flatten().to_numpy()
            gid0 += t.num_rows
            if parts == 1:
                writers[0].write_table(pa.table([v1, v2, gid, pos], schema=schema))
                continue
            part = (v1 % np.uint64(parts)).astype(np.uint16 if parts < 1 << 16 else np.uint32)
            order = np.argsort(part, kind="stable")          # a radix sort for 16-bit keys: input order kept
            bounds = np.searchsorted(part[order], np.arange(parts + 1))
            for p in range(parts):
                sel = order[bounds[p]:bounds[p + 1]]
                if len(sel):
                    writers[p].write_table(pa.table([v1[sel], v2[sel], gid[sel], pos[sel]], schema=schema))
    for w in writers:
        w.close()
    return paths


CUT = pa.schema([("gid", pa.int64()), ("pos", pa.int64()), ("src", pa.int64())])
FIRST = pa.schema([("gid", pa.int64()), ("pos", pa.int64()), ("count", pa.int64())])


def _find_repeats(partitions: list[Path], scratch: Path, parts: int, n_docs: int, keep: str,
                  stats: StageStats) -> list[tuple[Path, Path]]:
    """In each hash partition, the windows whose hash occurs more than once. The windows to cut
    (gid, pos, src: the document of the first occurrence) and the first occurrences (gid, pos,
    count) are written again, bucketed by document range, so that each document's windows can
    be merged into intervals one bucket at a time; returns the (cut, first) files of each bucket."""
    paths = [(scratch / f"cut{b:05d}.arrow", scratch / f"first{b:05d}.arrow") for b in range(parts)]
    writers = [(pa.ipc.new_file(str(c), CUT), pa.ipc.new_file(str(f), FIRST)) for c, f in paths]
    repeated_windows = 0
    for path in partitions:
        with pa.memory_map(str(path)) as src:
            df = pl.from_arrow(pa.ipc.open_file(src).read_all())
        # windows arrive in input order (gid, then pos), so after a stable sort by hash the first
        # row of each run of equal hashes is the first occurrence (a hash filter first measured slower)
        df = df.sort(["h1", "h2"], maintain_order=True)
        h1, h2 = df["h1"].to_numpy(), df["h2"].to_numpy()
        gid, pos = df["gid"].to_numpy(), df["pos"].to_numpy()
        del df
        if not len(h1):
            continue
        first = np.empty(len(h1), bool)
        first[0] = True
        first[1:] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
        del h1, h2
        group = np.cumsum(first) - 1
        count = np.bincount(group)[group]
        repeated = count > 1
        src = gid[np.flatnonzero(first)][group]
        del group
        lead = first & repeated
        repeated_windows += int(lead.sum())
        cut = repeated if keep == "none" else repeated & ~first
        for k, sel, cols in ((0, cut, (gid, pos, src)), (1, lead, (gid, pos, count))):
            bucket = (gid[sel] * parts // max(n_docs, 1)).astype(np.uint16 if parts < 1 << 16 else np.uint32)
            order = np.argsort(bucket, kind="stable")          # radix sort: input order kept within a bucket
            bounds = np.searchsorted(bucket[order], np.arange(parts + 1))
            chosen = [col[sel][order] for col in cols]
            for b in range(parts):
                if bounds[b + 1] > bounds[b]:
                    writers[b][k].write_table(pa.table([col[bounds[b]:bounds[b + 1]] for col in chosen],
                                                       schema=(CUT, FIRST)[k]))
    for cut_writer, first_writer in writers:
        cut_writer.close()
        first_writer.close()
    stats.counters["repeated_windows"] = repeated_windows
    return paths


def _read_sorted(path: Path) -> pl.DataFrame:
    with pa.memory_map(str(path)) as src:
        return pl.from_arrow(pa.ipc.open_file(src).read_all()).sort(["gid", "pos"])


def _intervals(gid: np.ndarray, pos: np.ndarray, length: int, same: np.ndarray | None = None) -> np.ndarray:
    """Interval number of each window (sorted by gid, pos): windows of ``length`` that overlap
    or touch in the same document (and, with ``same``, have equal ``same``) share one."""
    new = np.r_[True, (gid[1:] != gid[:-1]) | (pos[1:] > pos[:-1] + length)]
    if same is not None:
        new[1:] |= same[1:] != same[:-1]
    return np.cumsum(new) - 1


def _most_repeated(firsts: pl.DataFrame, sp, length: int) -> list[dict]:
    """The most repeated spans of one bucket (first occurrences of runs of repeated windows
    with one count), longest first among equals: where they are, for the filter to read."""
    if not firsts.height:
        return []
    gid, pos, count = (firsts[c].to_numpy() for c in ("gid", "pos", "count"))
    spans = (pl.DataFrame({"k": _intervals(gid, pos, length, count), "gid": gid, "pos": pos, "count": count})
             .group_by("k").agg(pl.col("gid").first(), pl.col("pos").min().alias("start"),
                                (pl.col("pos").max() + length).alias("end"), pl.col("count").first())
             .with_columns((pl.col("end") - pl.col("start")).alias("len"))
             .sort(["count", "len", "gid", "start"], descending=[True, True, False, False]).head(TOP_SPANS))
    return [{"unit": int(sp.units[g]), "row": int(sp.rows[g]), "start": int(a), "end": int(b), "count": int(k),
             "len": int(b - a), "gid": int(g)} for g, a, b, k in spans.select("gid", "start", "end", "count").iter_rows()]


DECISION = pa.schema([("unit", pa.int32()), ("row", pa.int64()), ("starts", pa.large_list(pa.int64())),
                      ("ends", pa.large_list(pa.int64())), ("source", pa.string()), ("reason", pa.string()),
                      ("detail", pa.string())])


def _write_decisions(workdir: Path, sp, n_tokens: np.ndarray, buckets: list[tuple[Path, Path]],
                     c: SubstringDedupConfig, stats: StageStats) -> list[dict]:
    """One bucket of documents at a time: merge each document's cut windows into token intervals
    and write a decision row for every document that loses anything (in gid order, which is
    (unit, row) order). Returns the most repeated spans over all buckets."""
    L = c.min_tokens
    top: list[dict] = []
    docs_cut = tokens_cut = 0
    with pq.ParquetWriter(str(Path(workdir) / DECISIONS), DECISION) as out:
        for cut_path, first_path in buckets:
            top = sorted(top + _most_repeated(_read_sorted(first_path), sp, L),
                         key=lambda t: (-t["count"], -t["len"], t["gid"], t["start"]))[:TOP_SPANS]
            cut = _read_sorted(cut_path)
            if not cut.height:
                continue
            gid, pos = cut["gid"].to_numpy(), cut["pos"].to_numpy()
            iv = (pl.DataFrame({"gid": gid, "start": pos, "end": pos + L, "k": _intervals(gid, pos, L)})
                  .group_by("k", maintain_order=True).agg(pl.col("gid").first(), pl.col("start").min(), pl.col("end").max()))
            per_doc = iv.group_by("gid", maintain_order=True).agg(
                "start", "end", (pl.col("end") - pl.col("start")).sum().alias("cut"))
            src = (cut.group_by(["gid", "src"]).len().sort(["gid", "len", "src"], descending=[False, True, False])
                   .group_by("gid", maintain_order=True).first())
            per_doc = per_doc.join(src.select("gid", "src"), on="gid", how="left").sort("gid")
            g = per_doc["gid"].to_numpy()
            ids = gather_column(sp.files, sp.sizes, np.unique(per_doc["src"].to_numpy()), "id")
            left = n_tokens[g] - per_doc["cut"].to_numpy()
            short = left < c.min_remaining
            src_ids = [ids[int(x)] for x in per_doc["src"].to_numpy()]
            docs_cut += len(g)
            tokens_cut += int(per_doc["cut"].sum())
            out.write_table(pa.table({
                "unit": pa.array(sp.units[g], pa.int32()), "row": pa.array(sp.rows[g], pa.int64()),
                "starts": per_doc["start"].to_arrow().cast(pa.large_list(pa.int64())),
                "ends": per_doc["end"].to_arrow().cast(pa.large_list(pa.int64())),
                "source": pa.array(src_ids, pa.string()),
                "reason": pa.array(["substring_duplicate" if x else None for x in short], pa.string()),
                "detail": pa.array([f"{r} of {n_tokens[d]} {c.unit} left after cutting spans first seen in {i}"
                                    if x else None for d, r, x, i in zip(g, left, short, src_ids)], pa.string()),
            }, schema=DECISION))
    stats.counters["documents_with_cuts"] = docs_cut
    stats.counters["tokens_cut"] = tokens_cut
    return top


def _span_text(text: str, starts: np.ndarray, start: int, end: int, unit: str) -> str:
    if unit == "bytes":
        return text.encode()[start:end].decode(errors="replace")
    return text[int(starts[start]):int(starts[end]) if end < len(starts) else len(text)].strip()


def _cut(text: str, starts: np.ndarray, iv_start: list[int], iv_end: list[int], unit: str) -> str:
    """``text`` without the token intervals [iv_start, iv_end)."""
    if unit == "bytes":
        raw = text.encode()
        pieces, at = [], 0
        for s, e in zip(iv_start, iv_end):
            while s > 0 and (raw[s] & 0xC0) == 0x80:      # widen to whole characters
                s -= 1
            while e < len(raw) and (raw[e] & 0xC0) == 0x80:
                e += 1
            pieces.append(raw[at:max(at, s)])
            at = max(at, e)
        return (b"".join(pieces) + raw[at:]).decode()
    pieces, at = [], 0
    for s, e in zip(iv_start, iv_end):
        a = int(starts[s])
        b = int(starts[e]) if e < len(starts) else len(text)
        pieces.append(text[at:a])
        at = b
    return "".join(pieces) + text[at:]
