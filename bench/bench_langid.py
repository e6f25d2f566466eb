"""Language identification: lingua (the default) vs the script detector, same documents.

Data: bench/data/langid/udhr.jsonl.gz (44 languages, short and long documents; built by
bench/langid_set.py from NLTK's UDHR corpus, public domain). Accuracy is the share of documents
whose code equals the label exactly (the script detector answers ``latin`` for any Latin-script
language but English, and one code per non-Latin script, so it can only be right on one language
of each script). Speed: documents per second after one warm-up pass (lingua loads its models
lazily on first use), on the cores given by RAYON_NUM_THREADS (lingua's thread pool).

    RAYON_NUM_THREADS=1 python bench/bench_langid.py
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from corpusforge.text.langid import LangIdConfig, lingua_detect, script_detect

DATA = Path(__file__).resolve().parent / "data" / "langid" / "udhr.jsonl.gz"
OUT = Path(__file__).resolve().parent / "results" / "langid.json"


def main() -> None:
    rows = [json.loads(line) for line in gzip.open(DATA, "rt", encoding="utf-8")]
    text = pa.array([r["text"] for r in rows], pa.string())
    detectors = {"script": lambda t: script_detect(t, LangIdConfig(detector="script")),
                 "lingua": lambda t: lingua_detect(t, LangIdConfig())}
    result = {"documents": len(rows), "languages": len({r["lang"] for r in rows}),
              "threads": os.environ.get("RAYON_NUM_THREADS", str(os.cpu_count()))}
    for name, detect in detectors.items():
        detect(text)                                   # warm-up: lingua loads its models here
        start = time.perf_counter()
        pred = detect(text)[0].to_pylist()
        seconds = time.perf_counter() - start
        by_kind, by_lang = defaultdict(list), defaultdict(list)
        for r, p in zip(rows, pred):
            by_kind[r["kind"]].append(p == r["lang"])
            by_lang[r["lang"]].append(p == r["lang"])
        result[name] = {"accuracy": sum(map(sum, by_kind.values())) / len(rows),
                        **{f"accuracy_{k}": sum(v) / len(v) for k, v in sorted(by_kind.items())},
                        "docs_per_s": len(rows) / seconds,
                        "languages_all_right": sum(all(v) for v in by_lang.values()),
                        "worst": sorted(((sum(v) / len(v), k) for k, v in by_lang.items()))[:5]}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1))
    print("| detector | accuracy | short docs | long docs | languages all right | docs/s |")
    print("|---|---|---|---|---|---|")
    for name in detectors:
        r = result[name]
        print(f"| {name} | {r['accuracy']:.3f} | {r['accuracy_short']:.3f} | {r['accuracy_long']:.3f} | "
              f"{r['languages_all_right']}/{result['languages']} | {r['docs_per_s']:,.0f} |")
    print("lingua's weakest:", result["lingua"]["worst"])


if __name__ == "__main__":
    main()
