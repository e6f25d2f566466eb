"""AdamW, the learning-rate schedule and gradient clipping."""

from __future__ import annotations

import math

import torch

from corpusforge.trainer.config import TrainConfig


def schedule_factor(step: int, warmup: int, total: int, schedule: str, min_ratio: float) -> float:
    """The learning rate at ``step`` as a fraction of the peak: linear warmup, then constant,
    linear or cosine decay to ``min_ratio`` at ``total`` steps."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "linear":
        return 1.0 - (1.0 - min_ratio) * progress
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def lr_lambda(cfg: TrainConfig):
    o = cfg.optim
    return lambda step: schedule_factor(step, o.warmup_steps, cfg.steps, o.schedule, o.min_lr / o.lr)


def use_fused(implementation: str, device_type: str) -> bool:
    """``auto``: the fused AdamW kernel (one launch for all parameters instead of a few per
    parameter group) on CUDA; PyTorch's default elsewhere."""
    if implementation == "auto":
        return device_type == "cuda"
    return implementation == "fused"


def build_optimizer(model, cfg: TrainConfig, zero1: bool, device_type: str = "cpu"):
    """AdamW; weight decay on matrices (weights of linear layers and embeddings) only."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    o = cfg.optim
    fused = use_fused(o.implementation, device_type)
    kw = {"lr": o.lr, "betas": (o.beta1, o.beta2), "eps": o.eps, "fused": fused or None,
          "foreach": True if o.implementation == "foreach" else None}
    groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if zero1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        opt = ZeroRedundancyOptimizer(decay, optimizer_class=torch.optim.AdamW, weight_decay=o.weight_decay, **kw)
        opt.add_param_group({"params": no_decay, "weight_decay": 0.0})
        return opt
    return torch.optim.AdamW(groups, **kw)


def clip_grad_norm(params, max_norm: float, pp_mesh) -> torch.Tensor:
    """Global gradient norm clipping; under pipeline parallelism the norm spans all stages."""
    if pp_mesh is None:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if hasattr(total, "full_tensor"):          # a DTensor when the stage is also sharded (pp+dp)
        total = total.full_tensor()
    total = total ** 2
    torch.distributed.all_reduce(total, group=pp_mesh.get_group())
    total = total.sqrt()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total
