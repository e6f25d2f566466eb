"""Classifier-based quality filtering: train on curated text vs raw text, score everything.

The model is the classic fast one (fastText/CCNet-style quality classifiers, GPT-3's filter):
hashed n-gram features and a linear classifier.

* Features: lowercase word unigrams and bigrams; for CJK documents character 1-, 2- and
  3-grams (no segmenter needed). Each n-gram hash picks one of ``dims`` columns and a sign
  (signed feature hashing, Weinberger et al. 2009); counts are log-scaled and each document's
  vector is L2-normalized. Built for a whole batch at once as a scipy CSR matrix.
* Model: L2-regularized logistic regression fit by L-BFGS (scipy), classes weighted to balance.
* File: one ``.npz`` with the weights, the bias and the feature settings, so scoring is exactly
  reproducible. ``corpusforge train-classifier`` makes one.

The stage ``text.quality_classifier`` writes ``score_quality_classifier`` (probability of
"curated") and rejects documents under ``threshold`` as ``classifier.low_score``.

Two models ship inside the package (``corpusforge/text/models/``, sources in SOURCES.md there):
``en`` and ``zh``, trained on real curated text (Wikipedia, news bodies, speeches) against real
web-page text (navigation, teasers, footers, boilerplate-dominated pages) by
``python bench/train_quality_models.py``, which also measures them against fastText. Each file
carries the threshold calibrated on its development set. ``model: auto`` (the default) scores
Chinese and Japanese documents with ``zh`` and the rest with ``en``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import Field, field_validator
from scipy import sparse

from corpusforge.errors import ConfigError
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split
from corpusforge.text.features import CJK_CHAR, Flat, is_cjk, languages
from corpusforge.text.minhash import FNV, WORD, mix64

FORMAT = "corpusforge.quality_classifier/1"
MODELS = Path(__file__).resolve().parent / "models"
SHIPPED = {"en": MODELS / "quality_en.npz", "zh": MODELS / "quality_zh.npz"}


@dataclass
class HashedNgrams:
    dims: int = 1 << 20
    word_ngrams: tuple[int, ...] = (1, 2)
    cjk_char_ngrams: tuple[int, ...] = (1, 2, 3)

    def transform(self, texts: list[str] | pl.Series, cjk: np.ndarray | None = None) -> sparse.csr_matrix:
        texts = texts if isinstance(texts, pl.Series) else pl.Series(texts, dtype=pl.String)
        if cjk is None:
            cjk = np.zeros(len(texts), bool)
        lowered = texts.str.to_lowercase()
        rows, cols, vals = [], [], []
        for mask, pattern, sizes in ((~cjk, WORD, self.word_ngrams), (cjk, CJK_CHAR + "|" + WORD, self.cjk_char_ngrams)):
            idx = np.flatnonzero(mask)
            if not len(idx):
                continue
            flat = Flat.of(lowered.gather(idx).str.extract_all(pattern))
            h = flat.values.hash(seed=3).to_numpy()
            doc = idx[flat.doc]
            g = h.copy()
            for n in range(1, max(sizes) + 1):
                if n > 1:
                    g = g[:-1] * FNV + h[n - 1:]
                    valid = doc[: len(g)] == doc[n - 1: n - 1 + len(g)]
                else:
                    valid = np.ones(len(g), bool)
                if n in sizes:
                    m = mix64(g[valid] ^ np.uint64(n))
                    rows.append(doc[: len(g)][valid])
                    cols.append((m % np.uint64(self.dims)).astype(np.int64))
                    vals.append(np.where((m >> np.uint64(63)) == 1, -1.0, 1.0))
        n_docs = len(texts)
        if not rows:
            return sparse.csr_matrix((n_docs, self.dims))
        x = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(n_docs, self.dims))
        x.sum_duplicates()
        x.data = np.sign(x.data) * np.log1p(np.abs(x.data))
        norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        return sparse.diags(1.0 / np.maximum(norms, 1e-12)) @ x


@dataclass
class QualityModel:
    features: HashedNgrams
    weights: np.ndarray
    bias: float
    meta: dict

    def predict(self, texts, cjk=None) -> np.ndarray:
        z = self.features.transform(texts, cjk) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, weights=self.weights.astype(np.float32), bias=np.float64(self.bias),
                            meta=np.frombuffer(json.dumps({**self.meta, "format": FORMAT,
                                                           "dims": self.features.dims,
                                                           "word_ngrams": self.features.word_ngrams,
                                                           "cjk_char_ngrams": self.features.cjk_char_ngrams}).encode(),
                                               dtype=np.uint8))

    @classmethod
    def load(cls, path: str | Path) -> "QualityModel":
        try:
            with np.load(path) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                weights, bias = z["weights"].astype(np.float64), float(z["bias"])
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"quality classifier model {path}: cannot be read ({exc}); "
                              f"train one with `corpusforge train-classifier`") from None
        if meta.get("format") != FORMAT:
            raise ConfigError(f"quality classifier model {path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        feats = HashedNgrams(meta["dims"], tuple(meta["word_ngrams"]), tuple(meta["cjk_char_ngrams"]))
        return cls(feats, weights, bias, meta)


def train(positive: list[str], negative: list[str], *, dims: int = 1 << 20, l2: float = 1e-4,
          holdout: float = 0.2, seed: int = 0, max_iter: int = 200) -> tuple[QualityModel, dict]:
    """Fit the classifier; returns the model and held-out metrics."""
    from scipy.optimize import minimize

    if not positive or not negative:
        raise ValueError("training needs both positive (curated) and negative (raw) documents")
    texts = positive + negative
    y = np.r_[np.ones(len(positive)), np.zeros(len(negative))]
    cjk = is_cjk(languages(pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string())})))
    feats = HashedNgrams(dims)
    x = feats.transform(texts, cjk)
    rng = np.random.default_rng(seed)
    test = rng.random(len(texts)) < holdout
    xt, yt = x[~test], y[~test]
    w_pos = len(yt) / (2 * max(yt.sum(), 1))
    w_neg = len(yt) / (2 * max((1 - yt).sum(), 1))
    sample_w = np.where(yt == 1, w_pos, w_neg)

    def loss(params):
        w, b = params[:-1], params[-1]
        z = xt @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        ll = sample_w * (np.logaddexp(0, z) - yt * z)
        g = sample_w * (p - yt)
        return ll.mean() + l2 * (w @ w), np.r_[xt.T @ g / len(yt) + 2 * l2 * w, g.mean()]

    res = minimize(loss, np.zeros(dims + 1), jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    model = QualityModel(feats, res.x[:-1], float(res.x[-1]),
                         {"positive_docs": len(positive), "negative_docs": len(negative), "l2": l2, "seed": seed})
    metrics = {"train_docs": int((~test).sum()), "holdout_docs": int(test.sum()), "iterations": int(res.nit)}
    if test.any():
        p = model.predict(pl.Series(texts, dtype=pl.String).filter(pl.Series(test)), cjk[test])
        pred = p >= 0.5
        tp = int((pred & (y[test] == 1)).sum())
        metrics.update(accuracy=float((pred == (y[test] == 1)).mean()),
                       precision=tp / max(int(pred.sum()), 1), recall=tp / max(int(y[test].sum()), 1))
    model.meta["holdout"] = metrics
    return model, metrics


class ClassifierConfig(StageConfig):
    model: str = Field("auto", description="'auto' (zh model for Chinese/Japanese, en for the rest), 'en', "
                                           "'zh', or the path of a model from `corpusforge train-classifier`.")
    threshold: float | None = Field(None, ge=0, le=1, description="Reject documents scoring below this "
                                    "(default: the threshold calibrated into the model, else 0.5).")

    @field_validator("model")
    @classmethod
    def _model_exists(cls, v: str) -> str:
        if v not in ("auto", *SHIPPED) and not Path(v).exists():
            raise ValueError(f"no model file {v!r} (use 'auto', 'en', 'zh' or a file from "
                             f"`corpusforge train-classifier`)")
        return v


class QualityClassifier(Stage):
    name = "text.quality_classifier"
    kinds = ("text",)
    Config = ClassifierConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"score_quality_classifier": pa.float64()}

    def _models(self) -> dict[str, QualityModel]:
        if getattr(self, "_loaded", None) is None:
            names = {"auto": ("en", "zh")}.get(self.config.model, (self.config.model,))
            self._loaded = {n: QualityModel.load(SHIPPED.get(n, n)) for n in names}
        return self._loaded

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        models = self._models()
        texts = pl.Series("t", table.column("text").combine_chunks(), pl.String)
        cjk = is_cjk(languages(table))
        score = np.zeros(table.num_rows)
        threshold = np.zeros(table.num_rows)
        if len(models) == 1:
            parts = [(next(iter(models.values())), np.ones(table.num_rows, bool))]
        else:   # auto: CJK documents to the zh model, the rest to the en model
            parts = [(models["zh"], cjk), (models["en"], ~cjk)]
        for model, rows in parts:
            if rows.any():
                idx = np.flatnonzero(rows)
                score[idx] = model.predict(texts.gather(idx), cjk[idx])
                threshold[idx] = self.config.threshold if self.config.threshold is not None \
                    else model.meta.get("threshold", 0.5)
        table = table.append_column("score_quality_classifier", pa.array(score, pa.float64()))
        low = score < threshold
        reason = np.where(low, "classifier.low_score", None)
        detail = [f"score {s:.3f} < {t:.3f}" if b else None for s, t, b in zip(score, threshold, low)]
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)
