"""The device mesh: how the world is split into data, tensor and pipeline parallel groups."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from corpusforge.trainer.config import ParallelConfig


FSDP_MODES = ("zero2", "zero3", "tp+fsdp", "pp+dp")
DDP_MODES = ("ddp", "zero1")
TP_MODES = ("tp", "tp+fsdp")
PP_MODES = ("pp", "pp+dp")


@dataclass
class ParallelDims:
    """The degrees of each kind of parallelism and what follows from the mode, decided once here
    so that the rest of the trainer reads flags instead of comparing mode names."""
    mode: str
    dp: int
    tp: int
    pp: int
    mesh: DeviceMesh | None
    fsdp: bool = field(init=False)            # FSDP2 shards (zero2, zero3, and the dp side of the 2D modes)
    ddp: bool = field(init=False)             # DistributedDataParallel (ddp, zero1)
    zero1: bool = field(init=False)           # ... with the optimizer state sharded
    tp_enabled: bool = field(init=False)
    pp_enabled: bool = field(init=False)
    reshard_after_forward: bool = field(init=False)   # ZeRO-3: free gathered parameters after forward

    def __post_init__(self):
        self.fsdp = self.mode in FSDP_MODES
        self.ddp = self.mode in DDP_MODES
        self.zero1 = self.mode == "zero1"
        self.tp_enabled = self.mode in TP_MODES
        self.pp_enabled = self.mode in PP_MODES
        self.reshard_after_forward = self.mode == "zero3"

    @property
    def dp_mesh(self):
        return self.mesh["dp"] if self.mesh is not None and "dp" in self.mesh.mesh_dim_names else None

    @property
    def tp_mesh(self):
        return self.mesh["tp"] if self.mesh is not None and "tp" in self.mesh.mesh_dim_names else None

    @property
    def pp_mesh(self):
        return self.mesh["pp"] if self.mesh is not None and "pp" in self.mesh.mesh_dim_names else None

    def coordinate(self, name: str) -> int:
        m = getattr(self, f"{name}_mesh")
        return m.get_local_rank() if m is not None else 0


def build(cfg: ParallelConfig, world_size: int, device_type: str) -> ParallelDims:
    mode = cfg.mode
    if mode == "none":
        if world_size != 1:
            raise ValueError(f"parallel.mode none with {world_size} processes: choose ddp, zero1/2/3, tp or pp")
        return ParallelDims(mode, 1, 1, 1, None)
    tp = cfg.tp if mode in TP_MODES else 1
    pp = cfg.pp if mode in PP_MODES else 1
    if mode == "tp":
        tp = world_size
    if mode == "pp":
        pp = world_size
    if world_size % (tp * pp):
        raise ValueError(f"{world_size} processes cannot be split into tp={tp} x pp={pp} groups")
    dp = world_size // (tp * pp)
    if mode in ("tp+fsdp", "pp+dp") and dp < 2:
        raise ValueError(f"parallel.mode {mode} needs a data-parallel degree of 2 or more; "
                         f"{world_size} processes with tp={tp}, pp={pp} leave {dp}")
    shape, names = [], []
    for size, name in ((dp, "dp"), (pp, "pp"), (tp, "tp")):
        if size > 1 or (name == "dp" and mode in DDP_MODES + ("zero2", "zero3")):
            shape.append(size)
            names.append(name)
    mesh = init_device_mesh(device_type, tuple(shape), mesh_dim_names=tuple(names))
    return ParallelDims(mode, dp, tp, pp, mesh)


def all_reduce_mean(value: torch.Tensor, mesh) -> torch.Tensor:
    if mesh is None:
        return value
    torch.distributed.all_reduce(value, group=mesh.get_group())
    return value / mesh.size()
