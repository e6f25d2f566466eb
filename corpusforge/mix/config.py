"""Mix configs: sources, proportions (weights, temperature or a named preset), budget, curriculum."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from corpusforge.config_base import StrictModel, read_yaml, validate

# Named recipes: shares by domain. Pretraining mixes general data heavily; continued pretraining
# and fine-tuning raise the domain share but keep general data in, against catastrophic forgetting.
PRESETS: dict[str, dict[str, float]] = {
    "pretrain": {"web": 0.55, "books": 0.15, "encyclopedia": 0.10, "news": 0.08, "code": 0.07, "dialogue": 0.03,
                 "domain": 0.02},
    "continued_pretraining": {"domain": 0.40, "web": 0.30, "books": 0.10, "encyclopedia": 0.10, "news": 0.05,
                              "code": 0.05},
    "finetune": {"domain": 0.70, "dialogue": 0.10, "web": 0.10, "encyclopedia": 0.10},
}


class Holdout(StrictModel):
    """A deterministic document-level split of a source (by a hash of each record's id), so that
    an evaluation slice never reaches training: ``part: train`` mixes the rest, ``heldout`` the slice."""
    fraction: float = Field(gt=0, lt=1, description="Share of the source's documents held out.")
    seed: int = 0
    part: Literal["train", "heldout"] = "train"


class SourceConfig(StrictModel):
    path: str = Field(description="A corpusforge dataset folder.")
    weight: float | None = Field(None, ge=0, description="Target share (normalised over sources).")
    domain: str | None = Field(None, description="Domain for presets (web, books, code, ...); default: the name.")
    max_epochs: float = Field(4.0, gt=0, description="Upsampling cap: at most this many passes over the source.")
    select_source: str | None = Field(None, description="Take only rows whose `source` column has this value.")
    holdout: Holdout | None = Field(None, description="Mix only one part of a held-out split of the source.")


class Phase(StrictModel):
    tokens: int = Field(gt=0, description="Tokens (records for image/point-cloud sets) in this phase.")
    weights: dict[str, float] = Field(description="Mixture of this phase, by source name.")


class CurriculumConfig(StrictModel):
    score: str = Field(description="Difficulty: a column (n_tokens, score_...) or a SQL expression over columns.")
    mode: Literal["sorted", "smooth", "phases"] = "smooth"
    window: int = Field(64, ge=1, description="Rows shuffled together, so neighbouring batches differ.")
    noise: float = Field(0.05, ge=0, le=1, description="smooth: spread of the easy-to-hard order (fraction of the set).")
    phases: list[Phase] | None = None
    within_phase: Literal["sorted", "shuffled"] = "sorted"

    @model_validator(mode="after")
    def _phases(self):
        if self.mode == "phases" and not self.phases:
            raise ValueError("curriculum.phases: required when mode is phases")
        return self


class OutputConfig(StrictModel):
    path: str
    shard_rows: int | None = Field(None, gt=0)
    shard_bytes: int | None = Field(256 << 20, gt=0)


class MixConfig(StrictModel):
    name: str
    sources: dict[str, SourceConfig] = Field(min_length=1)
    budget: int | None = Field(None, gt=0, description="Total tokens (records for image/point-cloud sets); "
                                                        "default: the sum of the sources at one pass.")
    temperature: float | None = Field(None, gt=0, description="Shares proportional to size^(1/T) (overrides weights).")
    preset: Literal["pretrain", "continued_pretraining", "finetune"] | None = None
    on_shortfall: Literal["error", "warn"] = "error"
    seed: int = 0
    curriculum: CurriculumConfig | None = None
    output: OutputConfig

    @model_validator(mode="after")
    def _shares(self):
        ways = sum([self.temperature is not None, self.preset is not None,
                    any(s.weight is not None for s in self.sources.values())])
        if ways > 1:
            raise ValueError("give source weights, a temperature or a preset, not several")
        if ways == 0:
            raise ValueError("give source weights, a temperature or a preset")
        if any(s.weight is not None for s in self.sources.values()):
            missing = [n for n, s in self.sources.items() if s.weight is None]
            if missing:
                raise ValueError(f"sources.{missing[0]}.weight: missing (every source needs one when any has one)")
            total = sum(s.weight for s in self.sources.values())
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"source weights sum to {total:.6g}, not 1 (they are shares of the budget)")
        if self.curriculum and self.curriculum.phases:
            for i, ph in enumerate(self.curriculum.phases):
                unknown = sorted(set(ph.weights) - set(self.sources))
                if unknown:
                    raise ValueError(f"curriculum.phases.{i}.weights: unknown source {unknown[0]!r}")
                if abs(sum(ph.weights.values()) - 1.0) > 1e-6:
                    raise ValueError(f"curriculum.phases.{i}.weights sum to {sum(ph.weights.values()):.6g}, not 1")
        return self


def load(path: str | Path, overrides: dict | None = None) -> MixConfig:
    return from_dict(read_yaml(path, overrides, "mix config"), source=str(path))


def from_dict(raw: dict, source: str = "mix config") -> MixConfig:
    return validate(MixConfig, raw, source)
