"""Pipeline parallelism with ``torch.distributed.pipelining``.

The model is cut into ``pp`` stages of consecutive blocks (the first also holds the embeddings,
the last the final norm and output projection); each rank keeps only its stage. A schedule
(GPipe, or 1F1B which bounds activation memory to the pipeline depth) runs ``microbatches``
microbatches per step; the loss is computed on the last stage per microbatch and the gradients
are scaled so that they equal the full batch's.
"""

from __future__ import annotations

import copy

import torch
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


def stage_layers(n_layer: int, pp: int, stage: int) -> list[str]:
    per, extra = divmod(n_layer, pp)
    start = stage * per + min(stage, extra)
    return [str(i) for i in range(start, start + per + (1 if stage < extra else 0))]


def split(model, pp: int, stage: int):
    """This rank's stage: a copy of the model without the other stages' parts."""
    cfg = model.cfg
    if cfg.n_layer < pp:
        raise ValueError(f"model.n_layer {cfg.n_layer} < pipeline stages {pp}")
    if cfg.tie_embeddings:
        raise ValueError("model.tie_embeddings is not supported with pipeline parallelism: set it to false")
    part = copy.deepcopy(model)
    keep = set(stage_layers(cfg.n_layer, pp, stage))
    for name in list(part.layers.keys()):
        if name not in keep:
            del part.layers[name]
    if stage > 0:
        part.tok_embeddings = None
        part.pos_embeddings = None
    if stage < pp - 1:
        part.norm = None
        part.output = None
    return part


def build_schedule(part, stage: int, pp: int, device, pp_group, microbatches: int, schedule: str, loss_fn):
    pstage = PipelineStage(part, stage, pp, device, group=pp_group)
    cls = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
    return cls(pstage, n_microbatches=microbatches, loss_fn=loss_fn)


def step(schedule, stage: int, pp: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """Forward and backward over the microbatches; the mean loss on the last stage, else None."""
    losses: list[torch.Tensor] = []
    if stage == 0:
        schedule.step(x, target=y if pp == 1 else None, losses=losses if pp == 1 else None)
    elif stage == pp - 1:
        schedule.step(target=y, losses=losses)
    else:
        schedule.step()
    return torch.stack(losses).mean() if losses else None
