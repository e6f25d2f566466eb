"""``corpusforge finetune CONFIG``: fine-tune a finished trainer run on tokenized conversations.

Read top to bottom: load the base run's model, add the method's layers (full: none, every weight
trains; lora / ia3 / qlora: frozen base, adapters train), wrap for data parallelism when launched by
torchrun (DDP, or FSDP2 with ``parallel: fsdp``), then a plain loop: packed masked batches, AdamW
over the trainable parameters, warmup + cosine, held-out loss on the conversations' trained tokens.

Outputs in ``out_dir``: ``adapter.pt`` (the trainable tensors by name + the method's settings;
full fine-tuning: the whole model), ``summary.json`` (trainable share, tokens/s, peak memory,
held-out loss before and after), ``metrics.jsonl``, ``checkpoint.pt`` (resume: a killed run started
again continues from the last checkpoint to the same result), and with ``merge: true``
``merged/`` (``config.json`` + ``final_model_stage0.pt``): the adapters folded into the base, in the
trainer's run format.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from corpusforge.trainer.finetune import adapters
from corpusforge.trainer.finetune.config import FinetuneConfig, load
from corpusforge.trainer.finetune.data import Conversations, FinetuneDataError, PackedRows, RowLoader
from corpusforge.trainer.model import GPT, Documents, IGNORE


def load_base(run: str | Path) -> tuple[dict, GPT]:
    """The base run's config (as a dict, vocabulary filled in) and its model, fp32 on the CPU."""
    from corpusforge.trainer.checkpoint import load_final_model
    from corpusforge.trainer.config import to_dict

    try:
        tc, model = load_final_model(run, field="base")
    except ValueError as exc:
        raise FinetuneDataError(str(exc)) from None
    return to_dict(tc), model


def lr_at(step: int, cfg: FinetuneConfig) -> float:
    """Warmup, then cosine down to a tenth: the trainer's schedule."""
    from corpusforge.trainer.optim import schedule_factor

    t = cfg.train
    return t.lr * schedule_factor(step, t.warmup_steps, t.steps, "cosine", 0.1)


def wrap(model: torch.nn.Module, cfg: FinetuneConfig, rt) -> torch.nn.Module:
    if rt.world_size == 1:
        return model
    if cfg.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.layers.values():
            fully_shard(block)
        return fully_shard(model)
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=None if rt.device.type == "cpu" else [rt.device.index])


@torch.no_grad()
def evaluate(model, rows: PackedRows, batch_size: int, batches: int, device, autocast) -> float:
    """Mean loss over the trained targets of the first ``batches`` held-out batches (global batches:
    every rank evaluates the same rows, so the figure does not depend on the number of ranks)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, min(len(rows), batch_size * batches), batch_size):
        x, y, doc = rows.batch(torch.arange(start, min(start + batch_size, len(rows))).numpy())
        n = int((y != IGNORE).sum())
        if n:
            with autocast():
                total += float(model(x.to(device), y.to(device), docs=Documents(doc.to(device)))) * n
            count += n
    model.train()
    return total / max(count, 1)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Trainable tensors by name, whole on every rank (FSDP2 shards are gathered)."""
    out = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            t = p.full_tensor() if hasattr(p, "full_tensor") else p
            out[name.replace("module.", "", 1) if name.startswith("module.") else name] = t.detach().cpu().clone()
    return out


def load_trainable(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    missing = [n for n in state if n not in params]
    if missing:
        raise FinetuneDataError(f"adapter does not fit this model: {missing[:3]} ...")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value.to(params[name].dtype))


def load_finetuned(out_dir: str | Path) -> GPT:
    """The base with its saved adapter applied (for evaluation or generation), fp32 on the CPU."""
    saved = torch.load(Path(out_dir) / "adapter.pt", map_location="cpu", weights_only=True)
    settings = json.loads(saved["settings"])
    _, model = load_base(settings["base"])
    lo = settings["lora"]
    adapters.apply(model, settings["method"], lo["targets"], lo["rank"], lo["alpha"], lo["dropout"])
    load_trainable(model, saved["tensors"])
    return model


def export_merged(model: torch.nn.Module, base_raw: dict, out: Path) -> Path:
    """Adapters folded in, written as a trainer run: config.json + final_model_stage0.pt."""
    merged = adapters.merge(model).float().cpu()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(base_raw, indent=1))
    torch.save(merged.state_dict(), out / "final_model_stage0.pt")
    return out


def main(argv: list[str] | None = None) -> dict:
    from corpusforge.trainer.device import init_runtime

    ap = argparse.ArgumentParser(prog="corpusforge finetune", description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], help="override a config key: train.steps=50")
    args = ap.parse_args(argv)
    cfg = load(args.config, args.set)
    rt = init_runtime(cfg.train.device)
    torch.manual_seed(cfg.train.seed)
    out = Path(cfg.out_dir)

    # model and data
    base_raw, model = load_base(cfg.base)
    seq_len = model.cfg.seq_len
    train_conv, val_conv = Conversations.open(cfg.data.dataset).split(cfg.data.val_fraction)
    top = max(int(t.max()) for t in train_conv.tokens + val_conv.tokens if len(t))
    if top >= model.cfg.vocab_size:
        raise FinetuneDataError(f"data.dataset: token id {top} >= the base model's vocabulary "
                                f"{model.cfg.vocab_size} (tokenize with the base run's tokenizer)")
    train_rows = PackedRows.pack(train_conv, seq_len, cfg.data.packing)
    val_rows = PackedRows.pack(val_conv, seq_len, cfg.data.packing)
    lo = cfg.lora
    try:
        adapters.apply(model, cfg.method, lo.targets, lo.rank, lo.alpha, lo.dropout)
    except ValueError as exc:          # e.g. qlora on a layer that is not a whole number of NF4 blocks
        raise FinetuneDataError(f"method: {cfg.method}: {exc}") from None
    model.to(rt.device)
    n_total = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ckpt = out / "checkpoint.pt"
    saved = torch.load(ckpt, map_location="cpu", weights_only=True) if ckpt.exists() else None
    if saved is not None:
        if rt.world_size > 1 and cfg.parallel == "fsdp":
            raise FinetuneDataError(f"out_dir: {ckpt} exists; resuming a parallel: fsdp fine-tune is not supported "
                                    "(its optimizer state is sharded): remove it, or resume with ddp")
        load_trainable(model, saved["tensors"])          # before wrapping: plain tensors
    net = wrap(model, cfg, rt)
    params = [p for p in net.parameters() if p.requires_grad]
    fused = rt.device.type == "cuda"
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay, fused=fused or None)
    loader = RowLoader(train_rows, cfg.train.batch_size, rt.rank, rt.world_size, cfg.train.seed)
    dtype = torch.bfloat16 if cfg.train.precision == "bf16" else None

    def autocast():
        return torch.autocast(rt.device.type, dtype=dtype, enabled=dtype is not None)

    # resume
    step, history = 0, {}
    if saved is not None:
        opt.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["loader"])
        step, history = int(saved["step"]), json.loads(saved["history"])
        torch.set_rng_state(saved["rng"])
    else:
        history["val_loss_before"] = evaluate(net, val_rows, cfg.train.batch_size * rt.world_size, cfg.train.eval_batches,
                                              rt.device, autocast)
    if rt.is_main:
        out.mkdir(parents=True, exist_ok=True)
    log = open(out / "metrics.jsonl", "a") if rt.is_main else None

    # the loop
    net.train()
    seen_tokens, seen_trained, start = 0, 0, time.perf_counter()
    while step < cfg.train.steps:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        x, y, doc = next(loader)
        x, y, doc = x.to(rt.device), y.to(rt.device), doc.to(rt.device)
        with autocast():
            loss = net(x, y, docs=Documents(doc))
        loss.backward()
        if cfg.train.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, cfg.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seen_tokens += x.numel() * rt.world_size
        seen_trained += int((y != IGNORE).sum()) * rt.world_size
        if log and (step % cfg.train.log_every == 0 or step == cfg.train.steps):
            log.write(json.dumps({"step": step, "loss": loss.item(), "lr": lr_at(step - 1, cfg)}) + "\n")
            log.flush()
        if step % cfg.train.eval_every == 0 or step == cfg.train.steps:
            val = evaluate(net, val_rows, cfg.train.batch_size * rt.world_size, cfg.train.eval_batches, rt.device, autocast)
            history[f"val_loss_step_{step}"] = val
        if step % cfg.train.checkpoint_every == 0 or step == cfg.train.steps:
            state = trainable_state(net)
            if rt.is_main:
                tmp = ckpt.with_suffix(".tmp")
                torch.save({"tensors": state, "optimizer": opt.state_dict(), "loader": loader.state_dict(),
                            "step": step, "history": json.dumps(history), "rng": torch.get_rng_state()}, tmp)
                os.replace(tmp, ckpt)          # written whole or not at all
    seconds = time.perf_counter() - start

    # outputs
    state = trainable_state(net)
    summary = {"method": cfg.method, "world_size": rt.world_size, "parallel": cfg.parallel if rt.world_size > 1 else None,
               "trainable_params": n_train, "total_params": n_total, "trainable_share": n_train / n_total,
               "steps": step, "train_rows": len(train_rows), "val_rows": len(val_rows),
               "truncated_conversations": train_rows.truncated + val_rows.truncated,
               "tokens_per_s": seen_tokens / seconds if seen_tokens else None,
               "trained_tokens_per_s": seen_trained / seconds if seen_trained else None,
               "peak_memory_bytes": rt.max_memory_bytes(), **history,
               "val_loss": history.get(f"val_loss_step_{step}")}
    if rt.is_main:
        settings = {"base": str(Path(cfg.base).resolve()), "method": cfg.method, "lora": cfg.lora.model_dump()}
        torch.save({"tensors": state, "settings": json.dumps(settings)}, out / "adapter.pt")
        if cfg.merge:
            if rt.world_size > 1:          # the gathered tensors into a plain local copy
                _, local = load_base(cfg.base)
                adapters.apply(local, cfg.method, lo.targets, lo.rank, lo.alpha, lo.dropout)
                load_trainable(local, state)
                model = local
            summary["merged"] = str(export_merged(model, base_raw, out / "merged"))
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        log.close()
    if rt.world_size > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return summary


if __name__ == "__main__":
    from corpusforge.trainer.device import exit_process

    main()
    exit_process(0)
