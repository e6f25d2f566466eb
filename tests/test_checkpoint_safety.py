"""A crafted checkpoint never runs code on resume (issue 16, item 15)."""

import os
import pickle
from pathlib import Path

import pytest
import torch

from corpusforge.trainer import checkpoint


class _Loader:
    def __init__(self):
        self.position = 0

    def state_dict(self):
        return {"epoch": 0, "consumed": self.position, "samples": 10}

    def load_state_dict(self, state):
        self.position = state["consumed"]


def _parts():
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return model, opt, sched, _Loader()


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_round_trips_with_weights_only(tmp_path):
    import random

    import numpy as np

    model, opt, sched, loader = _parts()
    loader.position = 7
    path = checkpoint.save(tmp_path, checkpoint.TrainState(model, opt, sched, loader, step=3), rank=0)
    expected = (torch.rand(1).item(), np.random.rand(), random.random())
    torch.rand(5), np.random.rand(3), random.random()          # move every RNG on
    m2, o2, s2, l2 = _parts()
    assert checkpoint.load(path, checkpoint.TrainState(m2, o2, s2, l2), rank=0) == 3 and l2.position == 7
    assert torch.equal(m2.weight, model.weight)
    assert (torch.rand(1).item(), np.random.rand(), random.random()) == expected


@pytest.mark.parametrize("target", ["rank0.pt", ".metadata"])
def test_crafted_checkpoint_is_refused_without_running_code(tmp_path, target):
    model, opt, sched, loader = _parts()
    path = checkpoint.save(tmp_path, checkpoint.TrainState(model, opt, sched, loader, step=1), rank=0)
    marker = tmp_path / "pwned"
    if target == "rank0.pt":
        torch.save({"step": 1, "evil": _Payload(marker)}, path / target)
    else:
        (path / target).write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(pickle.UnpicklingError):
        checkpoint.load(path, checkpoint.TrainState(*_parts()), rank=0)
    assert not marker.exists()


def test_pruned_model_file_loads_weights_only(tmp_path):
    from corpusforge.trainer.compress.prune import load_pruned

    marker = tmp_path / "pwned"
    torch.save({"model_config": {}, "state_dict": {}, "layer_shapes": _Payload(marker)}, tmp_path / "m.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_pruned(tmp_path / "m.pt")
    assert not marker.exists()
