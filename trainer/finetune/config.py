"""The fine-tuning config (``corpusforge finetune CONFIG``): a finished trainer run, conversations
tokenized by ``text.chat_tokenize``, a method and its settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from corpusforge.config_base import StrictModel, read_yaml, validate

LINEARS = ("wq", "wk", "wv", "wo", "w1", "w2")


class LoRAConfig(StrictModel):
    rank: int = Field(8, ge=1, le=1024)
    alpha: float = Field(16.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    targets: list[str] = Field(default_factory=lambda: list(LINEARS),
                               description="Linear layers by name: wq wk wv wo (attention), w1 w2 (feed-forward).")

    @field_validator("targets")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t not in LINEARS]
        if bad or not v:
            raise ValueError(f"{bad or 'empty'}: choose among {list(LINEARS)}")
        return v


class FinetuneData(StrictModel):
    dataset: str = Field(description="A dataset written by text.chat_tokenize (token_ids + loss_mask).")
    packing: bool = Field(True, description="Pack several conversations per row (never split, never crossing).")
    val_fraction: float = Field(0.1, ge=0, lt=1)


class FinetuneTrain(StrictModel):
    steps: int = Field(100, ge=1)
    batch_size: int = Field(8, ge=1)
    lr: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(10, ge=0)
    grad_clip: float = Field(1.0, ge=0)
    eval_every: int = Field(50, ge=1)
    eval_batches: int = Field(8, ge=1)
    checkpoint_every: int = Field(50, ge=1)
    log_every: int = Field(10, ge=1)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda", "npu"] = "auto"
    precision: Literal["fp32", "bf16"] = "fp32"


class FinetuneConfig(StrictModel):
    base: str = Field(description="A finished `corpusforge train` out_dir (config.json + final_model_stage*.pt).")
    method: Literal["full", "lora", "ia3", "qlora"] = "lora"
    lora: LoRAConfig = Field(default_factory=LoRAConfig)
    data: FinetuneData
    train: FinetuneTrain = Field(default_factory=FinetuneTrain)
    parallel: Literal["ddp", "fsdp"] = Field("ddp", description="With several processes (torchrun): DDP, or FSDP2 "
                                             "sharding the frozen base and the adapters.")
    out_dir: str
    merge: bool = Field(False, description="Fold the adapters into the base and export it as a trainer run "
                        "(out_dir/merged) that `corpusforge compress` and the trainer's loaders read.")

    @model_validator(mode="after")
    def _base_exists(self):
        if not (Path(self.base) / "config.json").exists():
            raise ValueError(f"base: {self.base} is not a finished trainer run (no config.json)")
        return self


def load(path: str | Path, overrides: list[str] | None = None) -> FinetuneConfig:
    return validate(FinetuneConfig, read_yaml(path, overrides, "finetune config"), str(path))
