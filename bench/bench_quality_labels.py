"""Quality decisions vs labels: the recipes, their parts, and datatrove's defaults, same documents.

Data: bench/data/quality/{en,zh}.jsonl.gz (real public text labelled keep/drop, split by page;
bench/quality_sets.py). For each language, on the dev and the test split:

* ``rules``: the recipe's langid + ``text.quality`` stages alone;
* ``classifier``: the shipped classifier alone, at the threshold calibrated into it;
* ``recipe``: data_samples/configs/recipe_{en,zh}_web.yaml's stages (rules, then the classifier at
  the threshold calibrated here on dev: the accuracy-maximising cut given the rules' decisions);
* ``datatrove``: GopherQualityFilter -> GopherRepetitionFilter -> C4QualityFilter with defaults
  (datatrove 0.10.1 in bench/.venv-datatrove; ``make bench-env``), English only.

Accuracy is agreement with the labels; keep/drop recall are the shares of keep- and drop-labelled
documents decided so. Chinese targets are read per source on test: keep >= 95% of encyclopedic and
news paragraphs over 200 characters, drop >= 90% of boilerplate. Books: the books recipe's keep
rate on the shared Shakespeare plays (2-4k-character scenes) and the speeches. Speed: the English
recipe's quality stages (normalize, langid, rules, classifier) vs datatrove's three filters, one
core each (POLARS_MAX_THREADS=1, RAYON_NUM_THREADS=1), every English document.

    RAYON_NUM_THREADS=1 POLARS_MAX_THREADS=1 python bench/bench_quality_labels.py
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DATA = ROOT / "bench" / "data" / "quality"
CONFIGS = ROOT / "data_samples" / "configs"
SHARED = ROOT.parent / "shared" / "data" / "text"
DT_PY = ROOT / "bench" / ".venv-datatrove" / "bin" / "python"
RESULTS = ROOT / "bench" / "results" / "quality_labels.json"
QUALITY_STAGES = {"text.normalize", "text.langid", "text.quality", "text.quality_classifier"}

from corpusforge.registry import stage_class  # noqa: E402
from corpusforge.stage import StageStats  # noqa: E402
from train_quality_models import best_threshold  # noqa: E402


def stages_of(recipe: str, **override) -> list:
    cfg = yaml.safe_load((CONFIGS / recipe).read_text())
    out = []
    for spec in cfg["stages"]:
        spec = dict(spec)
        name = spec.pop("stage")
        if name in QUALITY_STAGES:
            spec.update(override.get(name, {}))
            if spec.get("_skip"):
                continue
            cls = stage_class(name)
            out.append(cls(cls.Config(**spec)))
    return out


def run(stages: list, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Kept mask and classifier score (nan where no classifier ran) per document."""
    table = pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string()), "_row": np.arange(len(texts))})
    score = np.full(len(texts), np.nan)
    for stage in stages:
        for col in [c for c in table.column_names if c.startswith("score_") or c.startswith("reject")]:
            table = table.drop_columns([col])
        res = stage.process(table, StageStats())
        if "score_quality_classifier" in res.kept.column_names:
            for t in (res.kept, res.rejected):
                score[t.column("_row").to_numpy()] = t.column("score_quality_classifier").to_numpy()
        table = res.kept
    keep = np.zeros(len(texts), bool)
    keep[table.column("_row").to_numpy()] = True
    return keep, score


def metrics(keep: np.ndarray, y: np.ndarray) -> dict:
    return {"accuracy": float((keep == (y == 1)).mean()), "keep_recall": float(keep[y == 1].mean()),
            "drop_recall": float((~keep[y == 0]).mean())}


def datatrove(texts: list[str]) -> tuple[np.ndarray, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    out = subprocess.run(["taskset", "-c", "0", str(DT_PY), str(ROOT / "bench" / "_datatrove_quality.py"), f.name,
                          "--decisions"], check=True, capture_output=True, text=True).stdout
    os.unlink(f.name)
    r = json.loads(out.strip().splitlines()[-1])
    return np.array(r["decisions"]), r["seconds"]


def language(lang: str, results: dict) -> None:
    rows = [json.loads(line) for line in gzip.open(DATA / f"{lang}.jsonl.gz", "rt", encoding="utf-8")]
    recipe = f"recipe_{lang}_web.yaml"
    split = {s: [r for r in rows if r["split"] == s] for s in ("dev", "test")}
    out = {}
    rules = stages_of(recipe, **{"text.quality_classifier": {"_skip": True}})
    alone = stages_of(recipe, **{"text.quality": {"_skip": True}, "text.quality_classifier": {"threshold": None}})
    decided = {}
    for s, docs in split.items():
        texts, y = [d["text"] for d in docs], np.array([d["label"] for d in docs])
        rk, _ = run(rules, texts)
        ck, score = run(alone, texts)
        decided[s] = (texts, y, rk, ck, score)
    threshold = round(best_threshold(decided["dev"][4], decided["dev"][1], decided["dev"][2])[0], 3)
    full = stages_of(recipe, **{"text.quality_classifier": {"threshold": threshold}})
    for s, (texts, y, rk, ck, score) in decided.items():
        fk, _ = run(full, texts)
        out[s] = {"docs": len(y), "rules": metrics(rk, y), "classifier": metrics(ck, y), "recipe": metrics(fk, y)}
        if lang == "en" and DT_PY.exists():
            out[s]["datatrove"] = metrics(datatrove(texts)[0], y)
        if s == "test":
            out["test_by_source"] = {src: float(fk[[d["source"] == src for d in split[s]]].mean())
                                     for src in sorted({d["source"] for d in split[s]})}
    out["recipe_threshold"] = threshold
    results[lang] = out


def books(results: dict) -> None:
    stages = stages_of("recipe_books.yaml")
    out = {}
    if (SHARED / "tinyshakespeare.txt").exists():
        speeches = (SHARED / "tinyshakespeare.txt").read_text().split("\n\n")
        scenes, cur = [], []
        for sp in speeches:
            cur.append(sp)
            if sum(map(len, cur)) > 3000:
                scenes.append("\n\n".join(cur))
                cur = []
        out["shakespeare_scenes"] = {"docs": len(scenes), "kept": float(run(stages, scenes)[0].mean())}
    rows = [json.loads(line) for line in gzip.open(DATA / "en.jsonl.gz", "rt", encoding="utf-8")]
    speeches = [r["text"] for r in rows if r["source"] == "en_speeches"]
    out["speeches"] = {"docs": len(speeches), "kept": float(run(stages, speeches)[0].mean())}
    results["books"] = out


def speed(results: dict) -> None:
    rows = [json.loads(line) for line in gzip.open(DATA / "en.jsonl.gz", "rt", encoding="utf-8")]
    texts = [r["text"] for r in rows]
    stages = stages_of("recipe_en_web.yaml")
    run(stages, texts[:50])                            # warm-up: lingua and the model load
    start = time.perf_counter()
    run(stages, texts)
    ours = time.perf_counter() - start
    out = {"docs": len(texts), "corpusforge_recipe_s": ours, "corpusforge_docs_per_s": len(texts) / ours}
    if DT_PY.exists():
        _, theirs = datatrove(texts)
        out.update(datatrove_s=theirs, datatrove_docs_per_s=len(texts) / theirs, speedup=theirs / ours)
    results["speed_one_core"] = out


def main() -> None:
    results = {}
    for lang in ("en", "zh"):
        language(lang, results)
    books(results)
    speed(results)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    for lang in ("en", "zh"):
        r = results[lang]
        print(f"\n{lang} (recipe threshold calibrated on dev: {r['recipe_threshold']})")
        print("| decision | dev accuracy | test accuracy | test keep recall | test drop recall |")
        print("|---|---|---|---|---|")
        for name in ("rules", "classifier", "recipe", "datatrove"):
            if name in r["test"]:
                d, t = r["dev"][name], r["test"][name]
                print(f"| {name} | {d['accuracy']:.3f} | {t['accuracy']:.3f} | {t['keep_recall']:.3f} | "
                      f"{t['drop_recall']:.3f} |")
        print("test, share kept by source:", json.dumps(r["test_by_source"]))
    print("\nbooks:", json.dumps(results["books"]))
    print("speed (one core):", json.dumps(results["speed_one_core"]))


if __name__ == "__main__":
    main()
