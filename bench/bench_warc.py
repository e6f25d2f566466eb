"""WARC-to-text throughput and HTML extraction quality.

1. Extraction quality, trafilatura vs resiliparse, on pages with a known main text
   (``web_pages.py``: real paragraphs from ../shared/data in typical boilerplate), English and
   Chinese: precision and recall of the extracted words (characters for Chinese) against the
   main paragraphs, and pages/s of the bare extractor call.
2. Reader overhead: the ``warc`` reader over a gzipped WARC of the same pages (warcio parsing,
   charset check, extraction, Arrow records) vs calling the extractor directly on the pages'
   HTML strings already in memory, same extractor, same pages, one core, best of ``--repeats``.

    .venv/bin/python bench/bench_warc.py [--pages 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpusforge.io.readers.warc import WarcReader, extract  # noqa: E402
from web_pages import pages, write_warc  # noqa: E402
from timing import best  # noqa: E402


def tokens(text: str, lang: str) -> Counter:
    return Counter([c for c in text if not c.isspace()] if lang == "zh" else text.split())


def quality(outs: list[str | None], ps: list[dict]) -> dict:
    res = {}
    for lang in ("en", "zh"):
        pr = []
        for out, p in zip(outs, ps):
            if p["lang"] != lang:
                continue
            got, want = tokens(out or "", lang), tokens(" ".join(p["main"]), lang)
            inter = sum((got & want).values())
            pr.append((inter / max(1, sum(got.values())), inter / max(1, sum(want.values()))))
        p_, r_ = sum(x[0] for x in pr) / len(pr), sum(x[1] for x in pr) / len(pr)
        res[lang] = (p_, r_, 2 * p_ * r_ / (p_ + r_))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ps = pages(args.pages, seed=7)
    print(f"{len(ps)} pages ({sum(p['lang'] == 'en' for p in ps)} English, {sum(p['lang'] == 'zh' for p in ps)} Chinese), "
          f"{sum(len(p['html'].encode()) for p in ps) / 1e6:.1f} MB of HTML; one core\n")
    print("| extractor | pages/s | EN precision | EN recall | EN F1 | ZH precision | ZH recall | ZH F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ("trafilatura", "resiliparse"):
        dt, outs = best(lambda: [extract(p["html"], name)[0] for p in ps], 1)
        q = quality(outs, ps)
        print(f"| {name} | {len(ps) / dt:.0f} | " + " | ".join(f"{v:.3f}" for lang in ("en", "zh") for v in q[lang]) + " |",
              flush=True)
    print("\n| extractor | direct call pages/s | warc reader pages/s | reader time / direct time |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        warc = write_warc(Path(tmp) / "bench.warc.gz", [{"url": p["url"], "body": p["html"].encode()} for p in ps])
        for name in ("trafilatura", "resiliparse"):
            reader = WarcReader(WarcReader.Config(paths=[str(warc)], source="web", extractor=name), kind="text")

            def via_reader():
                return sum(b.records.num_rows for b in reader.read(warc))

            t_direct, _ = best(lambda: [extract(p["html"], name) for p in ps], args.repeats)
            t_reader, n = best(via_reader, args.repeats)
            assert n == len(ps), n
            print(f"| {name} | {len(ps) / t_direct:.0f} | {len(ps) / t_reader:.0f} | {t_reader / t_direct:.2f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
