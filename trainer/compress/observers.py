"""Range observers for static quantization, and the affine quantization they feed.

* ``minmax``: the running minimum and maximum of everything seen.
* ``moving_average``: min/max averaged over calibration batches, x <- x + c (batch - x) with
  averaging constant c (``momentum``, 0.01 as in PyTorch's MovingAverageMinMaxObserver): less
  pulled by one outlier batch.
* ``histogram``: a histogram of |x| (2048 bins, widened as larger values arrive) and the
  clipping threshold that minimises the KL divergence between the clipped distribution and its
  quantized version (the entropy calibration of TensorRT / Migacz 2017): outliers are clipped
  when that loses less information than the resolution they would cost.

Schemes: ``symmetric`` maps [-a, a] onto int8 [-127, 127] (zero point 0); ``asymmetric``
maps [lo, hi] onto uint8 [0, 255] with a zero point, using all levels for one-sided ranges
(post-GELU activations).
"""

from __future__ import annotations

import numpy as np
import torch


class MinMaxObserver:
    def __init__(self):
        self.lo, self.hi = float("inf"), float("-inf")

    def update(self, x: torch.Tensor) -> None:
        self.lo, self.hi = min(self.lo, x.min().item()), max(self.hi, x.max().item())

    def range(self) -> tuple[float, float]:
        return self.lo, self.hi


class MovingAverageMinMaxObserver(MinMaxObserver):
    def __init__(self, momentum: float = 0.01):
        super().__init__()
        self.c = momentum
        self.seen = False

    def update(self, x: torch.Tensor) -> None:
        lo, hi = x.min().item(), x.max().item()
        if not self.seen:
            self.lo, self.hi, self.seen = lo, hi, True
        else:
            self.lo += self.c * (lo - self.lo)
            self.hi += self.c * (hi - self.hi)


class HistogramObserver(MinMaxObserver):
    def __init__(self, bins: int = 2048, levels: int = 128):
        super().__init__()
        self.bins, self.levels = bins, levels
        self.hist = np.zeros(bins, np.float64)
        self.top = 0.0

    def update(self, x: torch.Tensor) -> None:
        super().update(x)
        a = x.detach().abs().flatten().float().numpy()
        top = float(a.max(initial=0.0))
        if top > self.top:                      # widen: fold the old histogram into the new bins
            if self.top > 0:
                old_centres = (np.arange(self.bins) + 0.5) * self.top / self.bins
                self.hist = np.bincount(np.minimum((old_centres / top * self.bins).astype(int), self.bins - 1),
                                        weights=self.hist, minlength=self.bins)
            self.top = top
        if self.top > 0:
            self.hist += np.bincount(np.minimum((a / self.top * self.bins).astype(int), self.bins - 1),
                                     minlength=self.bins)

    def threshold(self) -> float:
        """The |x| clipping threshold with the least KL(clipped || quantized)."""
        if self.top == 0 or self.hist.sum() == 0:
            return self.top
        best, best_kl = self.bins, float("inf")
        for i in range(self.levels, self.bins + 1, 16):
            kept = self.hist[:i]
            p = kept.copy()
            p[-1] += self.hist[i:].sum()        # P: the clipped distribution, outliers folded into the last bin
            # Q: the kept bins (without the outliers) quantized into `levels` levels, each level's
            # mass spread over its non-empty bins; the clipped mass P holds and Q lacks is the cost
            idx = np.minimum((np.arange(i) * self.levels) // i, self.levels - 1)
            mass = np.bincount(idx, weights=kept, minlength=self.levels)
            nonzero = np.bincount(idx, weights=(kept > 0).astype(float), minlength=self.levels)
            q = np.where(kept > 0, mass[idx] / np.maximum(nonzero[idx], 1), 0.0)
            ps, qs = p / p.sum(), q / q.sum()
            m = ps > 0
            kl = float(np.sum(ps[m] * np.log(ps[m] / np.maximum(qs[m], 1e-4 / i))))   # Q = 0 where P > 0: smoothed
            if kl < best_kl:
                best, best_kl = i, kl
        return best * self.top / self.bins

    def range(self) -> tuple[float, float]:
        t = self.threshold()
        return max(self.lo, -t), min(self.hi, t)


def make_observer(kind: str, momentum: float = 0.01):
    if kind == "minmax":
        return MinMaxObserver()
    if kind == "moving_average":
        return MovingAverageMinMaxObserver(momentum)
    if kind == "histogram":
        return HistogramObserver()
    raise ValueError(f"quantize.observer: {kind!r} is not one of ['histogram', 'minmax', 'moving_average']")


def qparams(lo: torch.Tensor | float, hi: torch.Tensor | float, symmetric: bool) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(scale, zero_point, qmin, qmax) for 8 bits; lo/hi may be tensors (per channel / group)."""
    lo, hi = torch.as_tensor(lo, dtype=torch.float32), torch.as_tensor(hi, dtype=torch.float32)
    lo, hi = torch.minimum(lo, torch.zeros_like(lo)), torch.maximum(hi, torch.zeros_like(hi))   # 0 exactly representable
    if symmetric:
        scale = torch.maximum(lo.abs(), hi) / 127.0
        return scale.clamp_min(1e-12), torch.zeros_like(scale), -127, 127
    scale = ((hi - lo) / 255.0).clamp_min(1e-12)
    return scale, torch.round(-lo / scale).clamp(0, 255), 0, 255


def fake_quantize(x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    return (torch.clamp(torch.round(x / scale) + zero_point, qmin, qmax) - zero_point) * scale
