"""A labelled near-duplicate set built from the real corpora in ../shared/data.

Base documents: windows of Tiny Shakespeare (English) and long lines of the Chinese Wikipedia
and CLUE news samples. For a third of them, a near-duplicate variant is made by one controlled
change of the kind that crawls produce:

* ``edit``     1-2% of the words (characters for Chinese) substituted, inserted or deleted
* ``reorder``  two sentences swapped
* ``insert``   one sentence of other text inserted (<= 5% of the length)
* ``delete``   one sentence removed
* ``boiler``   a header and a footer line added

True negatives are all other pairs; hard negatives are documents made of half of one base
document and half of another (true Jaccard ~0.3 with each), labelled not near-duplicate.
A pair is labelled positive when both documents derive from the same base by the changes
above (a base and its variant). ``evaluate`` scores a clustering against the labels.
"""

from __future__ import annotations

import random
import re
from itertools import combinations
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "text"
SENT = re.compile(r"(?<=[.!?。！？])\s*")


def _sentences(text: str) -> list[str]:
    return [s for s in SENT.split(text) if s]


def _join(sents: list[str], zh: bool) -> str:
    return ("" if zh else " ").join(sents)


def _vary(text: str, kind: str, rng: random.Random, zh: bool, filler: list[str]) -> str:
    if kind == "edit":
        units = list(text) if zh else text.split(" ")
        for _ in range(max(1, int(len(units) * rng.uniform(0.01, 0.02)))):
            i = rng.randrange(len(units))
            op = rng.random()
            if op < 0.5:
                units[i] = rng.choice("的是了在和" if zh else ["and", "the", "then", "so"])
            elif op < 0.75:
                units.insert(i, rng.choice("很也都" if zh else ["very", "also", "now"]))
            else:
                del units[i]
        return ("" if zh else " ").join(units)
    sents = _sentences(text)
    if kind == "reorder" and len(sents) > 3:
        i, j = rng.sample(range(len(sents)), 2)
        sents[i], sents[j] = sents[j], sents[i]
    elif kind == "insert":
        extra = rng.choice(filler)
        while len(extra) > 0.05 * len(text):
            extra = extra[: len(extra) // 2]
        sents.insert(rng.randrange(len(sents) + 1), extra)
    elif kind == "delete" and len(sents) > 5:
        del sents[rng.randrange(len(sents))]
    elif kind == "boiler":
        return ("转载请注明出处\n" if zh else "Posted by admin on the archive\n") + text + (
            "\n版权所有" if zh else "\nShare this page")
    return _join(sents, zh)


def make(n_en: int = 300, n_zh: int = 300, seed: int = 0) -> tuple[list[str], list[int], list[str]]:
    """Documents, the base each derives from (its family; -1 for hard negatives), and the change."""
    rng = random.Random(seed)
    text = (DATA / "tinyshakespeare.txt").read_text()
    en = [text[i:i + 1800].replace("\n", " ") for i in range(0, n_en * 1800, 1800)]
    zh = [line for f in ("zhwiki_sample.zh.txt", "clue_corpus_small_sample.zh.txt")
          for line in (DATA / f).read_text().splitlines() if len(line) > 400][:n_zh]
    bases = [(t, False) for t in en] + [(t, True) for t in zh]
    docs, family, change = [], [], []
    for b, (t, is_zh) in enumerate(bases):
        docs.append(t)
        family.append(b)
        change.append("base")
    kinds = ["edit", "reorder", "insert", "delete", "boiler"]
    for b, (t, is_zh) in enumerate(bases):
        if b % 3 == 0:
            kind = kinds[(b // 3) % len(kinds)]
            pool = zh if is_zh else en
            filler = _sentences(pool[(b + 7) % len(pool)])
            docs.append(_vary(t, kind, rng, is_zh, filler))
            family.append(b)
            change.append(kind)
    for b in range(0, len(bases) - 1, 10):       # hard negatives: half of one, half of the next
        (t1, z1), (t2, z2) = bases[b], bases[b + 1]
        if z1 == z2:
            docs.append(t1[: len(t1) // 2] + t2[len(t2) // 2:])
            family.append(-1)
            change.append("half_mix")
    return docs, family, change


def evaluate(family: list[int], cluster: list[object]) -> dict:
    """Pairwise precision and recall of a clustering (``cluster[i]`` None = singleton)."""
    truth = {}
    for i, f in enumerate(family):
        if f >= 0:
            truth.setdefault(f, []).append(i)
    positives = {p for members in truth.values() for p in combinations(sorted(members), 2)}
    groups = {}
    for i, c in enumerate(cluster):
        if c is not None:
            groups.setdefault(c, []).append(i)
    predicted = {p for members in groups.values() for p in combinations(sorted(members), 2)}
    tp = len(positives & predicted)
    return {"positives": len(positives), "predicted": len(predicted), "true_positives": tp,
            "precision": tp / len(predicted) if predicted else 1.0,
            "recall": tp / len(positives) if positives else 1.0}
