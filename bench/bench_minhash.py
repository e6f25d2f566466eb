"""MinHash signatures: corpusforge vs datasketch.MinHash.bulk vs datatrove, one core each.

* Throughput: corpusforge computes signatures from raw text (tokenizing and shingling
  included); datasketch gets the same shingles ready-made, as bytes (so its time is only
  hashing + permutations: a conservative comparison for corpusforge); datatrove runs its
  signature stage with the default config from raw text in its own venv. 128 permutations.
* Accuracy: pairs of real documents edited at rates from 0 to 80% (word substitutions,
  deletions, insertions, swaps), so that true Jaccard spans 0..1. True Jaccard is computed on
  the shingle sets; the mean absolute error of each estimator against it is reported.

    .venv/bin/python bench/bench_minhash.py
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "text"
DT_PY = ROOT / "bench" / ".venv-datatrove" / "bin" / "python"

from corpusforge.text.minhash import shingle, signatures  # noqa: E402


def english_docs(n_chars=2500) -> list[str]:
    text = (DATA / "tinyshakespeare.txt").read_text()
    return [text[i:i + n_chars] for i in range(0, len(text) - n_chars, n_chars)]


def edit(words: list[str], rate: float, rng: random.Random, vocab: list[str]) -> list[str]:
    out = list(words)
    for _ in range(int(rate * len(words))):
        op = rng.random()
        i = rng.randrange(len(out))
        if op < 0.4:
            out[i] = rng.choice(vocab)
        elif op < 0.7 and len(out) > 10:
            del out[i]
        elif op < 0.9:
            out.insert(i, rng.choice(vocab))
        else:
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
    return out


def shingle_strings(text: str, n: int = 5) -> list[bytes]:
    import re

    w = re.findall(r"\w+", text.lower())
    return [" ".join(w[i:i + n]).encode() for i in range(max(1, len(w) - n + 1))]


def main() -> None:
    if not DATA.exists():
        sys.exit("../shared/data is absent")
    import datasketch

    docs = english_docs()
    mb = sum(len(d.encode()) for d in docs) / 1e6
    series = pl.Series(docs)
    cjk = np.zeros(len(docs), bool)
    # --- throughput
    best_cf = min(_time(lambda: signatures(shingle(series, cjk, 5, 5), 128)) for _ in range(3))
    pre = [shingle_strings(d) for d in docs]
    best_ds = min(_time(lambda: datasketch.MinHash.bulk(pre, num_perm=128)) for _ in range(2))
    dt_seconds = None
    if DT_PY.exists():
        path = ROOT / "bench" / "_data" / "minhash_en.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        out = subprocess.run(["taskset", "-c", "0", str(DT_PY), str(ROOT / "bench" / "_datatrove_minhash.py"), str(path)],
                             capture_output=True, text=True, env=dict(os.environ, POLARS_MAX_THREADS="1"))
        dt_seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"] if out.returncode == 0 else None
        if out.returncode:
            print(out.stderr[-1500:])
    print(f"{len(docs)} docs, {mb:.2f} MB of English text, 128 permutations, 5-word shingles")
    print(f"  corpusforge (from raw text)           {mb / best_cf:7.2f} MB/s")
    print(f"  datasketch MinHash.bulk (shingled)    {mb / best_ds:7.2f} MB/s   -> corpusforge {best_ds / best_cf:.1f}x")
    if dt_seconds:
        print(f"  datatrove MinhashDedupSignature       {mb / dt_seconds:7.2f} MB/s   -> corpusforge {dt_seconds / best_cf:.1f}x")
    # --- accuracy on edited pairs
    rng = random.Random(0)
    vocab = " ".join(docs).lower().split()
    a_texts, b_texts = [], []
    for i, d in enumerate(docs[:400]):
        rate = (i % 9) * 0.1
        a_texts.append(d)
        b_texts.append(" ".join(edit(d.split(), rate, rng, vocab)))
    both = pl.Series(a_texts + b_texts)
    sig = signatures(shingle(both, np.zeros(len(both), bool), 5, 5), 128)
    est_cf = (sig[: len(a_texts)] == sig[len(a_texts):]).mean(axis=1)
    true, est_ds = [], []
    for a, b in zip(a_texts, b_texts):
        sa, sb = set(shingle_strings(a)), set(shingle_strings(b))
        true.append(len(sa & sb) / len(sa | sb))
        ma, mb_ = datasketch.MinHash.bulk([list(sa), list(sb)], num_perm=128)
        est_ds.append(ma.jaccard(mb_))
    true = np.array(true)
    print(f"Jaccard estimation on {len(true)} edited pairs (true Jaccard {true.min():.2f}..{true.max():.2f}):")
    print(f"  mean absolute error: corpusforge {np.abs(est_cf - true).mean():.4f}   "
          f"datasketch {np.abs(np.array(est_ds) - true).mean():.4f}")


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
