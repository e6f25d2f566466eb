"""Run a pipeline config as a Prefect flow: one task per (segment, unit), one task per
global-stage reduce step. The stage code and the on-disk layout are the runner's; only the
execution engine changes. With no Prefect server configured, Prefect runs the flow in its
local ephemeral mode.

    python -m flows.pipeline examples/demo_text.yaml [--resume]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

# No telemetry from a data pipeline (and no sqlite lock warnings from it in ephemeral mode).
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from prefect import flow, task  # noqa: E402

from corpusforge import runner  # noqa: E402
from corpusforge.config import PipelineConfig, from_dict, load_config  # noqa: E402


@task(name="unit", retries=2, retry_delay_seconds=2, task_run_name="segment {segment} unit {unit_index}")
def unit_task(raw: dict, base: str, segment: int, unit_index: int) -> dict:
    plan = runner.Plan.from_dict(raw, base=Path(base))
    result = runner.run_unit(plan, segment, plan.units[unit_index])
    return result.__dict__


@task(name="resolve", retries=1, task_run_name="resolve segment {segment}")
def resolve_task(raw: dict, base: str, segment: int) -> dict:
    plan = runner.Plan.from_dict(raw, base=Path(base))
    return runner.run_resolve(plan, segment)


def prefect_executor(plan: runner.Plan, segment: int, units: list[runner.Unit], progress=None):
    raw = plan.config.model_dump(mode="json")
    futures = [unit_task.submit(raw, str(plan.base), segment, u.index) for u in units]
    return [runner.UnitResult(**f.result()) for f in futures]


def prefect_resolver(plan: runner.Plan, segment: int) -> dict:
    return resolve_task(plan.config.model_dump(mode="json"), str(plan.base), segment)


@flow(name="corpusforge-pipeline", log_prints=True)
def pipeline_flow(config: dict, resume: bool = False, base: str | None = None) -> dict:
    """Run one pipeline config (the same YAML the CLI takes, as a mapping)."""
    cfg: PipelineConfig = from_dict(config, source="flow parameter `config`")
    summary = runner.run(cfg, resume=resume, base=Path(base) if base else None,
                         executor=prefect_executor, resolver=prefect_resolver)
    totals = summary.stats["totals"]
    print(f"{cfg.name}: {totals['entered']} in, {totals['kept']} kept, {totals['rejected']} rejected -> {summary.out}")
    return {"out": str(summary.out), "totals": totals}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    pipeline_flow(cfg.model_dump(mode="json"), resume=args.resume, base=str(Path.cwd()))


if __name__ == "__main__":
    main()
