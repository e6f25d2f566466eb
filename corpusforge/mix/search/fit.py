"""From measured proxies to a chosen mixture (RegMix's recipe, Liu et al. 2024).

1. Regressions from the mixture (the share of each source) to the target loss: ``linear``
   (RegMix's linear model), ``quadratic`` (ridge over the shares and their pairwise products,
   which can have its optimum inside the simplex, where a linear model cannot) and ``gbt``
   (gradient-boosted trees; RegMix uses LightGBM, scikit-learn's trees do the same job at this
   size). They are compared by k-fold cross-validation: the rank correlation (Spearman) of the
   held-out predictions with the measured losses decides, because the search only needs the
   order of mixtures to be right.
2. The winner, refitted on every proxy, scores many points of the simplex under the caps; the
   choice is the mean of the ``top_k`` best (RegMix: averaging the top predictions is steadier
   than the single argmin of a noisy fit). The mean of mixtures under the caps is under the caps.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from corpusforge.mix.search.candidates import draw


def make_model(kind: str, seed: int):
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import LinearRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    if kind == "linear":
        return LinearRegression()
    if kind == "quadratic":
        return make_pipeline(PolynomialFeatures(2, include_bias=False), RidgeCV(alphas=np.logspace(-6, 1, 15)))
    if kind == "gbt":
        return GradientBoostingRegressor(n_estimators=300, learning_rate=0.05, max_depth=2, min_samples_leaf=2,
                                         random_state=seed)
    raise ValueError(f"unknown regression {kind!r}")


def cross_validate(kind: str, X: np.ndarray, y: np.ndarray, folds: int, seed: int) -> dict:
    """Out-of-fold predictions of every proxy, and how well they rank and fit the measured losses."""
    from sklearn.model_selection import KFold

    folds = min(folds, len(y))
    pred = np.zeros_like(y)
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(X):
        pred[test] = make_model(kind, seed).fit(X[train], y[train]).predict(X[test])
    rho = spearmanr(pred, y).statistic if np.ptp(pred) > 0 and np.ptp(y) > 0 else 0.0
    return {"model": kind, "spearman": float(rho), "rmse": float(np.sqrt(np.mean((pred - y) ** 2))),
            "mae": float(np.mean(np.abs(pred - y))), "folds": folds, "predictions": pred.tolist()}


def choose(X: np.ndarray, y: np.ndarray, cap: np.ndarray, prior: np.ndarray, cfg) -> dict:
    """Cross-validate every regression, refit the best on all proxies, search the capped simplex."""
    scores = [cross_validate(kind, X, y, cfg.folds, cfg.seed) for kind in cfg.models]
    best = max(scores, key=lambda s: (round(s["spearman"], 6), -s["rmse"]))
    model = make_model(best["model"], cfg.seed).fit(X, y)
    rng = np.random.default_rng(cfg.seed)
    k = X.shape[1]
    # half the points spread over the whole simplex, half near the measured region (the prior)
    points = np.vstack([draw(cfg.samples // 2, np.ones(k), cap, rng),
                        draw(cfg.samples - cfg.samples // 2, k * prior, cap, rng), X])
    predicted = model.predict(points)
    top = np.argsort(predicted, kind="stable")[: cfg.top_k]
    chosen = points[top].mean(axis=0)
    chosen = chosen / chosen.sum()
    return {"cv": scores, "model": best["model"], "weights": chosen, "predicted_loss": float(model.predict(chosen[None])[0]),
            "best_sample_loss": float(predicted[top[0]]), "regression": model}


def landscape(model, chosen: np.ndarray, cap: np.ndarray, names: list[str], steps: int = 21) -> dict:
    """The predicted loss along each source's share, the others keeping their proportions from
    the chosen mixture: one curve per source, for the report."""
    out = {}
    for j, name in enumerate(names):
        grid = np.linspace(0.0, min(1.0, cap[j]), steps)
        rest = np.delete(chosen, j)
        rest = rest / rest.sum() if rest.sum() > 0 else np.full(len(rest), 1.0 / max(len(rest), 1))
        pts = np.array([np.insert(rest * (1 - s), j, s) for s in grid])
        out[name] = {"share": grid.tolist(), "predicted_loss": model.predict(pts).tolist()}
    return out
