"""Calibrate image near-duplicate defaults on real photographs (scikit-image).

For each of 21 photos: Hamming distance (dhash, phash, ahash, whash, on the stage's grey hash
thumbnail) and SSIM (on its SSIM thumbnail) of each near-duplicate variant to its original,
and of every pair of *different* photos. Reported per variant: the largest distance, the
smallest SSIM and how many of the 21 the stage's defaults find (distance <= max_distance
and SSIM >= min_ssim); for different photos the smallest distance, the largest SSIM and how
many pairs the defaults would merge.

    .venv/bin/python bench/bench_image_dedup_quality.py
"""

from __future__ import annotations

import sys
from itertools import combinations
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_photos import PHOTOS, encode, photo, variants  # noqa: E402

from corpusforge.image.near_dedup import HASHES, ImageDedupConfig, hash_bits, shrink, ssim, thumbnail  # noqa: E402

CFG = ImageDedupConfig()


def fingerprint(data: bytes):
    grey, _, _ = thumbnail(data, CFG.hash_size)
    flip = grey.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return ({k: hash_bits(f(grey)) for k, f in HASHES.items()}, {k: hash_bits(f(flip)) for k, f in HASHES.items()},
            shrink(grey, CFG.ssim_size))


def bits(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


def main() -> None:
    originals = {n: fingerprint(encode(photo(n))) for n in PHOTOS}
    print(f"hash thumbnail {CFG.hash_size}px, SSIM thumbnail {CFG.ssim_size}px; defaults: {CFG.hash}, "
          f"max_distance {CFG.max_distance}, min_ssim {CFG.min_ssim}; {len(PHOTOS)} photos\n")
    print("| variant | " + " | ".join(f"{h} max" for h in HASHES) + f" | SSIM min | found by defaults |")
    print("|---|" + "---|" * (len(HASHES) + 2))
    for var in ("resized_half", "jpeg_q20", "crop_2pct", "brighter", "png", "mirror"):
        dist = {h: [] for h in HASHES}
        sims = []
        for n in PHOTOS:
            hv, _, tv = fingerprint(variants(photo(n))[var])
            ho, fo, to = originals[n]
            for h in HASHES:      # a mirror is matched by the original's mirrored hash (flip_invariant)
                dist[h].append(bits(hv[h], fo[h] if var == "mirror" else ho[h]))
            sims.append(ssim(to, tv[:, ::-1]) if var == "mirror" else ssim(to, tv))
        found = sum(d <= CFG.max_distance and s >= CFG.min_ssim for d, s in zip(dist[CFG.hash], sims))
        print(f"| {var} | " + " | ".join(str(max(dist[h])) for h in HASHES)
              + f" | {min(sims):.3f} | {found}/{len(PHOTOS)} |")
    print("\n| different photos | " + " | ".join(f"{h} min" for h in HASHES) + " | SSIM max | merged by defaults |")
    print("|---|" + "---|" * (len(HASHES) + 2))
    dist = {h: [] for h in HASHES}
    sims = []
    for a, b in combinations(PHOTOS, 2):
        (ha, fa, ta), (hb, fb, tb) = originals[a], originals[b]
        for h in HASHES:
            dist[h].append(min(bits(ha[h], hb[h]), bits(ha[h], fb[h])))
        sims.append(max(ssim(ta, tb), ssim(ta, tb[:, ::-1])))
    merged = sum(d <= CFG.max_distance and s >= CFG.min_ssim for d, s in zip(dist[CFG.hash], sims))
    print(f"| {len(sims)} pairs, either orientation | " + " | ".join(str(min(dist[h])) for h in HASHES)
          + f" | {max(sims):.3f} | {merged} |")


if __name__ == "__main__":
    main()
