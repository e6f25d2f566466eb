"""Training configuration: dataclasses, loaded from YAML, overridable from the command line
(``--set optim.lr=3e-4``). Unknown keys and wrong types are errors that name the field."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from corpusforge.trainer.model import ModelConfig


@dataclass
class DataConfig:
    dataset: str = ""                 # a corpusforge text dataset with token_ids (manifest folder)
    val_fraction: float = 0.1         # the last fraction of the token stream is held out
    shuffle_window: int = 0           # shuffle samples within windows of this many (0: manifest order)
    num_workers: int = 0              # DataLoader worker processes
    epoch_shift: bool = False         # move the packing grid by a seeded offset every epoch after the first
    sampling: str = "packed"          # packed: disjoint windows in manifest order | random: windows at random offsets
    verify: bool = True               # check shard sha256 against the manifest when opening


@dataclass
class ParallelConfig:
    # none | ddp | zero1 | zero2 | zero3 | tp | pp | tp+fsdp | pp+dp
    mode: str = "none"
    tp: int = 1                       # tensor-parallel degree (tp, tp+fsdp)
    pp: int = 1                       # pipeline stages (pp, pp+dp)
    pp_schedule: str = "1f1b"         # gpipe | 1f1b
    microbatches: int = 4
    cpu_offload: bool = False         # zero2/zero3: keep sharded parameters and optimizer state on CPU


@dataclass
class OptimConfig:
    lr: float = 1e-3
    min_lr: float = 1e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    grad_clip: float = 1.0            # 0: off
    schedule: str = "cosine"          # cosine | linear | constant
    warmup_steps: int = 100
    implementation: str = "auto"      # auto: fused AdamW on an accelerator, else foreach | fused | foreach


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    batch_size: int = 12              # sequences per data-parallel rank per micro-step
    grad_accum: int = 1
    steps: int = 2000
    eval_every: int = 250             # 0: only at the end
    eval_batches: int = 20
    log_every: int = 10
    precision: str = "fp32"           # fp32 | bf16 | fp16
    # none | full: recompute every ac_every-th block in backward | op: keep matmul and attention
    # outputs, recompute the cheap elementwise ops (norms, activations, RoPE)
    activation_checkpointing: str = "none"
    ac_every: int = 1
    compile: bool = False             # torch.compile each transformer block (and the loss)
    float8: str = "none"              # none | tensorwise | rowwise: torchao float8 training (CUDA, sm89+)
    seed: int = 1337
    device: str = "auto"              # auto | cpu | cuda | npu
    out_dir: str = "out/train"
    checkpoint_every: int = 0         # 0: only at the end
    save_final: bool = True           # false: no checkpoint or final weights at the end (benchmarks, sweeps)
    resume: bool = False
    stop_at: int = 0                  # stop after this step (checkpoint saved), as if interrupted; 0: run to `steps`
    tensorboard: bool = True

    def validate(self) -> "TrainConfig":
        choices = {
            "parallel.mode": (self.parallel.mode, {"none", "ddp", "zero1", "zero2", "zero3", "tp", "pp", "tp+fsdp", "pp+dp"}),
            "parallel.pp_schedule": (self.parallel.pp_schedule, {"gpipe", "1f1b"}),
            "data.sampling": (self.data.sampling, {"packed", "random"}),
            "optim.schedule": (self.optim.schedule, {"cosine", "linear", "constant"}),
            "precision": (self.precision, {"fp32", "bf16", "fp16"}),
            "model.norm": (self.model.norm, {"rmsnorm", "layernorm"}),
            "model.pos": (self.model.pos, {"rope", "learned"}),
            "device": (self.device, {"auto", "cpu", "cuda", "npu"}),
            "activation_checkpointing": (self.activation_checkpointing, {"none", "full", "op"}),
            "float8": (self.float8, {"none", "tensorwise", "rowwise"}),
            "optim.implementation": (self.optim.implementation, {"auto", "fused", "foreach"}),
        }
        for name, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"{name}: {value!r} is not one of {sorted(allowed)}")
        if not self.data.dataset:
            raise ValueError("data.dataset: required (a corpusforge dataset with token_ids)")
        positive = {"batch_size": self.batch_size, "grad_accum": self.grad_accum, "steps": self.steps,
                    "model.seq_len": self.model.seq_len, "parallel.tp": self.parallel.tp,
                    "parallel.pp": self.parallel.pp, "parallel.microbatches": self.parallel.microbatches,
                    "ac_every": self.ac_every, "model.loss_chunks": self.model.loss_chunks}
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name}: must be >= 1, got {value}")
        if not 0 <= self.data.val_fraction < 1:
            raise ValueError(f"data.val_fraction: must be in [0, 1), got {self.data.val_fraction}")
        if self.parallel.mode.startswith("pp") and self.batch_size % self.parallel.microbatches:
            raise ValueError(f"parallel.microbatches {self.parallel.microbatches} must divide batch_size {self.batch_size}")
        if self.model.loss_chunks > 1 and self.parallel.mode in ("tp", "tp+fsdp", "pp", "pp+dp"):
            raise ValueError(f"model.loss_chunks: {self.model.loss_chunks} needs the whole output layer on one rank; "
                             f"parallel.mode {self.parallel.mode} splits it: set it to 1")
        if self.float8 != "none" and self.parallel.mode in ("tp", "tp+fsdp"):
            raise ValueError(f"float8: {self.float8} is not combined with tensor parallelism here (parallel.mode "
                             f"{self.parallel.mode}); use none, ddp, zero1/2/3 or pp")
        if self.float8 != "none" and self.precision != "bf16":
            raise ValueError(f"float8: {self.float8} trains the matmuls in float8 and the rest in bf16: set precision: bf16")
        return self


def _build(cls, raw: dict, where: str):
    if not isinstance(raw, dict):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ValueError(f"{where + '.' if where else ''}{unknown[0]}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {}
    for key, value in raw.items():
        typ = hints[key]
        path = f"{where}.{key}" if where else key
        if dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value or {}, path)
            continue
        base = float if typ is float else int if typ is int else bool if typ is bool else str if typ is str else None
        if base in (int, float) and isinstance(value, str):      # YAML reads 3e-4 as a string
            try:
                value = base(value)
            except ValueError:
                pass
        if base is bool and not isinstance(value, bool):
            raise ValueError(f"{path}: expected true/false, got {value!r}")
        if base is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{path}: expected an integer, got {value!r}")
        if base is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{path}: expected a number, got {value!r}")
        if base is str and not isinstance(value, str):
            raise ValueError(f"{path}: expected a string, got {value!r}")
        kwargs[key] = float(value) if base is float else value
    return cls(**kwargs)


def read_raw(path: str | Path | None, overrides: list[str] | None = None) -> dict:
    """A YAML config as a mapping, with ``KEY.SUB=VALUE`` overrides (values parsed as YAML) applied."""
    raw = (yaml.safe_load(Path(path).read_text()) if path else {}) or {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        node = raw
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return raw


def load(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    return _build(TrainConfig, read_raw(path, overrides), "").validate()


def to_dict(cfg: TrainConfig) -> dict:
    return dataclasses.asdict(cfg)
