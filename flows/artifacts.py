"""What the flows show in the Prefect UI: a run's summary table and artifact keys (links to
reports come from ``reports.py``)."""

from __future__ import annotations

from corpusforge import runner


def summary_markdown(name: str, summary: runner.RunSummary) -> str:
    s = summary.stats
    t = s["totals"]
    lines = [f"# {name}", "", f"{t['entered']} records in, **{t['kept']} kept**, {t['rejected']} rejected, "
             f"accounting {'ok' if t['accounting_ok'] else 'FAILED'}; output `{summary.out}`", "",
             "| step | in | kept | rejected | top reasons |", "|---|---|---|---|---|"]
    read = s["read"]
    reasons = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:4])  # noqa: E731
    lines.append(f"| read | {read['records'] + read['rejected']} | {read['records']} | {read['rejected']} | "
                 f"{reasons(read['rejected_by_reason'])} |")
    for st in s["stages"].values():
        lines.append(f"| {st['stage']} | {st['rows_in']} | {st['kept']} | {st['rejected']} | "
                     f"{reasons(st['rejected_by_reason'])} |")
    return "\n".join(lines)


def artifact_key(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")[:60] or "pipeline"
