"""Candidate mixtures: Dirichlet draws around a prior, kept under each source's cap, plus the
uniform and temperature baselines.

A source's cap is the largest share the final mix can give it: ``max_epochs x available tokens /
budget`` (more would repeat it more often than allowed). Draws over a cap are rejected; when too
few survive (tight caps), the rest are projected onto the capped simplex instead."""

from __future__ import annotations

import numpy as np

from corpusforge.errors import ConfigError


def caps(available: dict[str, int], max_epochs: dict[str, float], budget: int | None) -> dict[str, float]:
    """The largest share each source can take of ``budget`` tokens (default: one pass over all)."""
    budget = budget or sum(available.values())
    out = {n: min(1.0, max_epochs[n] * available[n] / budget) for n in available}
    if sum(out.values()) < 1 - 1e-9:
        raise ConfigError(f"budget: {budget:,} tokens cannot be met: the sources hold {sum(available.values()):,} "
                          f"tokens and allow at most {sum(out.values()):.0%} of it at their max_epochs")
    return out


def project(w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The mixture ``w`` (rows sum to 1) with every share at most its cap: the excess of capped
    sources is handed to the others in proportion to their shares (water-filling)."""
    w = np.array(w, dtype=float, copy=True)
    single = w.ndim == 1
    w = np.atleast_2d(w)
    for _ in range(w.shape[1]):
        over = w > cap
        if not over.any():
            break
        excess = np.where(over, w - cap, 0).sum(axis=1, keepdims=True)
        w = np.minimum(w, cap)
        free = np.where(w < cap - 1e-12, np.maximum(w, 1e-12), 0)
        w = w + excess * free / np.maximum(free.sum(axis=1, keepdims=True), 1e-300)
    return w[0] if single else w


def prior_shares(prior, names: list[str], available: dict[str, int]) -> np.ndarray:
    if prior == "tokens":
        p = np.array([available[n] for n in names], float)
    elif prior == "uniform":
        p = np.ones(len(names))
    else:
        p = np.array([prior.get(n, 0.0) for n in names], float)
    return p / p.sum()


def draw(n: int, alpha: np.ndarray, cap: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` Dirichlet(alpha) mixtures under the caps: rejection first, projection for the rest."""
    alpha = np.maximum(alpha, 1e-3)
    kept = np.zeros((0, len(alpha)))
    for _ in range(20):
        batch = rng.dirichlet(alpha, size=max(4 * n, 64))
        kept = np.vstack([kept, batch[(batch <= cap + 1e-12).all(axis=1)]])
        if len(kept) >= n:
            return kept[:n]
    return np.vstack([kept, project(rng.dirichlet(alpha, size=n - len(kept)), cap)])


def temperature_shares(available: dict[str, int], names: list[str], temperature: float) -> np.ndarray:
    raw = np.array([available[n] ** (1.0 / temperature) for n in names], float)
    return raw / raw.sum()


def candidates(names: list[str], available: dict[str, int], cap: dict[str, float], cfg) -> list[dict]:
    """The first round: ``cfg.n`` draws, then the uniform and temperature baselines (projected
    under the caps when they exceed one). Each: {"id", "kind", "weights"}."""
    rng = np.random.default_rng(cfg.seed)
    c = np.array([cap[n] for n in names])
    prior = prior_shares(cfg.prior, names, available)
    draws = draw(cfg.n, cfg.concentration * len(names) * prior, c, rng)
    out = [{"id": f"c{i:03d}", "kind": "sampled", "weights": _named(names, w)} for i, w in enumerate(draws)]
    out += baselines(names, available, c, cfg.temperature)
    return out


def baselines(names: list[str], available: dict[str, int], cap: np.ndarray, temperature: float) -> list[dict]:
    uniform = project(np.full(len(names), 1.0 / len(names)), cap)
    temp = project(temperature_shares(available, names, temperature), cap)
    return [{"id": "uniform", "kind": "baseline", "weights": _named(names, uniform)},
            {"id": f"temperature{temperature:g}", "kind": "baseline", "weights": _named(names, temp)}]


def around(names: list[str], centre: dict[str, float], n: int, concentration: float, cap: dict[str, float],
           seed: int, prefix: str) -> list[dict]:
    """A second round: ``n`` draws from Dirichlet(concentration x centre) under the caps."""
    rng = np.random.default_rng(seed + 7919)
    c = np.array([cap[n] for n in names])
    w = draw(n, concentration * np.array([centre[k] for k in names]), c, rng)
    return [{"id": f"{prefix}{i:03d}", "kind": "refined", "weights": _named(names, x)} for i, x in enumerate(w)]


def _named(names: list[str], w: np.ndarray) -> dict[str, float]:
    w = np.asarray(w, float)
    w = w / w.sum()
    return {n: float(x) for n, x in zip(names, w)}
