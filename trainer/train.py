"""The training loop. Read it top to bottom: set up, then ``for step in range(...)``.

    python -m trainer CONFIG.yaml [--set optim.lr=3e-4 ...]                 # one process
    torchrun --nproc_per_node=2 -m trainer CONFIG.yaml --set parallel.mode=ddp
"""

from __future__ import annotations

import argparse
import warnings
import json
import os
import math
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from trainer import checkpoint
from trainer.config import TrainConfig, load, to_dict
from trainer.data import TokenLoader, TokenStream, split
from trainer.device import init_runtime
from trainer.model import GPT
from trainer.parallelize import ac, ddp, fsdp, pp, tp
from trainer.parallelize.mesh import all_reduce_mean, build


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def lr_lambda(cfg: TrainConfig):
    o = cfg.optim

    def factor(step: int) -> float:
        if step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        if o.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - o.warmup_steps) / max(1, cfg.steps - o.warmup_steps))
        ratio = o.min_lr / o.lr
        if o.schedule == "linear":
            return 1.0 - (1.0 - ratio) * progress
        return ratio + (1.0 - ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return factor


def build_optimizer(model, cfg: TrainConfig, zero1: bool):
    """AdamW; weight decay on matrices (weights of linear layers and embeddings) only."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    o = cfg.optim
    kw = {"lr": o.lr, "betas": (o.beta1, o.beta2), "eps": o.eps}
    groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if zero1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        opt = ZeroRedundancyOptimizer(decay, optimizer_class=torch.optim.AdamW, weight_decay=o.weight_decay, **kw)
        opt.add_param_group({"params": no_decay, "weight_decay": 0.0})
        return opt
    return torch.optim.AdamW(groups, **kw)


def clip_grad_norm(params, max_norm: float, pp_mesh) -> torch.Tensor:
    """Global gradient norm clipping; under pipeline parallelism the norm spans all stages."""
    if pp_mesh is None:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if hasattr(total, "full_tensor"):          # a DTensor when the stage is also sharded (pp+dp)
        total = total.full_tensor()
    total = total ** 2
    torch.distributed.all_reduce(total, group=pp_mesh.get_group())
    total = total.sqrt()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


def open_metrics(path: Path, start: int):
    """metrics.jsonl for appending, holding only the lines of steps up to ``start``: a fresh run
    (start 0) replaces an old curve; a resumed one drops the steps it will log again."""
    kept = []
    if start and path.exists():
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= start:
                    kept.append(line)
            except json.JSONDecodeError:
                continue                                  # a line cut by the kill
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
    return open(path, "a")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Train a GPT on a corpusforge dataset.")
    parser.add_argument("config", nargs="?", help="YAML config (trainer/configs/*.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    from corpusforge.errors import CorpusforgeError
    from trainer.data import DataError

    try:
        cfg = load(args.config, args.set)
        return train(cfg)
    except (DataError, CorpusforgeError) as exc:       # the data, not the config: exit 1, as the CLI does
        print(f"data error: {exc}", file=sys.stderr)
        raise SystemExit(1)
    except (ValueError, FileNotFoundError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def train(cfg: TrainConfig) -> dict:
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")   # DCP in a single process
    # ---- runtime, mesh, seed --------------------------------------------------------------
    rt = init_runtime(cfg.device)
    dims = build(cfg.parallel, rt.world_size, rt.device.type)
    mode = cfg.parallel.mode
    if cfg.parallel.cpu_offload and (rt.device.type == "cpu" or mode not in ("zero2", "zero3", "tp+fsdp", "pp+dp")):
        raise ValueError("parallel.cpu_offload moves FSDP's sharded parameters, gradients and optimizer state from "
                         "the accelerator to host memory: it needs an accelerator and mode zero2/zero3/tp+fsdp/pp+dp")
    if mode.startswith("pp") and cfg.grad_accum != 1:
        raise ValueError("grad_accum > 1 with pipeline parallelism: raise parallel.microbatches instead")
    out = Path(cfg.out_dir)
    if rt.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(to_dict(cfg), indent=2))
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)

    # ---- data ---------------------------------------------------------------------------------
    cache = out / "cache"
    if rt.is_main:
        stream = TokenStream.open(cfg.data.dataset, cache, verify=cfg.data.verify)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    if not rt.is_main:
        stream = TokenStream.open(cfg.data.dataset, cache, verify=False, build=False)
    train_seqs, val_seqs = split(stream.tokens, cfg.model.seq_len, cfg.data.val_fraction)
    dp_rank = dims.coordinate("dp")
    loader = TokenLoader(train_seqs, cfg.batch_size, dp_rank, dims.dp, cfg.seed, cfg.data.shuffle_window,
                         cfg.data.num_workers, cfg.data.epoch_shift, cfg.data.sampling == "random")
    if cfg.model.vocab_size == 0:
        if stream.vocab_size is None:
            raise ValueError("model.vocab_size: 0 needs a tokenizer named in the dataset's manifest; set it explicitly")
        cfg.model.vocab_size = stream.vocab_size

    # ---- model and parallelism -------------------------------------------------------------
    model = GPT(cfg.model)                      # same seed everywhere: same initial weights
    n_params = model.num_params()
    flops_per_token = model.flops_per_token()
    param_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
    schedule = None
    pp_stage = dims.coordinate("pp")
    if mode in ("pp", "pp+dp"):
        model = pp.split(model, dims.pp, pp_stage)
    if mode in ("tp", "tp+fsdp"):
        model = tp.apply(model, dims.tp_mesh)
    model = model.to(rt.device)
    if cfg.activation_checkpointing:
        model = ac.apply(model)
    if mode in ("zero2", "zero3", "tp+fsdp", "pp+dp"):
        model = fsdp.apply(model, dims.dp_mesh, reshard_after_forward=(mode == "zero3"),
                           cpu_offload=cfg.parallel.cpu_offload, param_dtype=param_dtype)
    if mode in ("ddp", "zero1"):
        model = ddp.apply(model, dims, rt.device)
    if mode in ("pp", "pp+dp"):
        schedule = pp.build_schedule(model, pp_stage, dims.pp, rt.device, dims.pp_mesh.get_group(),
                                     cfg.parallel.microbatches, cfg.parallel.pp_schedule, cross_entropy)
    optimizer = build_optimizer(model, cfg, zero1=(mode == "zero1"))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    use_autocast = cfg.precision != "fp32" and mode not in ("zero2", "zero3", "tp+fsdp", "pp+dp")
    autocast = (torch.autocast(rt.device.type, dtype=param_dtype) if use_autocast else nullcontext())
    scaler = torch.amp.GradScaler(rt.device.type, enabled=cfg.precision == "fp16")

    # ---- resume -------------------------------------------------------------------------------
    start = 0
    if cfg.resume and checkpoint.latest(out) is not None:
        start = checkpoint.load(checkpoint.latest(out), model, optimizer, scheduler, loader, rt.rank, mode == "zero1")
        if rt.is_main:
            print(f"resumed from {checkpoint.latest(out)} at step {start}")

    writer = None
    if cfg.tensorboard and rt.is_main:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out / "tensorboard"))
    metrics = open_metrics(out / "metrics.jsonl", start) if rt.is_main else None
    tokens_per_step = cfg.batch_size * cfg.model.seq_len * cfg.grad_accum * dims.dp
    if rt.is_main:
        print(f"model {n_params / 1e6:.2f}M parameters | {mode} dp={dims.dp} tp={dims.tp} pp={dims.pp} on "
              f"{rt.device} ({rt.backend}) | {len(train_seqs):,} train / {len(val_seqs):,} val sequences of "
              f"{cfg.model.seq_len} | {tokens_per_step:,} tokens per step")

    # ---- the loop -----------------------------------------------------------------------------
    model.train()
    loss_value = float("nan")
    t_last = time.perf_counter()
    end = min(cfg.steps, cfg.stop_at) if cfg.stop_at else cfg.steps
    for step in range(start, end):
        if schedule is not None:
            x, y = next(loader)
            loss = pp.step(schedule, pp_stage, dims.pp, x.to(rt.device), y.to(rt.device))
            loss_sum = loss.detach() if loss is not None else torch.zeros((), device=rt.device)
        else:
            loss_sum = torch.zeros((), device=rt.device)
            for micro in range(cfg.grad_accum):
                x, y = next(loader)
                last = micro == cfg.grad_accum - 1
                sync = nullcontext()
                if mode in ("ddp", "zero1") and not last:
                    sync = model.no_sync()
                elif mode in ("zero2", "zero3", "tp+fsdp") and cfg.grad_accum > 1:
                    model.set_requires_gradient_sync(last)
                with sync:
                    with autocast:
                        loss = cross_entropy(model(x.to(rt.device)), y.to(rt.device)) / cfg.grad_accum
                    scaler.scale(loss).backward()
                loss_sum += loss.detach()
        if cfg.optim.grad_clip > 0:
            scaler.unscale_(optimizer)
            clip_grad_norm([p for p in model.parameters()], cfg.optim.grad_clip, dims.pp_mesh)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        if step == end - 1:
            state_bytes = local_state_bytes(model, optimizer)      # what this rank holds, sharded or not
        optimizer.zero_grad(set_to_none=True)

        # the loss of the step, the same number on every rank
        if dims.pp_mesh is not None:
            torch.distributed.all_reduce(loss_sum, group=dims.pp_mesh.get_group())   # only the last stage had it
        loss_value = all_reduce_mean(loss_sum, dims.dp_mesh).item()
        now = time.perf_counter()
        dt, t_last = now - t_last, now
        if rt.is_main:
            rec = {"step": step + 1, "loss": loss_value, "lr": scheduler.get_last_lr()[0],
                   "tokens_per_s": tokens_per_step / dt}
            metrics.write(json.dumps(rec) + "\n")
            metrics.flush()
            if writer:
                for k, v in rec.items():
                    if k != "step":
                        writer.add_scalar(f"train/{k}", v, step + 1)
            if (step + 1) % cfg.log_every == 0 or step == start:
                mem = rt.max_memory_bytes()
                print(f"step {step + 1:5d} | loss {loss_value:.4f} | lr {rec['lr']:.2e} | "
                      f"{rec['tokens_per_s']:,.0f} tok/s | max mem {mem / 2**20 if mem else float('nan'):.0f} MB",
                      flush=True)
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
            _log_eval(evaluate(model, val_seqs, cfg, dims, rt, schedule, pp_stage), step + 1, rt, writer, metrics)
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            checkpoint.save(out, step + 1, model, optimizer, scheduler, loader, rt.rank, mode == "zero1")

    # ---- the end ------------------------------------------------------------------------------
    if end < cfg.steps:                          # stopped early on purpose: save and leave
        checkpoint.save(out, end, model, optimizer, scheduler, loader, rt.rank, mode == "zero1")
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        return {"train_loss": loss_value, "steps": end, "stopped": True}
    val = evaluate(model, val_seqs, cfg, dims, rt, schedule, pp_stage)
    _log_eval(val, cfg.steps, rt, writer, metrics)
    checkpoint.save(out, cfg.steps, model, optimizer, scheduler, loader, rt.rank, mode == "zero1")
    _save_final_weights(model, out, rt.rank, dims)
    summary = {"train_loss": loss_value, "val_loss": val, "steps": cfg.steps, "params": n_params,
               "flops_per_token": flops_per_token, "max_memory_bytes": rt.max_memory_bytes(),
               "rank_state_bytes": _gather_object(state_bytes)}
    if rt.is_main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        if writer:
            writer.close()
        metrics.close()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return summary


@torch.no_grad()
def evaluate(model, val_seqs, cfg: TrainConfig, dims, rt, schedule, pp_stage) -> float:
    """Mean loss over the first ``eval_batches`` batches of the held-out split (in order)."""
    if len(val_seqs) < cfg.batch_size * dims.dp:
        return float("nan")
    model.eval()
    loader = TokenLoader(val_seqs, cfg.batch_size, dims.coordinate("dp"), dims.dp)
    total = torch.zeros((), device=rt.device)
    n = min(cfg.eval_batches, len(val_seqs) // (cfg.batch_size * dims.dp))
    for _ in range(n):
        x, y = next(loader)
        if schedule is not None:
            losses = []
            if pp_stage == dims.pp - 1:
                schedule.eval(target=y.to(rt.device), losses=losses)
            elif pp_stage == 0:
                schedule.eval(x.to(rt.device))
            else:
                schedule.eval()
            total += torch.stack(losses).mean() if losses else 0.0
        else:
            total += cross_entropy(model(x.to(rt.device)), y.to(rt.device))
    if dims.pp_mesh is not None:
        torch.distributed.all_reduce(total, group=dims.pp_mesh.get_group())
    model.train()
    return (all_reduce_mean(total, dims.dp_mesh) / max(n, 1)).item()


def local_state_bytes(model, optimizer) -> dict:
    """Bytes of parameters, gradients and optimizer state held by this rank (shards: local part)."""
    def size(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()
    params = sum(size(p) for p in model.parameters())
    grads = sum(size(p.grad) for p in model.parameters() if p.grad is not None)
    inner = getattr(optimizer, "optim", optimizer)          # ZeroRedundancyOptimizer keeps its shard in .optim
    optim = sum(size(v) for st in inner.state.values() for v in st.values() if torch.is_tensor(v))
    return {"params": params, "grads": grads, "optimizer": optim, "total": params + grads + optim}


def _gather_object(obj):
    if not torch.distributed.is_initialized():
        return [obj]
    out = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)
    return out


def _log_eval(val: float, step: int, rt, writer, metrics) -> None:
    if rt.is_main:
        print(f"step {step:5d} | val loss {val:.4f} | {val / math.log(2):.3f} bits per token", flush=True)
        metrics.write(json.dumps({"step": step, "val_loss": val}) + "\n")
        metrics.flush()
        if writer:
            writer.add_scalar("val/loss", val, step)


def _save_final_weights(model, out: Path, rank: int, dims) -> None:
    """The full (unsharded) weights, one file per pipeline stage (a plain model: one file), for
    comparison and export."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))   # collective
    if dims.coordinate("dp") == 0 and dims.coordinate("tp") == 0:
        torch.save({k: v.detach().cpu() for k, v in sd.items()}, out / f"final_model_stage{dims.coordinate('pp')}.pt")
