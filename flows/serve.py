"""The deployment catalogue: every corpusforge flow as a deployment, served to a Prefect server, so runs can be started
(or scheduled) from the Prefect UI with their parameters.

    corpusforge serve [--port 4200] [--no-server]

starts a Prefect server on 127.0.0.1 (loopback only; ``--host`` to change it, deliberately), waits
until it answers, points this process at it, and serves the deployments below until stopped
(Ctrl-C stops both). With ``--no-server`` it serves to the server ``PREFECT_API_URL`` names.
In the UI: Deployments -> ``corpusforge-pipeline/pipeline`` -> Run -> Custom run -> paste a
pipeline config (the YAML the CLI takes, as JSON/YAML in the ``config`` field).

| deployment | flow | parameters |
|---|---|---|
| ``corpusforge-pipeline/pipeline`` | one pipeline (text, image or point cloud) | ``config``, ``resume``, ``base`` |
| ``corpusforge-pipeline/pipeline-dask`` | the same on a local Dask cluster (2 worker processes) | as above |
| ``corpusforge-mix/mix`` | mixing and curriculum | ``config``, ``base`` |
| ``corpusforge-report/report`` | a dataset's report | ``dataset`` |
| ``corpusforge-corpus/corpus`` | pipelines, then mix, then report | ``pipelines``, ``mix``, ``resume``, ``base`` |
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from corpusforge.flows.server import start_server, wait_healthy

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def deployments(base: str):
    from corpusforge.flows.corpus import corpus_flow, mix_flow, report_flow
    from corpusforge.flows.pipeline import dask_runner, pipeline_flow

    example = {"name": "demo-text", "kind": "text",
               "inputs": [{"format": "jsonl", "paths": ["data_samples/text/web_en.jsonl"], "source": "web"}],
               "stages": [{"stage": "text.normalize"}, {"stage": "text.quality"}],
               "output": {"path": "out/ui/demo-text"}}
    return [
        pipeline_flow.to_deployment(name="pipeline", parameters={"config": example, "resume": False, "base": base},
                                    description="Run one corpusforge pipeline config."),
        pipeline_flow.with_options(task_runner=dask_runner(2)).to_deployment(
            name="pipeline-dask", parameters={"config": example, "resume": False, "base": base},
            description="Run one pipeline with its units on a local Dask cluster."),
        mix_flow.to_deployment(name="mix", parameters={"base": base}, description="Mix datasets (proportions, curriculum)."),
        report_flow.to_deployment(name="report", description="Write a dataset's HTML report."),
        corpus_flow.to_deployment(name="corpus", parameters={"base": base}, description="Pipelines, then mix, then report."),
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="corpusforge serve", description="Serve corpusforge's flows to a Prefect server.")
    p.add_argument("--host", default="127.0.0.1", help="server address (default loopback only)")
    p.add_argument("--port", type=int, default=4200)
    p.add_argument("--no-server", action="store_true", help="use the server PREFECT_API_URL names")
    p.add_argument("--base", default=str(Path.cwd()), help="folder relative config paths are resolved against")
    p.add_argument("--reports-port", type=int, default=4201,
                   help="port of the report server the UI's report links use (127.0.0.1; 0: any free port)")
    args = p.parse_args(argv)
    from corpusforge.flows import reports

    _, reports_url = reports.start("127.0.0.1", args.reports_port)
    server = None
    if not args.no_server:
        server = start_server(args.host, args.port)
        os.environ["PREFECT_API_URL"] = f"http://{args.host}:{args.port}/api"
    api = os.environ.get("PREFECT_API_URL")
    if not api:
        print("serve --no-server needs PREFECT_API_URL (the server's /api URL)", file=sys.stderr)
        return 2
    try:
        wait_healthy(api)
        print(f"Prefect UI: {api.removesuffix('/api')}  (deployments: corpusforge-pipeline/pipeline, ...); "
              f"reports: {reports_url}", flush=True)
        from prefect import serve

        serve(*deployments(args.base))
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
