"""The ``corpusforge`` command.

Exit codes: 0 success; 1 the run failed or the dataset is invalid; 2 the command line or the
config is wrong (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from corpusforge.config_base import parse_set
from corpusforge.errors import ConfigError, CorpusforgeError
from corpusforge.io.dataset import LEGACY_MANIFEST, MANIFEST, REJECTED, REPORT_HTML, STATS

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
console = Console(stderr=True, soft_wrap=True)   # never break a message across lines in logs
out = Console(soft_wrap=True)


def cmd_run(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from corpusforge import runner
    from corpusforge.config import load_config

    config = load_config(args.config, parse_set(args.set))
    plan = runner.Plan(config)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.quiet) as progress:
        tasks = {}

        def on_done(segment, unit):
            if segment not in tasks:
                tasks[segment] = progress.add_task(f"segment {segment}", total=len(plan.units))
            progress.advance(tasks[segment])

        summary = runner.run(config, resume=args.resume, workers=args.workers, progress=on_done)
    totals = summary.stats["totals"]
    table = Table(title=f"{config.name}: {totals['entered']} records in, {totals['kept']} kept, "
                        f"{totals['rejected']} rejected", show_lines=False)
    for col in ("stage", "in", "kept", "rejected", "top reasons", "s"):
        table.add_column(col, justify="right" if col in ("in", "kept", "rejected", "s") else "left")
    read = summary.stats["read"]
    table.add_row("read", str(read["records"] + read["rejected"]), str(read["records"]), str(read["rejected"]),
                  _reasons(read["rejected_by_reason"]), "")
    for st in summary.stats["stages"].values():
        table.add_row(st["stage"], str(st["rows_in"]), str(st["kept"]), str(st["rejected"]),
                      # a global stage's time is its filter passes plus its resolve (the group-wide work)
                      _reasons(st["rejected_by_reason"]), f"{st['seconds'] + st.get('resolve_seconds', 0):.2f}")
    if not args.quiet:
        out.print(table)
    out.print(f"output:   {summary.out}/{MANIFEST}\nrejected: {summary.out}/{REJECTED}/{MANIFEST}\n"
              f"stats:    {summary.out}/{STATS}\nreport:   {summary.out}/{REPORT_HTML}")
    for w in summary.stats.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    if summary.skipped_steps:
        out.print(f"resumed: {summary.skipped_steps} finished step(s) skipped")
    return EXIT_OK


def _reasons(counts: dict, k: int = 3) -> str:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return ", ".join(f"{r} {n}" for r, n in top)


def cmd_inspect(args) -> int:
    from corpusforge.io.dataset import Dataset

    ds = Dataset.open(args.path)
    m = ds.manifest
    if args.json:
        out.print_json(json.dumps(m))
        return EXIT_OK
    out.print(f"[bold]{ds.root}[/bold]  ({m.get('dataset', 'kept')})")
    out.print(f"schema   {m['schema']['name']} v{m['schema']['version']}")
    out.print(f"rows     {m['rows']:,} in {len(m['shards'])} shard(s), {m['bytes']:,} bytes")
    out.print(f"config   {m['config_hash'][:16]}  stages: "
              f"{', '.join(s['name'] for s in m['lineage'].get('stages', [])) or '(none)'}")
    if m.get("sources"):
        out.print("sources  " + ", ".join(f"{k}: {v['rows']:,}" + (f" rows, {v['tokens']:,} tokens" if 'tokens' in v else "")
                                          for k, v in m["sources"].items()))
    out.print("columns  " + ", ".join(f"{c['name']}:{c['type']}" for c in m["columns"]))
    if m.get("artifacts"):
        out.print("artifacts " + ", ".join(f"{k}={v}" for k, v in m["artifacts"].items()))
    if args.rows and m["shards"]:
        batch = next(ds.iter_batches(batch_size=args.rows))
        skip = ("token_ids", "points", "colors", "normals", "intensity")
        for i, row in enumerate(batch.to_pylist()[: args.rows]):
            out.rule(f"row {i}")
            for key, value in row.items():
                if value is not None and key not in skip:
                    out.print(f"[bold]{key}[/bold]: {_short(value)}", highlight=False)
                elif key in skip and value is not None:
                    out.print(f"[bold]{key}[/bold]: <{len(value)} values>", highlight=False)
    return EXIT_OK


def _short(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v)} bytes>"
    s = "" if v is None else str(v)
    return s if len(s) <= 200 else s[:200] + "…"


def cmd_validate(args) -> int:
    import pyarrow.parquet as pq

    from corpusforge import schemas
    from corpusforge.io.dataset import Dataset

    ds = Dataset.open(args.path)
    datasets = [ds]
    rejected_dir = ds.store.join(REJECTED)
    if ds.store.exists(f"{rejected_dir}/{MANIFEST}"):
        datasets.append(Dataset.open(ds.store.display(rejected_dir)))
    failed = False
    for ds in datasets:
        problems = [str(p) for p in ds.verify(checksums=not args.no_checksums)]
        rejected = ds.manifest.get("dataset") == "rejected"
        for entry in ds.manifest["shards"]:
            path = ds.store.join(entry["path"])
            if not ds.store.exists(path):
                continue
            try:
                shard_schema = pq.read_schema(path, filesystem=ds.store.arrow_fs)
                schemas.validate(shard_schema.empty_table(), ds.record_schema, rejected=rejected)
            except Exception as exc:  # noqa: BLE001 - report every problem, keep checking
                problems.append(f"{entry['path']}: {exc}")
        if problems:
            failed = True
            out.print(f"[red]INVALID[/red] {ds.root}: {len(problems)} problem(s)")
            for p in problems:
                out.print(f"  - {p}")
        else:
            what = "sizes, checksums and schema" if not args.no_checksums else "sizes and schema"
            out.print(f"[green]OK[/green] {ds.root}: {len(ds.manifest['shards'])} shard(s), {ds.num_rows:,} rows; "
                      f"{what} verified")
    return EXIT_FAILED if failed else EXIT_OK


def _texts_from(path: str, limit: int | None, min_chars: int, text_field: str = "text") -> list[str]:
    """Documents for training: a corpusforge dataset folder, a folder of text files (one document
    each), a JSONL file (``text`` field), or a text file (one document per line)."""
    from corpusforge.io.dataset import Dataset
    from corpusforge.io.readers.jsonl import JsonlReader
    from corpusforge.io.readers.text import TextReader

    p = Path(path)
    if p.is_dir() and ((p / MANIFEST).exists() or (p / LEGACY_MANIFEST).exists()):
        texts = Dataset.open(p).read(columns=["text"]).column("text").to_pylist()
    elif p.is_dir():   # a folder of text files, one document each
        reader = TextReader(TextReader.Config(paths=[path], source="train"), kind="text")
        texts = [t for f in reader.files() for b in reader.read(f) for t in b.records.column("text").to_pylist()]
    else:
        if not p.exists():
            raise ConfigError(f"{path}: no such file or dataset")
        if ".jsonl" in p.name:
            reader = JsonlReader(JsonlReader.Config(paths=[path], source="train", text_field=text_field), kind="text")
        else:
            reader = TextReader(TextReader.Config(paths=[path], source="train", mode="line"), kind="text")
        texts = [t for b in reader.read(p) for t in b.records.column("text").to_pylist()]
    texts = [t for t in texts if len(t) >= min_chars]
    return texts[:limit] if limit else texts


def cmd_train_classifier(args) -> int:
    from corpusforge.text.classifier import train

    pos = [t for p in args.positive for t in _texts_from(p, args.limit, args.min_chars, args.text_field)]
    neg = [t for p in args.negative for t in _texts_from(p, args.limit, args.min_chars, args.text_field)]
    if not pos or not neg:
        raise ConfigError(f"need documents on both sides: {len(pos)} positive, {len(neg)} negative")
    model, metrics = train(pos, neg, dims=1 << args.log2_dims, l2=args.l2, seed=args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    model.save(args.out)
    out.print(f"trained on {len(pos):,} positive and {len(neg):,} negative documents -> {args.out}")
    if "accuracy" in metrics:
        out.print(f"held-out ({metrics['holdout_docs']:,} docs): accuracy {metrics['accuracy']:.3f}, "
                  f"precision {metrics['precision']:.3f}, recall {metrics['recall']:.3f}")
    return EXIT_OK


def cmd_train_tokenizer(args) -> int:
    from corpusforge.text.tokenize import EOS, PAD, train_for_dataset

    specials = tuple(args.special_tokens) if args.special_tokens else (EOS, PAD)
    path, tok = train_for_dataset(args.dataset, out=args.out, model=args.model, vocab_size=args.vocab_size,
                                  special_tokens=specials, min_frequency=args.min_frequency)
    size = tok.get_vocab_size()
    out.print(f"{args.model} tokenizer, vocabulary {size:,}, special tokens {list(specials)} -> {path}")
    return EXIT_OK


def cmd_train(args) -> int:
    from corpusforge.trainer.train import main as train_main

    train_main([args.config] + [f"--set={kv}" for kv in (args.set or [])])
    return EXIT_OK


def cmd_finetune(args) -> int:
    from corpusforge.trainer.finetune.run import main as finetune_main

    summary = finetune_main([args.config] + [f"--set={kv}" for kv in (args.set or [])])
    out.print(f"{summary['method']}: {summary['trainable_params']:,} of {summary['total_params']:,} parameters "
              f"trained ({summary['trainable_share']:.2%}); held-out loss {summary['val_loss_before']:.4f} -> "
              f"{summary['val_loss']:.4f}" if "val_loss_before" in summary else f"{summary['method']}: done")
    return EXIT_OK


def cmd_compress(args) -> int:
    from corpusforge.trainer.compress.cli import main as compress_main

    return compress_main([args.method, args.config] + [f"--set={kv}" for kv in (args.set or [])])


def cmd_serve(args) -> int:
    from corpusforge.flows.serve import main as serve_main

    argv = ["--host", args.host, "--port", str(args.port), "--reports-port", str(args.reports_port)] + (
        ["--no-server"] if args.no_server else [])
    return serve_main(argv + (["--base", args.base] if args.base else []))


def cmd_mix(args) -> int:
    if args.config[0] == "search":
        return cmd_mix_search(args)
    if len(args.config) != 1:
        raise ConfigError(f"mix: expected one config, got {' '.join(args.config)} (or: mix search SEARCH_CONFIG)")
    from corpusforge.mix.build import build
    from corpusforge.mix.config import load as load_mix

    cfg = load_mix(args.config[0], parse_set(args.set))
    stats = build(cfg, log=lambda m: console.print(f"[yellow]{m}[/yellow]"))
    table = Table(title=f"{cfg.name}: {stats['rows']:,} rows, {stats['mixture']['unit']}")
    for col in ("source", "requested", "achieved", "available", "repeats"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for name, m in stats["mixture"]["sources"].items():
        table.add_row(name, f"{m['requested_share']:.1%}", f"{m['achieved_share']:.1%}", f"{m['available']:,}",
                      f"{m['repeats']:.2f}x")
    out.print(table)
    out.print(f"output: {cfg.output.path}/{MANIFEST}  (order: {stats['order']['description']})\n"
              f"report: {cfg.output.path}/{REPORT_HTML}")
    return EXIT_OK


def cmd_mix_search(args) -> int:
    if len(args.config) != 2:
        raise ConfigError("mix search: expected one search config (see data_samples/configs/demo_mix_search.yaml)")
    from corpusforge.mix.search.config import load as load_search
    from corpusforge.mix.search.run import search

    cfg = load_search(args.config[1], parse_set(args.set))
    result = search(cfg, log=lambda m: console.print(m, markup=False, highlight=False))
    names = list(result["sources"])
    table = Table(title=f"{cfg.name}: {len(result['proxies'])} proxies, target loss")
    for col in ("mixture", *names, "verified (2x depth)", "predicted"):
        table.add_column(col, justify="left" if col == "mixture" else "right")
    table.add_row("chosen", *(f"{result['chosen'][n]:.3f}" for n in names),
                  _loss((result.get("verification") or {}).get("mixtures", {}).get("chosen", {}).get("mean")),
                  f"{result['predicted_loss']:.4f}")
    for p in result["proxies"]:
        if p["kind"] == "baseline":
            v = (result.get("verification") or {}).get("mixtures", {}).get(p["id"], {}).get("mean")
            table.add_row(p["id"], *(f"{p['weights'][n]:.3f}" for n in names), _loss(v), "")
    out.print(table)
    out.print(f"mix config: {result['mix_config']}  (corpusforge mix {result['mix_config']})\n"
              f"report: {Path(result['mix_config']).parent / 'report.html'}")
    return EXIT_OK


def _loss(v) -> str:
    return f"{v:.4f}" if v is not None else "-"


def cmd_report(args) -> int:
    from corpusforge.report.build import generate

    html, js = generate(args.dataset, args.out)
    out.print(f"report: {html}\nsummary: {js}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="corpusforge", description="Prepare pretraining data as sharded Parquet.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a pipeline config")
    r.add_argument("config", help="pipeline YAML")
    r.add_argument("--resume", action="store_true", help="skip finished steps of an interrupted run")
    r.add_argument("--workers", type=int, default=1, help="processes to run units in (default 1)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value, e.g. output.path=out/x")
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(fn=cmd_run)
    i = sub.add_parser("inspect", help="show a dataset's manifest, schema, counts and sample rows")
    i.add_argument("path")
    i.add_argument("--rows", type=int, default=3, help="sample rows to show (0: none)")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")
    i.set_defaults(fn=cmd_inspect)
    v = sub.add_parser("validate", help="check a dataset's shards against its manifest (sizes, sha256) and schema")
    v.add_argument("path")
    v.add_argument("--no-checksums", action="store_true", help="skip sha256 (sizes and schema only)")
    v.set_defaults(fn=cmd_validate)
    c = sub.add_parser("train-classifier", help="train the quality classifier (curated vs raw text)")
    c.add_argument("--positive", nargs="+", required=True, help="curated text: datasets, .jsonl or .txt (one per line)")
    c.add_argument("--negative", nargs="+", required=True, help="raw text, same forms")
    c.add_argument("--out", required=True, help="model file to write (.npz)")
    c.add_argument("--log2-dims", type=int, default=20, help="feature hashing dimensions, as a power of 2")
    c.add_argument("--l2", type=float, default=1e-4)
    c.add_argument("--min-chars", type=int, default=50, help="ignore shorter documents")
    c.add_argument("--limit", type=int, default=None, help="at most this many documents per input")
    c.add_argument("--text-field", default="text", help="field holding the text in JSONL inputs")
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(fn=cmd_train_classifier)
    t = sub.add_parser("train-tokenizer", help="train a byte-level tokenizer on a text dataset")
    t.add_argument("dataset", help="a text dataset folder (its manifest names the tokenizer afterwards)")
    t.add_argument("--model", choices=["bpe", "unigram", "wordpiece", "char"], default="bpe")
    t.add_argument("--vocab-size", type=int, default=32_000)
    t.add_argument("--min-frequency", type=int, default=2)
    t.add_argument("--special-tokens", nargs="+", help="default: <|endoftext|> <|pad|> (document end, padding)")
    t.add_argument("--out", help="tokenizer file (default: <dataset>/tokenizer.json)")
    t.set_defaults(fn=cmd_train_tokenizer)
    tr = sub.add_parser("train", help="train a GPT on a tokenized dataset (one process; torchrun -m corpusforge.trainer for more)")
    tr.add_argument("config", help="trainer YAML (trainer/configs/*.yaml)")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", help="override, e.g. optim.lr=3e-4")
    tr.set_defaults(fn=cmd_train)
    ft = sub.add_parser("finetune", help="fine-tune a trained run on conversations: full, LoRA, IA3, QLoRA "
                        "(torchrun -m corpusforge.trainer.finetune.run for more processes)")
    ft.add_argument("config", help="fine-tuning YAML (trainer/configs/finetune_demo.yaml)")
    ft.add_argument("--set", action="append", metavar="KEY=VALUE", help="override, e.g. method=qlora")
    ft.set_defaults(fn=cmd_finetune)
    cp = sub.add_parser("compress", help="quantize, prune or distill a model the trainer trained")
    cp.add_argument("method", choices=["quantize", "prune", "distill"])
    cp.add_argument("config", help="compression YAML (trainer/configs/compress_*.yaml)")
    cp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override, e.g. prune.sparsity=0.3")
    cp.set_defaults(fn=cmd_compress)
    sv = sub.add_parser("serve", help="start a Prefect server on 127.0.0.1 and serve the pipeline deployments (UI)")
    sv.add_argument("--host", default="127.0.0.1", help="server address (default: loopback only)")
    sv.add_argument("--port", type=int, default=4200)
    sv.add_argument("--no-server", action="store_true", help="serve to the server PREFECT_API_URL names")
    sv.add_argument("--reports-port", type=int, default=4201,
                    help="port of the loopback report server the UI's report links open (default 4201)")
    sv.add_argument("--base", help="folder relative config paths are resolved against (default: here)")
    sv.set_defaults(fn=cmd_serve)
    mx = sub.add_parser("mix", help="mix cleaned datasets into a training set (proportions, curriculum); "
                                    "`mix search SEARCH_CONFIG` chooses the proportions with proxy models")
    mx.add_argument("config", nargs="+", metavar="CONFIG",
                    help="mix YAML (see data_samples/configs/demo_mix.yaml), or `search` and a search YAML "
                         "(data_samples/configs/demo_mix_search.yaml)")
    mx.add_argument("--set", action="append", metavar="KEY=VALUE")
    mx.set_defaults(fn=cmd_mix)
    rp = sub.add_parser("report", help="write a self-contained HTML report and a JSON summary of a dataset")
    rp.add_argument("dataset")
    rp.add_argument("--out", help="folder for _report.html and _report.json (default: the dataset's)")
    rp.set_defaults(fn=cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ConfigError as exc:
        console.print(f"[red]config error:[/red] {exc}")
        return EXIT_USAGE
    except CorpusforgeError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return EXIT_FAILED
    except OSError as exc:
        console.print(f"[red]I/O error:[/red] {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]: rerun with --resume to continue")
        return 130


if __name__ == "__main__":
    sys.exit(main())
