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
