"""Activation checkpointing per transformer block (recompute activations in backward)."""

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper


def apply(model):
    for name, block in list(model.layers.items()):
        model.layers[name] = checkpoint_wrapper(block, preserve_rng_state=True)
    return model
