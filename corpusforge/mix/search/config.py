"""Mixture-search configs (``corpusforge mix search SEARCH_CONFIG``): the sources, the target the
final model should do well on, how candidates are drawn, how each proxy model is trained, how the
mixture-to-loss regression is fitted, and how the choice is verified."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from corpusforge.config_base import StrictModel, format_errors, read_yaml, validate
from corpusforge.mix.config import SourceConfig


class TargetSet(StrictModel):
    source: str | None = Field(None, description="A held-out slice of this source (see holdout).")
    path: str | None = Field(None, description="Or a separate tokenized dataset, evaluated whole.")
    select_source: str | None = Field(None, description="With path: only rows whose `source` column has this value.")
    weight: float = Field(1.0, gt=0, description="Weight of this set's loss in the target (normalised).")

    @model_validator(mode="after")
    def _one(self):
        if (self.source is None) == (self.path is None):
            raise ValueError("give either source (a held-out slice of a source) or path (a separate dataset)")
        if self.select_source is not None and self.path is None:
            raise ValueError("select_source: only with path (a source's slice uses the source's own selection)")
        return self


class HoldoutConfig(StrictModel):
    fraction: float = Field(0.1, gt=0, lt=1, description="Share of a target source's documents kept out of training.")
    seed: int = 0


class CandidatesConfig(StrictModel):
    n: int = Field(16, ge=2, description="Mixtures drawn around the prior (the baselines come on top).")
    prior: Literal["tokens", "uniform"] | dict[str, float] = Field(
        "tokens", description="Centre of the draws: the sources' token shares, uniform, or shares by source name.")
    concentration: float = Field(1.0, gt=0, description="Dirichlet alpha = concentration x sources x prior: "
                                                        "small spreads the draws to the corners, large keeps them near the prior.")
    temperature: float = Field(2.0, gt=0, description="The temperature baseline: shares proportional to tokens^(1/T).")
    seed: int = 0


class ProxyConfig(StrictModel):
    train: dict = Field(default_factory=dict, description="Trainer config for every proxy (model, optim, batch_size, "
                                                           "steps, ...); data and out_dir are set by the search.")
    eval_tokens: int = Field(0, ge=0, description="Tokens of each target set evaluated (0: all of them).")


class FitConfig(StrictModel):
    models: list[Literal["linear", "quadratic", "gbt"]] = Field(
        default_factory=lambda: ["linear", "quadratic", "gbt"], min_length=1,
        description="Regressions from mixture to target loss, compared by cross-validation.")
    folds: int = Field(5, ge=2)
    samples: int = Field(100_000, ge=100, description="Points of the simplex scored by the chosen regression.")
    top_k: int = Field(100, ge=1, description="The choice is the mean of the top_k predicted mixtures (RegMix).")
    seed: int = 0


class RefineConfig(StrictModel):
    n: int = Field(0, ge=0, description="A second round of proxies drawn around the first choice (0: none).")
    concentration: float = Field(50.0, gt=0, description="Dirichlet alpha = concentration x choice.")


class VerifyConfig(StrictModel):
    enabled: bool = True
    model: dict = Field(default_factory=dict, description="Model overrides for the verification proxies; "
                                                           "default: twice the proxy's layers.")
    steps: int | None = Field(None, ge=1, description="Steps of the verification proxies (default: the proxy's).")
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1,
                             description="Each mixture is trained once per seed: their spread is the noise floor.")


class WorkersConfig(StrictModel):
    workers: int = Field(1, ge=1, description="Proxies trained at the same time (processes).")
    threads: int = Field(1, ge=1, description="Torch CPU threads per proxy.")


class OutputConfig(StrictModel):
    path: str = Field(description="The search's folder: candidates, proxies, fit, report, chosen mix config.")
    mix_path: str | None = Field(None, description="output.path of the chosen mix config (default: <path>/mix).")


class SearchConfig(StrictModel):
    name: str
    sources: dict[str, SourceConfig] = Field(min_length=2)
    targets: dict[str, TargetSet] = Field(min_length=1)
    holdout: HoldoutConfig = Field(default_factory=HoldoutConfig)
    budget: int | None = Field(None, gt=0, description="Tokens of the final mix: with max_epochs it caps each share.")
    candidates: CandidatesConfig = Field(default_factory=CandidatesConfig)
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)
    fit: FitConfig = Field(default_factory=FitConfig)
    refine: RefineConfig = Field(default_factory=RefineConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    parallel: WorkersConfig = Field(default_factory=WorkersConfig)
    output: OutputConfig

    @model_validator(mode="after")
    def _references(self):
        for n, s in self.sources.items():
            if s.weight is not None:
                raise ValueError(f"sources.{n}.weight: the search chooses the weights; leave it out")
            if s.holdout is not None:
                raise ValueError(f"sources.{n}.holdout: set by the search (holdout, targets); leave it out")
        for n, t in self.targets.items():
            if t.source is not None and t.source not in self.sources:
                raise ValueError(f"targets.{n}.source: unknown source {t.source!r} (sources: {', '.join(self.sources)})")
        if isinstance(self.candidates.prior, dict):
            unknown = sorted(set(self.candidates.prior) - set(self.sources))
            if unknown:
                raise ValueError(f"candidates.prior: unknown source {unknown[0]!r}")
            if sum(self.candidates.prior.values()) <= 0 or min(self.candidates.prior.values()) < 0:
                raise ValueError("candidates.prior: shares must be >= 0 and not all 0")
        from corpusforge.trainer.config import TrainConfig

        for where, overrides in (("proxy.train", self.proxy.train), ("verify", {"model": self.verify.model})):
            try:       # a typo in the trainer's part of the config fails now, not in the first proxy
                TrainConfig.model_validate({**overrides, "data": {**overrides.get("data", {}), "dataset": "x"}})
            except ValidationError as exc:
                raise ValueError(format_errors(exc, where)) from None
        return self


def load(path: str | Path, overrides: dict | None = None) -> SearchConfig:
    return from_dict(read_yaml(path, overrides, "mix search config"), source=str(path))


def from_dict(raw: dict, source: str = "mix search config") -> SearchConfig:
    return validate(SearchConfig, raw, source)
