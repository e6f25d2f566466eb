"""Image hashing throughput: the ``image.near_dedup`` fingerprint step vs calling imagehash on
each file, on the same real photographs, in the same run, one core.

Images: scikit-image's 21 photographs saved as JPEG (quality 90) and PNG at their own size
(about 0.25 megapixel) and enlarged 3x (about 2 megapixels, a phone or web photo), repeated
to ``--count`` files per set. For each set:

  baseline   ``imagehash.dhash(PIL.Image.open(path))`` per file (the issue's reference)
  stage      read every file's bytes, build the Arrow table, then ``ImageNearDedup.fingerprint``
             with the default config: decode (JPEG at a DCT-scaled draft), EXIF orientation,
             alpha flattening, 64-px grey thumbnail, dhash, the 32-px SSIM thumbnail

OpenCV and the BLAS are held to one thread.

    .venv/bin/python bench/bench_image_hash.py [--count 210] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cv2  # noqa: E402
import imagehash  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import xxhash  # noqa: E402
from PIL import Image  # noqa: E402

from corpusforge.image.near_dedup import ImageNearDedup, hash_bits  # noqa: E402
from image_photos import PHOTOS, photo  # noqa: E402
from timing import best  # noqa: E402


def write_set(folder: Path, fmt: str, scale: int, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        name = PHOTOS[i % len(PHOTOS)]
        im = photo(name)
        if scale != 1:
            im = im.resize((im.width * scale, im.height * scale), Image.Resampling.BICUBIC)
        p = folder / f"{i:04d}_{name}.{fmt.lower()}"
        im.save(p, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        paths.append(p)
    return paths


def baseline(paths: list[Path]) -> list[int]:
    return [hash_bits(imagehash.dhash(Image.open(p))) for p in paths]


def stage_run(stage: ImageNearDedup, paths: list[Path]) -> pa.Table:
    data = [p.read_bytes() for p in paths]
    sizes = [Image.open(p).size for p in paths]
    table = pa.table({"id": [xxhash.xxh3_128_hexdigest(d) for d in data], "src_path": [str(p) for p in paths],
                      "image": pa.array(data, pa.binary()), "width": pa.array([s[0] for s in sizes], pa.int32()),
                      "height": pa.array([s[1] for s in sizes], pa.int32())})
    return stage.fingerprint(table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=210)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    stage = ImageNearDedup(ImageNearDedup.Config())
    print(f"{args.count} files per set, best of {args.repeats}; one thread\n")
    print("| set | MP/image | imagehash.dhash(Image.open) img/s | stage img/s | ratio | hashes within 6 bits of baseline |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("JPEG", "PNG"):
            for scale in (1, 3):
                paths = write_set(Path(tmp) / f"{fmt}{scale}", fmt, scale, args.count)
                mp = np.mean([np.prod(Image.open(p).size) for p in paths]) / 1e6
                t_base, ref = best(lambda: baseline(paths), args.repeats)
                t_stage, fp = best(lambda: stage_run(stage, paths), args.repeats)
                ours = fp.column("hash").to_numpy()
                close = np.mean(np.bitwise_count(ours ^ np.array(ref, np.uint64)) <= 6)
                print(f"| {fmt} x{scale} | {mp:.2f} | {len(paths) / t_base:.0f} | {len(paths) / t_stage:.0f} | "
                      f"{t_base / t_stage:.2f}x | {close:.0%} |", flush=True)


if __name__ == "__main__":
    main()
