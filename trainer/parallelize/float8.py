"""Float8 training with torchao: the linear layers' matmuls run in float8 (scales per tensor,
``tensorwise``, or per row, ``rowwise``, which is more accurate and a little slower); weights,
optimizer and everything else stay as they were. Needs an NVIDIA GPU with float8 tensor cores
(compute capability 8.9: Ada, Hopper and newer); elsewhere it is refused, never emulated. The
output projection stays in bf16 (the logits are the most sensitive matmul), and so does any
layer whose sizes are not multiples of 16 (the float8 kernels need that).
"""

from __future__ import annotations

import torch
from torch import nn


def check(device: torch.device) -> None:
    if device.type != "cuda":
        raise ValueError(f"float8: needs an NVIDIA GPU with float8 tensor cores (compute capability 8.9+: "
                         f"Ada, Hopper or newer); this run is on {device.type}: set float8: none")
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        raise ValueError(f"float8: {torch.cuda.get_device_name(device)} is compute capability {major}.{minor}; "
                         f"float8 matmuls need 8.9+ (Ada, Hopper or newer): set float8: none")
    try:
        import torchao.float8  # noqa: F401
    except ImportError as exc:
        raise ValueError("float8: needs torchao (pip install torchao)") from exc


def _converted(module: nn.Module, fqn: str) -> bool:
    return (isinstance(module, nn.Linear) and fqn.split(".")[-1] != "output"
            and module.in_features % 16 == 0 and module.out_features % 16 == 0)


def apply(model: nn.Module, recipe: str) -> nn.Module:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    return convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe),
                                      module_filter_fn=_converted)
