"""Labelled partial copies built from real encyclopedic text, to calibrate ``text.partial_dedup``.

Sources: WikiText-2 articles (``bench/data/partial_copies``, see SOURCES.md), lightly
detokenized; ``dev`` is the validation split (thresholds are chosen on it), ``test`` the test
split (reported, never tuned on). Chinese: paragraphs of the shared zhwiki sample, split in two
halves the same way.

Each source is a passage of an article (its lead and following paragraphs, 250-700 words). For
every source one derived document is made, of one kind:

* ``cut``        50-90% of the source's sentences, in order (contiguous or not), possibly with up
                 to 30% new text from another article around them            -> positive
* ``light``      a cut, then light edits: 6-15% of the words substituted, deleted or inserted, two
                 sentences swapped                                           -> positive
* ``heavy``      a cut, then heavy edits: 25-40% of the words changed and most sentences
                 reordered (a paraphrase by machine, as article spinners make) -> positive
* ``same_topic`` another passage of the same article (same subject, names and terms, written
                 independently)                                              -> negative

A pair (derived, source) is positive for ``cut``, ``light`` and ``heavy``. A derived document that
took new text from another article's passage also copies that passage when it is in the corpus:
such a pair is ``inserted``, a real copy relation that is neither counted as found nor as false.
A detector is scored on pairs: found when either document is tagged as a partial copy of the
other; every other pair it tags is a false positive.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "partial_copies"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "text"
SENT = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
KINDS = ("cut", "light", "heavy", "same_topic")
POSITIVE = ("cut", "light", "heavy")
FILLER = ["also", "very", "then", "however", "which", "many", "large", "early", "later", "several", "new", "main"]


@dataclass
class Labelled:
    docs: list[str]                 # every document of the corpus: sources, derived, distractors
    pairs: dict[tuple[int, int], str]   # (derived index, source index) -> kind


def _detok(text: str) -> str:
    # WikiText replaced rare words with <unk>; one shared word for all of them would make
    # unrelated passages share n-grams ("unknown unknown pattern"): give each its own
    text = re.sub(r"<unk>", lambda m: f"rare{zlib.crc32(m.string[:m.start()].encode()) % 100000}", text)
    text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    text = re.sub(r" ([.,;:!?)\]'])", r"\1", text)
    text = re.sub(r"([(\[]) ", r"\1", text)
    return re.sub(r'" (.*?) "', r'"\1"', text).strip()


def _articles(split: str) -> list[list[str]]:
    """Articles as lists of paragraphs (section headings dropped)."""
    lines = (DATA / f"wikitext2_{'valid' if split == 'dev' else 'test'}.txt").read_text(encoding="utf-8").splitlines()
    arts: list[list[str]] = []
    for line in lines:
        s = line.strip()
        if re.fullmatch(r"= [^=].* =", s):
            arts.append([])
        elif s and not s.startswith("= =") and arts:
            arts[-1].append(_detok(s))
    return [a for a in arts if sum(len(p.split()) for p in a) > 900]


def _passages(paragraphs: list[str], lo: int, hi: int) -> list[str]:
    """Consecutive paragraphs grouped into passages of lo..hi words."""
    out, cur = [], []
    for p in paragraphs:
        cur.append(p)
        n = sum(len(x.split()) for x in cur)
        if n >= lo:
            text = " ".join(cur)
            out.append(" ".join(text.split()[:hi]))
            cur = []
    return out


def _sentences(text: str) -> list[str]:
    return [s for s in SENT.split(text) if s.strip()]


def _cut(text: str, rng: random.Random, zh: bool, other: str) -> tuple[str, bool]:
    """(the cut, whether it took sentences of ``other``)."""
    sents = _sentences(text)
    share = rng.uniform(0.5, 0.9)
    k = max(2, round(len(sents) * share))
    if rng.random() < 0.5:
        a = rng.randrange(0, len(sents) - k + 1)
        chosen = sents[a:a + k]
    else:
        chosen = [sents[i] for i in sorted(rng.sample(range(len(sents)), k))]
    extra = _sentences(other)
    new = extra[:rng.randrange(0, max(1, int(len(extra) * 0.3)))] if rng.random() < 0.5 else []
    parts = new[: len(new) // 2] + chosen + new[len(new) // 2:]
    return ("" if zh else " ").join(parts), bool(new)


def _edit(text: str, rng: random.Random, zh: bool, rate: float, swaps: int, vocab: list[str]) -> str:
    units = list(text) if zh else text.split(" ")
    for _ in range(max(1, int(len(units) * rate))):
        i = rng.randrange(len(units))
        op = rng.random()
        if op < 0.6:
            units[i] = rng.choice(vocab)
        elif op < 0.8:
            units.insert(i, rng.choice(vocab if zh else FILLER))
        elif len(units) > 10:
            del units[i]
    sents = _sentences(("" if zh else " ").join(units))
    for _ in range(swaps):
        if len(sents) > 2:
            i, j = rng.sample(range(len(sents)), 2)
            sents[i], sents[j] = sents[j], sents[i]
    return ("" if zh else " ").join(sents)


def english(split: str = "dev", seed: int = 0) -> Labelled:
    rng = random.Random(f"{split}-{seed}")
    arts = [_passages(a, 250, 700) for a in _articles(split)]
    arts = [a for a in arts if len(a) >= 2]
    vocab = sorted({w for a in arts for p in a for w in p.split() if w.isalpha()})
    return _build(arts, rng, False, vocab, seed)


def chinese(split: str = "dev", seed: int = 0) -> Labelled:
    rng = random.Random(f"zh-{split}-{seed}")
    lines = [l.strip() for l in (SHARED / "zhwiki_sample.zh.txt").read_text(encoding="utf-8").splitlines()
             if len(l.strip()) > 400]
    half = len(lines) // 2
    lines = lines[:half] if split == "dev" else lines[half:]
    # no article structure here: "same topic" negatives are the next paragraph of the sample
    arts = [[lines[i][:900], lines[i + 1][:900]] for i in range(0, len(lines) - 1, 2)]
    vocab = sorted({ch for a in arts for p in a for ch in p if "\u4e00" <= ch <= "\u9fff"})
    return _build(arts, rng, True, vocab, seed)


def _build(arts: list[list[str]], rng: random.Random, zh: bool, vocab: list[str], seed: int) -> Labelled:
    docs: list[str] = []
    pairs: dict[tuple[int, int], str] = {}
    took_from: list[tuple[int, str]] = []      # (derived index, the passage it took new text from)
    for i, passages in enumerate(arts):
        src = passages[0]
        other = arts[(i + 7) % len(arts)][-1]
        kind = KINDS[(i + seed) % len(KINDS)]
        if kind == "same_topic":
            derived = passages[1]
        else:
            derived, took = _cut(src, rng, zh, other)
            if kind == "light":
                derived = _edit(derived, rng, zh, rng.uniform(0.06, 0.15), 2, vocab)
            elif kind == "heavy":
                derived = _edit(derived, rng, zh, rng.uniform(0.25, 0.40), 6, vocab)
        docs += [src, derived]
        pairs[(len(docs) - 1, len(docs) - 2)] = kind
        if kind != "same_topic" and took:
            took_from.append((len(docs) - 1, other))
        docs += passages[2:4]              # more of the article: distractors on the same subject
    where = {d: j for j, d in enumerate(docs)}
    for derived_index, other in took_from:
        if other in where:
            pairs.setdefault((derived_index, where[other]), "inserted")
    return Labelled(docs, pairs)


def score(data: Labelled, found: set[tuple[int, int]]) -> dict:
    """Pair-level precision, recall and F1 over cut+light+heavy pairs; ``found`` holds unordered
    pairs (either direction) a detector tagged; ``inserted`` pairs count neither way."""
    found = {tuple(sorted(p)) for p in found}
    labelled = {tuple(sorted(p)): k for p, k in data.pairs.items()}
    pos = {p for p, k in labelled.items() if k in POSITIVE}
    tp = len(pos & found)
    fp = len({p for p in found if labelled.get(p) not in POSITIVE + ("inserted",)})
    prec = tp / max(1, tp + fp)
    rec = tp / max(1, len(pos))
    out = {"precision": prec, "recall": rec, "f1": 2 * prec * rec / max(1e-9, prec + rec), "false_pairs": fp,
           "positives": len(pos)}
    for kind in KINDS:
        ps = {p for p, k in labelled.items() if k == kind}
        out[f"found_{kind}"] = f"{len(ps & found)}/{len(ps)}"
    return out
