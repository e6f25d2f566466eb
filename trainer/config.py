"""Training configuration: strict pydantic models (``corpusforge.config_base``, as every config
in the project), loaded from YAML, overridable from the command line (``--set optim.lr=3e-4``).
Unknown keys, wrong types and impossible combinations are ``ConfigError``s that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from corpusforge.config_base import StrictModel, read_yaml, validate
from corpusforge.trainer.model import ModelConfig


class DataConfig(StrictModel):
    dataset: str = ""                 # a corpusforge text dataset with token_ids (manifest folder)
    val_fraction: float = Field(0.1, ge=0, lt=1)   # the last fraction of the token stream is held out
    shuffle_window: int = 0           # shuffle samples within windows of this many (0: manifest order)
    num_workers: int = 0              # DataLoader worker processes
    epoch_shift: bool = False         # move the packing grid by a seeded offset every epoch after the first
    sampling: Literal["packed", "random"] = "packed"   # packed: disjoint windows in manifest order | random offsets
    verify: bool = True               # check shard sha256 against the manifest when opening


class ParallelConfig(StrictModel):
    mode: Literal["none", "ddp", "zero1", "zero2", "zero3", "tp", "pp", "tp+fsdp", "pp+dp"] = "none"
    tp: int = Field(1, ge=1)          # tensor-parallel degree (tp, tp+fsdp)
    pp: int = Field(1, ge=1)          # pipeline stages (pp, pp+dp)
    pp_schedule: Literal["gpipe", "1f1b"] = "1f1b"
    microbatches: int = Field(4, ge=1)
    cpu_offload: bool = False         # zero2/zero3: keep sharded parameters and optimizer state on CPU


class OptimConfig(StrictModel):
    lr: float = 1e-3
    min_lr: float = 1e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    grad_clip: float = 1.0            # 0: off
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_steps: int = 100
    # auto: fused AdamW on CUDA, else PyTorch's default | fused | foreach
    implementation: Literal["auto", "fused", "foreach"] = "auto"


class TrainConfig(StrictModel):
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    batch_size: int = Field(12, ge=1)  # sequences per data-parallel rank per micro-step
    grad_accum: int = Field(1, ge=1)
    steps: int = Field(2000, ge=1)
    eval_every: int = 250             # 0: only at the end
    eval_batches: int = 20
    log_every: int = Field(10, ge=1)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    # none | full: recompute every ac_every-th block in backward | op: keep matmul and attention
    # outputs, recompute the cheap elementwise ops (norms, activations, RoPE)
    activation_checkpointing: Literal["none", "full", "op"] = "none"
    ac_every: int = Field(1, ge=1)
    compile: bool = False             # torch.compile each transformer block (and the loss)
    float8: Literal["none", "tensorwise", "rowwise"] = "none"   # torchao float8 training (CUDA, sm89+)
    seed: int = 1337
    device: Literal["auto", "cpu", "cuda", "npu"] = "auto"
    out_dir: str = "out/train"
    checkpoint_every: int = 0         # 0: only at the end
    save_final: bool = True           # false: no checkpoint or final weights at the end (benchmarks, sweeps)
    resume: bool = False
    stop_at: int = 0                  # stop after this step (checkpoint saved), as if interrupted; 0: run to `steps`
    tensorboard: bool = True

    @model_validator(mode="after")
    def _combinations(self) -> "TrainConfig":
        mode = self.parallel.mode
        if not self.data.dataset:
            raise ValueError("data.dataset: required (a corpusforge dataset with token_ids)")
        if mode.startswith("pp") and self.batch_size % self.parallel.microbatches:
            raise ValueError(f"parallel.microbatches: {self.parallel.microbatches} must divide batch_size {self.batch_size}")
        if self.model.loss_chunks > 1 and mode in ("tp", "tp+fsdp", "pp", "pp+dp"):
            raise ValueError(f"model.loss_chunks: {self.model.loss_chunks} needs the whole output layer on one rank; "
                             f"parallel.mode {mode} splits it: set it to 1")
        if self.float8 != "none" and mode in ("tp", "tp+fsdp"):
            raise ValueError(f"float8: {self.float8} is not combined with tensor parallelism here (parallel.mode "
                             f"{mode}); use none, ddp, zero1/2/3 or pp")
        if self.float8 != "none" and self.precision != "bf16":
            raise ValueError(f"float8: {self.float8} trains the matmuls in float8 and the rest in bf16: set precision: bf16")
        return self


def load(path: str | Path | None = None, overrides: list[str] | dict | None = None) -> TrainConfig:
    return validate(TrainConfig, read_yaml(path, overrides, "train config"), str(path) if path else "train config")


def to_dict(cfg: TrainConfig) -> dict:
    return cfg.model_dump(mode="json")
