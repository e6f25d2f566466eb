"""Train the shipped quality classifiers (one command), and measure them against fastText.

    python bench/train_quality_models.py            # writes corpusforge/text/models/quality_{en,zh}.npz

Data: bench/data/quality/{en,zh}.jsonl.gz (real public text with keep/drop labels and a
train/dev/test split by page; built by bench/quality_sets.py, sources in SOURCES.md there).
For each language, on the train split:

* corpusforge's hashed n-gram logistic regression (``text.quality_classifier``), L2 chosen on dev;
* fastText supervised (fasttext-numpy2-wheel; word 1-2-grams, CJK text spaced into characters
  with 1-3-grams, as our features are), epochs chosen on dev.

Thresholds are calibrated on dev (the accuracy-maximising cut), then both models are reported
on test at that threshold, with ROC AUC and documents per second scored on one core. The model
with the higher dev accuracy among those whose file fits the package (<= 10 MB) ships; the
shipped file carries its dev threshold. Results: bench/results/quality_models.json and bench/RESULTS.md.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "quality"
RESULTS = ROOT / "bench" / "results" / "quality_models.json"
sys.path.insert(0, str(ROOT))

from corpusforge.text.classifier import SHIPPED, train  # noqa: E402


def load(lang: str) -> dict[str, tuple[list[str], np.ndarray]]:
    rows = [json.loads(line) for line in gzip.open(DATA / f"{lang}.jsonl.gz", "rt", encoding="utf-8")]
    return {s: ([r["text"] for r in rows if r["split"] == s], np.array([r["label"] for r in rows if r["split"] == s]))
            for s in ("train", "dev", "test")}


def best_threshold(score: np.ndarray, y: np.ndarray, keep: np.ndarray | None = None) -> tuple[float, float]:
    """The accuracy-maximising cut (midway to the next score) and its accuracy. ``keep``: the
    decisions of stages before the classifier (a document they reject stays rejected)."""
    keep = np.ones(len(score), bool) if keep is None else keep
    cuts = np.unique(np.r_[score[~np.isnan(score)], 0.0, 1.0])
    acc = [((keep & (score >= c)) == (y == 1)).mean() for c in cuts]
    i = int(np.argmax(acc))
    return float((cuts[i] + cuts[i + 1]) / 2 if i + 1 < len(cuts) else cuts[i]), float(acc[i])


def auc(score: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(score)
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    pos = y == 1
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


class HashedLR:
    name = "hashed n-gram LR (corpusforge)"

    def __init__(self, l2: float):
        self.l2 = l2

    def fit(self, texts, y):
        self.model, _ = train([t for t, v in zip(texts, y) if v], [t for t, v in zip(texts, y) if not v],
                              l2=self.l2, holdout=0.0, max_iter=300)
        return self

    def score(self, texts):
        from corpusforge.text.features import is_cjk, languages
        import pyarrow as pa

        cjk = is_cjk(languages(pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string())})))
        return self.model.predict(texts, cjk)


CJK = re.compile(r"([\u3040-\u30ff\u3400-\u9fff])")


class FastText:
    name = "fastText supervised"

    def __init__(self, epoch: int, cjk: bool, cutoff: int = 0):
        self.epoch, self.cjk = epoch, cjk
        self.cutoff = cutoff        # > 0: product-quantize to the `cutoff` most useful n-grams after training

    def prep(self, t: str) -> str:
        t = t.lower().replace("\n", " ")
        return CJK.sub(r" \1 ", t) if self.cjk else t

    def fit(self, texts, y):
        import fasttext

        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            for t, v in zip(texts, y):
                f.write(f"__label__{int(v)} {self.prep(t)}\n")
        self.model = fasttext.train_supervised(input=f.name, epoch=self.epoch, lr=0.5, dim=64,
                                               wordNgrams=3 if self.cjk else 2, minCount=2, thread=1, seed=0,
                                               verbose=0)
        if self.cutoff:
            self.model.quantize(input=f.name, qnorm=True, retrain=True, cutoff=self.cutoff, thread=1, verbose=0)
        os.unlink(f.name)
        return self

    def score(self, texts):
        labels, probs = self.model.predict([self.prep(t) for t in texts], k=2)
        return np.array([dict(zip(lab, p)).get("__label__1", 0.0) for lab, p in zip(labels, probs)])


def file_bytes(model) -> int:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "model"
        if isinstance(model, HashedLR):
            model.model.save(path.with_suffix(".npz"))
            return path.with_suffix(".npz").stat().st_size
        model.model.save_model(str(path))
        return path.stat().st_size


def evaluate(model, data) -> dict:
    dev_score = model.score(data["dev"][0])
    thr, dev_acc = best_threshold(dev_score, data["dev"][1])
    start = time.perf_counter()
    test_score = model.score(data["test"][0])
    seconds = time.perf_counter() - start
    y = data["test"][1]
    pred = test_score >= thr
    return {"threshold": thr, "dev_accuracy": dev_acc, "dev_auc": auc(dev_score, data["dev"][1]),
            "test_accuracy": float((pred == (y == 1)).mean()), "test_auc": auc(test_score, y),
            "test_keep_recall": float(pred[y == 1].mean()), "test_drop_recall": float((~pred[y == 0]).mean()),
            "docs_per_s": len(y) / seconds, "file_bytes": file_bytes(model)}


def main() -> None:
    results = {}
    for lang in ("en", "zh"):
        data = load(lang)
        sizes = {s: {"docs": len(v[1]), "keep": int(v[1].sum())} for s, v in data.items()}
        candidates = [("lr", l2, HashedLR(l2)) for l2 in (1e-5, 1e-4, 1e-3)]
        try:
            import fasttext  # noqa: F401
            candidates += [("fasttext", ep, FastText(ep, lang == "zh")) for ep in (10, 25, 50)]
        except ImportError:
            print("fastText not installed (pip install corpusforge[bench]): measuring the LR only")
        rows = []
        for kind, setting, model in candidates:
            model.fit(*data["train"])
            rows.append({"model": kind, "setting": setting, **evaluate(model, data), "_obj": model})
            print(lang, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items() if k != "_obj"})
        best = {k: max((r for r in rows if r["model"] == k), key=lambda r: r["dev_accuracy"])
                for k in {r["model"] for r in rows}}
        fits = [r for r in best.values() if r["file_bytes"] <= 10_000_000]
        chosen = max(fits, key=lambda r: r["dev_accuracy"])
        for r in best.values():
            if r["file_bytes"] > 10_000_000:
                print(f"{lang}: {r['model']} dev accuracy {r['dev_accuracy']:.3f}, but its file is "
                      f"{r['file_bytes'] / 1e6:.0f} MB: too large to ship in the package")
        assert chosen["model"] == "lr", "a smaller fastText would need packaging; not built"
        lr = chosen
        lr["_obj"].model.meta.update(threshold=lr["threshold"], language=lang, trained_on=f"bench/data/quality/{lang}",
                                     dev_accuracy=lr["dev_accuracy"], test_accuracy=lr["test_accuracy"])
        SHIPPED[lang].parent.mkdir(parents=True, exist_ok=True)
        lr["_obj"].model.save(SHIPPED[lang])
        results[lang] = {"sizes": sizes, "runs": [{k: v for k, v in r.items() if k != "_obj"} for r in rows],
                         "shipped": {"model": "lr", "l2": lr["setting"], "threshold": lr["threshold"],
                                     "file_bytes": SHIPPED[lang].stat().st_size},
                         "dev_winner": chosen["model"]}
        print(f"{lang}: shipped LR l2={lr['setting']} threshold {lr['threshold']:.3f} -> {SHIPPED[lang]} "
              f"({SHIPPED[lang].stat().st_size / 1e6:.1f} MB)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
