"""What the log reports besides the loss: model FLOPs utilisation (MFU) against the device's
peak for the precision in use, and the metrics file.

Peaks are dense tensor-core figures (no 2:4 sparsity) in FLOP/s from the vendors' data sheets,
matched on the device name that PyTorch reports. A device not in the table reports no MFU rather
than a guessed one. Float8 training reports MFU against the float8 peak and, beside it, against
the bf16 peak ("bf16-equivalent"), the figure most published runs quote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

T = 1e12
# (substrings of the device name, all must match) -> peaks by precision. Order matters: the
# first match wins, so the more specific names come first.
PEAK_FLOPS: list[tuple[tuple[str, ...], dict[str, float]]] = [
    (("H100", "NVL"), {"bf16": 835 * T, "fp16": 835 * T, "float8": 1671 * T, "fp32": 60 * T}),
    (("H100", "PCIe"), {"bf16": 756 * T, "fp16": 756 * T, "float8": 1513 * T, "fp32": 51 * T}),
    (("H100",), {"bf16": 989 * T, "fp16": 989 * T, "float8": 1979 * T, "fp32": 67 * T}),       # SXM (HBM3)
    (("H200", "NVL"), {"bf16": 835 * T, "fp16": 835 * T, "float8": 1671 * T, "fp32": 60 * T}),
    (("H200",), {"bf16": 989 * T, "fp16": 989 * T, "float8": 1979 * T, "fp32": 67 * T}),
    (("A100",), {"bf16": 312 * T, "fp16": 312 * T, "fp32": 19.5 * T}),
    (("L40S",), {"bf16": 362 * T, "fp16": 362 * T, "float8": 733 * T, "fp32": 91.6 * T}),
    (("Ascend910B1",), {"bf16": 414 * T, "fp16": 414 * T}),
    (("Ascend910B2",), {"bf16": 376 * T, "fp16": 376 * T}),
    (("Ascend910B3",), {"bf16": 313 * T, "fp16": 313 * T}),
    (("Ascend910B4",), {"bf16": 280 * T, "fp16": 280 * T}),
]


def device_name(device: torch.device) -> str:
    if device.type == "cpu":
        return "cpu"
    mod = torch.get_device_module(device.type)
    try:
        return mod.get_device_name(device)
    except (AttributeError, RuntimeError):
        return device.type


def peak_flops(name: str, precision: str) -> float | None:
    """The device's peak FLOP/s for ``precision`` (bf16 | fp16 | fp32 | float8), or None when the
    device or the precision on it is not in the table."""
    for keys, peaks in PEAK_FLOPS:
        if all(k.lower() in name.lower() for k in keys):
            return peaks.get(precision)
    return None


class Throughput:
    """tokens/s and MFU of a window of steps."""

    def __init__(self, flops_per_token: float, world_size: int, peak: float | None, peak_bf16: float | None = None,
                 name: str = ""):
        self.flops_per_token, self.world_size = flops_per_token, world_size
        self.peak, self.peak_bf16, self.name = peak, peak_bf16, name

    @classmethod
    def for_device(cls, device: torch.device, precision: str, float8: bool, flops_per_token: float,
                   world_size: int) -> "Throughput":
        """The peaks of this device for the precision in use (float8: also the bf16 peak)."""
        name = device_name(device)
        return cls(flops_per_token, world_size, peak_flops(name, "float8" if float8 else precision),
                   peak_flops(name, "bf16") if float8 else None, name)

    def __call__(self, tokens_per_s: float) -> dict:
        """``tokens_per_s`` over all ranks; MFU per device."""
        rec = {"tokens_per_s": tokens_per_s}
        achieved = tokens_per_s * self.flops_per_token / self.world_size
        if self.peak:
            rec["mfu"] = achieved / self.peak
        if self.peak_bf16:
            rec["mfu_bf16_equiv"] = achieved / self.peak_bf16
        return rec


def open_metrics(path: Path, start: int):
    """metrics.jsonl for appending, holding only the lines of steps up to ``start``: a fresh run
    (start 0) replaces an old curve; a resumed one drops the steps it will log again."""
    kept = []
    if start and path.exists():
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= start:
                    kept.append(line)
            except json.JSONDecodeError:
                continue                                  # a line cut by the kill
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
    return open(path, "a")
