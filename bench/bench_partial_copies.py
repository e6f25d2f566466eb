"""Partial-copy detection on labelled sets (``labelled_partial_copies.py``), side by side:

* ``text.partial_dedup`` with its defaults (word 4-grams / CJK character 5-grams, containment 0.3)
* ``text.partial_dedup unit: sentences`` (the default before: whole-sentence containment 0.6)
* ``text.substring_dedup`` (flag mode): a document counts as a copy of the document named in
  ``tag_substring_dup_of`` when at least half of its bytes are in repeated spans of 50 words
* ``text.near_dedup`` with its defaults (document Jaccard)
* datasketch's ``MinHashLSHEnsemble`` (the field's containment index) over the same 4-gram
  shingles, containment threshold 0.3, queried with every document

and OCR-like near-duplicate books (Tiny Shakespeare cut into books, three re-keyed with
character noise and new line breaks): how many true pairs each finds and how many false pairs.

    .venv/bin/python bench/bench_partial_copies.py
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import labelled_partial_copies as L  # noqa: E402
from conftest import text_config  # noqa: E402

from corpusforge import runner  # noqa: E402
from corpusforge.io.dataset import Dataset  # noqa: E402

METHODS = {
    "partial_dedup (default: n-grams)": [{"stage": "text.partial_dedup", "action": "flag"}],
    "partial_dedup unit: sentences": [{"stage": "text.partial_dedup", "action": "flag", "unit": "sentences"}],
    "substring_dedup, >= 50% of a document": [{"stage": "text.substring_dedup", "action": "flag"}],
    "near_dedup (default)": [{"stage": "text.near_dedup"}],
}


def run_stage(docs: list[str], stages: list[dict], lang: str) -> set[tuple[int, int]]:
    """Pairs (document index, its named source's index) a stage finds."""
    tmp = Path(tempfile.mkdtemp())
    try:
        (tmp / "in").mkdir()
        with open(tmp / "in" / "docs.jsonl", "w") as fh:
            for d in docs:
                fh.write(json.dumps({"text": d, "lang": lang}, ensure_ascii=False) + "\n")
        cfg = text_config([{"format": "jsonl", "paths": [str(tmp / "in")], "source": "web", "lang_field": "lang"}],
                          tmp / "out", stages)
        runner.run(cfg)
        rows = Dataset.open(tmp / "out").read().to_pylist()
        rej = tmp / "out" / "_rejected"
        rows += Dataset.open(rej).read().to_pylist()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    index = {r["id"]: r["src_row"] for r in rows}
    found = set()
    for r in rows:
        if r.get("tag_partial_copy_of"):
            found.add((r["src_row"], index[r["tag_partial_copy_of"]]))
        if r.get("tag_substring_dup_of") and r["count_substring_dup_bytes"] >= 0.5 * len(r["text"].encode()):
            found.add((r["src_row"], index[r["tag_substring_dup_of"]]))
        if r.get("tag_minhash_cluster") and r["tag_minhash_cluster"] != r["id"]:
            found.add((r["src_row"], index[r["tag_minhash_cluster"]]))
    return found


LSH_SETTINGS = {  # the stage's defaults, and the earlier ones, which suit the approximate index better
    "datasketch MinHashLSHEnsemble (3-grams, 0.2)": (3, 3, 0.2),
    "datasketch MinHashLSHEnsemble (4-grams / 5 chars, 0.3)": (4, 5, 0.3),
}


def lsh_ensemble(docs: list[str], lang: str, n_words: int = 3, n_chars: int = 3,
                 threshold: float = 0.2) -> set[tuple[int, int]]:
    """datasketch's containment index on the stage's shingles (word / CJK character n-grams)."""
    from datasketch import MinHash, MinHashLSHEnsemble

    from corpusforge.text.minhash import shingle

    n = n_chars if lang == "zh" else n_words
    sh = shingle(pl.Series(docs), np.full(len(docs), lang == "zh"), n, n)
    sets = [set() for _ in docs]
    for h, d in zip(sh.hashes, sh.doc):
        sets[d].add(int(h))
    mh = []
    for s in sets:
        m = MinHash(num_perm=128)
        m.update_batch([v.to_bytes(8, "little") for v in s])
        mh.append(m)
    index = MinHashLSHEnsemble(threshold=threshold, num_perm=128, num_part=16)
    index.index([(i, m, max(1, len(s))) for i, (m, s) in enumerate(zip(mh, sets))])
    found = set()
    for i, (m, s) in enumerate(zip(mh, sets)):
        if len(s) < 20:
            continue
        for j in index.query(m, len(s)):
            if j != i and len(sets[j]) >= len(s):        # the smaller one is the copy, as in the stage
                found.add((i, j))
    return found


def books(seed: int = 0) -> tuple[list[str], set[tuple[int, int]]]:
    """Eight distinct 'books' of Tiny Shakespeare and three OCR-like re-keyings of three of them."""
    text = (Path(__file__).resolve().parents[2] / "shared" / "data" / "text" / "tinyshakespeare.txt").read_text()
    rng = random.Random(seed)
    size = len(text) // 8
    docs = [text[i * size:(i + 1) * size] for i in range(8)]
    pairs = set()
    for k, b in enumerate((1, 4, 6)):
        chars = list(docs[b])
        for _ in range(int(len(chars) * rng.uniform(0.01, 0.03))):      # OCR misreads
            i = rng.randrange(len(chars))
            chars[i] = rng.choice("ilrnmoe,.;'1")
        ocr = "".join(chars).replace("\n", " ")
        words = ocr.split(" ")
        lines, cur = [], []
        for w in words:                                                  # new line breaks, hyphenation
            cur.append(w)
            if sum(len(x) + 1 for x in cur) > 60:
                lines.append(" ".join(cur))
                cur = []
        docs.append("\n".join(lines + [" ".join(cur)]))
        pairs.add(tuple(sorted((8 + k, b))))
    return docs, pairs


def main() -> None:
    rows = []
    for lang, build in (("en", L.english), ("zh", L.chinese)):
        for split in ("dev", "test"):
            sets = [build(split, seed) for seed in range(4)]
            for name, how in list(METHODS.items()) + list(LSH_SETTINGS.items()):
                tp = fp = pos = 0
                kinds = {k: [0, 0] for k in L.KINDS}
                start = time.perf_counter()
                for data in sets:
                    found = (lsh_ensemble(data.docs, lang, *how) if name in LSH_SETTINGS
                             else run_stage(data.docs, how, lang))
                    r = L.score(data, found)
                    tp += round(r["recall"] * r["positives"])
                    pos += r["positives"]
                    fp += r["false_pairs"]
                    for k in L.KINDS:
                        a, b = map(int, r[f"found_{k}"].split("/"))
                        kinds[k][0] += a
                        kinds[k][1] += b
                secs = time.perf_counter() - start
                p, rc = tp / max(1, tp + fp), tp / max(1, pos)
                f1 = 2 * p * rc / max(1e-9, p + rc)
                rows.append((lang, split, name, p, rc, f1, fp, *(f"{a}/{b}" for a, b in kinds.values()), secs))
                print(f"{lang} {split:4s} {name:40s} P {p:.3f} R {rc:.3f} F1 {f1:.3f} false pairs {fp:3d} "
                      + " ".join(f"{k} {a}/{b}" for k, (a, b) in kinds.items()) + f"  {secs:.1f}s", flush=True)
    docs, truth = books()
    print("\nOCR'd near-duplicate books: 8 distinct books + 3 re-keyed copies")
    for name, how in list(METHODS.items()) + list(LSH_SETTINGS.items()):
        found = {tuple(sorted(p)) for p in (lsh_ensemble(docs, "en", *how) if name in LSH_SETTINGS
                                            else run_stage(docs, how, "en"))}
        print(f"  {name:40s} true pairs {len(found & truth)}/3, false pairs {len(found - truth)}")


if __name__ == "__main__":
    main()
