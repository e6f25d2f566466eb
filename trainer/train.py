"""The training loop. Read it top to bottom: set up, then ``for step in range(...)``.

    python -m corpusforge.trainer CONFIG.yaml [--set optim.lr=3e-4 ...]                 # one process
    torchrun --nproc_per_node=2 -m corpusforge.trainer CONFIG.yaml --set parallel.mode=ddp
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from corpusforge.trainer import checkpoint
from corpusforge.trainer.checkpoint import TrainState
from corpusforge.trainer.config import TrainConfig, load, to_dict
from corpusforge.trainer.data import TokenLoader, TokenStream, split
from corpusforge.trainer.device import init_runtime
from corpusforge.trainer.metrics import Throughput, open_metrics
from corpusforge.trainer.model import GPT, cross_entropy
from corpusforge.trainer.optim import build_optimizer, clip_grad_norm, lr_lambda
from corpusforge.trainer.parallelize import PARAM_DTYPES, parallelize, pp
from corpusforge.trainer.parallelize.mesh import ParallelDims, all_reduce_mean, build


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Train a GPT on a corpusforge dataset.")
    parser.add_argument("config", nargs="?", help="YAML config (trainer/configs/*.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    from corpusforge.errors import ConfigError, CorpusforgeError
    from corpusforge.trainer.data import DataError

    try:
        cfg = load(args.config, args.set)
        return train(cfg)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2)
    except (DataError, CorpusforgeError) as exc:       # the data, not the config: exit 1, as the CLI does
        print(f"data error: {exc}", file=sys.stderr)
        raise SystemExit(1)
    except (ValueError, FileNotFoundError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2)


class Step:
    """One optimizer step: forward and backward over the micro-batches (or the pipeline
    schedule), gradient clipping, the optimizer and the LR scheduler. Returns the step's loss as
    a tensor on the device, so that nothing waits for the GPU until the log asks for it."""

    def __init__(self, cfg: TrainConfig, dims: ParallelDims, device: torch.device, schedule):
        self.cfg, self.dims, self.device, self.schedule = cfg, dims, device, schedule
        # FSDP casts parameters itself (its mixed-precision policy); elsewhere autocast does
        self.dtype = PARAM_DTYPES.get(cfg.precision)
        self.use_autocast = self.dtype is not None and not dims.fsdp
        self.scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16")

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.use_autocast)

    def __call__(self, state: TrainState) -> torch.Tensor:
        cfg, dims, model = self.cfg, self.dims, state.model
        state.optimizer.zero_grad(set_to_none=True)
        if self.schedule is not None:
            x, y = next(state.loader)
            loss = pp.step(self.schedule, dims.coordinate("pp"), dims.pp, x.to(self.device), y.to(self.device))
            loss_sum = loss.detach() if loss is not None else torch.zeros((), device=self.device)
        else:
            loss_sum = torch.zeros((), device=self.device)
            for micro in range(cfg.grad_accum):
                x, y = next(state.loader)
                last = micro == cfg.grad_accum - 1
                sync = nullcontext()
                if dims.ddp and not last:
                    sync = model.no_sync()
                elif dims.fsdp and cfg.grad_accum > 1:
                    model.set_requires_gradient_sync(last)
                with sync:
                    with self.autocast():
                        loss = model(x.to(self.device), y.to(self.device)) / cfg.grad_accum
                    self.scaler.scale(loss).backward()
                loss_sum += loss.detach()
        if cfg.optim.grad_clip > 0:
            self.scaler.unscale_(state.optimizer)
            clip_grad_norm([p for p in model.parameters()], cfg.optim.grad_clip, dims.pp_mesh)
        self.scaler.step(state.optimizer)
        self.scaler.update()
        state.scheduler.step()
        state.step += 1
        return loss_sum


class Log:
    """metrics.jsonl, TensorBoard and the console. Losses of the steps since the last flush are
    kept on the device and reduced across ranks in one collective when the log is flushed (every
    ``log_every`` steps, and before an evaluation or a checkpoint), so the loop never waits on the
    GPU for a number nobody reads yet. Every rank calls ``flush`` at the same steps."""

    def __init__(self, cfg: TrainConfig, out: Path, rt, dims: ParallelDims, start: int, throughput: Throughput):
        self.rt, self.dims, self.throughput = rt, dims, throughput
        self.tokens_per_step = cfg.batch_size * cfg.model.seq_len * cfg.grad_accum * dims.dp
        self.metrics = open_metrics(out / "metrics.jsonl", start) if rt.is_main else None
        self.writer = None
        if cfg.tensorboard and rt.is_main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tensorboard"))
        self.pending: list[tuple[int, torch.Tensor, float]] = []
        self.t_last = time.perf_counter()
        self.last_loss = float("nan")
        self.last_record: dict = {}

    def step(self, step: int, loss: torch.Tensor, lr: float) -> None:
        self.pending.append((step, loss, lr))

    def flush(self) -> None:
        if not self.pending:
            return
        losses = torch.stack([loss for _, loss, _ in self.pending])
        if self.dims.pp_mesh is not None:         # only the last stage had the loss
            torch.distributed.all_reduce(losses, group=self.dims.pp_mesh.get_group())
        losses = all_reduce_mean(losses, self.dims.dp_mesh).tolist()      # waits for the GPU here
        now = time.perf_counter()
        per_step = (now - self.t_last) / len(self.pending)
        self.t_last = now
        speed = self.throughput(self.tokens_per_step / per_step)
        mem = self.rt.max_memory_bytes()
        for (step, _, lr), loss in zip(self.pending, losses):
            rec = {"step": step, "loss": loss, "lr": lr, **speed, "max_memory_bytes": mem}
            if self.metrics:
                self.metrics.write(json.dumps(rec) + "\n")
            if self.writer:
                for k, v in rec.items():
                    if k != "step" and v is not None:
                        self.writer.add_scalar(f"train/{k}", v, step)
        if self.metrics:
            self.metrics.flush()
            mfu = f" | MFU {speed['mfu']:.1%}" if "mfu" in speed else ""
            print(f"step {step:5d} | loss {loss:.4f} | lr {lr:.2e} | {speed['tokens_per_s']:,.0f} tok/s{mfu} | "
                  f"max mem {mem / 2**20 if mem else float('nan'):.0f} MB", flush=True)
        self.last_loss, self.last_record = losses[-1], {**speed, "max_memory_bytes": mem}
        self.pending = []

    def restart_clock(self) -> None:
        """After an evaluation or a checkpoint, so that their time is not counted as training."""
        self.t_last = time.perf_counter()

    def eval(self, val: float, step: int) -> None:
        if self.rt.is_main:
            print(f"step {step:5d} | val loss {val:.4f} | {val / math.log(2):.3f} bits per token", flush=True)
            self.metrics.write(json.dumps({"step": step, "val_loss": val}) + "\n")
            self.metrics.flush()
            if self.writer:
                self.writer.add_scalar("val/loss", val, step)

    def close(self) -> None:
        if self.writer:
            self.writer.close()
        if self.metrics:
            self.metrics.close()


def train(cfg: TrainConfig) -> dict:
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")   # DCP in a single process
    # ---- runtime, mesh, seed --------------------------------------------------------------
    rt = init_runtime(cfg.device)
    dims = build(cfg.parallel, rt.world_size, rt.device.type)
    if cfg.parallel.cpu_offload and (rt.device.type == "cpu" or not dims.fsdp):
        raise ValueError("parallel.cpu_offload moves FSDP's sharded parameters, gradients and optimizer state from "
                         "the accelerator to host memory: it needs an accelerator and mode zero2/zero3/tp+fsdp/pp+dp")
    if dims.pp_enabled and cfg.grad_accum != 1:
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
    loader = TokenLoader(train_seqs, cfg.batch_size, dims.coordinate("dp"), dims.dp, cfg.seed, cfg.data.shuffle_window,
                         cfg.data.num_workers, cfg.data.epoch_shift, cfg.data.sampling == "random")
    if cfg.model.vocab_size == 0:
        if stream.vocab_size is None:
            raise ValueError("model.vocab_size: 0 needs a tokenizer named in the dataset's manifest; set it explicitly")
        cfg.model.vocab_size = stream.vocab_size

    # ---- model, parallelism, optimizer ----------------------------------------------------------
    model = GPT(cfg.model)                      # same seed everywhere: same initial weights
    n_params, flops_per_token = model.num_params(), model.flops_per_token()
    model = parallelize(model, dims, cfg, rt.device)
    schedule = None
    if dims.pp_enabled:
        schedule = pp.build_schedule(model, dims.coordinate("pp"), dims.pp, rt.device, dims.pp_mesh.get_group(),
                                     cfg.parallel.microbatches, cfg.parallel.pp_schedule, cross_entropy)
    optimizer = build_optimizer(model, cfg, dims.zero1, rt.device.type)
    state = TrainState(model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg)), loader)
    train_step = Step(cfg, dims, rt.device, schedule)

    # ---- resume -------------------------------------------------------------------------------
    if cfg.resume and checkpoint.latest(out) is not None:
        checkpoint.load(checkpoint.latest(out), state, rt.rank)
        if rt.is_main:
            print(f"resumed from {checkpoint.latest(out)} at step {state.step}")
    throughput = Throughput.for_device(rt.device, cfg.precision, cfg.float8 != "none", flops_per_token, rt.world_size)
    log = Log(cfg, out, rt, dims, state.step, throughput)
    if rt.is_main:
        print(f"model {n_params / 1e6:.2f}M parameters | {dims.mode} dp={dims.dp} tp={dims.tp} pp={dims.pp} on "
              f"{rt.device} ({throughput.name}, {rt.backend}) | {len(train_seqs):,} train / {len(val_seqs):,} val "
              f"sequences of {cfg.model.seq_len} | {log.tokens_per_step:,} tokens per step")

    # ---- the loop -----------------------------------------------------------------------------
    model.train()
    start = state.step
    end = min(cfg.steps, cfg.stop_at) if cfg.stop_at else cfg.steps
    while state.step < end:
        loss = train_step(state)
        log.step(state.step, loss, state.scheduler.get_last_lr()[0])
        evaluate_now = cfg.eval_every and state.step % cfg.eval_every == 0 and state.step < cfg.steps
        save_now = cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0
        if state.step % cfg.log_every == 0 or state.step == start + 1 or state.step == end or evaluate_now or save_now:
            log.flush()
        if evaluate_now:
            log.eval(evaluate(model, val_seqs, cfg, dims, rt, schedule, train_step.autocast), state.step)
        if save_now:
            checkpoint.save(out, state, rt.rank)
        if evaluate_now or save_now:
            log.restart_clock()

    # ---- the end ------------------------------------------------------------------------------
    if end < cfg.steps:                          # stopped early on purpose: save and leave
        checkpoint.save(out, state, rt.rank)
        log.close()
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        return {"train_loss": log.last_loss, "steps": end, "stopped": True}
    state_bytes = local_state_bytes(model, optimizer)      # what this rank holds, sharded or not
    val = evaluate(model, val_seqs, cfg, dims, rt, schedule, train_step.autocast)
    log.eval(val, cfg.steps)
    if cfg.save_final:
        checkpoint.save(out, state, rt.rank)
        _save_final_weights(model, out, dims)
    summary = {"train_loss": log.last_loss, "val_loss": val, "steps": cfg.steps, "params": n_params,
               "flops_per_token": flops_per_token, "device": throughput.name, "max_memory_bytes": rt.max_memory_bytes(),
               "last_log": log.last_record, "rank_state_bytes": _gather_object(state_bytes)}
    if rt.is_main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    log.close()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return summary


@torch.no_grad()
def evaluate(model, val_seqs, cfg: TrainConfig, dims: ParallelDims, rt, schedule, autocast) -> float:
    """Mean loss over the first ``eval_batches`` batches of the held-out split (in order)."""
    if len(val_seqs) < cfg.batch_size * dims.dp:
        return float("nan")
    model.eval()
    loader = TokenLoader(val_seqs, cfg.batch_size, dims.coordinate("dp"), dims.dp)
    total = torch.zeros((), device=rt.device)
    n = min(cfg.eval_batches, len(val_seqs) // (cfg.batch_size * dims.dp))
    stage = dims.coordinate("pp")
    for _ in range(n):
        x, y = next(loader)
        if schedule is not None:
            losses = []
            if stage == dims.pp - 1:
                schedule.eval(target=y.to(rt.device), losses=losses)
            elif stage == 0:
                schedule.eval(x.to(rt.device))
            else:
                schedule.eval()
            total += torch.stack(losses).mean() if losses else 0.0
        else:
            with autocast():
                total += model(x.to(rt.device), y.to(rt.device))
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


def _save_final_weights(model, out: Path, dims: ParallelDims) -> None:
    """The full (unsharded) weights, one file per pipeline stage (a plain model: one file), for
    comparison and export."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))   # collective
    if dims.coordinate("dp") == 0 and dims.coordinate("tp") == 0:
        torch.save({k: v.detach().cpu() for k, v in sd.items()}, out / f"final_model_stage{dims.coordinate('pp')}.pt")
