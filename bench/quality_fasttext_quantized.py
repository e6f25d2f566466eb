"""Quantized fastText (a few MB) vs the shipped hashed n-gram LR on the labelled quality sets: can
a fastText small enough to ship beat the LR? (bench/RESULTS.md, "Which classifier".)

Same data, splits, threshold choice on dev and measures as ``train_quality_models.py``; fastText
quantized with ``quantize(qnorm=True, retrain=True, cutoff=...)``. Nothing is shipped from here.

    .venv/bin/python bench/quality_fasttext_quantized.py [--langs en,zh]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_quality_models import FastText, HashedLR, evaluate, load  # noqa: E402

SETTINGS = [(25, 50_000), (25, 100_000), (10, 100_000), (25, 200_000)]     # (epochs, quantization cutoff)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--langs", default="en")
    args = ap.parse_args()
    print("| lang | model | file MB | dev accuracy | test accuracy | test ROC AUC |")
    print("|---|---|---|---|---|---|")
    for lang in args.langs.split(","):
        data = load(lang)
        models = [("hashed n-gram LR, l2 1e-5", HashedLR(1e-5))]
        models += [(f"fastText {ep} epochs, quantized, cutoff {cut:,}", FastText(ep, lang == "zh", cutoff=cut))
                   for ep, cut in SETTINGS]
        for name, model in models:
            r = evaluate(model.fit(*data["train"]), data)
            print(f"| {lang} | {name} | {r['file_bytes'] / 1e6:.1f} | {r['dev_accuracy']:.3f} | "
                  f"{r['test_accuracy']:.3f} | {r['test_auc']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
