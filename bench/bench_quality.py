"""Heuristic quality filters: corpusforge vs datatrove 0.10.1, one core each, same documents.

corpusforge: ``text.langid`` + ``text.quality`` with the Gopher quality, Gopher repetition
and C4 families (FineWeb off, to match datatrove's three filters), in batches of 4,096 like
the runner, POLARS_MAX_THREADS=1. datatrove: GopherQualityFilter -> GopherRepetitionFilter ->
C4QualityFilter with defaults, chained as in a pipeline (``bench/_datatrove_quality.py``,
run in ``bench/.venv-datatrove``; ``make bench-env`` creates it). Both processes are pinned to
CPU 0 with ``taskset``.

Corpora (real text from ../shared/data): English = Tiny Shakespeare cut into documents of
consecutive speeches (~2-4 KB), at 4 different offsets; Chinese = CLUE news + zhwiki lines.

    .venv/bin/python bench/bench_quality.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "text"
WORK = ROOT / "bench" / "_data"
DT_PY = ROOT / "bench" / ".venv-datatrove" / "bin" / "python"


def english_docs() -> list[str]:
    speeches = (DATA / "tinyshakespeare.txt").read_text().split("\n\n")
    docs = []
    for offset in range(4):
        cur = []
        for sp in speeches[offset:]:
            cur.append(sp)
            if sum(map(len, cur)) > 2000 + 500 * offset:
                docs.append("\n\n".join(cur))
                cur = []
    return docs


def chinese_docs() -> list[str]:
    lines = (DATA / "clue_corpus_small_sample.zh.txt").read_text().splitlines()
    lines += (DATA / "zhwiki_sample.zh.txt").read_text().splitlines()
    return [line for line in lines if line.strip()]


def run_corpusforge(path: str) -> dict:
    import pyarrow as pa

    from corpusforge.stage import StageStats
    from corpusforge.text.langid import LangId
    from corpusforge.text.quality import Quality

    texts = [json.loads(line)["text"] for line in open(path)]
    langid = LangId()
    quality = Quality(Quality.Config(fineweb=None, c4={}))
    warm = pa.table({"text": ["A warm up sentence. " * 20], "lang": pa.nulls(1, pa.string())})
    quality.process(langid.process(warm, StageStats()).kept, StageStats())
    stats = StageStats()
    kept = 0
    start = time.perf_counter()
    for i in range(0, len(texts), 4096):
        t = pa.table({"text": texts[i:i + 4096], "lang": pa.nulls(len(texts[i:i + 4096]), pa.string())})
        t = langid.process(t, StageStats()).kept
        kept += quality.process(t, stats).kept.num_rows
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "kept": kept, "docs": len(texts), "reasons": dict(stats.rejected_by_reason)}


def pinned(cmd: list[str], env=None) -> dict:
    out = subprocess.run(["taskset", "-c", "0", *cmd], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(run_corpusforge(sys.argv[2])))
        return
    if not DATA.exists():
        sys.exit("../shared/data is absent: this benchmark needs the real corpora")
    if not DT_PY.exists():
        sys.exit("bench/.venv-datatrove is missing: run `make bench-env` first")
    WORK.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, POLARS_MAX_THREADS="1", OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    rows = []
    for name, docs in (("English (Tiny Shakespeare)", english_docs()), ("Chinese (CLUE news + zhwiki)", chinese_docs())):
        path = WORK / f"quality_{name.split()[0].lower()}.jsonl"
        with open(path, "w") as f:
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
        mb = sum(len(d.encode()) for d in docs) / 1e6
        cf = min((pinned([sys.executable, __file__, "--worker", str(path)], env) for _ in range(3)),
                 key=lambda r: r["seconds"])
        dt = min((pinned([str(DT_PY), str(ROOT / "bench" / "_datatrove_quality.py"), str(path)], env)
                  for _ in range(2)), key=lambda r: r["seconds"])
        rows.append((name, len(docs), mb, cf, dt))
    print(f"{'corpus':30} {'docs':>6} {'MB':>5} | {'corpusforge MB/s':>16} {'kept':>6} | "
          f"{'datatrove MB/s':>14} {'kept':>6} | {'speed-up':>8}")
    for name, n, mb, cf, dt in rows:
        print(f"{name:30} {n:6} {mb:5.2f} | {mb / cf['seconds']:16.2f} {cf['kept']:6} | "
              f"{mb / dt['seconds']:14.2f} {dt['kept']:6} | {dt['seconds'] / cf['seconds']:7.1f}x")
    for name, _, _, cf, dt in rows:
        print(f"\n{name}: top rejection reasons")
        print("  corpusforge:", Counter(cf["reasons"]).most_common(6))
        print("  datatrove:  ", Counter(dt["reasons"]).most_common(6))


if __name__ == "__main__":
    main()
