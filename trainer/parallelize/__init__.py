"""Parallelism applied to the model from outside (torchtitan-style): each module here takes a
plain ``GPT`` and returns it wrapped or transformed.

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

Activation checkpointing (``ac.py``) wraps every block, before FSDP.
"""
