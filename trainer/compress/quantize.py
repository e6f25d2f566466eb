"""Quantization of a trained GPT, each method measured against the fp32 model.

| method | what | how |
|---|---|---|
| ``int8_weight_only`` | int8 weights per output channel, fp32 activations | torchao ``Int8WeightOnlyConfig`` |
| ``int8_dynamic`` | int8 weights, activations quantized per token at run time | torchao ``Int8DynamicActivationInt8WeightConfig`` |
| ``int4_weight_only`` | int4 weights per group of ``group_size`` (``scheme``) | torchao ``IntxWeightOnlyConfig(int4, PerGroup)``; on CPU stored unpacked, one int4 per int8 byte |
| ``nf4`` | 4-bit NormalFloat weights, blocks of 64, double-quantized scales (QLoRA) | torchao's ``NF4Tensor`` |
| ``static`` | int8 weights (``granularity``: per_tensor, per_channel, per_group; ``scheme``) and int8 activations with ranges fixed by calibration (``observer``) | here: observers on every linear layer's input over ``calibration_batches`` training batches, then ``StaticQuantLinear`` (int8 weights stored, activations quantize-dequantized with the fixed scale and zero point) |
| ``qat`` | int4 per-group weights after quantization-aware fine-tuning | torchao ``QATConfig`` prepare (fake-quantized weights, straight-through estimator) -> ``qat_steps`` of fine-tuning -> convert to ``IntxWeightOnlyConfig``; compared with the same steps of plain fine-tuning followed by int4 PTQ |
| ``int4_tinygemm`` | int4 weights per group, packed for the tinygemm CUDA kernel (bf16 activations) | torchao ``Int4WeightOnlyConfig(int4_packing_format="tile_packed_to_4d")``; CUDA only, refused elsewhere with a message naming the alternative |
| ``float8_weight_only`` | float8 (e4m3) weights per output channel | torchao ``Float8WeightOnlyConfig``; a GPU with float8 (compute capability 8.9+) |
| ``float8_dynamic`` | float8 weights per row and activations per token at run time, float8 matmuls | torchao ``Float8DynamicActivationFloat8WeightConfig(PerRow())``; compute capability 8.9+ |

All linear layers of the transformer blocks are quantized; the output layer too unless it shares
its weight with the embedding (``tie_embeddings``): quantizing it would untie and duplicate it.
Torchao's int8 static config (``Int8StaticActivationInt8WeightConfig``) refuses these layers on
CPU in this version, so static quantization is carried out by ``StaticQuantLinear``: its
accuracy is what an int8 kernel would compute (the same rounding), its speed is not measured as
an int8 kernel's.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from corpusforge.trainer.compress.common import (CompressConfig, CompressError, Trained, batches, clone, device_of, finetune, measure, save,
                                     write_report)
from corpusforge.trainer.compress.observers import fake_quantize, make_observer, qparams

# torchao logs each CUDA-only kernel library it cannot load on a CPU machine, and torch a
# deprecation notice for torchao's enums: neither is actionable here
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

METHODS = ("int8_weight_only", "int8_dynamic", "int4_weight_only", "nf4", "static", "qat", "int4_tinygemm",
           "float8_weight_only", "float8_dynamic")
ACCELERATOR_METHODS = {"int4_tinygemm": "int4_weight_only", "float8_weight_only": "int8_weight_only",
                       "float8_dynamic": "int8_dynamic"}      # -> what runs everywhere instead


def linear_filter(model) -> callable:
    tied = model.output is not None and model.output.weight is model.tok_embeddings.weight

    def keep(module: torch.nn.Module, fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and not (tied and fqn == "output")
    return keep


def _torchao(model, config, cfg: CompressConfig):
    from torchao.quantization import quantize_

    quantize_(model, config, filter_fn=linear_filter(model))
    return model


def _int4_config(cfg: CompressConfig):
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_primitives import MappingType

    return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(cfg.quantize.group_size),
                                mapping_type=MappingType.SYMMETRIC if cfg.quantize.scheme == "symmetric" else MappingType.ASYMMETRIC)


def _check_group_size(model, group_size: int) -> None:
    keep = linear_filter(model)
    for name, mod in model.named_modules():
        if keep(mod, name) and mod.in_features % group_size:
            raise CompressError(f"quantize.group_size: {group_size} does not divide {name}.in_features "
                                f"({mod.in_features}); choose a divisor such as 32 or 64")


def apply(method: str, model, cfg: CompressConfig, trained: Trained | None = None):
    """Quantize a copy of ``model`` by ``method`` (qat needs ``trained`` for its data)."""
    q = cfg.quantize
    keep = linear_filter(model)
    if not any(keep(m, n) for n, m in model.named_modules()):
        kinds = sorted({type(m).__name__ for m in model.modules() if not list(m.children())})
        raise CompressError(f"quantize: no torch.nn.Linear layers to quantize (layer types: {', '.join(kinds)}); "
                            "these methods quantize linear layers, the rest stays in float")
    model = clone(model)
    if method == "int8_weight_only":
        from torchao.quantization import Int8WeightOnlyConfig

        return _torchao(model, Int8WeightOnlyConfig(), cfg)
    if method == "int8_dynamic":
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig

        return _torchao(model, Int8DynamicActivationInt8WeightConfig(), cfg)
    if method == "int4_weight_only":
        _check_group_size(model, q.group_size)
        return _torchao(model, _int4_config(cfg), cfg)
    if method == "nf4":
        return to_nf4(model)
    if method == "static":
        return static(model, cfg, trained)
    if method in ACCELERATOR_METHODS:
        return _accelerator_only(method, model, cfg)
    raise CompressError(f"quantize.methods: unknown method {method!r}; known: {', '.join(METHODS)}")


def _accelerator_only(method: str, model, cfg: CompressConfig):
    """The methods whose kernels exist on CUDA only (tinygemm, float8 matmuls): refused elsewhere,
    naming the method that runs there instead."""
    device = device_of(model)
    needs_fp8 = method.startswith("float8")
    if device.type != "cuda" or (needs_fp8 and torch.cuda.get_device_capability(device) < (8, 9)):
        raise CompressError(f"quantize.methods: {method} needs {'a GPU with float8 (compute capability 8.9+)' if needs_fp8 else 'CUDA'}; "
                            f"this model is on {device}: use {ACCELERATOR_METHODS[method]}, which runs there")
    from torchao.quantization import (Float8DynamicActivationFloat8WeightConfig, Float8WeightOnlyConfig,
                                      Int4WeightOnlyConfig, PerRow)

    if method == "int4_tinygemm":
        _check_group_size(model, cfg.quantize.group_size)
        if model.tok_embeddings.weight.dtype != torch.bfloat16:
            raise CompressError("quantize.methods: int4_tinygemm multiplies bf16 activations: set precision: bf16")
        config = Int4WeightOnlyConfig(group_size=cfg.quantize.group_size, int4_packing_format="tile_packed_to_4d")
    elif method == "float8_weight_only":
        config = Float8WeightOnlyConfig()
    else:
        config = Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
    return _torchao(model, config, cfg)


def nf4_weight(weight: torch.Tensor, name: str) -> torch.nn.Parameter:
    """A frozen NF4 copy of a weight (QLoRA's format): blocks of 64 weights, their absmax scales
    double-quantized in blocks of up to 256 (fewer when a layer has fewer blocks)."""
    from math import gcd

    try:                                    # torchao >= 0.18
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4 as nf4
    except ImportError:                     # torchao <= 0.17
        from torchao.dtypes.nf4tensor import to_nf4 as nf4

    n = weight.numel()
    if n % 64:
        raise CompressError(f"nf4: {name} has {n} weights, not a multiple of the 64-weight NF4 block")
    return torch.nn.Parameter(nf4(weight.detach(), 64, gcd(n // 64, 256)), requires_grad=False)


def to_nf4(model):
    """NF4 (QLoRA) on every linear layer but a tied output."""
    keep = linear_filter(model)
    for name, mod in model.named_modules():
        if keep(mod, name):
            try:
                mod.weight = nf4_weight(mod.weight, name)
            except CompressError as exc:
                raise CompressError(f"{exc}; leave nf4 out of quantize.methods for this model") from None
    return model


# ---- static int8 --------------------------------------------------------------------------

class StaticQuantLinear(torch.nn.Module):
    """A linear layer with int8 weights and an int8 input of fixed (calibrated) scale and zero point."""

    def __init__(self, linear: torch.nn.Linear, act: tuple, granularity: str, symmetric: bool, group_size: int):
        super().__init__()
        w = linear.weight.detach().float()
        out_f, in_f = w.shape
        if granularity == "per_tensor":
            view = w.reshape(1, -1)
        elif granularity == "per_channel":
            view = w
        else:
            if in_f % group_size:
                raise CompressError(f"quantize.group_size: {group_size} does not divide in_features {in_f}")
            view = w.reshape(-1, group_size)
        scale, zp, qmin, qmax = qparams(view.min(dim=1).values, view.max(dim=1).values, symmetric)
        q = torch.clamp(torch.round(view / scale[:, None]) + zp[:, None], qmin, qmax)
        # stored as int8 (asymmetric levels shifted by -128 into the int8 range)
        self.register_buffer("qweight", (q - (0 if symmetric else 128)).to(torch.int8).reshape(out_f, in_f))
        self.register_buffer("w_scale", scale)
        self.register_buffer("w_zero", (zp - (0 if symmetric else 128)).to(torch.int8))
        self.shape = (out_f, in_f)
        self.view_shape = view.shape
        self.bias = linear.bias
        a_scale, a_zero, self.a_qmin, self.a_qmax = act
        self.register_buffer("a_scale", a_scale.reshape(()))
        self.register_buffer("a_zero", a_zero.reshape(()))
        self.in_features, self.out_features = in_f, out_f

    def weight_dequantized(self) -> torch.Tensor:
        q = self.qweight.float().reshape(self.view_shape)
        return ((q - self.w_zero.float()[:, None]) * self.w_scale[:, None]).reshape(self.shape)

    @property
    def weight(self) -> torch.Tensor:        # bytes are counted on what is stored: qweight + scales
        return self.qweight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = fake_quantize(x, self.a_scale, self.a_zero, self.a_qmin, self.a_qmax)
        return F.linear(xq, self.weight_dequantized(), self.bias)


def static(model, cfg: CompressConfig, trained: Trained):
    q = cfg.quantize
    keep = linear_filter(model)
    targets = {name: mod for name, mod in model.named_modules() if keep(mod, name)}
    observers = {name: make_observer(q.observer, q.momentum) for name in targets}
    hooks = [mod.register_forward_pre_hook(lambda m, args, n=name: observers[n].update(args[0]))
             for name, mod in targets.items()]
    with torch.no_grad():
        for x, _ in batches(trained.train, cfg.batch_size, cfg.calibration_batches, cfg.seed):
            model(x.to(device_of(model)))
    for h in hooks:
        h.remove()
    symmetric = q.scheme == "symmetric"
    for name, mod in targets.items():
        lo, hi = observers[name].range()
        new = StaticQuantLinear(mod, qparams(lo, hi, symmetric), q.granularity, symmetric, q.group_size)
        parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
        setattr(parent, name.rpartition(".")[2], new)
    return model


# ---- quantization-aware training -------------------------------------------------------------

def qat(model, cfg: CompressConfig, trained: Trained):
    """int4 per-group QAT with torchao: prepare (fake quantization, straight-through gradients),
    fine-tune, convert."""
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    _check_group_size(model, cfg.quantize.group_size)
    model = clone(model)
    base = _int4_config(cfg)
    quantize_(model, QATConfig(base, step="prepare"), filter_fn=linear_filter(model))
    finetune(model, trained, cfg.quantize.qat_steps, cfg.quantize.qat_lr, cfg.batch_size, cfg.seed)
    quantize_(model, QATConfig(base, step="convert"), filter_fn=linear_filter(model))
    return model


def run(cfg: CompressConfig, trained: Trained) -> dict:
    """Every configured method on the trained model; returns the report rows."""
    from pathlib import Path

    out = Path(cfg.out_dir)
    fp32 = trained.model
    data = batches(trained.val, cfg.batch_size, cfg.eval_batches)
    rows = {trained.base: measure(fp32, data)}
    notes = []
    for method in cfg.quantize.methods:
        if method == "qat":
            # the fair baseline: the same steps of plain fine-tuning, then int4 PTQ; the gap is
            # measured against that fine-tuned fp32 model, which QAT also started from
            steps = cfg.quantize.qat_steps
            tuned = clone(fp32)
            finetune(tuned, trained, steps, cfg.quantize.qat_lr, cfg.batch_size, cfg.seed)
            rows[f"fp32 fine-tuned {steps} steps"] = measure(tuned, data, fp32)
            ptq = apply("int4_weight_only", tuned, cfg)
            rows[f"int4 PTQ after {steps} fp32 fine-tuning steps"] = measure(ptq, data, fp32)
            model = qat(fp32, cfg, trained)
            rows["qat"] = measure(model, data, fp32)
            ref = rows[f"fp32 fine-tuned {steps} steps"]["loss"]
            gap_ptq = rows[f"int4 PTQ after {steps} fp32 fine-tuning steps"]["loss"] - ref
            gap_qat = rows["qat"]["loss"] - ref
            recovered = 1 - gap_qat / gap_ptq if gap_ptq > 0 else float("nan")
            notes.append(f"int4 loss gap to the fp32 model fine-tuned {steps} steps: PTQ {gap_ptq:+.4f}, QAT "
                         f"{gap_qat:+.4f}: QAT recovers {recovered:.0%} of the PTQ gap at equal steps")
        else:
            model = apply(method, fp32, cfg, trained)
            name = method if method != "static" else (f"static ({cfg.quantize.granularity}, {cfg.quantize.scheme}, "
                                                      f"{cfg.quantize.observer})")
            rows[name] = measure(model, data, fp32)
        save(out, method, model, trained.train_cfg.model)
    write_report(out, "quantize", rows, notes)
    return rows
