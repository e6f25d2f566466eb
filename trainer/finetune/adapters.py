"""Parameter-efficient fine-tuning layers, applied to a trained GPT by module name.

* **LoRA** (Hu et al. 2021): a frozen ``nn.Linear`` W plus a trainable low-rank update
  ``(alpha / rank) * B @ A`` (A: rank x in, Kaiming-uniform; B: out x rank, zeros, so training
  starts from the base model exactly), dropout on the adapter's input.
* **IA3** (Liu et al. 2022): learned vectors that scale the keys, the values and the feed-forward
  hidden activations (``wk``, ``wv`` outputs; ``w2``'s input), initialised to ones.
* **QLoRA** (Dettmers et al. 2023): LoRA over a base whose targeted weights are NF4 with
  double-quantized scales (torchao's ``NF4Tensor``, as ``trainer.compress``'s ``nf4``); the base
  stays frozen and quantized, the adapters train in float32 (or the autocast dtype).

``merge`` folds every adapter into its base weight and returns a plain GPT with ``nn.Linear``
layers (QLoRA: the NF4 weight is dequantized first), whose outputs equal the adapted model's.
The layers are written here rather than taken from peft, whose PEFT model wrapping and state-dict
naming target transformers' models: the trainer's GPT needs only these three small layers, and
they merge into the trainer's own checkpoint format.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float):
        super().__init__()
        self.base = base
        self.rank, self.scale = rank, alpha / rank
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, dtype=torch.float32, device=_device(base)))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=torch.float32, device=_device(base)))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.lora_a.to(x.dtype), self.lora_b.to(x.dtype)
        return self.base(x) + F.linear(F.linear(self.dropout(x), a), b) * self.scale

    def merged(self) -> nn.Linear:
        w = _dense_weight(self.base)
        out = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        out.weight.data = (w + self.scale * (self.lora_b @ self.lora_a)).to(w.dtype)
        if self.base.bias is not None:
            out.bias.data = self.base.bias.detach().clone()
        return out


class IA3Linear(nn.Module):
    """Scales a linear layer's output (``where: output``, keys and values) or its input
    (``where: input``: the feed-forward hidden activation entering ``w2``)."""

    def __init__(self, base: nn.Linear, where: str):
        super().__init__()
        self.base, self.where = base, where
        size = base.out_features if where == "output" else base.in_features
        self.ia3 = nn.Parameter(torch.ones(size, dtype=torch.float32, device=_device(base)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.ia3.to(x.dtype)
        return self.base(x) * v if self.where == "output" else self.base(x * v)

    def merged(self) -> nn.Linear:
        w = _dense_weight(self.base)
        out = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        if self.where == "output":
            out.weight.data = (w * self.ia3[:, None]).to(w.dtype)
            if self.base.bias is not None:
                out.bias.data = (self.base.bias.detach() * self.ia3).to(w.dtype)
        else:
            out.weight.data = (w * self.ia3[None, :]).to(w.dtype)
            if self.base.bias is not None:
                out.bias.data = self.base.bias.detach().clone()
        return out


IA3_TARGETS = {"wk": "output", "wv": "output", "w2": "input"}


def _device(mod: nn.Module) -> torch.device:
    return next(mod.parameters()).device


def _dense_weight(base: nn.Linear) -> torch.Tensor:
    w = base.weight.detach()
    return w.get_original_weight() if hasattr(w, "get_original_weight") else w.clone()


def _targets(model: nn.Module, names: list[str]) -> list[tuple[nn.Module, str, nn.Linear]]:
    found = [(parent, child, mod) for parent in model.modules() for child, mod in parent.named_children()
             if child in names and isinstance(mod, nn.Linear)]
    if not found:
        raise ValueError(f"no linear layer named any of {names} in the model")
    return found


def apply(model: nn.Module, method: str, targets: list[str], rank: int = 8, alpha: float = 16.0,
          dropout: float = 0.0) -> list[str]:
    """Freeze the base, add the method's layers in place; returns the trainable parameter names."""
    if method == "full":
        for p in model.parameters():
            p.requires_grad_(True)
        return [n for n, _ in model.named_parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    if method == "qlora":
        from corpusforge.trainer.compress.quantize import nf4_weight

        for parent, child, mod in _targets(model, targets):
            mod.weight = nf4_weight(mod.weight, child)
    for parent, child, mod in _targets(model, list(IA3_TARGETS) if method == "ia3" else targets):
        if method == "ia3":
            setattr(parent, child, IA3Linear(mod, IA3_TARGETS[child]))
        else:
            setattr(parent, child, LoRALinear(mod, rank, alpha, dropout))
    return [n for n, p in model.named_parameters() if p.requires_grad]


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The trainable tensors, by their names in the adapted model."""
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def merge(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base layer, in place; returns the model (plain layers)."""
    for parent in list(model.modules()):
        for child, mod in list(parent.named_children()):
            if isinstance(mod, (LoRALinear, IA3Linear)):
                setattr(parent, child, mod.merged().to(_dense_weight(mod.base).device))
    for p in model.parameters():
        p.requires_grad_(False)
    return model
