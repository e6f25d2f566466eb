"""Checkpoints with ``torch.distributed.checkpoint`` (DCP).

What is saved is a :class:`TrainState`: the model, optimizer, LR scheduler, data loader and
step. ``<out_dir>/checkpoints/step_NNNNNN/``: the model and optimizer through DCP (each rank writes
its own shards: DDP, FSDP, TP and pipeline stages alike; ``get_state_dict`` turns them into
the same keys as the plain model), plus ``rank{r}.pt`` with what is per-rank state: the step,
the LR scheduler, the data loader's position and every RNG. ZeRO-1's optimizer is consolidated
to rank 0 and saved whole. ``latest`` names the last complete checkpoint and is written last,
so a run killed while saving resumes from the previous one.

Nothing in a checkpoint can run code on load: the per-rank files and ZeRO-1's file load with
``torch.load(weights_only=True)`` (the RNG states are stored as tensors and plain numbers), and
DCP's pickled ``.metadata`` is checked by an unpickler that accepts only DCP's own classes.
"""

from __future__ import annotations

import os
import pickle
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.optim import ZeroRedundancyOptimizer


@dataclass
class TrainState:
    """Everything a run needs to continue where it stopped."""
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loader: object                   # trainer.data.TokenLoader (state_dict / load_state_dict)
    step: int = 0

    @property
    def zero1(self) -> bool:
        """ZeRO-1's optimizer is consolidated and saved whole, not through DCP."""
        return isinstance(self.optimizer, ZeroRedundancyOptimizer)


def _rng_state() -> dict:
    """Every RNG as tensors and plain numbers, so that the file loads with ``weights_only=True``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, py_gauss = random.getstate()
    return {"torch": torch.get_rng_state(),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "gauss": float(gauss)},
            "python": {"version": version, "internal": list(internal), "gauss": py_gauss}}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss"]))


# What a DCP ``.metadata`` pickle may name. DCP reads it with plain ``pickle.load``, which runs any
# callable a crafted file names: it is checked first, with an unpickler that refuses the rest.
_DCP_GLOBALS = {("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("torch", "Size"),
                ("torch.serialization", "_get_layout"), ("collections", "OrderedDict")}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        allowed = ((module, name) in _DCP_GLOBALS or module.startswith("torch.distributed.checkpoint.")
                   or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)))
        if not allowed:
            raise pickle.UnpicklingError(f"checkpoint metadata names {module}.{name}: refused (not DCP metadata)")
        return super().find_class(module, name)


def check_metadata(path: Path) -> None:
    """Refuse a checkpoint whose DCP metadata would run code when DCP unpickles it."""
    meta = Path(path) / ".metadata"
    if meta.exists():
        with open(meta, "rb") as f:
            _MetadataUnpickler(f).load()


def _barrier():
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


def save(out_dir: Path, state: TrainState, rank: int) -> Path:
    root = Path(out_dir) / "checkpoints"
    path = root / f"step_{state.step:06d}"
    path.mkdir(parents=True, exist_ok=True)
    if state.zero1:
        state.optimizer.consolidate_state_dict(to=0)
        if rank == 0:
            torch.save({"model": state.model.module.state_dict(), "optim": state.optimizer.state_dict()},
                       path / "zero1.pt")
    else:
        model_sd, optim_sd = get_state_dict(state.model, state.optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))
    torch.save({"step": state.step, "scheduler": state.scheduler.state_dict(), "loader": state.loader.state_dict(),
                "rng": _rng_state()}, path / f"rank{rank}.pt")
    _barrier()
    if rank == 0:
        tmp = root / "latest.tmp"
        tmp.write_text(path.name)
        os.replace(tmp, root / "latest")
    _barrier()
    return path


def latest(out_dir: Path) -> Path | None:
    marker = Path(out_dir) / "checkpoints" / "latest"
    return marker.parent / marker.read_text().strip() if marker.exists() else None


def load(path: Path, state: TrainState, rank: int) -> int:
    """Restore everything :func:`save` wrote into ``state``; returns (and sets) the step to continue from."""
    if state.zero1:
        saved = torch.load(path / "zero1.pt", weights_only=True)
        state.model.module.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optim"])
    else:
        model_sd, optim_sd = get_state_dict(state.model, state.optimizer)
        sd = {"model": model_sd, "optim": optim_sd}
        check_metadata(path)
        dcp.load(sd, checkpoint_id=str(path))
        set_state_dict(state.model, state.optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
    mine = path / f"rank{rank}.pt"
    if not mine.exists():
        raise RuntimeError(f"{path} has no state for rank {rank}: resume with the world size it was saved with")
    extra = torch.load(mine, weights_only=True)     # tensors and plain data only: never code
    state.scheduler.load_state_dict(extra["scheduler"])
    state.loader.load_state_dict(extra["loader"])
    _set_rng_state(extra["rng"])
    state.step = extra["step"]
    return state.step


def load_final_model(run: str | Path, field: str = "run"):
    """A finished run's config and full model, fp32 on the CPU: ``config.json`` and
    ``final_model_stage*.pt`` (a pipeline-parallel run's stages hold disjoint parts of one model).
    What cannot be read raises ValueError naming ``field``."""
    import json

    from corpusforge.config_base import validate
    from corpusforge.trainer.config import TrainConfig
    from corpusforge.trainer.model import GPT

    run = Path(run)
    if not (run / "config.json").exists():
        raise ValueError(f"{field}: {run} has no config.json (give a finished trainer out_dir)")
    stages = sorted(run.glob("final_model_stage*.pt"))
    if not stages:
        raise ValueError(f"{field}: {run} has no final_model_stage0.pt (the run did not finish)")
    tc = validate(TrainConfig, json.loads((run / "config.json").read_text()), str(run / "config.json"))
    state = {}
    for f in stages:
        state.update(torch.load(f, map_location="cpu", weights_only=True))
    if tc.model.vocab_size == 0:              # config.json is written before the tokenizer names it
        tc.model.vocab_size = state["tok_embeddings.weight"].shape[0]
    model = GPT(tc.model)
    model.load_state_dict(state)
    return tc, model
