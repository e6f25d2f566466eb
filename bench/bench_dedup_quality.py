"""Near-dedup precision and recall on the labelled set of ``labelled_dedup.py`` (real text,
English and Chinese), at the default configuration of ``text.near_dedup``, through the runner.

    .venv/bin/python bench/bench_dedup_quality.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import labelled_dedup  # noqa: E402

from corpusforge import runner  # noqa: E402
from corpusforge.io.dataset import Dataset  # noqa: E402


def run(n_en=300, n_zh=300, config: dict | None = None) -> tuple[dict, dict]:
    docs, family, change = labelled_dedup.make(n_en, n_zh)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "in.jsonl").write_text("".join(json.dumps({"text": d, "i": i}, ensure_ascii=False) + "\n"
                                              for i, d in enumerate(docs)))
        cfg = {"name": "dedup-eval", "kind": "text",
               "inputs": [{"format": "jsonl", "paths": [str(tmp / "in.jsonl")], "source": "eval"}],
               "stages": [{"stage": "text.langid"}, {"stage": "text.near_dedup", **(config or {})}],
               "output": {"path": str(tmp / "out")}}
        summary = runner.run(cfg)
        rows = Dataset.open(tmp / "out").read().to_pylist() + Dataset.open(tmp / "out" / "_rejected").read().to_pylist()
    cluster = [None] * len(docs)
    for r in rows:
        cluster[json.loads(r["meta"])["i"]] = r["tag_minhash_cluster"]
    scores = labelled_dedup.evaluate(family, cluster)
    missed = Counter(change[i] for i, c in enumerate(cluster) if c is None and change[i] not in ("base", "half_mix"))
    return scores, {"missed_by_change": dict(missed), "counters": summary.stats["stages"]["01:text.near_dedup"]["counters"]}


if __name__ == "__main__":
    scores, info = run()
    print(json.dumps({**scores, **info}, indent=1))
