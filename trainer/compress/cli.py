"""The compression commands: read the config, load the trained run, run one method, print
its report (also written to ``out_dir/report.md`` and ``report.json``, the model beside them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

METHODS = ("quantize", "prune", "distill")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corpusforge compress",
                                     description="Compress a model trained by the trainer: quantize, prune or distill.")
    parser.add_argument("method", choices=METHODS)
    parser.add_argument("config", help="compression YAML (trainer/configs/compress_*.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. prune.sparsity=0.3")
    args = parser.parse_args(argv)
    from corpusforge.trainer.compress.common import CompressError, load_config, load_run
    from corpusforge.trainer.data import DataError

    try:
        cfg = load_config(args.config, args.set)
        trained = load_run(cfg.run, cfg)
        distributed = _init_distributed() if args.method == "distill" else False
        if args.method == "quantize":
            from corpusforge.trainer.compress import quantize as method
        elif args.method == "prune":
            from corpusforge.trainer.compress import prune as method
        else:
            from corpusforge.trainer.compress import distill as method
        method.run(cfg, trained)
    except (CompressError, DataError, ValueError, FileNotFoundError) as exc:
        print(f"compress error: {exc}", file=sys.stderr)
        return 2
    if not distributed or _rank() == 0:
        print((Path(cfg.out_dir) / "report.md").read_text())
        print(f"model and report: {cfg.out_dir}")
    if distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return 0


def _init_distributed() -> bool:
    import os

    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")          # the student is small; CPU collectives (gloo)
        return True
    return False


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_initialized() else 0
