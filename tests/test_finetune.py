"""Fine-tuning: SFT data (loss mask, packing boundaries) and the adapters (merge, QLoRA's frozen NF4 base)."""

import numpy as np
import pyarrow as pa
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from corpusforge.stage import StageStats
from corpusforge.text.chat_tokenize import ChatTokenize
from corpusforge.trainer.finetune import adapters
from corpusforge.trainer.finetune.data import Conversations, PackedRows
from corpusforge.trainer.model import GPT, IGNORE, Documents, ModelConfig

CHAT = ("<|system|>\nBe brief.\n<|user|>\nWhat is the capital of France?\n<|assistant|>\nParis.\n"
        "<|user|>\nAnd of Italy?\n<|assistant|>\nRome.")


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    from tokenizers import decoders

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([CHAT] * 20 + ["The capital of Spain is Madrid."] * 20,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|pad|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_loss_mask_covers_assistant_turns_only(tokenizer_file):
    stage = ChatTokenize(ChatTokenize.Config(tokenizer=str(tokenizer_file)))
    t = pa.table({"text": [CHAT, "no markers here", "<|user|>\nonly a question"], "lang": pa.nulls(3, pa.string())})
    res = stage.process(t, StageStats())
    assert res.rejected.column("reject_reason").to_pylist() == ["not_a_conversation", "no_trained_turn"]
    row = res.kept.to_pylist()[0]
    assert len(row["token_ids"]) == len(row["loss_mask"]) == row["n_tokens"]
    tok = Tokenizer.from_file(str(tokenizer_file))
    trained = tok.decode([i for i, m in zip(row["token_ids"], row["loss_mask"]) if m], skip_special_tokens=False)
    assert trained == "Paris.\nRome.<|endoftext|>"
    untrained = tok.decode([i for i, m in zip(row["token_ids"], row["loss_mask"]) if not m])
    assert "capital of France" in untrained and "Paris" not in untrained and "<|assistant|>" in untrained


def test_packing_never_splits_or_crosses_conversations():
    rng = np.random.default_rng(0)
    lengths = [5, 9, 3, 12, 7, 4, 30]
    conv = Conversations([rng.integers(0, 50, n).astype(np.uint32) for n in lengths],
                         [np.r_[np.zeros(n // 2), np.ones(n - n // 2)].astype(np.uint8) for n in lengths])
    rows = PackedRows.pack(conv, seq_len=15)
    assert rows.truncated == 1                                 # the 30-token one, cut to a row
    for r in range(len(rows)):                                 # each conversation whole, in one row
        ids = [d for d in np.unique(rows.doc[r]) if d >= 0]
        assert all(np.ptp(np.flatnonzero(rows.doc[r] == d)) + 1 == (rows.doc[r] == d).sum() for d in ids)
    x, y, doc = rows.batch(np.arange(len(rows)))
    cross = (doc[:, 1:] != doc[:, :-1])
    assert (y[:, :-1][cross] == IGNORE).all()                  # no target across a boundary
    assert (y[doc < 0] == IGNORE).all()                        # nor in padding
    # attention stays inside a conversation: changing the first one leaves the second's outputs
    model = GPT(ModelConfig(vocab_size=50, n_layer=2, n_head=2, d_model=32, seq_len=15)).eval()
    row = x[:1].clone()
    other = row.clone()
    other[0, doc[0] == 0] = (other[0, doc[0] == 0] + 7) % 50
    second = doc[0] == 1
    a = model(row, docs=Documents(doc[:1]))[0, second]
    b = model(other, docs=Documents(doc[:1]))[0, second]
    alone = model(row[:, second])[0]
    assert torch.allclose(a, b, atol=1e-5) and torch.allclose(a, alone, atol=1e-5)


@pytest.mark.parametrize("method", ["lora", "ia3", "qlora"])
def test_merged_model_equals_the_adapted_model(method):
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=64, n_layer=2, n_head=2, d_model=64, seq_len=16))
    names = adapters.apply(model, method, ["wq", "wk", "wv", "wo", "w1", "w2"], rank=4, alpha=8)
    assert names and all(("lora" in n) or ("ia3" in n) for n in names)
    for p in model.parameters():
        if p.requires_grad:
            p.data += 0.05 * torch.randn_like(p)               # a trained adapter, not the identity
    x = torch.randint(0, 64, (2, 16))
    model.eval()
    before = model(x)
    merged = adapters.merge(model)
    assert not any(isinstance(m, (adapters.LoRALinear, adapters.IA3Linear)) for m in merged.modules())
    assert torch.allclose(merged(x), before, atol=1e-4)


def test_qlora_base_stays_nf4_and_frozen_while_adapters_train():
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=64, n_layer=2, n_head=2, d_model=64, seq_len=16))
    adapters.apply(model, "qlora", ["wq", "wv"], rank=4, alpha=8)
    base = model.layers["0"].attention.wq.base.weight
    assert type(base).__name__ == "NF4Tensor" and not base.requires_grad
    before = base.get_original_weight().clone()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    x = torch.randint(0, 64, (2, 17))
    for _ in range(3):
        loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad()
    after = model.layers["0"].attention.wq.base.weight
    assert type(after).__name__ == "NF4Tensor" and torch.equal(after.get_original_weight(), before)
    assert model.layers["0"].attention.wq.lora_b.abs().sum() > 0          # the adapter learned


# --- corpusforge finetune, end to end ---------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from conftest import SHARED_DATA, text_config  # noqa: E402
from corpusforge import runner  # noqa: E402
from corpusforge.cli import main as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = "<|{role}|>\n{content}"


def _speech_pairs() -> list[dict]:
    """Real dialogue: consecutive speeches of Tiny Shakespeare as user/assistant turns (the demo's
    conversations where ../shared/data is absent)."""
    src = SHARED_DATA / "text" / "tinyshakespeare.txt"
    if not src.exists():
        return [json.loads(line) for line in open(ROOT / "data_samples/acquire/chat/conversations.jsonl")] * 20
    speeches = [s.split("\n", 1)[1] for s in src.read_text().split("\n\n")[:1200] if "\n" in s]
    return [{"messages": [{"role": "user", "content": a}, {"role": "assistant", "content": b}]}
            for a, b in zip(speeches[0::2], speeches[1::2]) if len(a) + len(b) < 110][:240]


@pytest.fixture(scope="module")
def sft(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("finetune")
    (tmp / "chat").mkdir()
    (tmp / "chat" / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _speech_pairs()))
    runner.run(text_config([{"format": "jsonl", "paths": [str(tmp / "chat")], "source": "chat",
                             "turns_field": "messages", "turn_template": TEMPLATE, "turn_separator": "\n"}],
                           tmp / "raw"))
    assert cli(["train-tokenizer", str(tmp / "raw"), "--model", "char"]) == 0
    tok = str(tmp / "raw" / "tokenizer.json")
    runner.run(text_config([{"format": "dataset", "paths": [str(tmp / "raw")]}], tmp / "tok",
                           [{"stage": "text.tokenize", "tokenizer": tok}]))
    runner.run(text_config([{"format": "dataset", "paths": [str(tmp / "raw")]}], tmp / "sft",
                           [{"stage": "text.chat_tokenize", "tokenizer": tok, "template": TEMPLATE}]))
    from corpusforge.trainer.config import load
    from corpusforge.trainer.train import train

    train(load(None, [f"data.dataset={tmp / 'tok'}", f"out_dir={tmp / 'base'}", "steps=150", "model.n_layer=2",
                      "model.d_model=64", "model.n_head=4", "model.seq_len=128", "batch_size=16", "optim.lr=3e-3",
                      "optim.warmup_steps=10", "eval_every=0", "tensorboard=false", "log_every=1000"]))
    return tmp


def ft_config(sft, out, **over) -> Path:
    cfg = {"base": str(sft / "base"), "method": "lora", "lora": {"rank": 4, "alpha": 8},
           "data": {"dataset": str(sft / "sft"), "val_fraction": 0.2},
           "train": {"steps": 60, "batch_size": 8, "lr": 1e-2, "warmup_steps": 3, "eval_every": 60,
                     "eval_batches": 4, "checkpoint_every": 5, "log_every": 5, "device": "cpu"},
           "out_dir": str(out), "merge": True}
    for key, value in over.items():
        node = cfg
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    path = out.parent / f"{out.name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_lora_finetune_learns_saves_loads_and_merges(sft, tmp_path):
    from corpusforge.trainer.finetune.run import load_base, load_finetuned

    assert cli(["finetune", str(ft_config(sft, tmp_path / "lora"))]) == 0
    s = json.loads((tmp_path / "lora" / "summary.json").read_text())
    assert s["val_loss"] < s["val_loss_before"] and 0 < s["trainable_share"] < 0.2
    adapted = load_finetuned(tmp_path / "lora").eval()            # adapter.pt onto the base
    _, merged = load_base(tmp_path / "lora" / "merged")            # the exported trainer run
    x = torch.randint(0, merged.cfg.vocab_size, (2, 32))
    assert torch.allclose(adapted(x), merged.eval()(x), atol=1e-4)


@pytest.mark.parametrize("method", ["full", "ia3", "qlora"])
def test_every_method_trains_its_share(sft, tmp_path, method):
    lr = 1e-3 if method == "full" else 1e-2          # every weight moving wants a smaller step
    assert cli(["finetune", str(ft_config(sft, tmp_path / method, method=method, merge=False,
                                          **{"train.steps": 30, "train.eval_every": 30, "train.lr": lr}))]) == 0
    s = json.loads((tmp_path / method / "summary.json").read_text())
    share = {"full": (0.99, 1.01), "ia3": (0, 0.01), "qlora": (0.01, 0.2)}[method]
    assert share[0] < s["trainable_share"] <= share[1] and s["val_loss"] < s["val_loss_before"]


def test_a_killed_finetune_resumes_to_the_same_adapter(sft, tmp_path):
    straight = ft_config(sft, tmp_path / "straight", merge=False, **{"train.steps": 40})
    killed = ft_config(sft, tmp_path / "killed", merge=False, **{"train.steps": 40})
    assert cli(["finetune", str(straight)]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "corpusforge", "finetune", str(killed)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = tmp_path / "killed" / "checkpoint.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "adapter.pt").exists()        # it did die part-way
    assert cli(["finetune", str(killed)]) == 0
    a = torch.load(tmp_path / "straight" / "adapter.pt", weights_only=True)["tensors"]
    b = torch.load(tmp_path / "killed" / "adapter.pt", weights_only=True)["tensors"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_processes_match_one(sft, tmp_path, parallel):
    """gloo, world size 2, batch 4 per rank vs one process with batch 8: the same rows each step."""
    one = ft_config(sft, tmp_path / "one", merge=False, **{"train.steps": 10, "train.eval_every": 10})
    two = ft_config(sft, tmp_path / "two", merge=False, parallel=parallel,
                    **{"train.steps": 10, "train.eval_every": 10, "train.batch_size": 4})
    assert cli(["finetune", str(one)]) == 0
    import socket

    with socket.socket() as sock:                 # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
                        "-m", "corpusforge.trainer.finetune.run", str(two)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    a = json.loads((tmp_path / "one" / "summary.json").read_text())
    b = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert b["world_size"] == 2 and b["parallel"] == parallel
    # per-rank token means averaged vs one global mean: equal up to the ranks' token counts
    assert a["val_loss_before"] == pytest.approx(b["val_loss_before"], abs=1e-5)
    assert abs(a["val_loss"] - b["val_loss"]) < 0.01, (a["val_loss"], b["val_loss"])
    assert b["trainable_params"] == a["trainable_params"]
