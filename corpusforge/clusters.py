"""What every near-duplicate resolve does after it has its verified pairs: connected
components, one representative per cluster, and reading a column back for chosen rows.

Rows are named by *global id*: their position in the concatenation of the fingerprint files
(unit order, then row order), as the text and image dedup stages number them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


@dataclass
class Spills:
    """A global stage's fingerprint files, as the resolve step sees them: their row counts, and
    for every global id the unit and the row within the unit it came from."""

    files: list[str]
    sizes: np.ndarray
    units: np.ndarray
    rows: np.ndarray

    @property
    def n(self) -> int:
        return int(self.sizes.sum())

    def column(self, name: str) -> pa.ChunkedArray:
        """One column of every file, in global-id order."""
        typ = pq.read_schema(self.files[0]).field(name).type
        return pa.chunked_array([pq.read_table(f, columns=[name]).column(0) for f in self.files], type=typ)


def spills(fingerprint_files) -> Spills:
    files = [str(f) for f in fingerprint_files]
    sizes = np.array([pq.read_metadata(f).num_rows for f in files], dtype=np.int64)
    if not sizes.sum():
        return Spills(files, sizes, np.zeros(0, np.int32), np.zeros(0, np.int64))
    units = np.concatenate([pq.read_table(f, columns=["unit"]).column("unit").to_numpy() for f in files])
    return Spills(files, sizes, units, np.concatenate([np.arange(s) for s in sizes]))


@dataclass
class Clusters:
    members: np.ndarray        # global ids in a cluster of two or more, ascending
    label: np.ndarray          # the cluster of each member
    rep: np.ndarray            # the representative (a global id) of each member's cluster
    size: np.ndarray           # the size of each member's cluster
    count: int                 # clusters
    largest: int

    @property
    def is_rep(self) -> np.ndarray:
        return self.members == self.rep

    def size_histogram(self) -> np.ndarray:
        """Clusters by size: element s is the number of clusters of s members (the report's table)."""
        return np.bincount(np.bincount(self.label)[np.unique(self.label)]) if len(self.label) else np.zeros(0, np.int64)


def clusters(pairs: np.ndarray, n: int, rank: list[np.ndarray] = ()) -> Clusters:
    """Connected components of ``pairs`` over ``n`` rows; the representative of each is the
    member with the highest ``rank[0]``, ties broken by ``rank[1]`` and so on (each an array
    of length n, NaN lowest), then the earliest global id."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    sizes_by_label = np.bincount(labels)
    members = np.flatnonzero(sizes_by_label[labels] > 1)
    cols = {"gid": members, "label": labels[members]}
    for i, r in enumerate(rank):
        cols[f"r{i}"] = np.nan_to_num(np.asarray(r, np.float64)[members], nan=-np.inf)
    order = ["label"] + [f"r{i}" for i in range(len(rank))] + ["gid"]
    reps = (pl.DataFrame(cols).sort(order, descending=[False] + [True] * len(rank) + [False])
            .group_by("label", maintain_order=True).agg(pl.col("gid").first()))
    rep_of = np.zeros(len(sizes_by_label), np.int64)
    rep_of[reps["label"].to_numpy()] = reps["gid"].to_numpy()
    return Clusters(members, labels[members], rep_of[labels[members]], sizes_by_label[labels[members]],
                    count=reps.height, largest=int(sizes_by_label.max(initial=0)) if len(members) else 0)


def gather_column(files: list[str], sizes: np.ndarray, gids: np.ndarray, column: str) -> dict[int, object]:
    """{global id: value} of one column for the given sorted global ids, one file at a time
    (only that file's column in memory)."""
    out, start = {}, 0
    for f, size in zip(files, sizes):
        lo, hi = np.searchsorted(gids, [start, start + size])
        if hi > lo:
            values = pq.read_table(f, columns=[column]).column(0).take(pa.array(gids[lo:hi] - start)).to_pylist()
            out.update(zip(gids[lo:hi].tolist(), values))
        start += size
    return out


class FixedRows:
    """A fixed-size binary column (signatures, thumbnails, histograms) for chosen global ids,
    as rows of ``width`` bytes, read one fingerprint file at a time: memory holds the chosen
    rows and one file's column, never the whole corpus."""

    def __init__(self, files: list[str], sizes: np.ndarray, gids: np.ndarray, column: str, width: int):
        self.gids = gids
        self.rows = np.empty((len(gids), width), np.uint8)
        start = 0
        for f, size in zip(files, sizes):
            lo, hi = np.searchsorted(gids, [start, start + size])
            if hi > lo:
                col = pq.read_table(f, columns=[column]).column(0).combine_chunks()
                raw = np.frombuffer(col.buffers()[1], np.uint8, count=len(col) * width,
                                    offset=col.offset * width).reshape(len(col), width)
                self.rows[lo:hi] = raw[gids[lo:hi] - start]
            start += size

    def __getitem__(self, gid) -> np.ndarray:
        return self.rows[np.searchsorted(self.gids, gid)]
