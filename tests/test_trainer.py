"""The trainer: parity of every parallel mode with one process (gloo on CPU), exact resume, the
data loader, device selection, config errors, and a short real-data run."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import ROOT, shared, text_config
from corpusforge import runner
from corpusforge.cli import main as cli

TINY = ["steps=4", "eval_every=0", "eval_batches=2", "model.n_layer=2", "model.d_model=64", "model.seq_len=32",
        "optim.warmup_steps=2", "tensorboard=false", "data.verify=false", "log_every=100"]


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """A tokenized dataset made by corpusforge from the project's own samples."""
    tmp = tmp_path_factory.mktemp("tokens")
    runner.run(text_config([{"format": "text", "paths": [str(ROOT / "data_samples/text/books")], "source": "books"},
                            {"format": "jsonl", "paths": [str(ROOT / "data_samples/text/news_zh.jsonl.gz")],
                             "source": "news", "text_field": "content"}], tmp / "clean", [{"stage": "text.normalize"}]))
    assert cli(["train-tokenizer", str(tmp / "clean"), "--vocab-size", "400"]) == 0
    runner.run(text_config([{"format": "dataset", "paths": [str(tmp / "clean")]}], tmp / "tok",
                           [{"stage": "text.tokenize", "tokenizer": str(tmp / "clean" / "tokenizer.json")}]))
    return tmp / "tok"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tokens, out, nprocs: int, *overrides: str):
    args = [f"--set={o}" for o in TINY + [f"data.dataset={tokens}", f"out_dir={out}", *overrides]]
    if nprocs == 1:
        cmd = [sys.executable, "-m", "corpusforge.trainer", *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nprocs}",
               f"--master_port={_port()}", "-m", "corpusforge.trainer", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def losses(out) -> list[float]:
    return [json.loads(l)["loss"] for l in open(Path(out) / "metrics.jsonl") if '"loss"' in l]


def weights(out) -> dict:
    sd = {}
    for f in sorted(Path(out).glob("final_model_stage*.pt")):
        sd.update(torch.load(f))
    return sd


def assert_same_training(a, b, tol: float) -> None:
    """Two runs of 4 steps trained alike: the same losses and final weights, within ``tol``."""
    la, lb = losses(a), losses(b)
    assert len(la) == len(lb) == 4
    assert max(abs(x - y) for x, y in zip(la, lb)) < tol, (la, lb)
    wa, wb = weights(a), weights(b)
    assert set(wa) == set(wb)
    assert max((wa[k] - wb[k]).abs().max().item() for k in wb) < tol


@pytest.fixture(scope="module")
def reference(tokens, tmp_path_factory):
    """One process, global batches of 4 and 8 sequences."""
    tmp = tmp_path_factory.mktemp("ref")
    launch(tokens, tmp / "b4", 1, "batch_size=4")
    launch(tokens, tmp / "b8", 1, "batch_size=8")
    return {4: tmp / "b4", 8: tmp / "b8"}


MODES = [
    ("ddp", 2, ["parallel.mode=ddp"], 8),
    ("zero1", 2, ["parallel.mode=zero1"], 8),
    ("zero2", 2, ["parallel.mode=zero2"], 8),
    ("zero3", 2, ["parallel.mode=zero3"], 8),
    ("tp", 2, ["parallel.mode=tp"], 4),
    ("pp_1f1b", 2, ["parallel.mode=pp", "parallel.microbatches=2"], 4),
    ("pp_gpipe", 2, ["parallel.mode=pp", "parallel.microbatches=2", "parallel.pp_schedule=gpipe"], 4),
    ("tp+fsdp", 4, ["parallel.mode=tp+fsdp", "parallel.tp=2"], 8),
    ("pp+dp", 4, ["parallel.mode=pp+dp", "parallel.pp=2", "parallel.microbatches=2"], 8),
]


@pytest.mark.parametrize("name,nprocs,overrides,ref_batch", MODES, ids=[m[0] for m in MODES])
def test_parallel_mode_matches_single_process(tokens, reference, tmp_path, name, nprocs, overrides, ref_batch):
    launch(tokens, tmp_path / name, nprocs, "batch_size=4", *overrides)
    assert_same_training(tmp_path / name, reference[ref_batch], 1e-5)


@pytest.mark.parametrize("mode,nprocs", [("none", 1), ("zero3", 2)])
def test_resume_is_bit_for_bit(tokens, tmp_path, mode, nprocs):
    common = ["steps=6", "batch_size=4", f"parallel.mode={mode}", "data.shuffle_window=20"]
    launch(tokens, tmp_path / "full", nprocs, *common)
    launch(tokens, tmp_path / "split", nprocs, *common, "stop_at=3")
    assert len(losses(tmp_path / "split")) == 3
    r = launch(tokens, tmp_path / "split", nprocs, *common, "resume=true")
    assert "resumed from" in r.stdout
    assert losses(tmp_path / "split") == losses(tmp_path / "full")          # exactly equal


def test_grad_accumulation_and_activation_checkpointing_are_equivalent(tokens, tmp_path, reference):
    launch(tokens, tmp_path / "accum", 1, "batch_size=4", "grad_accum=2", "activation_checkpointing=full")
    a, b = losses(tmp_path / "accum"), losses(reference[8])
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_bf16_mixed_precision_trains(tokens, tmp_path):
    launch(tokens, tmp_path / "bf16", 1, "batch_size=4", "precision=bf16", "steps=6")
    assert all(np.isfinite(losses(tmp_path / "bf16")))


def test_config_errors_name_the_field(tokens, tmp_path):
    for override, msg in (("optim.lrr=1", "optim.lrr: unknown key"), ("steps=ten", "steps: Input should be a valid integer"),
                          ("parallel.mode=fsdp", "parallel.mode"), ("precision=fp8", "precision"),
                          ("parallel.cpu_offload=true", "needs an accelerator")):
        r = subprocess.run([sys.executable, "-m", "corpusforge.trainer", f"--set=data.dataset={tokens}", f"--set={override}"],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_dataset_without_tokens_is_a_clear_error(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "hello"}\n')
    runner.run(text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "s"}], tmp_path / "d"))
    from corpusforge.trainer.data import DataError, TokenStream

    with pytest.raises(DataError, match="text.tokenize"):
        TokenStream.open(tmp_path / "d", tmp_path / "cache")
    m = json.loads((tmp_path / "d" / "_manifest.json").read_text())
    m["schema"]["version"] = "2.0.0"
    (tmp_path / "d" / "_manifest.json").write_text(json.dumps(m))
    with pytest.raises(DataError, match="not compatible|v2.0.0"):
        TokenStream.open(tmp_path / "d", tmp_path / "cache")


def test_loader_resume_across_epochs_workers_and_dp_degree():
    from corpusforge.trainer.data import PackedSequences, TokenLoader

    seqs = PackedSequences(np.arange(2000, dtype=np.uint32), 8, 0, 2000)
    ref = TokenLoader(seqs, 4, seed=3, shuffle_window=16)
    expected = [next(ref)[0] for _ in range(130)]                 # > 2 epochs of 62 steps
    a = TokenLoader(seqs, 4, seed=3, shuffle_window=16, num_workers=2)
    for _ in range(70):
        next(a)
    b = TokenLoader(seqs, 4, seed=3, shuffle_window=16, num_workers=2)
    b.load_state_dict(a.state_dict())
    assert all(torch.equal(next(b)[0], e) for e in expected[70:])
    # the same position, continued by two data-parallel ranks of 2 sequences each
    ranks = [TokenLoader(seqs, 2, r, 2, seed=3, shuffle_window=16) for r in range(2)]
    for r in ranks:
        r.load_state_dict(a.state_dict())
    for e in expected[70:]:
        assert torch.equal(torch.cat([next(r)[0] for r in ranks]), e)
    # every sample of an epoch exactly once, none repeated
    seen = torch.cat([x[:, 0] for x in expected[:62]]).tolist()
    assert len(seen) == len(set(seen)) == 248


def test_device_selection_without_hardware():
    from corpusforge.trainer.device import backend_for, choose_device_type

    assert choose_device_type("auto", {"cuda": True, "npu": True}) == "cuda"
    assert choose_device_type("auto", {"cuda": False, "npu": True}) == "npu"
    assert choose_device_type("auto", {"cuda": False, "npu": False}) == "cpu"
    with pytest.raises(RuntimeError, match="not available"):
        choose_device_type("cuda", {"cuda": False, "npu": False})
    assert backend_for("cpu") == "gloo" and backend_for("cuda") == "nccl"
    with pytest.raises(RuntimeError, match="torch_npu"):
        backend_for("npu")


def test_real_data_tiny_shakespeare_loss_falls(tmp_path):
    """The CI-sized version of bench/bench_train_shakespeare.py: 300 steps of the nanoGPT CPU
    recipe on Tiny Shakespeare through corpusforge; the full 2,000 steps are in bench/RESULTS.md."""
    src = shared("text", "tinyshakespeare.txt")
    runner.run(text_config([{"format": "text", "paths": [str(src)], "source": "shakespeare"}], tmp_path / "raw"))
    assert cli(["train-tokenizer", str(tmp_path / "raw"), "--model", "char"]) == 0
    runner.run(text_config([{"format": "dataset", "paths": [str(tmp_path / "raw")]}], tmp_path / "tok",
                           [{"stage": "text.tokenize", "tokenizer": str(tmp_path / "raw" / "tokenizer.json")}]))
    r = subprocess.run([sys.executable, "-m", "corpusforge.trainer", str(ROOT / "trainer/configs/shakespeare_char.yaml"),
                        f"--set=data.dataset={tmp_path / 'tok'}", f"--set=out_dir={tmp_path / 'run'}", "--set=steps=300",
                        "--set=optim.warmup_steps=30", "--set=eval_batches=10", "--set=tensorboard=false"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["val_loss"] < 2.6, summary          # from ln(68) = 4.2 at the start


def test_random_window_sampling_is_deterministic_resumable_and_dp_independent():
    from corpusforge.trainer.data import PackedSequences, TokenLoader

    seqs = PackedSequences(np.arange(5000, dtype=np.uint32), 8, 0, 4500)
    one = TokenLoader(seqs, 4, seed=2, random_windows=True)
    ranks = [TokenLoader(seqs, 2, r, 2, seed=2, random_windows=True) for r in range(2)]
    batches = [next(one)[0] for _ in range(300)]
    assert all(torch.equal(b, torch.cat([next(r)[0] for r in ranks])) for b in batches)
    a = TokenLoader(seqs, 4, seed=2, random_windows=True)
    for _ in range(123):
        next(a)
    b = TokenLoader(seqs, 4, seed=2, random_windows=True, num_workers=2)
    b.load_state_dict(a.state_dict())
    assert all(torch.equal(next(b)[0], e) for e in batches[123:])
    starts = torch.stack([x[:, 0] for x in batches]).flatten()
    assert starts.max() < 4500 - 8 and len(set(starts.tolist())) > 1000      # random offsets, not a grid


def test_metrics_never_hold_two_curves_and_bad_shards_are_data_errors(tokens, tmp_path):
    """Issue 16: metrics.jsonl had the resumed steps twice and a second curve after a fresh run into
    an old out_dir; a truncated shard was a "config error" (exit 2); an edited row count trained."""
    import shutil

    out = tmp_path / "run"
    common = ["log_every=1", "checkpoint_every=2"]
    launch(tokens, out, 1, *common, "stop_at=3")
    launch(tokens, out, 1, *common, "resume=true")
    steps = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in l]
    assert steps == sorted(set(steps)) and steps[-1] == 4, steps          # each step once
    launch(tokens, out, 1, *common)                                         # a fresh run into the same out_dir
    again = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in l]
    assert again == sorted(set(again)) and again[0] == steps[0], again

    bad = tmp_path / "bad"
    shutil.copytree(tokens, bad)
    shard = sorted(bad.glob("part-*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    r = subprocess.run([sys.executable, "-m", "corpusforge.trainer", *[f"--set={o}" for o in TINY],
                        f"--set=data.dataset={bad}", f"--set=out_dir={tmp_path / 'o2'}"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "data error" in r.stderr and shard.name in r.stderr, r.stderr[-2000:]

    edited = tmp_path / "edited"
    shutil.copytree(tokens, edited)
    m = json.loads((edited / "_manifest.json").read_text())
    m["shards"][0]["rows"] += 5
    (edited / "_manifest.json").write_text(json.dumps(m))
    r = subprocess.run([sys.executable, "-m", "corpusforge.trainer", *[f"--set={o}" for o in TINY],
                        f"--set=data.dataset={edited}", f"--set=out_dir={tmp_path / 'o3'}"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "rows" in r.stderr, r.stderr[-2000:]
