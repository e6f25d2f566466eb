"""Activation checkpointing: recompute activations in backward instead of keeping them.

``full``: every ``every``-th transformer block is recomputed whole (``every: 1``: all of them,
the most memory saved; 2: half of them, and so on). ``op`` (selective, op-level): every block
keeps the outputs of its matmuls and attention, the expensive ops, and recomputes only the cheap
elementwise ones (norms, activation, RoPE, residual adds), which holds most of the memory of
those activations for a few percent of extra compute.
"""

from __future__ import annotations

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

_aten = torch.ops.aten
# The ops whose outputs op-level checkpointing keeps. Names that a build of PyTorch lacks (the
# attention kernels differ by device) are skipped.
_SAVED_OPS = {getattr(_aten, name).default for name in (
    "mm", "addmm", "bmm", "_scaled_mm",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
) if hasattr(_aten, name)}


def _keep_matmuls(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in _SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _op_level_context():
    return create_selective_checkpoint_contexts(_keep_matmuls)


def apply(model, mode: str, every: int = 1):
    for i, (name, block) in enumerate(list(model.layers.items())):
        if mode == "full" and i % every == 0:
            model.layers[name] = checkpoint_wrapper(block, preserve_rng_state=True)
        elif mode == "op":
            model.layers[name] = checkpoint_wrapper(block, preserve_rng_state=True, context_fn=_op_level_context)
    return model
