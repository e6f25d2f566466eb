"""A decoder-only transformer (GPT) in one file. It knows nothing about parallelism:
``trainer/parallelize`` applies DDP, FSDP, tensor and pipeline parallelism to it from outside.

Structure (names chosen so that parallelism plans can address them, torchtitan-style):
``tok_embeddings`` -> ``layers.{i}`` (``attention_norm`` -> ``attention`` (wq, wk, wv, wo) ->
``ffn_norm`` -> ``feed_forward`` (w1, w2)) -> ``norm`` -> ``output`` (-> the loss, when targets
are given: in ``loss_chunks`` slices of tokens, each recomputed in backward, so that the fp32
logits of a large vocabulary never exist all at once). Any of ``tok_embeddings``,
``pos_embeddings``, ``norm`` and ``output`` may be ``None`` and layers may be removed: that is
how a pipeline stage holds only its part of the model.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from pydantic import Field, model_validator

from corpusforge.config_base import StrictModel


class ModelConfig(StrictModel):
    vocab_size: int = Field(0, ge=0)  # 0: taken from the dataset's tokenizer
    n_layer: int = Field(4, ge=1)
    n_head: int = Field(4, ge=1)
    d_model: int = Field(128, ge=1)
    seq_len: int = Field(64, ge=1)
    mlp_ratio: int = Field(4, ge=1)
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    pos: Literal["rope", "learned"] = "rope"
    tie_embeddings: bool = False
    dropout: float = Field(0.0, ge=0, lt=1)
    bias: bool = False
    rope_theta: float = 10_000.0
    loss_chunks: int = Field(1, ge=1)  # >1: the output projection and loss in this many slices of tokens

    @model_validator(mode="after")
    def _heads(self) -> "ModelConfig":
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        return self


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.d_model, eps=1e-6)
    return nn.LayerNorm(cfg.d_model, bias=cfg.bias)


def rope_tables(head_dim: int, seq_len: int, theta: float) -> torch.Tensor:
    """cos and sin of the rotary angles, shape (2, seq_len, head_dim // 2), in float32 (the
    angles need the precision; they are cast to the activations' dtype where used)."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    return torch.stack([angles.cos(), angles.sin()])


def apply_rope(x: torch.Tensor, tables: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate the channel pairs (2i, 2i+1) of x (B, T, H, D) by position, in x's dtype: the pairs
    are a view of x and the rotated halves are written once into the output (no float32 copy of
    the activations and no cast back). ``positions`` (B, T), when given, are each token's position
    in its own document (packed conversations restart at 0)."""
    t = x.shape[1]
    if positions is None:
        cos = tables[0, :t, None, :].to(x.dtype)                  # (T, 1, D/2)
        sin = tables[1, :t, None, :].to(x.dtype)
    else:
        cos = tables[0][positions][:, :, None, :].to(x.dtype)     # (B, T, 1, D/2)
        sin = tables[1][positions][:, :, None, :].to(x.dtype)
    pairs = x.unflatten(-1, (-1, 2))                              # a view: (B, T, H, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


IGNORE = -100     # a target that is not trained on (F.cross_entropy's ignore_index)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of (B, T, vocab) logits, in float32 (also the pipeline schedule's loss)."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def _loss_sum(h: torch.Tensor, targets: torch.Tensor, output: nn.Module) -> torch.Tensor:
    return F.cross_entropy(output(h).float(), targets, reduction="sum")


def chunked_cross_entropy(h: torch.Tensor, targets: torch.Tensor, output: nn.Module, chunks: int) -> torch.Tensor:
    """Mean cross-entropy of ``output(h)`` against ``targets``. With ``chunks`` > 1 the tokens are
    cut into that many slices whose logits are recomputed in backward: peak memory holds one
    slice's fp32 logits instead of all of them."""
    if chunks <= 1:        # (B, T, d) into the output layer: what tensor parallelism's plan expects
        return cross_entropy(output(h), targets)
    h, targets = h.flatten(0, 1), targets.flatten()
    total = sum(checkpoint(_loss_sum, hc, tc, output, use_reentrant=False)
                for hc, tc in zip(h.chunk(chunks), targets.chunk(chunks)))
    # targets of -100 (fine-tuning: untrained tokens, padding) are ignored, as F.cross_entropy does
    return total / (targets != IGNORE).sum().clamp(min=1)


class Documents:
    """Where packed documents lie in a batch: ``doc`` (B, T) ids (one per document in its row, -1
    for padding), from which each token's position in its document and the block-diagonal causal
    attention mask (B, 1, T, T) follow. Padding attends to itself only (no row without a key)."""

    def __init__(self, doc: torch.Tensor):
        b, t = doc.shape
        idx = torch.arange(t, device=doc.device)
        start = torch.ones_like(doc, dtype=torch.bool)
        start[:, 1:] = doc[:, 1:] != doc[:, :-1]
        first = torch.cummax(torch.where(start, idx.expand(b, t), torch.zeros_like(doc)), dim=1).values
        self.positions = idx - first
        same = doc[:, :, None] == doc[:, None, :]
        causal = idx[:, None] >= idx[None, :]
        self.attention_mask = (same & causal)[:, None]


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.head_dim = cfg.d_model // cfg.n_head
        self.wq = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.wk = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.wv = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.wo = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.rope = cfg.pos == "rope"

    def forward(self, x: torch.Tensor, rope: torch.Tensor | None, docs: "Documents | None" = None) -> torch.Tensor:
        b, t, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds only its share of the heads
        q = self.wq(x).view(b, t, -1, self.head_dim)
        k = self.wk(x).view(b, t, -1, self.head_dim)
        v = self.wv(x).view(b, t, -1, self.head_dim)
        if self.rope:
            pos = docs.positions if docs is not None else None
            q, k = apply_rope(q, rope, pos), apply_rope(k, rope, pos)
        mask = docs.attention_mask if docs is not None else None
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=mask, is_causal=mask is None,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=cfg.bias)
        self.w2 = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = make_norm(cfg)
        self.attention = Attention(cfg)
        self.ffn_norm = make_norm(cfg)
        self.feed_forward = FeedForward(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, rope: torch.Tensor | None, docs: "Documents | None" = None) -> torch.Tensor:
        # docs only when given: tensor parallelism's input plan for attention names two inputs
        h = self.attention_norm(x)
        x = x + self.dropout(self.attention(h, rope) if docs is None else self.attention(h, rope, docs))
        return x + self.dropout(self.feed_forward(self.ffn_norm(x)))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size <= 0:
            raise ValueError("model.vocab_size must be positive (or 0 to take it from the tokenizer)")
        if cfg.d_model % cfg.n_head:
            raise ValueError(f"model.d_model {cfg.d_model} is not divisible by model.n_head {cfg.n_head}")
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embeddings = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.pos == "learned" else None
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.n_layer)})
        self.norm = make_norm(cfg)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.register_buffer("rope", rope_tables(cfg.d_model // cfg.n_head, cfg.seq_len, cfg.rope_theta),
                             persistent=False)
        self.init_weights()

    def init_weights(self) -> None:
        """GPT-2 initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)."""
        for name, p in self.named_parameters():
            if p.dim() < 2:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.cfg.n_layer))
            else:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None,
                docs: "Documents | None" = None) -> torch.Tensor:
        """(B, T) token ids -> (B, T, vocab) logits, or with (B, T) ``targets`` the mean
        cross-entropy (targets of -100 ignored). A pipeline stage without ``tok_embeddings`` takes
        (B, T, d_model) activations instead, and one without ``output`` returns activations.
        ``docs``: several documents packed in one sequence (fine-tuning): attention stays inside
        each document and positions restart at each document's start."""
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        if self.pos_embeddings is not None:
            pos = docs.positions if docs is not None else torch.arange(h.shape[1], device=h.device)
            h = h + self.pos_embeddings(pos)
        for layer in self.layers.values():
            h = layer(h, self.rope) if docs is None else layer(h, self.rope, docs)
        h = self.norm(h) if self.norm is not None else h
        if self.output is None:
            return h
        if targets is None:
            return self.output(h)
        return self.loss(h, targets)

    def loss(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The output projection and mean cross-entropy (a method of its own so that it can be
        compiled as one unit)."""
        return chunked_cross_entropy(h, targets, self.output, self.cfg.loss_chunks)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> float:
        """Training FLOPs per token (6N + attention), as in the PaLM/nanoGPT MFU estimate."""
        c = self.cfg
        return 6 * self.num_params() + 12 * c.n_layer * c.d_model * c.seq_len
