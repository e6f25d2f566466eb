"""Names, places, organisations: recall and precision of text.pii's NER per type, and docs/s.

Labelled sets (bench/data/ner, see SOURCES.md there): English WikiGold (Wikipedia sentences,
PER/LOC/ORG/MISC, CC-BY 4.0) and 1,200 sentences of People's Daily NER (the development split
of zjy-ucas/ChineseNER). A gold entity counts as found when a finding of the mapped type
overlaps it; a finding is correct when it overlaps a gold entity of its type (MISC is ignored,
neither gold nor a false find when it overlaps a MISC span).

    .venv/bin/python bench/bench_pii_ner.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

from corpusforge.text.pii import Pii  # noqa: E402

DATA = ROOT / "bench" / "data" / "ner"
GOLD = {"PER": "PERSON", "LOC": "LOCATION", "ORG": "ORGANIZATION"}


def overlaps(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def evaluate(rows: list[dict], pii: Pii) -> dict:
    stats = {t: [0, 0, 0, 0] for t in GOLD.values()}      # gold, gold found, predicted, predicted correct
    t0 = time.perf_counter()
    found = [pii.find(r["text"]) for r in rows]
    seconds = time.perf_counter() - t0
    for row, preds in zip(rows, found):
        gold = [(s, e, GOLD.get(t, t)) for s, e, t in row["spans"]]
        for s, e, t in gold:
            if t in stats:
                stats[t][0] += 1
                stats[t][1] += any(p.entity_type == t and overlaps((p.start, p.end), (s, e)) for p in preds)
        for p in preds:
            if p.entity_type not in stats:
                continue
            if any(t == "MISC" and overlaps((p.start, p.end), (s, e)) for s, e, t in gold):
                continue
            stats[p.entity_type][2] += 1
            stats[p.entity_type][3] += any(t == p.entity_type and overlaps((p.start, p.end), (s, e)) for s, e, t in gold)
    return {"docs": len(rows), "docs_per_s": len(rows) / seconds, "types": stats}


def main():
    pii = Pii(Pii.Config(entities=["PERSON", "LOCATION", "ORGANIZATION"]))
    print("| set | type | gold | recall | precision | docs/s (one core) |")
    print("|---|---|---|---|---|---|")
    for name, file in (("WikiGold (English)", "wikigold_en.jsonl"), ("People's Daily (Chinese)", "peoples_daily_zh.jsonl")):
        res = evaluate(load(DATA / file), pii)
        for t, (g, gf, p, pc) in res["types"].items():
            print(f"| {name} | {t} | {g} | {gf / max(g, 1):.3f} | {pc / max(p, 1):.3f} | {res['docs_per_s']:.0f} |")


if __name__ == "__main__":
    main()
