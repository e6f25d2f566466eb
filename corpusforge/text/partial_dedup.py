"""Partial copies: documents that reuse a large part of another one (a global stage).

Document-level MinHash compares whole documents: a 300-word piece cut out of a 5,000-word
article has a Jaccard similarity of about 0.06 with it and is never a candidate. Containment
is the right measure: the share of the smaller document's content found in the larger one.

fingerprint: the distinct segments of each document, hashed (list<uint64>), and their number.
    ``unit: ngrams`` (default): word ``ngram``-grams, lowercased, punctuation ignored (character
    ``cjk_ngram``-grams for Chinese and Japanese), so a copy with cuts, reordered sentences or
    a few changed words keeps most of its n-grams; ``unit: sentences``: sentences of at least
    ``min_chars`` normalized characters (exact sentence reuse only).
resolve: partitioned by hash (``partitions`` passes, each reading only its hashes, so memory
    is bounded by a partition): segments found in more than ``max_doc_freq`` documents are
    boilerplate and ignored (``text.line_dedup`` removes those); every pair of documents
    sharing a segment gets a count; containment(A in B) = shared / segments of A.
    A is a partial copy when containment >= ``threshold`` and A is the smaller of the two (on a
    tie, the later one in input order), so a pair of equal copies loses exactly one; its source
    is the document that contains most of it.
action: ``remove`` rejects the copy as ``partial_copy``; ``flag`` keeps it. Either way the copy
    gets ``tag_partial_copy_of`` = the id of the document it was copied from.

Defaults (word 3-grams, CJK character 3-grams, threshold 0.2) were chosen on the dev split of labelled
partial copies built from WikiText-2 and Chinese Wikipedia (``bench/labelled_partial_copies.py``,
``bench/bench_partial_copies.py``): excerpts, light edits and heavy, spun rewrites (25-40% of the
words changed) count as copies, another passage of the same article does not. The earlier 4-grams
(5 characters) at 0.3 missed most heavy rewrites.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, model_validator

from corpusforge.stage import GlobalStage, StageConfig, StageStats, write_decisions
from corpusforge.text.features import is_cjk, languages
from corpusforge.text.minhash import shingle
from corpusforge.text.segments import SENTENCE, segment_hashes


class PartialDedupConfig(StageConfig):
    unit: Literal["ngrams", "sentences"] = Field("ngrams", description="What containment counts: word n-grams or sentences.")
    threshold: float = Field(0.2, gt=0, le=1, description="Share of the copy's segments found in the source "
                                    "(default 0.2 for ngrams, 0.6 for sentences).")
    ngram: int = Field(3, ge=1, description="Words per n-gram (unit: ngrams).")
    cjk_ngram: int = Field(3, ge=1, description="Characters per n-gram for zh/ja documents (unit: ngrams).")
    min_segments: int = Field(20, ge=1, description="Documents with fewer segments are not judged "
                                     "(default 20 n-grams, 3 sentences).")
    min_chars: int = Field(20, ge=1, description="Sentences shorter than this (normalized) are ignored (unit: sentences).")
    max_doc_freq: int = Field(50, ge=2, description="Segments in more documents than this are boilerplate.")
    action: Literal["remove", "flag"] = "remove"
    partitions: int = Field(4, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _sentence_defaults(cls, data):
        if isinstance(data, dict) and data.get("unit") == "sentences":
            data = {"threshold": 0.6, "min_segments": 3, **data}
        return data


class PartialDedup(GlobalStage):
    name = "text.partial_dedup"
    kinds = ("text",)
    Config = PartialDedupConfig

    def tag_columns(self) -> tuple[str, ...]:
        return ("tag_partial_copy_of",)

    def fingerprint(self, table: pa.Table) -> pa.Table:
        c: PartialDedupConfig = self.config
        texts = pl.Series("t", table.column("text").combine_chunks(), pl.String)
        if c.unit == "ngrams":
            sh = shingle(texts, is_cjk(languages(table)), c.ngram, c.cjk_ngram)
            distinct = pl.DataFrame({"d": sh.doc, "h": sh.hashes}).unique(maintain_order=True)
            doc, h = distinct["d"].to_numpy(), distinct["h"].to_numpy()
        else:
            doc, h, _ = segment_hashes(texts, SENTENCE, c.min_chars)
        counts = np.bincount(doc, minlength=table.num_rows)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return pa.table({"id": table.column("id"), "n_segments": pa.array(counts.astype(np.int32)),
                         "segments": pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(h, pa.uint64()))})

    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: PartialDedupConfig = self.config
        files = [str(f) for f in fingerprint_files]
        sizes = [pq.read_metadata(f).num_rows for f in files]
        n = int(sum(sizes))
        meta = pl.concat([pl.read_parquet(f, columns=["unit", "row", "id", "n_segments"]) for f in files]) \
            if n else pl.DataFrame()
        if n == 0:
            write_decisions(workdir, _empty())
            return
        gid_offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        n_sent = meta["n_segments"].to_numpy()
        shared_parts = []
        for p in range(c.partitions):
            parts = []
            for f, off in zip(files, gid_offsets):
                t = pl.read_parquet(f, columns=["segments"]).with_row_index("gid", offset=int(off))
                t = t.explode("segments").drop_nulls("segments")
                parts.append(t.filter(pl.col("segments") % c.partitions == p))
            ex = pl.concat(parts).with_columns(pl.col("gid").cast(pl.Int64))
            groups = ex.group_by("segments").agg(pl.col("gid"))
            groups = groups.filter((pl.col("gid").list.len() > 1) & (pl.col("gid").list.len() <= c.max_doc_freq))
            stats.counters["boilerplate_sentences_ignored"] += int(
                ex.group_by("segments").len().filter(pl.col("len") > c.max_doc_freq).height)
            if groups.height == 0:
                continue
            pairs = (groups.select(pl.col("gid").alias("a"), pl.col("gid").alias("b"))
                     .explode("a").explode("b").filter(pl.col("a") != pl.col("b")))
            shared_parts.append(pairs.group_by(["a", "b"]).len())
        if not shared_parts:
            write_decisions(workdir, _empty())
            return
        shared = pl.concat(shared_parts).group_by(["a", "b"]).agg(pl.col("len").sum())
        a, b, k = (shared[x].to_numpy() for x in ("a", "b", "len"))
        contain = k / np.maximum(n_sent[a], 1)
        is_copy = ((contain >= c.threshold) & (n_sent[a] >= c.min_segments)
                   & ((n_sent[a] < n_sent[b]) | ((n_sent[a] == n_sent[b]) & (a > b))))
        stats.counters["pairs_sharing_sentences"] = int(len(a) // 2)
        if not is_copy.any():
            write_decisions(workdir, _empty())
            return
        cand = pl.DataFrame({"a": a[is_copy], "b": b[is_copy], "c": contain[is_copy]})
        best = cand.sort(["a", "c", "b"], descending=[False, True, False]).group_by("a", maintain_order=True).first()
        copies, sources, share = best["a"].to_numpy(), best["b"].to_numpy(), best["c"].to_numpy()
        ids = meta["id"].to_numpy()
        stats.counters["partial_copies"] = len(copies)
        remove = c.action == "remove"
        write_decisions(workdir, pa.table({
            "unit": meta["unit"].to_numpy()[copies], "row": meta["row"].to_numpy()[copies],
            "reason": pa.array(["partial_copy" if remove else None] * len(copies), pa.string()),
            "detail": pa.array([f"{s:.0%} of its {c.unit} appear in {ids[b]}" if remove else None
                                for s, b in zip(share, sources)], pa.string()),
            "tag_partial_copy_of": pa.array(ids[sources], pa.string()),
        }))


def _empty() -> pa.Table:
    return pa.table({"unit": pa.array([], pa.int32()), "row": pa.array([], pa.int64()),
                     "reason": pa.array([], pa.string()), "detail": pa.array([], pa.string()),
                     "tag_partial_copy_of": pa.array([], pa.string())})
