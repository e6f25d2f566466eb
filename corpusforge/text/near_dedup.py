"""Near-duplicate removal with MinHash LSH (a global stage: fingerprint, resolve, filter).

fingerprint (map, per unit):
    MinHash signature of each document (``minhash.py``: word n-grams, character n-grams for
    CJK), its LSH band keys as separate uint64 columns ``b0..b{B-1}``, its id and shingle count,
    and the representative score column when one is configured. Written to Parquet per unit:
    this is the spill, so the corpus never has to fit in memory.
resolve (reduce, once):
    * bands and rows come from the config or from datasketch's parameter optimiser for the
      target Jaccard ``threshold`` (equal weights on false positives and negatives);
    * one band at a time (one column of every fingerprint file), documents with the same key
      become candidate edges (a star per bucket); memory holds one band and the edges;
    * ``verify: signature`` (default) keeps edges whose signature agreement (estimated
      Jaccard) reaches the threshold, reading only the candidates' signatures, file by file;
      ``verify: exact`` recomputes true Jaccard from stored shingle hashes; ``none`` keeps all;
    * clusters are connected components (scipy.sparse.csgraph);
    * the representative of a cluster is the document with the highest ``representative_score``
      column (if configured and present), then the earliest in input order. It is kept; every
      other member is rejected as ``near_duplicate`` naming the representative, and every
      member gets ``tag_minhash_cluster`` = the representative's id.
filter (map): the generic decisions filter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, model_validator

from corpusforge.clusters import FixedRows, clusters, gather_column, spills
from corpusforge.stage import GlobalStage, StageConfig, StageStats, write_decisions
from corpusforge.text.features import languages, is_cjk
from corpusforge.text.minhash import band_keys, shingle, signatures


class NearDedupConfig(StageConfig):
    threshold: float = Field(0.7, gt=0, le=1, description="Target Jaccard similarity of near-duplicates (0.7: BigCode; FineWeb's 14x8 bands are about 0.72).")
    num_perm: int = Field(128, ge=16, le=1024, description="Signature length.")
    bands: int | None = Field(None, ge=1, description="LSH bands; derived from threshold when unset.")
    rows: int | None = Field(None, ge=1, description="Rows per band; derived from threshold when unset.")
    ngram: int = Field(5, ge=1, description="Shingle size in words.")
    cjk_ngram: int = Field(5, ge=1, description="Shingle size in characters for zh/ja documents.")
    verify: Literal["signature", "exact", "none"] = "signature"
    representative_score: str | None = Field(
        None, description="Column whose highest value picks a cluster's representative (e.g. a quality score).")
    seed: int = 1

    @model_validator(mode="after")
    def _bands(self):
        if (self.bands is None) != (self.rows is None):
            raise ValueError("set both bands and rows, or neither (then they are derived from threshold)")
        if self.bands is not None and self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows = {self.bands * self.rows} exceeds num_perm {self.num_perm}")
        return self

    def lsh_params(self) -> tuple[int, int]:
        if self.bands is not None:
            return self.bands, self.rows
        from datasketch.lsh import _optimal_param

        return _optimal_param(self.threshold, self.num_perm, 0.5, 0.5)


class NearDedup(GlobalStage):
    name = "text.near_dedup"
    kinds = ("text",)
    Config = NearDedupConfig

    def tag_columns(self) -> tuple[str, ...]:
        return ("tag_minhash_cluster",)

    # -- map ------------------------------------------------------------------------------
    def fingerprint(self, table: pa.Table) -> pa.Table:
        c: NearDedupConfig = self.config
        bands, rows = c.lsh_params()
        texts = pl.Series("text", table.column("text").combine_chunks(), pl.String)
        cjk = is_cjk(languages(table))
        sh = shingle(texts, cjk, c.ngram, c.cjk_ngram)
        sig = signatures(sh, c.num_perm, c.seed)
        keys = band_keys(sig, bands, rows, c.seed)
        counts = sh.counts()
        cols = {"id": table.column("id"), "n_shingles": pa.array(counts.astype(np.int32)),
                "sig": pa.FixedSizeBinaryArray.from_buffers(pa.binary(4 * c.num_perm), len(sig),
                                                           [None, pa.py_buffer(np.ascontiguousarray(sig).tobytes())])}
        for j in range(bands):
            cols[f"b{j}"] = pa.array(keys[:, j], pa.uint64(), mask=counts == 0)   # no shingles: no bucket
        if c.representative_score:
            cols["score"] = (table.column(c.representative_score).cast(pa.float64())
                             if c.representative_score in table.column_names else pa.nulls(table.num_rows, pa.float64()))
        if c.verify == "exact":
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            cols["shingles"] = pa.ListArray.from_arrays(pa.array(offsets, pa.int64()).cast(pa.int32()),
                                                        pa.array(sh.hashes, pa.uint64()))
        return pa.table(cols)

    # -- reduce ---------------------------------------------------------------------------
    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: NearDedupConfig = self.config
        bands, rows = c.lsh_params()
        stats.counters["lsh_bands"], stats.counters["lsh_rows"] = bands, rows
        sp = spills(fingerprint_files)
        files, sizes, n, units, rows_in_unit = sp.files, sp.sizes, sp.n, sp.units, sp.rows
        if n == 0:
            write_decisions(workdir, _empty_decisions())
            return
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])

        # candidate edges, one band at a time; a document's global id is its position in the
        # concatenation of the fingerprint files (unit order, then row order)
        edges = []
        for j in range(bands):
            keys = pa.chunked_array([pq.read_table(f, columns=[f"b{j}"]).column(0) for f in files])
            band = pl.DataFrame({"k": pl.Series(keys), "gid": np.arange(n, dtype=np.int64)}).drop_nulls("k")
            buckets = (band.group_by("k").agg(pl.col("gid").sort()).filter(pl.col("gid").list.len() > 1)
                       .select(pl.col("gid").list.first().alias("u"), pl.col("gid").list.slice(1).alias("v"))
                       .explode("v"))
            if buckets.height:
                edges.append(buckets.select("u", "v").to_numpy())
        stats.counters["candidate_pairs"] = 0
        if not edges:
            write_decisions(workdir, _empty_decisions())
            return
        pairs = np.unique(np.concatenate(edges).astype(np.int64), axis=0)
        stats.counters["candidate_pairs"] = len(pairs)

        sigs = FixedRows(files, sizes, np.unique(pairs), "sig", 4 * c.num_perm)
        sigs.rows = sigs.rows.view(np.uint32)      # signatures are uint32 rows
        similarity = (sigs[pairs[:, 0]] == sigs[pairs[:, 1]]).mean(axis=1)
        if c.verify == "signature":
            pairs, similarity = pairs[similarity >= c.threshold], similarity[similarity >= c.threshold]
        elif c.verify == "exact":
            true = _exact_jaccard(files, offsets, pairs)
            keep = true >= c.threshold
            pairs, similarity = pairs[keep], true[keep]
        stats.counters["verified_pairs"] = len(pairs)
        if not len(pairs):
            write_decisions(workdir, _empty_decisions())
            return

        score = None
        if c.representative_score:
            score = np.concatenate([pq.read_table(f, columns=["score"]).column("score").to_numpy(zero_copy_only=False)
                                    for f in files]).astype(np.float64)
        cl = clusters(pairs, n, [score] if score is not None else [])
        members, rep, is_rep, size = cl.members, cl.rep, cl.is_rep, cl.size
        ids = gather_column(files, sizes, np.unique(rep), "id")
        est = (sigs[members] == sigs[rep]).mean(axis=1)
        detail = [None if r else f"near-duplicate of {ids[int(p)]} (cluster of {s}; estimated Jaccard {j:.2f})"
                  for r, p, s, j in zip(is_rep, rep, size, est)]
        stats.counters["clusters"] = cl.count
        stats.counters["duplicates"] = int((~is_rep).sum())
        stats.counters["largest_cluster"] = cl.largest
        write_decisions(workdir, pa.table({
            "unit": units[members].astype(np.int32), "row": rows_in_unit[members],
            "reason": pa.array([None if r else "near_duplicate" for r in is_rep], pa.string()),
            "detail": pa.array(detail, pa.string()),
            "tag_minhash_cluster": pa.array([ids[int(p)] for p in rep], pa.string()),
        }))
        np.save(workdir / "cluster_sizes.npy", cl.size_histogram())


def _exact_jaccard(files: list[str], offsets: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    need = np.unique(pairs)
    sets = {}
    for f, off in zip(files, offsets):
        t = pq.read_table(f, columns=["shingles"])
        local = need[(need >= off) & (need < off + t.num_rows)] - off
        for g, lst in zip(local + off, t.column("shingles").take(pa.array(local)).to_pylist()):
            sets[int(g)] = set(lst or ())
    out = np.empty(len(pairs))
    for i, (u, v) in enumerate(pairs):
        a, b = sets[int(u)], sets[int(v)]
        out[i] = len(a & b) / max(1, len(a | b))
    return out


def _empty_decisions() -> pa.Table:
    return pa.table({"unit": pa.array([], pa.int32()), "row": pa.array([], pa.int64()),
                     "reason": pa.array([], pa.string()), "detail": pa.array([], pa.string()),
                     "tag_minhash_cluster": pa.array([], pa.string())})
