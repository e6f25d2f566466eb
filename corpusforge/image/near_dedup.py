"""``image.near_dedup``: perceptual-hash near-duplicate removal (a global stage).

fingerprint (map, per unit):
    each image is decoded once at a small size (JPEGs at a DCT-scaled draft, EXIF orientation
    applied, alpha flattened onto white) and shrunk to a ``hash_size`` (64) square grey
    thumbnail; imagehash's ``hash`` (dhash by default; phash, ahash, whash) of it is the 64-bit
    key, and of its mirror too when ``flip_invariant``. A ``ssim_size`` (32) thumbnail, a colour
    histogram (when verifying by histogram), the pixel count and the quality score are kept.
    Images that do not decode get a null hash and are rejected with the decoder's reason.
resolve (reduce, once):
    * candidate pairs: every pair of hashes within ``max_distance`` bits, found by multi-index
      hashing (``hamming.py``; no all-pairs loop; a million hashes in seconds);
    * verification of each candidate pair, all configured checks must pass: ``ssim``
      (scikit-image's SSIM of the grey thumbnails, Gaussian window as in Wang et al.,
      ``data_range`` 255 for 8-bit; with ``flip_invariant`` the better of the pair and the
      mirrored pair), ``histogram`` (cosine of 8x8x8 RGB histograms) and ``embedding`` (cosine
      of a vector column the user brings, e.g. CLIP features);
    * clusters are connected components of the verified pairs; the representative is a colour
      member over a greyscale one, then the member with the most pixels, then the best ``quality_score`` (a column, the sharpness
      score of ``image.quality`` by default), then the earliest. It is kept; every other member
      is rejected as ``near_duplicate`` naming the representative's id and file, with its Hamming
      distance and SSIM to it; every member gets ``tag_image_cluster`` = the representative's id.
filter (map): the generic decisions filter.

Defaults (dhash, ``max_distance`` 10, ``min_ssim`` 0.6) are calibrated on scikit-image's 21
photographs, ``bench/bench_image_dedup_quality.py``: half-size, JPEG quality 20, lossless and
mirrored copies all found, 2% crops 19 of 21, 25% brighter 20 of 21 (the misses move 11-15
bits of dHash), no different photos merged (closest: 14 bits, SSIM 0.40). The search cost
grows steeply with ``max_distance`` (1M hashes: 7 s at 6, 125 s at 10); see bench/RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import cv2
import imagehash
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from PIL import Image
from pydantic import Field

from corpusforge.clusters import FixedRows, clusters, gather_column, spills
from corpusforge.image.decode import DEFAULT_MAX_PIXELS, ImageProblem, analysis_image
from corpusforge.image.hamming import near_pairs
from corpusforge.stage import GlobalStage, StageConfig, StageStats, write_decisions

HASHES = {"dhash": imagehash.dhash, "phash": imagehash.phash, "ahash": imagehash.average_hash,
          "whash": imagehash.whash}
HIST_BINS = 8


class ImageDedupConfig(StageConfig):
    hash: Literal["dhash", "phash", "ahash", "whash"] = "dhash"
    max_distance: int = Field(10, ge=0, le=32, description="Hamming distance (of 64 bits) for candidate pairs.")
    flip_invariant: bool = Field(False, description="Also match left-right mirrored copies.")
    verify: list[Literal["ssim", "histogram", "embedding"]] = Field(default_factory=lambda: ["ssim"])
    min_ssim: float = Field(0.6, ge=-1, le=1)
    min_histogram_cosine: float = Field(0.9, ge=0, le=1)
    embedding_column: str | None = Field(None, description="A list<float> column of feature vectors for 'embedding'.")
    min_embedding_cosine: float = Field(0.95, ge=-1, le=1)
    hash_size: int = Field(64, ge=16, le=256, description="Side of the grey thumbnail the hash is computed from.")
    ssim_size: int = Field(32, ge=8, le=256, description="Side of the grey thumbnail compared by SSIM.")
    quality_score: str | None = Field("score_image_sharpness", description="Column that breaks ties between equal-sized members.")
    blocks: int | None = Field(None, ge=2, le=64, description="Multi-index blocks; chosen from the data size when unset.")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)


def hash_bits(h: imagehash.ImageHash) -> int:
    return int.from_bytes(np.packbits(h.hash.ravel()).tobytes(), "big")


def has_colour(rgb: Image.Image, threshold: float = 6.0) -> bool:
    """True when the picture has chroma: the mean spread between its R, G and B channels is
    above ``threshold`` levels (a greyscale image saved as RGB has none; JPEG noise adds ~1-2)."""
    a = np.asarray(rgb.convert("RGB"), np.int16)
    return bool((a.max(axis=2) - a.min(axis=2)).mean() > threshold)


def thumbnail(data: bytes, size: int, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[Image.Image, Image.Image, int]:
    """(grey thumbnail, RGB thumbnail, pixels decoded), thumbnails ``size`` square."""
    im = analysis_image(data, min_side=size, max_pixels=max_pixels)
    w, h = im.size
    rgb = np.asarray(im.convert("RGB"))
    small = cv2.resize(rgb, (size, size), interpolation=cv2.INTER_AREA if w * h > size * size else cv2.INTER_LINEAR)
    return Image.fromarray(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY), "L"), Image.fromarray(small, "RGB"), w * h


def shrink(grey: Image.Image, size: int) -> np.ndarray:
    a = np.asarray(grey)
    return a if a.shape[0] == size else cv2.resize(a, (size, size), interpolation=cv2.INTER_AREA)


def colour_histogram(rgb: Image.Image) -> np.ndarray:
    a = np.asarray(rgb).reshape(-1, 3) // (256 // HIST_BINS)
    idx = (a[:, 0].astype(np.int32) * HIST_BINS + a[:, 1]) * HIST_BINS + a[:, 2]
    return np.bincount(idx, minlength=HIST_BINS ** 3).astype(np.float32)


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return float(structural_similarity(a, b, data_range=255, gaussian_weights=True, sigma=1.5,
                                       use_sample_covariance=False))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else 0.0


class ImageNearDedup(GlobalStage):
    name = "image.near_dedup"
    kinds = ("image",)
    Config = ImageDedupConfig

    def tag_columns(self) -> tuple[str, ...]:
        return ("tag_image_cluster",)

    # -- map ------------------------------------------------------------------------------
    def fingerprint(self, table: pa.Table) -> pa.Table:
        c: ImageDedupConfig = self.config
        fn = HASHES[c.hash]
        n = table.num_rows
        hashes, flips = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
        ok = np.zeros(n, bool)
        pixels = np.zeros(n, np.int64)
        colour = np.zeros(n, np.int8)
        thumbs = np.zeros((n, c.ssim_size * c.ssim_size), np.uint8)
        hists = np.zeros((n, HIST_BINS ** 3), np.float32) if "histogram" in c.verify else None
        problem, problem_detail = [None] * n, [None] * n
        # the representative is chosen by full-size pixel count: from the columns (the header's
        # size), not from the thumbnail's source, which a JPEG draft has already shrunk
        full = pc.multiply(pc.cast(table.column("width"), pa.int64()), pc.cast(table.column("height"), pa.int64()))
        full = full.to_numpy(zero_copy_only=False)
        for i, data in enumerate(table.column("image").to_pylist()):
            try:
                grey, rgb, decoded = thumbnail(data or b"", c.hash_size, c.max_pixels)
                pixels[i] = decoded if np.isnan(full[i]) else full[i]
            except ImageProblem as p:
                problem[i], problem_detail[i] = p.reason, p.detail
                continue
            ok[i] = True
            colour[i] = has_colour(rgb)
            hashes[i] = hash_bits(fn(grey))
            if c.flip_invariant:
                flips[i] = hash_bits(fn(grey.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))
            thumbs[i] = shrink(grey, c.ssim_size).ravel()
            if hists is not None:
                hists[i] = colour_histogram(rgb)
        mask = ~ok
        cols = {"id": table.column("id"), "src_path": table.column("src_path"),
                "hash": pa.array(hashes, pa.uint64(), mask=mask), "pixels": pa.array(pixels, pa.int64()),
                "colour": pa.array(colour, pa.int8()),
                "thumb": _fixed(thumbs), "problem": pa.array(problem, pa.string()),
                "problem_detail": pa.array(problem_detail, pa.string())}
        if c.flip_invariant:
            cols["hash_flip"] = pa.array(flips, pa.uint64(), mask=mask)
        if hists is not None:
            cols["hist"] = _fixed(hists.view(np.uint8))
        if c.quality_score:
            cols["quality"] = (table.column(c.quality_score).cast(pa.float64()) if c.quality_score in table.column_names
                               else pa.nulls(n, pa.float64()))
        if "embedding" in c.verify:
            if not c.embedding_column or c.embedding_column not in table.column_names:
                raise KeyError(f"verify: embedding needs embedding_column; {c.embedding_column!r} is not a column")
            cols["embedding"] = table.column(c.embedding_column).cast(pa.list_(pa.float32()))
        return pa.table(cols)

    # -- reduce ---------------------------------------------------------------------------
    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: ImageDedupConfig = self.config
        sp = spills(fingerprint_files)
        files, sizes, n, units, rows_in_unit, column = sp.files, sp.sizes, sp.n, sp.units, sp.rows, sp.column
        decisions = []
        if n == 0:
            write_decisions(workdir, _decisions(decisions))
            return
        problem = np.array(column("problem").to_pylist(), dtype=object)
        bad = np.flatnonzero(problem != None)  # noqa: E711 - elementwise
        if len(bad):
            details = column("problem_detail").to_pylist()
            for g in bad:
                stats.counters[f"undecodable_{problem[g]}"] += 1
            decisions.append((bad, problem[bad].tolist(), [details[g] for g in bad], [None] * len(bad)))

        good = np.flatnonzero(problem == None)  # noqa: E711
        hashes = pc.fill_null(column("hash"), 0).to_numpy()           # nulls: the undecodable, never compared
        flips = pc.fill_null(column("hash_flip"), 0).to_numpy() if c.flip_invariant else None
        keys, owner = hashes[good], good
        if c.flip_invariant:
            keys, owner = np.concatenate([keys, flips[good]]), np.concatenate([good, good])
        edges, _ = near_pairs(keys, c.max_distance, c.blocks)
        pairs = np.sort(owner[edges], axis=1) if len(edges) else np.zeros((0, 2), np.int64)
        pairs = np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0) if len(pairs) else pairs
        stats.counters["candidate_pairs"] = len(pairs)

        thumbs = FixedRows(files, sizes, np.unique(pairs), "thumb", c.ssim_size * c.ssim_size) if len(pairs) else None
        keep = np.ones(len(pairs), bool)
        if len(pairs) and "ssim" in c.verify:
            side = c.ssim_size
            scores = np.array([self._ssim(thumbs[u].reshape(side, side), thumbs[v].reshape(side, side)) for u, v in pairs])
            stats.counters["rejected_by_ssim"] = int((scores < c.min_ssim).sum())
            keep &= scores >= c.min_ssim
        if len(pairs) and "histogram" in c.verify:
            hists = FixedRows(files, sizes, np.unique(pairs), "hist", HIST_BINS ** 3 * 4)
            cos = np.array([cosine(hists[u].view(np.float32), hists[v].view(np.float32)) for u, v in pairs])
            stats.counters["rejected_by_histogram"] = int((keep & (cos < c.min_histogram_cosine)).sum())
            keep &= cos >= c.min_histogram_cosine
        if len(pairs) and "embedding" in c.verify:
            emb = gather_column(files, sizes, np.unique(pairs), "embedding")
            cos = np.array([cosine(np.asarray(emb[int(u)] or [], np.float64), np.asarray(emb[int(v)] or [], np.float64))
                            if emb[int(u)] and emb[int(v)] and len(emb[int(u)]) == len(emb[int(v)]) else 0.0
                            for u, v in pairs])
            stats.counters["rejected_by_embedding"] = int((keep & (cos < c.min_embedding_cosine)).sum())
            keep &= cos >= c.min_embedding_cosine
        pairs = pairs[keep]
        stats.counters["verified_pairs"] = len(pairs)

        if len(pairs):
            # colour before greyscale (a grey copy keeps less of the picture), then pixels, then quality
            rank = [column("colour").to_numpy().astype(np.float64), column("pixels").to_numpy().astype(np.float64)]
            if c.quality_score:
                rank.append(column("quality").to_numpy(zero_copy_only=False).astype(np.float64))
            cl = clusters(pairs, n, rank)
            reps = np.unique(cl.rep)
            ids, paths = gather_column(files, sizes, reps, "id"), gather_column(files, sizes, reps, "src_path")
            side = c.ssim_size
            detail = []
            for m, r, size in zip(cl.members, cl.rep, cl.size):
                if m == r:
                    detail.append(None)
                    continue
                d = int(np.bitwise_count(hashes[m] ^ hashes[r]))
                if flips is not None:
                    d = min(d, int(np.bitwise_count(flips[m] ^ hashes[r])))
                s = self._ssim(thumbs[m].reshape(side, side), thumbs[r].reshape(side, side))
                where = f" ({paths[int(r)]})" if paths[int(r)] else ""
                detail.append(f"near-duplicate of {ids[int(r)]}{where}: cluster of {size}, Hamming {d}, SSIM {s:.2f}")
            is_rep = cl.is_rep
            decisions.append((cl.members, [None if x else "near_duplicate" for x in is_rep], detail,
                              [ids[int(r)] for r in cl.rep]))
            stats.counters["clusters"] = cl.count
            stats.counters["duplicates"] = int((~is_rep).sum())
            stats.counters["largest_cluster"] = cl.largest
        write_decisions(workdir, _decisions(decisions, units, rows_in_unit))

    def _ssim(self, a: np.ndarray, b: np.ndarray) -> float:
        s = ssim(a, b)
        return max(s, ssim(a, b[:, ::-1])) if self.config.flip_invariant else s


def _fixed(rows: np.ndarray) -> pa.FixedSizeBinaryArray:
    rows = np.ascontiguousarray(rows)
    width = rows.shape[1] * rows.itemsize
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(rows), [None, pa.py_buffer(rows.tobytes())])


def _decisions(parts: list, units: np.ndarray | None = None, rows_in_unit: np.ndarray | None = None) -> pa.Table:
    gids = np.concatenate([p[0] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
    return pa.table({
        "unit": pa.array(units[gids] if len(gids) else [], pa.int32()),
        "row": pa.array(rows_in_unit[gids] if len(gids) else [], pa.int64()),
        "reason": pa.array([x for p in parts for x in p[1]], pa.string()),
        "detail": pa.array([x for p in parts for x in p[2]], pa.string()),
        "tag_image_cluster": pa.array([x for p in parts for x in p[3]], pa.string()),
    })
