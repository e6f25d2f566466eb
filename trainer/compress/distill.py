"""Knowledge distillation: a smaller student learns from the trained model (the teacher, frozen).

loss = alpha * T^2 * KL(teacher_T || student_T) + (1 - alpha) * CE(student, labels)
       [+ hidden_weight * patient loss]

where x_T = softmax(logits / T) (Hinton et al. 2015; T^2 keeps the soft-target gradients at
the scale of the hard ones). The optional patient loss (Sun et al. 2019) matches the student's
hidden states to the teacher's: student layer j (of Ls) to teacher layer round((j + 1) Lt / Ls)
- 1 (uniform mapping; the last to the last), through a learned linear projection when the
widths differ, as a normalised MSE (the MSE divided by the teacher state's variance, so that
every layer counts alike). The projection is dropped after training.

The student sees the same batches, in the same order, as a baseline student of the same shape
trained from scratch for the same steps (``baseline: true``), so the report compares like with
like. Under ``torchrun`` the student trains with DDP (the teacher runs on each rank's share).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from corpusforge.trainer.compress.common import (CompressConfig, CompressError, Trained, batches, finetune, measure, save,
                                     write_report)
from corpusforge.trainer.model import GPT


def student_config(cfg: CompressConfig, trained: Trained):
    s = cfg.distill.student.model_copy()
    teacher_vocab = trained.model.cfg.vocab_size
    if s.vocab_size == 0:
        s.vocab_size = teacher_vocab
    elif s.vocab_size != teacher_vocab:
        raise CompressError(f"distill.student.vocab_size: {s.vocab_size} but the teacher's vocabulary has "
                            f"{teacher_vocab} tokens; soft targets need the same vocabulary: set it to 0 (the "
                            f"teacher's) or {teacher_vocab}")
    if s.seq_len != trained.model.cfg.seq_len:
        raise CompressError(f"distill.student.seq_len: {s.seq_len}; the data is packed in windows of the teacher's "
                            f"{trained.model.cfg.seq_len}: set it to {trained.model.cfg.seq_len}")
    return s


def layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    return [round((j + 1) * teacher_layers / student_layers) - 1 for j in range(student_layers)]


def _hidden_states(model) -> tuple[list, list]:
    """Hooks that collect each block's output."""
    states = []
    hooks = [layer.register_forward_hook(lambda m, i, o: states.append(o)) for layer in model.layers.values()]
    return states, hooks


def distill(cfg: CompressConfig, trained: Trained) -> tuple[GPT, list[float]]:
    d = cfg.distill
    teacher = trained.model.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    torch.manual_seed(cfg.seed)
    student = GPT(student_config(cfg, trained)).to(device=trained.device, dtype=trained.model.tok_embeddings.weight.dtype)
    mapping = layer_map(len(student.layers), len(teacher.layers))
    t_states, t_hooks = _hidden_states(teacher)
    s_states, s_hooks = _hidden_states(student)
    proj = None
    if d.hidden_weight > 0 and student.cfg.d_model != teacher.cfg.d_model:
        proj = torch.nn.Linear(student.cfg.d_model, teacher.cfg.d_model, bias=False, device=trained.device)
    T = d.temperature

    def loss_fn(model, x, y):
        t_states.clear()
        s_states.clear()
        with torch.no_grad():
            t_logits = teacher(x).float()
        s_logits = model(x).float()
        ce = F.cross_entropy(s_logits.flatten(0, 1), y.flatten())
        kl = F.kl_div(F.log_softmax(s_logits / T, -1).flatten(0, 1), F.log_softmax(t_logits / T, -1).flatten(0, 1),
                      log_target=True, reduction="batchmean")
        loss = d.alpha * T * T * kl + (1 - d.alpha) * ce
        if d.hidden_weight > 0:
            patient = 0.0
            for j, t_index in enumerate(mapping):
                hs, ht = s_states[j], t_states[t_index]
                hs = proj(hs) if proj is not None else hs
                patient = patient + F.mse_loss(hs, ht) / ht.var().clamp_min(1e-6)
            loss = loss + d.hidden_weight * patient / len(mapping)
        return loss

    losses = finetune(student, trained, d.steps, d.lr, cfg.batch_size, cfg.seed, loss_fn,
                      extra_params=list(proj.parameters()) if proj is not None else None, warmup_steps=d.warmup_steps)
    for h in t_hooks + s_hooks:
        h.remove()
    return student, losses


def from_scratch(cfg: CompressConfig, trained: Trained) -> GPT:
    torch.manual_seed(cfg.seed)                    # the distilled student's initial weights, too
    student = GPT(student_config(cfg, trained)).to(device=trained.device, dtype=trained.model.tok_embeddings.weight.dtype)
    finetune(student, trained, cfg.distill.steps, cfg.distill.lr, cfg.batch_size, cfg.seed,
             warmup_steps=cfg.distill.warmup_steps)
    return student


def run(cfg: CompressConfig, trained: Trained) -> dict:
    out = Path(cfg.out_dir)
    data = batches(trained.val, cfg.batch_size, cfg.eval_batches)
    rows = {trained.base: measure(trained.model, data)}
    d = cfg.distill
    student, _ = distill(cfg, trained)
    shape = f"{student.cfg.n_layer} layers x {student.cfg.d_model}"
    rows[f"student {shape}, distilled {d.steps} steps (alpha {d.alpha}, T {d.temperature}"
         f"{f', hidden {d.hidden_weight}' if d.hidden_weight else ''})"] = measure(student, data, trained.model)
    notes = [f"teacher {trained.model.num_params():,} parameters, student {student.num_params():,}"]
    if d.baseline:
        scratch = from_scratch(cfg, trained)
        rows[f"student {shape}, from scratch {d.steps} steps"] = measure(scratch, data, trained.model)
        distilled, base = list(rows.values())[1]["loss"], list(rows.values())[2]["loss"]
        notes.append(f"held-out loss: distilled {distilled:.4f} vs from scratch {base:.4f} ({distilled - base:+.4f})")
    if not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0:
        save(out, "student", student, student.cfg)
        write_report(out, "distill", rows, notes)
    return rows
