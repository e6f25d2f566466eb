"""Run a pipeline config as a Prefect flow: one task per (segment, unit), one task per
global-stage reduce step. The stage code and the on-disk layout are the runner's; only the
execution engine changes, so the output is byte-identical to the CLI's.

* Task runner: Prefect's default (threads in this process), or Dask through prefect-dask's
  ``DaskTaskRunner``: ``dask_workers`` local worker processes, or an existing cluster at
  ``dask_address`` (``tcp://scheduler:8786``); without ``PREFECT_API_URL`` a Dask run starts its
  own loopback Prefect server (workers cannot reach the ephemeral API). Units are the unit of distribution; a global
  stage's fingerprint (map) and filter (map) steps run inside the unit tasks, its resolve
  (reduce) step as one task, all reading and writing the run's ``_work/`` folder, which every
  worker must therefore see: one machine, a shared filesystem mounted at the same path, or an
  object store (``output.path: s3://bucket/prefix``; see ``corpusforge.io.storage``).
* Retries: a unit task is retried ``retries`` times (the config's); units that still fail are
  listed with their errors after every other unit has finished, and the flow fails.
* No Prefect task caching: a cached task result stood for files a rerun had deleted (issue 16).
  A finished unit is skipped by the runner's own done marker, which is written after the unit's
  files and read from the store itself, so a rerun, a resume or a deployment run twice does
  exactly the work whose output is not there.
* Artifacts: a markdown summary (records in, kept, rejected by reason per stage) and a link to
  the HTML report, shown on the flow run's page in the Prefect UI.

    python -m corpusforge.flows.pipeline CONFIG [--resume] [--dask-workers N | --dask-address tcp://host:8786 | --threads N]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

# No telemetry from a data pipeline (and no sqlite lock warnings from it in ephemeral mode).
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# The ephemeral server (a flow run without PREFECT_API_URL) creates its database on first start;
# on a busy 2-core machine that takes longer than Prefect's 20 s default and the run would fail.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

from prefect import flow, task  # noqa: E402
from prefect.artifacts import create_link_artifact, create_markdown_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from corpusforge import runner  # noqa: E402
from corpusforge.config import PipelineConfig, from_dict, load_config  # noqa: E402
from corpusforge.io.dataset import REPORT_HTML  # noqa: E402
from corpusforge.io.storage import Store  # noqa: E402


from corpusforge.flows.artifacts import artifact_key, summary_markdown  # noqa: E402
from corpusforge.flows.reports import report_link as link  # noqa: E402  (the address artifacts show)
from corpusforge.flows.server import local_server  # noqa: E402


@task(name="unit", retry_delay_seconds=1, cache_policy=NO_CACHE, task_run_name="segment {segment} unit {unit_index}")
def unit_task(raw: dict, base: str, segment: int, unit_index: int) -> dict:
    plan = runner.Plan.from_dict(raw, base=Path(base))
    result = runner.run_unit(plan, segment, plan.units[unit_index])
    return result.__dict__


@task(name="resolve", retries=1, cache_policy=NO_CACHE, task_run_name="resolve segment {segment}")
def resolve_task(raw: dict, base: str, segment: int) -> dict:
    plan = runner.Plan.from_dict(raw, base=Path(base))
    return runner.run_resolve(plan, segment)


def prefect_executor(plan: runner.Plan, segment: int, units: list[runner.Unit], progress=None):
    """The units as Prefect tasks (retried by Prefect, ``retries`` times), collected as every
    executor collects (``runner.collect``: results in unit order, or every failure listed)."""
    raw = plan.config.model_dump(mode="json")
    submit = unit_task.with_options(retries=plan.config.retries).submit

    def run_round(pending: list[runner.Unit]):
        futures = {u.index: submit(raw, str(plan.base), segment, u.index) for u in pending}
        for u in pending:
            fut = futures[u.index]
            fut.wait()
            if fut.state.is_completed():
                yield u, runner.UnitResult(**fut.result())
                continue
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - the task's own exception, after its retries
                yield u, exc
            else:
                yield u, RuntimeError(f"task ended {fut.state.type.value}")
    return runner.collect(segment, units, 1, run_round, progress)


def prefect_resolver(plan: runner.Plan, segment: int) -> dict:
    return resolve_task(plan.config.model_dump(mode="json"), str(plan.base), segment)


@flow(name="corpusforge-pipeline", log_prints=True)
def pipeline_flow(config: dict, resume: bool = False, base: str | None = None) -> dict:
    """Run one pipeline config (the same YAML the CLI takes, as a mapping)."""
    cfg: PipelineConfig = from_dict(config, source="flow parameter `config`")
    summary = runner.run(cfg, resume=resume, base=Path(base) if base else None,
                         executor=prefect_executor, resolver=prefect_resolver)
    totals = summary.stats["totals"]
    key = artifact_key(cfg.name)
    create_markdown_artifact(summary_markdown(cfg.name, summary), key=f"{key}-summary",
                             description=f"corpusforge run {cfg.name}")
    store = Store(summary.out)
    report = store.join(REPORT_HTML)
    if store.exists(report):
        create_link_artifact(link(store.display(report)), link_text=f"{cfg.name} report", key=f"{key}-report")
    print(f"{cfg.name}: {totals['entered']} in, {totals['kept']} kept, {totals['rejected']} rejected -> {summary.out}")
    return {"out": str(summary.out), "totals": totals}


def _api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def dask_runner(workers: int | None = None, address: str | None = None):
    """prefect-dask's DaskTaskRunner: an existing cluster at ``address``, or a local cluster of
    ``workers`` single-threaded worker processes."""
    from prefect_dask import DaskTaskRunner

    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers or 2, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": None})


def run_flow(config: dict, resume: bool = False, base: str | None = None, dask_workers: int | None = None,
             dask_address: str | None = None, threads: int | None = None) -> dict:
    """The pipeline flow with the chosen task runner: Dask, or Prefect's thread pool (``threads``
    tasks at a time; Prefect's default when None)."""
    f = pipeline_flow
    if dask_workers or dask_address:
        f = pipeline_flow.with_options(task_runner=dask_runner(dask_workers, dask_address))
        if not _api_url():
            # Dask worker processes report task states to a Prefect API; the ephemeral one of
            # this process is not reachable from them, so a run without a server gets its own
            from prefect.settings import PREFECT_API_URL, temporary_settings


            with local_server() as url:
                with temporary_settings(updates={PREFECT_API_URL: url}):
                    return f(config, resume=resume, base=base)
    elif threads:
        from prefect.task_runners import ThreadPoolTaskRunner

        f = pipeline_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=threads))
    return f(config, resume=resume, base=base)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--dask-workers", type=int, help="run units on a local Dask cluster of N worker processes")
    p.add_argument("--dask-address", help="run units on an existing Dask cluster (tcp://scheduler:8786)")
    p.add_argument("--threads", type=int, help="without Dask: at most N unit tasks at a time in this process")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    run_flow(cfg.model_dump(mode="json"), resume=args.resume, base=str(Path.cwd()),
             dask_workers=args.dask_workers, dask_address=args.dask_address, threads=args.threads)


if __name__ == "__main__":
    main()
