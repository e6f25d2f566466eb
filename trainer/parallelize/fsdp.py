"""ZeRO-2 and ZeRO-3 with FSDP2 (``fully_shard``): every transformer block is its own unit,
then the root. ``reshard_after_forward=False`` keeps parameters gathered between forward and
backward (ZeRO-2: gradients and optimizer state sharded); ``True`` frees them (ZeRO-3)."""

import torch
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard


def apply(model, mesh, *, reshard_after_forward: bool, cpu_offload: bool = False, param_dtype=None):
    kw = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    if cpu_offload:
        kw["offload_policy"] = CPUOffloadPolicy()
    if param_dtype is not None:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for block in model.layers.values():
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    return model
