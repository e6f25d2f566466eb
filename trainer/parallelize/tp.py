"""Tensor parallelism with DTensor (Megatron-style, torchtitan's plan).

Attention: wq, wk, wv column-wise (each rank computes its share of the heads), wo row-wise;
MLP: w1 column-wise, w2 row-wise. Sequence parallel: the norms run on sequence shards
(``Shard(1)``) and activations are gathered only where a matmul needs them. The embedding is
row-wise (vocabulary sharded) and the output projection column-wise with replicated output, so
the loss sees full logits. Heads must divide evenly; tied embeddings are not supported with TP.
"""

from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)


def apply(model, tp_mesh):
    cfg = model.cfg
    size = tp_mesh.size()
    if cfg.n_head % size:
        raise ValueError(f"model.n_head {cfg.n_head} is not divisible by the tensor-parallel degree {size}")
    if cfg.tie_embeddings:
        raise ValueError("model.tie_embeddings is not supported with tensor parallelism: set it to false")
    if cfg.pos == "learned":
        raise ValueError("model.pos learned is not supported with tensor parallelism: use rope")
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate(), use_local_output=True),
    })
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        })
    return model
