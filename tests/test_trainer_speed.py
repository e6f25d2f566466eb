"""The trainer's speed options give the same training as without them (compile, activation
checkpointing in every form, the chunked loss), device-specific choices are made right (fused
AdamW, compile backend, float8 refused off Hopper/Ada), and MFU comes from the peak table."""

import json
import subprocess
import sys
import types

import pytest
import torch

from conftest import ROOT
from test_trainer import TINY, assert_same_training, launch, tokens  # noqa: F401  (tokens is a fixture)
from corpusforge.trainer.config import load
from corpusforge.trainer.metrics import Throughput, peak_flops
from corpusforge.trainer.model import GPT, ModelConfig
from corpusforge.trainer.optim import use_fused
from corpusforge.trainer.parallelize import torch_compile


@pytest.fixture(scope="module")
def plain(tokens, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("plain")
    launch(tokens, out, 1, "batch_size=4", "model.n_layer=3")
    return out


@pytest.mark.parametrize("overrides", [["activation_checkpointing=full"],
                                       ["activation_checkpointing=full", "ac_every=2"],
                                       ["activation_checkpointing=op"],
                                       ["model.loss_chunks=3"]],
                         ids=["full", "every2", "op", "loss_chunks"])
def test_memory_savers_change_nothing_but_memory(tokens, plain, tmp_path, overrides):  # noqa: F811
    launch(tokens, tmp_path, 1, "batch_size=4", "model.n_layer=3", *overrides)
    assert_same_training(tmp_path, plain, 1e-5)


def test_compile_trains_like_eager(tokens, plain, tmp_path):  # noqa: F811
    """Inductor on CPU: the same losses and weights as eager, up to float reassociation; the
    parameter names (and so checkpoints) are unchanged."""
    launch(tokens, tmp_path, 1, "batch_size=4", "model.n_layer=3", "compile=true")
    assert_same_training(tmp_path, plain, 2e-4)


def test_chunked_loss_equals_the_whole_loss_and_gradients():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=97, n_layer=1, n_head=2, d_model=32, seq_len=16)
    whole = GPT(cfg)
    chunked = GPT(cfg.model_copy(update={"loss_chunks": 5}))      # 5 does not divide 2 x 16 tokens
    chunked.load_state_dict(whole.state_dict())
    x, y = torch.randint(0, 97, (2, 16)), torch.randint(0, 97, (2, 16))
    la, lb = whole(x, y), chunked(x, y)
    la.backward()
    lb.backward()
    assert torch.allclose(la, lb, atol=1e-6)
    assert torch.allclose(la, torch.nn.functional.cross_entropy(whole(x).flatten(0, 1), y.flatten()), atol=1e-6)
    for (n, p), q in zip(whole.named_parameters(), chunked.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6), n


def test_rope_keeps_the_activation_dtype_and_the_float32_result():
    from corpusforge.trainer.model import apply_rope, rope_tables

    tables = rope_tables(16, 8, 10_000.0)
    x = torch.randn(2, 8, 3, 16)
    ref = apply_rope(x, tables)
    out = apply_rope(x.bfloat16(), tables)
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), ref, atol=0.05)
    assert torch.allclose(ref.norm(dim=-1), x.norm(dim=-1), atol=1e-4)      # a rotation keeps lengths


def test_float8_and_speed_options_are_checked_by_name(tokens, tmp_path):  # noqa: F811
    base = [f"data.dataset={tokens}", f"out_dir={tmp_path}"]
    with pytest.raises(ValueError, match="float8"):
        load(None, base + ["float8=rowwise"])                      # needs bf16
    with pytest.raises(ValueError, match="float8"):
        load(None, base + ["float8=tensorwise", "precision=bf16", "parallel.mode=tp"])
    with pytest.raises(ValueError, match="model.loss_chunks"):
        load(None, base + ["model.loss_chunks=4", "parallel.mode=pp"])
    with pytest.raises(ValueError, match="activation_checkpointing"):
        load(None, base + ["activation_checkpointing=sometimes"])
    # on this CPU machine a float8 run is refused at start, with the reason, as a config error
    r = subprocess.run([sys.executable, "-m", "corpusforge.trainer", *[f"--set={o}" for o in TINY + base],
                        "--set=float8=tensorwise", "--set=precision=bf16", "--set=device=cpu"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "float8" in r.stderr and "cpu" in r.stderr, r.stderr[-2000:]


def test_float8_is_refused_off_a_float8_gpu():
    from corpusforge.trainer.parallelize import float8

    with pytest.raises(ValueError, match="float8 tensor cores.*cpu"):
        float8.check(torch.device("cpu"))


def test_fused_adamw_where_the_device_has_it():
    assert use_fused("auto", "cuda") and not use_fused("auto", "cpu") and not use_fused("auto", "npu")
    assert use_fused("fused", "cpu") and not use_fused("foreach", "cuda")


def test_compile_backend_follows_the_device(monkeypatch):
    assert torch_compile.backend_for("cuda") == "inductor" == torch_compile.backend_for("cpu")
    monkeypatch.setitem(sys.modules, "torchair", None)              # not installed
    with pytest.raises(ValueError, match="torchair"):
        torch_compile.backend_for("npu")
    fake = types.SimpleNamespace(get_npu_backend=lambda: "npu-backend")
    monkeypatch.setitem(sys.modules, "torchair", fake)
    assert torch_compile.backend_for("npu") == "npu-backend"


def test_peaks_and_mfu():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989e12
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756e12
    assert peak_flops("NVIDIA H200", "float8") == 1979e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "float8") is None                 # no float8 on Ampere
    assert peak_flops("Ascend910B2", "bf16") == 376e12
    assert peak_flops("cpu", "bf16") is None and peak_flops("Some New GPU", "bf16") is None
    assert Throughput(6e9, 1, 989e12)(82_425.0)["mfu"] == pytest.approx(0.5, rel=1e-3)
    rec = Throughput(6e9, 1, 1979e12, 989e12)(82_425.0)                           # float8
    assert rec["mfu"] == pytest.approx(0.25, rel=1e-2) and rec["mfu_bf16_equiv"] == pytest.approx(0.5, rel=1e-3)


def test_log_records_memory_and_no_mfu_on_an_unknown_device(plain):
    recs = [json.loads(line) for line in open(plain / "metrics.jsonl") if '"loss"' in line]
    assert all(r["max_memory_bytes"] > 0 and "mfu" not in r and r["tokens_per_s"] > 0 for r in recs)
    summary = json.loads((plain / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["last_log"]["tokens_per_s"] > 0
