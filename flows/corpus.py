"""The other flows: mixing/curriculum, reports, and the full corpus (several pipelines, then the
mix, then its report) chaining them. Their parameters are the same configs the CLI takes, as
mappings, validated by the same models (a wrong field fails the flow run with its name).

    python -m corpusforge.flows.corpus CORPUS.yaml       # {pipelines: [config or path, ...], mix: config or path}
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml
from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from corpusforge.flows.artifacts import artifact_key
from corpusforge.flows.reports import report_link as link
from corpusforge.flows.pipeline import pipeline_flow


@task(name="mix", retries=1, retry_delay_seconds=1)
def mix_task(config: dict, base: str | None = None) -> dict:
    from corpusforge.mix.build import build
    from corpusforge.mix.config import from_dict

    cfg = from_dict(config, source="flow parameter `config`")
    return build(cfg, base=Path(base) if base else None)


@task(name="report", retries=1, retry_delay_seconds=1)
def report_task(dataset: str) -> str:
    from corpusforge.report.build import generate

    html, _ = generate(dataset)
    return str(html)


@flow(name="corpusforge-mix", log_prints=True)
def mix_flow(config: dict, base: str | None = None) -> dict:
    """Mix cleaned datasets into a training set by domain proportions, in curriculum order."""
    stats = mix_task(config, base)
    m = stats["mixture"]
    rows = ["| source | requested | achieved | available | repeats |", "|---|---|---|---|---|"]
    rows += [f"| {name} | {s['requested_share']:.1%} | {s['achieved_share']:.1%} | {s['available']:,} | {s['repeats']:.2f}x |"
             for name, s in m["sources"].items()]
    create_markdown_artifact(f"# {config.get('name', 'mix')}\n\n{stats['rows']:,} rows ({m['unit']})\n\n" + "\n".join(rows),
                             key=f"{artifact_key(str(config.get('name', 'mix')))}-mixture")
    print(f"mixed {stats['rows']:,} rows")
    return {"rows": stats["rows"], "mixture": m}


@flow(name="corpusforge-report", log_prints=True)
def report_flow(dataset: str) -> str:
    """(Re)write a dataset's HTML and JSON report."""
    html = report_task(dataset)
    create_link_artifact(link(html), link_text=f"report of {dataset}",
                         key=f"{artifact_key(dataset.rstrip('/').rsplit('/', 1)[-1])}-report")
    return html


def _config(item: dict | str, base: Path) -> dict:
    if isinstance(item, dict):
        return item
    path = Path(item) if Path(item).is_absolute() else base / item
    return yaml.safe_load(path.read_text())


@flow(name="corpusforge-corpus", log_prints=True)
def corpus_flow(pipelines: list, mix: dict | str | None = None, resume: bool = False, base: str | None = None) -> dict:
    """The whole corpus: every pipeline (configs or paths to them), then the mix of their outputs
    and its report. Each pipeline is a subflow with its own units, retries and artifacts."""
    root = Path(base) if base else Path.cwd()
    results = [pipeline_flow(_config(p, root), resume=resume, base=str(root)) for p in pipelines]
    out = {"pipelines": results}
    if mix is not None:
        mix_cfg = _config(mix, root)
        out["mix"] = mix_flow(mix_cfg, base=str(root))
        mix_out = mix_cfg["output"]["path"]
        out["mix_report"] = report_flow(mix_out if "://" in mix_out else str(root / mix_out))
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", help="YAML with pipelines: [...] and mix: ...")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args(argv)
    spec = yaml.safe_load(Path(args.corpus).read_text())
    corpus_flow(spec["pipelines"], spec.get("mix"), resume=args.resume, base=str(Path.cwd()))


if __name__ == "__main__":
    main()
