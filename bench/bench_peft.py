"""LoRA layers: corpusforge's own (trainer/finetune/adapters.py) vs peft on the trainer's GPT.

peft's ``inject_adapter_in_model`` puts its LoRA layers into any ``nn.Module`` by target name,
so both run on the same GPT, same targets (wq wk wv wo w1 w2), rank 8, alpha 16, no dropout.
Checked: the same trainable parameter count, and with peft's A/B copied into ours, the same outputs.
Measured: a training step (forward + backward + AdamW) with 2 threads
(torch.set_num_threads(2)), median of 20 after 3 warm-ups, two model sizes.

peft is not a dependency; install it beside the project for this run:
    pip install --target /tmp/peftsite --no-deps peft accelerate transformers safetensors huggingface_hub regex psutil
    PYTHONPATH=/tmp/peftsite python bench/bench_peft.py
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "peft.json"
TARGETS = ["wq", "wk", "wv", "wo", "w1", "w2"]

from corpusforge.trainer.finetune import adapters  # noqa: E402
from corpusforge.trainer.model import GPT, ModelConfig  # noqa: E402


def step_seconds(model, x, y) -> float:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    times = []
    for i in range(23):
        start = time.perf_counter()
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from peft import LoraConfig, inject_adapter_in_model

    torch.set_num_threads(2)
    rows = []
    for d_model, n_layer in ((192, 4), (512, 6)):
        torch.manual_seed(0)
        base = GPT(ModelConfig(vocab_size=512, n_layer=n_layer, n_head=8, d_model=d_model, seq_len=256))
        ours = copy.deepcopy(base)
        adapters.apply(ours, "lora", TARGETS, rank=8, alpha=16)
        theirs = copy.deepcopy(base)
        for p in theirs.parameters():
            p.requires_grad_(False)
        theirs = inject_adapter_in_model(LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, lora_dropout=0.0),
                                         theirs)
        n_ours = sum(p.numel() for p in ours.parameters() if p.requires_grad)
        n_theirs = sum(p.numel() for p in theirs.parameters() if p.requires_grad)
        # same adapter values: copy peft's (random A, and a random B so the update is not zero)
        with torch.no_grad():
            for name, mod in theirs.named_modules():
                if hasattr(mod, "lora_A") and "default" in getattr(mod, "lora_A", {}):
                    mod.lora_B["default"].weight.normal_(0, 0.02)
                    mine = ours.get_submodule(name)
                    mine.lora_a.copy_(mod.lora_A["default"].weight)
                    mine.lora_b.copy_(mod.lora_B["default"].weight)
        x = torch.randint(0, 512, (16, 256))
        y = torch.randint(0, 512, (16, 256))
        with torch.no_grad():
            diff = float((ours.eval()(x[:2]) - theirs.eval()(x[:2])).abs().max())
        ours.train()
        theirs.train()
        t_ours, t_theirs = step_seconds(ours, x, y), step_seconds(theirs, x, y)
        rows.append({"d_model": d_model, "n_layer": n_layer, "params": base.num_params(),
                     "trainable_ours": n_ours, "trainable_peft": n_theirs, "max_abs_output_diff": diff,
                     "step_s_ours": t_ours, "step_s_peft": t_theirs, "peft_over_ours": t_theirs / t_ours})
        print(rows[-1])
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=1))
    print("\n| model | trainable (ours / peft) | same outputs | step, ours | step, peft | peft / ours |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n_layer']}L d{r['d_model']} ({r['params'] / 1e6:.1f}M) | {r['trainable_ours']:,} / "
              f"{r['trainable_peft']:,} | max diff {r['max_abs_output_diff']:.1e} | {r['step_s_ours'] * 1e3:.0f} ms | "
              f"{r['step_s_peft'] * 1e3:.0f} ms | {r['peft_over_ours']:.2f}x |")


if __name__ == "__main__":
    main()
