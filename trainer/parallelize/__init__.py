"""Parallelism applied to the model from outside (torchtitan-style): ``parallelize`` takes a
plain ``GPT`` and returns it split, converted, wrapped and compiled, in this order:

1. pipeline split (``pp.py``): this rank keeps its stage's blocks;
2. float8 (``float8.py``): the linear layers become torchao's float8 linears;
3. tensor parallelism (``tp.py``);
4. the move to the device;
5. activation checkpointing (``ac.py``): full every k-th block, or op-level;
6. ``torch.compile`` per block and of the loss (``torch_compile.py``);
7. FSDP2 (``fsdp.py``) or DDP (``ddp.py``), last, over the compiled blocks.

| mode | what | module |
|---|---|---|
| ``none`` | one process | |
| ``ddp`` | DistributedDataParallel | ``ddp.py`` |
| ``zero1`` | DDP + ``ZeroRedundancyOptimizer`` (optimizer state sharded) | ``ddp.py`` + train's optimizer |
| ``zero2`` | FSDP2 ``fully_shard(reshard_after_forward=False)``: gradients and optimizer state sharded | ``fsdp.py`` |
| ``zero3`` | FSDP2 ``fully_shard(reshard_after_forward=True)``: parameters sharded too | ``fsdp.py`` |
| ``tp`` | DTensor tensor parallel: attention/MLP column- and row-wise, sequence parallel norms | ``tp.py`` |
| ``pp`` | ``torch.distributed.pipelining``: GPipe or 1F1B over microbatches | ``pp.py`` |
| ``tp+fsdp`` | 2D: TP inside, FSDP across | ``tp.py`` + ``fsdp.py`` on a (dp, tp) mesh |
| ``pp+dp`` | 2D: pipeline stages, each data parallel with FSDP | ``pp.py`` + ``fsdp.py`` on a (dp, pp) mesh |
"""

from __future__ import annotations

import torch

from corpusforge.trainer.parallelize import ac, ddp, float8, fsdp, pp, torch_compile, tp
from corpusforge.trainer.parallelize.mesh import ParallelDims

PARAM_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def parallelize(model, dims: ParallelDims, cfg, device: torch.device):
    """``cfg`` is the TrainConfig: its float8, activation_checkpointing, compile, precision and
    parallel.cpu_offload settings are applied here and nowhere else."""
    if dims.pp_enabled:
        model = pp.split(model, dims.pp, dims.coordinate("pp"))
    if cfg.float8 != "none":
        float8.check(device)
        model = float8.apply(model, cfg.float8)
    if dims.tp_enabled:
        model = tp.apply(model, dims.tp_mesh)
    model = model.to(device)
    if cfg.activation_checkpointing != "none":
        model = ac.apply(model, cfg.activation_checkpointing, cfg.ac_every)
    if cfg.compile:
        model = torch_compile.apply(model, device.type)
    if dims.fsdp:
        model = fsdp.apply(model, dims.dp_mesh, reshard_after_forward=dims.reshard_after_forward,
                           cpu_offload=cfg.parallel.cpu_offload, param_dtype=PARAM_DTYPES.get(cfg.precision))
    elif dims.ddp:
        model = ddp.apply(model, dims, device)
    return model
