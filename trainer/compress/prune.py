"""Pruning of a trained GPT, then fine-tuning, measured against the dense model.

``unstructured``: magnitude (L1) pruning of the linear weights of the transformer blocks with
``torch.nn.utils.prune``: per layer (``scope: layer``, every layer to ``sparsity``) or global
(``scope: global``, one threshold over all of them). During fine-tuning the masks stay applied
(pruned weights stay zero); ``prune.remove`` then folds them into plain weights, so the saved
state dict has no ``weight_orig``/``weight_mask``.

``structured``: whole attention heads (rows of wq, wk, wv and columns of wo) and/or MLP channels
(rows of w1, columns of w2) are removed, the same share in every layer, by importance:

| importance | score of a head or channel |
|---|---|
| ``l1`` / ``l2`` | norm of its weights (the rows and columns it owns) |
| ``activation`` | mean magnitude of its output (the input of wo / w2) over calibration batches |
| ``taylor`` | first-order estimate of the loss change when it is removed, abs(sum of activation x gradient), over calibration batches (Molchanov et al. 2017) |

The model is rebuilt with smaller linear layers (fewer parameters, less compute: a real
reduction, not a mask); the saved checkpoint records each layer's head and channel counts.

Schedules: ``one_shot`` prunes to the target then fine-tunes ``finetune_steps``;
``iterative`` reaches the target in ``iterations`` steps on a cubic schedule
(s_i = s (1 - (1 - i/n)^3), Zhu & Gupta 2017), fine-tuning ``finetune_steps / iterations`` after each.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.utils.prune as prune

from corpusforge.trainer.compress.common import (CompressConfig, CompressError, Trained, batches, clone, cross_entropy, device_of, finetune,
                                     measure, save, write_report)


def block_linears(model) -> list[tuple[str, torch.nn.Linear]]:
    out = [(f"layers.{i}.{name}", mod) for i, layer in model.layers.items() for name, mod in layer.named_modules()
           if isinstance(mod, torch.nn.Linear)]
    if not out:
        raise CompressError("prune: the model has no linear layers in model.layers (a GPT from corpusforge.trainer.model is expected)")
    return out


def sparsity(model) -> float:
    ws = [m.weight for _, m in block_linears(model)]
    return sum((w == 0).sum().item() for w in ws) / sum(w.numel() for w in ws)


def schedule(cfg: CompressConfig) -> list[float]:
    p = cfg.prune
    if p.schedule == "one_shot":
        return [p.sparsity]
    n = p.iterations
    return [p.sparsity * (1 - (1 - i / n) ** 3) for i in range(1, n + 1)]


# ---- unstructured -----------------------------------------------------------------------------

def unstructured(model, cfg: CompressConfig, trained: Trained):
    model = clone(model)
    params = [(m, "weight") for _, m in block_linears(model)]
    targets = schedule(cfg)
    steps = cfg.prune.finetune_steps // len(targets)
    done = 0.0
    for target in targets:
        amount = (target - done) / (1 - done)       # torch prunes a share of what is still unpruned
        if cfg.prune.scope == "global":
            prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=amount)
        else:
            for m, name in params:
                prune.l1_unstructured(m, name, amount=amount)
        done = target
        if steps:
            finetune(model, trained, steps, cfg.prune.lr, cfg.batch_size, cfg.seed)
    for m, name in params:
        prune.remove(m, name)
    return model


# ---- structured -------------------------------------------------------------------------------

def _groups(layer, target: str) -> dict[str, tuple]:
    """What a unit is in each group: (linears whose output rows it owns, linears whose input
    columns it owns, unit width, number of units)."""
    a, f = layer.attention, layer.feed_forward
    groups = {}
    if target in ("heads", "both"):
        groups["heads"] = ([a.wq, a.wk, a.wv], [a.wo], a.head_dim, a.wq.out_features // a.head_dim)
    if target in ("mlp", "both"):
        groups["mlp"] = ([f.w1], [f.w2], 1, f.w1.out_features)
    return groups


def importance(model, cfg: CompressConfig, trained: Trained) -> dict[tuple[str, str], torch.Tensor]:
    """A score per unit, per (layer, group)."""
    how = cfg.prune.importance
    scores = {}
    if how in ("l1", "l2"):
        p = 1 if how == "l1" else 2
        for i, layer in model.layers.items():
            for g, (rows, cols, width, n) in _groups(layer, cfg.prune.target).items():
                s = sum(m.weight.detach().abs().pow(p).reshape(n, width, -1).sum(dim=(1, 2)) for m in rows)
                s = s + sum(m.weight.detach().abs().pow(p).reshape(m.out_features, n, width).sum(dim=(0, 2)) for m in cols)
                scores[(i, g)] = s.pow(1 / p)
        return scores
    # data-based: the activations entering wo / w2 (one slice per unit), over calibration batches
    acts, hooks = {}, []
    for i, layer in model.layers.items():
        for g, (_, cols, width, n) in _groups(layer, cfg.prune.target).items():
            def hook(mod, args, key=(i, g), width=width, n=n):
                x = args[0]
                if how == "taylor":
                    x.retain_grad()
                acts.setdefault(key, []).append((x, width, n))
            hooks.append(cols[0].register_forward_pre_hook(hook))
    model.train()
    for x, y in batches(trained.train, cfg.batch_size, cfg.calibration_batches, cfg.seed):
        acts.clear()
        model.zero_grad(set_to_none=True)
        loss = cross_entropy(model, x.to(device_of(model)), y.to(device_of(model)))
        if how == "taylor":
            loss.backward()
        for key, items in acts.items():
            for a, width, n in items:
                v = a.detach() * a.grad if how == "taylor" else a.detach().abs()
                v = v.reshape(-1, n, width)
                s = v.sum(dim=(0, 2)).abs() if how == "taylor" else v.mean(dim=(0, 2))
                scores[key] = scores.get(key, 0) + s
    for h in hooks:
        h.remove()
    model.zero_grad(set_to_none=True)
    model.eval()
    return scores


def _shrink(linear: torch.nn.Linear, keep: torch.Tensor, dim: int) -> torch.nn.Linear:
    w = linear.weight.detach().index_select(dim, keep)
    new = torch.nn.Linear(w.shape[1], w.shape[0], bias=linear.bias is not None, device=w.device, dtype=w.dtype)
    new.weight.data.copy_(w)
    if linear.bias is not None:
        new.bias.data.copy_(linear.bias.detach() if dim == 1 else linear.bias.detach().index_select(0, keep))
    return new


def remove_units(model, scores: dict, share: float, target: str) -> dict:
    """Remove ``share`` of the units of each group in each layer (lowest score first, at least
    one kept); returns each layer's remaining head and channel counts."""
    shapes = {}
    for i, layer in model.layers.items():
        a, f = layer.attention, layer.feed_forward
        for g, (rows, cols, width, n) in _groups(layer, target).items():
            keep_n = max(1, n - int(round(share * n)))
            keep_units = torch.sort(torch.topk(scores[(i, g)], keep_n).indices).values
            idx = (keep_units[:, None] * width + torch.arange(width)).flatten()
            owner = a if g == "heads" else f
            for name in ("wq", "wk", "wv") if g == "heads" else ("w1",):
                setattr(owner, name, _shrink(getattr(owner, name), idx, 0))
            setattr(owner, "wo" if g == "heads" else "w2", _shrink(getattr(owner, "wo" if g == "heads" else "w2"), idx, 1))
        shapes[i] = {"heads": a.wq.out_features // a.head_dim, "mlp": f.w1.out_features}
    return shapes


def structured(model, cfg: CompressConfig, trained: Trained):
    model = clone(model)
    targets = schedule(cfg)
    steps = cfg.prune.finetune_steps // len(targets)
    removed, shapes = 0.0, {}
    for target in targets:
        share = (target - removed) / (1 - removed)   # of what is left
        shapes = remove_units(model, importance(model, cfg, trained), share, cfg.prune.target)
        removed = target
        if steps:
            finetune(model, trained, steps, cfg.prune.lr, cfg.batch_size, cfg.seed)
    return model, shapes


def load_pruned(path: str | Path):
    """Rebuild a structurally pruned model saved by ``run``."""
    from corpusforge.trainer.model import GPT, ModelConfig

    ckpt = torch.load(path, map_location="cpu", weights_only=True)     # tensors and plain data: never code
    model = GPT(ModelConfig(**ckpt["model_config"]))
    for i, shape in (ckpt.get("layer_shapes") or {}).items():
        layer = model.layers[i]
        heads = torch.arange(shape["heads"] * layer.attention.head_dim)
        for name in ("wq", "wk", "wv"):
            setattr(layer.attention, name, _shrink(getattr(layer.attention, name), heads, 0))
        layer.attention.wo = _shrink(layer.attention.wo, heads, 1)
        mlp = torch.arange(shape["mlp"])
        layer.feed_forward.w1 = _shrink(layer.feed_forward.w1, mlp, 0)
        layer.feed_forward.w2 = _shrink(layer.feed_forward.w2, mlp, 1)
    model.load_state_dict(ckpt["state_dict"])
    return model.eval()


def run(cfg: CompressConfig, trained: Trained) -> dict:
    out = Path(cfg.out_dir)
    data = batches(trained.val, cfg.batch_size, cfg.eval_batches)
    dense = trained.model
    rows = {trained.base: measure(dense, data)}
    p = cfg.prune
    tuned = clone(dense)                                 # the dense model fine-tuned for the same steps
    finetune(tuned, trained, p.finetune_steps, p.lr, cfg.batch_size, cfg.seed)
    rows[f"dense, fine-tuned {p.finetune_steps} steps"] = measure(tuned, data, dense)
    notes = []
    if p.kind == "unstructured":
        model = unstructured(dense, cfg, trained)
        name = f"{p.sparsity:.0%} unstructured ({p.scope}, {p.schedule}), fine-tuned {p.finetune_steps} steps"
        rows[name] = measure(model, data, dense)
        rows[name]["sparsity"] = sparsity(model)
        notes.append(f"zeros in block linear weights: {rows[name]['sparsity']:.1%} (stored dense: unstructured "
                     "sparsity saves bytes only in a sparse format)")
        save(out, "pruned", model, trained.train_cfg.model)
    else:
        model, shapes = structured(dense, cfg, trained)
        name = f"{p.sparsity:.0%} of {p.target} units removed ({p.importance}, {p.schedule}), fine-tuned {p.finetune_steps} steps"
        rows[name] = measure(model, data, dense)
        notes.append(f"parameters {rows[trained.base]['params']:,} -> {rows[name]['params']:,} "
                     f"({rows[name]['params'] / rows[trained.base]['params']:.1%})")
        save(out, "pruned", model, trained.train_cfg.model, {"layer_shapes": shapes})
    base = rows[trained.base]["loss"]
    notes.append(f"held-out loss vs dense: {(rows[name]['loss'] / base - 1) * 100:+.2f}%")
    write_report(out, "prune", rows, notes)
    return rows
