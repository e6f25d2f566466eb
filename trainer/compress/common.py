"""What every compression method shares: the trained run it starts from, the held-out
measurement (loss, perplexity, tokens/s, bytes, error against the fp32 model), one fine-tuning
loop, and saving the result with its report.

Compression runs on the trainer's device selection (``device``: auto takes CUDA, then NPU, else
CPU). On an accelerator the reference model is bf16 (``precision: auto``) and every row is
compared with it; on CPU it is fp32.

A *run* is a finished trainer ``out_dir``: ``config.json`` (the model and the dataset) and
``final_model_stage*.pt`` (the full weights; a pipeline-parallel run's stages are merged).
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from pydantic import Field

from corpusforge.config_base import StrictModel, read_yaml, validate
from corpusforge.trainer.config import TrainConfig
from corpusforge.trainer.data import PackedSequences, TokenLoader, TokenStream, split
from corpusforge.trainer.device import synchronize
from corpusforge.trainer.model import GPT, ModelConfig
from corpusforge.trainer.model import cross_entropy as logits_cross_entropy


class CompressError(ValueError):
    """A compression request that cannot be met; the message says what to change."""


class QuantizeConfig(StrictModel):
    # int8_weight_only | int8_dynamic | int4_weight_only | nf4 | static | qat | int4_tinygemm |
    # float8_weight_only | float8_dynamic (quantize.METHODS; an unknown one is refused there, naming them)
    methods: list[str] = Field(default_factory=lambda: ["int8_weight_only", "int8_dynamic", "int4_weight_only", "nf4",
                                                        "static", "qat"])
    group_size: int = Field(32, ge=1)  # int4_weight_only, nf4 blocks, static per_group, qat
    granularity: Literal["per_tensor", "per_channel", "per_group"] = "per_channel"   # static weights
    scheme: Literal["symmetric", "asymmetric"] = "symmetric"      # static and int4 (zero point)
    observer: Literal["minmax", "moving_average", "histogram"] = "minmax"   # static activations
    momentum: float = 0.01            # moving_average: PyTorch's default averaging constant
    qat_steps: int = 200              # fake-quantized fine-tuning steps (and the same for its baseline)
    qat_lr: float = 1e-4


class PruneConfig(StrictModel):
    kind: Literal["unstructured", "structured"] = "unstructured"
    scope: Literal["layer", "global"] = "global"                   # unstructured
    sparsity: float = Field(0.5, gt=0, lt=1)   # unstructured: share of linear weights zeroed; structured: of units removed
    target: Literal["mlp", "heads", "both"] = "mlp"                # structured
    importance: Literal["l1", "l2", "activation", "taylor"] = "l2"  # structured
    schedule: Literal["one_shot", "iterative"] = "one_shot"
    iterations: int = Field(4, ge=1)  # iterative: prune steps, cubic schedule to the target
    finetune_steps: int = 200         # in total (split over the iterations)
    lr: float = 1e-4


class DistillConfig(StrictModel):
    student: ModelConfig = Field(default_factory=lambda: ModelConfig(n_layer=2, n_head=4, d_model=96))
    alpha: float = Field(0.5, ge=0, le=1)   # weight of the soft-target loss
    temperature: float = Field(2.0, gt=0)
    hidden_weight: float = 0.0        # > 0: add patient (intermediate-layer) distillation
    steps: int = 500
    lr: float = 1e-3
    warmup_steps: int = 50
    baseline: bool = True             # also train the same student from scratch on the same batches


class CompressConfig(StrictModel):
    run: str = Field(min_length=1)    # a finished trainer out_dir (config.json and final_model_stage0.pt)
    out_dir: str = "out/compress"
    batch_size: int = Field(12, ge=1)
    eval_batches: int = 20
    calibration_batches: int = 8
    seed: int = 1337
    device: Literal["auto", "cpu", "cuda", "npu"] = "auto"        # as the trainer chooses
    precision: Literal["auto", "fp32", "bf16"] = "auto"   # the reference's dtype: auto = bf16 on an accelerator, else fp32
    quantize: QuantizeConfig = Field(default_factory=QuantizeConfig)
    prune: PruneConfig = Field(default_factory=PruneConfig)
    distill: DistillConfig = Field(default_factory=DistillConfig)


def load_config(path: str | Path | None, overrides: list[str] | dict | None = None) -> CompressConfig:
    return validate(CompressConfig, read_yaml(path, overrides, "compress config"), str(path) if path else "compress config")


@dataclass
class Trained:
    """A finished run: its config, model (on the device, in the reference precision, eval mode)
    and data splits."""

    train_cfg: TrainConfig
    model: GPT
    train: PackedSequences
    val: PackedSequences
    vocab_size: int
    device: torch.device = torch.device("cpu")
    base: str = "fp32"                # the reference row's name: its precision

    def loader(self, batch_size: int, seed: int, rank: int = 0, world: int = 1) -> TokenLoader:
        """Training batches drawn as the run drew them (its shuffle window and sampling)."""
        d = self.train_cfg.data
        return TokenLoader(self.train, batch_size, rank, world, seed, d.shuffle_window, 0, d.epoch_shift,
                           d.sampling == "random")


def resolve_device(cfg: CompressConfig) -> tuple[torch.device, torch.dtype, str]:
    """The device (the trainer's choice: an unavailable explicit request is an error) and the
    reference dtype."""
    from corpusforge.trainer.device import available_accelerators, choose_device_type

    try:
        kind = choose_device_type(cfg.device, available_accelerators())
    except RuntimeError as exc:
        raise CompressError(f"device: {exc}") from None
    device = torch.device(kind) if kind == "cpu" else torch.device(kind, 0)
    name = cfg.precision if cfg.precision != "auto" else ("fp32" if kind == "cpu" else "bf16")
    return device, {"fp32": torch.float32, "bf16": torch.bfloat16}[name], name


def load_run(run: str | Path, cfg: CompressConfig | None = None) -> Trained:
    from corpusforge.trainer.checkpoint import load_final_model

    device, dtype, base = resolve_device(cfg) if cfg is not None else (torch.device("cpu"), torch.float32, "fp32")
    try:
        tc, model = load_final_model(run)
    except ValueError as exc:
        raise CompressError(str(exc)) from None
    model.to(device=device, dtype=dtype).eval()
    stream = TokenStream.open(tc.data.dataset, Path(run) / "cache", verify=False)
    train, val = split(stream.tokens, tc.model.seq_len, tc.data.val_fraction)
    return Trained(tc, model, train, val, tc.model.vocab_size, device, base)


# ---- measurement --------------------------------------------------------------------------

def batches(seqs: PackedSequences, batch_size: int, n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first n batches of ``seqs`` in order (held-out evaluation, calibration)."""
    loader = TokenLoader(seqs, batch_size, 0, 1, seed)
    return [next(loader) for _ in range(min(n, len(seqs) // batch_size))]


def tensor_bytes(t: torch.Tensor) -> int:
    """Storage of a tensor, looking inside tensor subclasses (torchao's int data + scales, NF4)."""
    t = t.data if isinstance(t, torch.nn.Parameter) else t
    if type(t) is not torch.Tensor and hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return sum(tensor_bytes(getattr(t, n)) for n in names)
    return t.numel() * t.element_size()


def weight_bytes(model: torch.nn.Module) -> dict:
    """Bytes of linear-layer weights and of all parameters and buffers (tied weights once)."""
    seen, linear, total = set(), 0, 0
    for mod in model.modules():
        for name, t in list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False)):
            if id(t) in seen or name == "rope":
                continue
            seen.add(id(t))
            b = tensor_bytes(t)
            total += b
            if _is_linear(mod) and name != "bias":      # weights, or quantized weights and their scales
                linear += b
    return {"linear_weight_bytes": linear, "total_bytes": total}


def _is_linear(mod) -> bool:
    return isinstance(mod, torch.nn.Linear) or type(mod).__name__.endswith("Linear")


def count_weights(model: torch.nn.Module) -> int:
    """Parameters, counting quantized weights stored as buffers (``qweight``) too."""
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for n, b in model.named_buffers()
                                                            if n.endswith("qweight"))


def device_of(model: torch.nn.Module) -> torch.device:
    return next(iter(model.parameters()), next(iter(model.buffers()), torch.zeros(()))).device


def decode_latency(model: torch.nn.Module, device: torch.device, repeats: int = 50) -> dict:
    """Milliseconds per generated token at batch 1: one token through every layer, the cost of a
    decoding step with a KV cache less its attention over the cache (this model keeps no cache).
    At batch 1 this is bound by reading the weights, which is where weight-only quantization pays.
    On CUDA the step is captured in a CUDA graph, as a serving loop runs it, so that kernel launch
    overhead does not hide the weights' cost; where capture fails (a kernel that syncs), eager."""
    x = torch.zeros((1, 1), dtype=torch.long, device=device)
    mode = "eager"
    step = lambda: model(x)                                        # noqa: E731
    for _ in range(3):
        step()
    if device.type == "cuda":
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(x)
            step, mode = graph.replay, "cuda graph"
        except Exception:                                          # noqa: BLE001  any capture failure: eager
            torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        synchronize(device)
        t = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - t)
    times.sort()
    return {"decode_ms_per_token": 1000 * times[len(times) // 2], "decode_mode": mode}


@torch.no_grad()
def measure(model: torch.nn.Module, data: list, reference: torch.nn.Module | None = None, speed_repeats: int = 3) -> dict:
    """Held-out loss and perplexity, tokens/s (forward, best of ``speed_repeats`` passes), batch-1
    decoding latency, and the error against the reference model's outputs: mean KL(reference ||
    model) per token and the largest absolute logit difference."""
    model.eval()
    device = device_of(model)
    data = [(x.to(device), y.to(device)) for x, y in data]
    loss = kl = 0.0
    max_err = 0.0
    for x, y in data:
        logits = model(x).float()
        loss += F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
        if reference is not None:
            ref = reference(x).float()
            kl += F.kl_div(F.log_softmax(logits, -1).flatten(0, 1), F.log_softmax(ref, -1).flatten(0, 1),
                           log_target=True, reduction="batchmean").item()
            max_err = max(max_err, (logits - ref).abs().max().item())
    n = max(len(data), 1)
    if data:
        model(data[0][0])                          # warm-up: thread pools, allocator, lazy init
    best = float("inf")
    for _ in range(speed_repeats):
        synchronize(device)
        t = time.perf_counter()
        for x, _ in data:
            model(x)
        synchronize(device)
        best = min(best, time.perf_counter() - t)
    tokens = sum(x.numel() for x, _ in data)
    out = {"loss": loss / n, "perplexity": math.exp(loss / n), "tokens_per_s": tokens / best if best > 0 else 0.0,
           "params": count_weights(model), **weight_bytes(model), **decode_latency(model, device)}
    if reference is not None:
        out.update({"kl_to_fp32": kl / n, "max_logit_error": max_err})
    return out


# ---- fine-tuning --------------------------------------------------------------------------

def finetune(model: torch.nn.Module, trained: "Trained", steps: int, lr: float, batch_size: int, seed: int,
             loss_fn=None, extra_params: list | None = None, warmup_steps: int = 0) -> list[float]:
    """AdamW for ``steps`` steps on the run's training split, batches drawn as the run drew them
    (deterministic for a seed), a linear warmup then constant ``lr``; gradient norm clipped at 1. ``loss_fn(model, x, y)``
    defaults to cross-entropy. Under ``torchrun`` the model is wrapped in DDP and each rank
    takes its share of every step's batch (the trainer's data-parallel schedule)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    rank, world = (torch.distributed.get_rank(), torch.distributed.get_world_size()) if distributed else (0, 1)
    wrapped = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    params = [p for p in model.parameters() if p.requires_grad] + list(extra_params or [])
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup_steps) if warmup_steps else 1.0)
    loader = trained.loader(batch_size, seed, rank, world)
    loss_fn = loss_fn or cross_entropy
    losses = []
    model.train()
    device = device_of(model)
    for _ in range(steps):
        x, y = next(loader)
        loss = loss_fn(wrapped, x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


def cross_entropy(model, x, y) -> torch.Tensor:
    """The model's mean cross-entropy on (x, y): fine-tuning's default loss."""
    return logits_cross_entropy(model(x), y)


def clone(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model)


# ---- output -------------------------------------------------------------------------------

def save(out_dir: Path, name: str, model: torch.nn.Module, model_cfg: ModelConfig, extra: dict | None = None) -> Path:
    """``<out_dir>/<name>.pt``: the model config, its (possibly quantized or reshaped) state dict
    and what is needed to rebuild it (``extra``: per-layer shapes after structured pruning)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.pt"
    torch.save({"model_config": model_cfg.model_dump(), "state_dict": model.state_dict(), **(extra or {})}, path)
    return path


def write_report(out_dir: Path, method: str, rows: dict[str, dict], notes: list[str] | None = None) -> None:
    """report.json and report.md: one row per configuration, ratios against the first (the
    reference model's) row."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps({"method": method, "rows": rows, "notes": notes or []}, indent=2))
    base_name = next(iter(rows), "fp32")
    base = rows.get(base_name)
    lines = [f"# {method}", "", f"| configuration | linear weight bytes | x smaller | params | held-out loss | vs {base_name} | "
             f"perplexity | tokens/s | decode ms/token (batch 1) | KL to {base_name} |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        smaller = base["linear_weight_bytes"] / r["linear_weight_bytes"] if base and r.get("linear_weight_bytes") else float("nan")
        rel = (r["loss"] / base["loss"] - 1) * 100 if base else float("nan")
        lines.append(f"| {name} | {r.get('linear_weight_bytes', 0):,} | {smaller:.2f}x | {r.get('params', 0):,} | "
                     f"{r['loss']:.4f} | {rel:+.2f}% | {r['perplexity']:.3f} | {r.get('tokens_per_s', 0):,.0f} | "
                     f"{r.get('decode_ms_per_token', float('nan')):.3f} ({r.get('decode_mode', '-')}) | "
                     f"{r.get('kl_to_fp32', float('nan')):.4f} |")
    lines += [""] + [f"- {n}" for n in notes or []]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
