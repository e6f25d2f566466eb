"""``torch.compile`` per transformer block, as torchtitan does: every block has the same code,
so one compiled graph serves them all (compile time does not grow with depth), and the blocks
stay the units that activation checkpointing wraps and FSDP shards. ``Module.compile`` compiles
in place, so parameter names (and checkpoints) do not change. The loss (output projection and
cross-entropy) is compiled too.

The backend follows the device: Inductor on CUDA and CPU; on Ascend NPU, torchair's backend
(the inductor has no NPU code generator), and a clear error when torchair is missing.
"""

from __future__ import annotations

import importlib

import torch


def backend_for(device_type: str):
    if device_type in ("cuda", "cpu"):
        return "inductor"
    if device_type == "npu":
        try:
            torchair = importlib.import_module("torchair")
        except ImportError as exc:
            raise ValueError("compile: true on an Ascend NPU needs torchair (Ascend's torch.compile backend, "
                             "installed with torch_npu); install it or set compile: false") from exc
        return torchair.get_npu_backend()
    raise ValueError(f"compile: true has no backend for device {device_type!r}: set compile: false")


def apply(model, device_type: str):
    backend = backend_for(device_type)
    for block in model.layers.values():
        block.compile(backend=backend, fullgraph=True)
    if getattr(model, "output", None) is not None:      # the last pipeline stage, or the whole model
        model.loss = torch.compile(model.loss, backend=backend)
    return model
