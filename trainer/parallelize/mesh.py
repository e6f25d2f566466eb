"""The device mesh: how the world is split into data, tensor and pipeline parallel groups."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from trainer.config import ParallelConfig


@dataclass
class ParallelDims:
    mode: str
    dp: int
    tp: int
    pp: int
    mesh: DeviceMesh | None

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
    tp = cfg.tp if mode in ("tp", "tp+fsdp") else 1
    pp = cfg.pp if mode in ("pp", "pp+dp") else 1
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
        if size > 1 or (name == "dp" and mode in ("ddp", "zero1", "zero2", "zero3")):
            shape.append(size)
            names.append(name)
    mesh = init_device_mesh(device_type, tuple(shape), mesh_dim_names=tuple(names))
    return ParallelDims(mode, dp, tp, pp, mesh)


def all_reduce_mean(value: torch.Tensor, mesh) -> torch.Tensor:
    if mesh is None:
        return value
    torch.distributed.all_reduce(value, group=mesh.get_group())
    return value / mesh.size()
