"""Fine-tuning methods side by side: full, LoRA, IA3, QLoRA on the same base and conversations.

Conversations: Tiny Shakespeare's dialogue (../shared/data; karpathy/char-rnn, MIT), each pair of
consecutive speeches one user -> assistant exchange (real public dialogue, not instructions),
rendered with the chat template ``<|{role}|>\\n{content}``, cleaned and tokenized by the pipeline
(``text.chat_tokenize``: loss on the assistant's speech only). Base: a 4-layer GPT (d_model 192,
seq_len 256) trained by ``corpusforge train`` on the same text (char tokenizer). Each method runs
as its own ``corpusforge finetune`` process (so peak memory is its own), same steps, batch and
seed; learning rates per method (full 1e-3, LoRA/QLoRA 5e-3, IA3 3e-2). Reported: trainable
share, peak RSS, tokens/s, held-out loss on the assistant tokens before and after, and for LoRA
the largest difference between the merged model's and the adapted model's logits.

    python bench/bench_finetune.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHAKESPEARE = ROOT.parent / "shared" / "data" / "text" / "tinyshakespeare.txt"
RESULTS = ROOT / "bench" / "results" / "finetune.json"
TEMPLATE = "<|{role}|>\n{content}"
LR = {"full": 1e-3, "lora": 5e-3, "ia3": 3e-2, "qlora": 5e-3}


def cf(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "corpusforge", *args], check=True, stdout=subprocess.DEVNULL)


def pipeline(path: Path, inputs: list, stages: list, out: Path) -> None:
    path.write_text(yaml.safe_dump({"name": out.name, "kind": "text", "inputs": inputs, "stages": stages,
                                    "output": {"path": str(out)}, "seed": 0}))
    cf("run", str(path), "-q")


def main() -> None:
    if not SHAKESPEARE.exists():
        sys.exit(f"{SHAKESPEARE} is missing (../shared/data)")
    tmp = Path(tempfile.mkdtemp(prefix="bench_finetune_"))
    speeches = [s.split("\n", 1)[1] for s in SHAKESPEARE.read_text().split("\n\n") if "\n" in s]
    pairs = [{"messages": [{"role": "user", "content": a}, {"role": "assistant", "content": b}]}
             for a, b in zip(speeches[0::2], speeches[1::2]) if len(a) + len(b) < 230]
    (tmp / "chat").mkdir()
    (tmp / "chat" / "dialogue.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    chat = {"format": "jsonl", "paths": [str(tmp / "chat")], "source": "dialogue", "turns_field": "messages",
            "turn_template": TEMPLATE, "turn_separator": "\n"}
    pipeline(tmp / "raw.yaml", [chat], [{"stage": "text.normalize"}], tmp / "raw")
    cf("train-tokenizer", str(tmp / "raw"), "--model", "char")
    tok = str(tmp / "raw" / "tokenizer.json")
    ds = {"format": "dataset", "paths": [str(tmp / "raw")]}
    pipeline(tmp / "tok.yaml", [ds], [{"stage": "text.tokenize", "tokenizer": tok}], tmp / "tok")
    pipeline(tmp / "sft.yaml", [ds], [{"stage": "text.chat_tokenize", "tokenizer": tok, "template": TEMPLATE}],
             tmp / "sft")
    cf("train", str(ROOT / "trainer/configs/demo.yaml"), "--set", f"data.dataset={tmp / 'tok'}",
       "--set", f"out_dir={tmp / 'base'}", "--set", "steps=600", "--set", "model.n_layer=4",
       "--set", "model.d_model=192", "--set", "model.n_head=6", "--set", "model.seq_len=256",
       "--set", "batch_size=16", "--set", "data.shuffle_window=100000", "--set", "tensorboard=false")
    rows = {}
    for method, lr in LR.items():
        cfg = {"base": str(tmp / "base"), "method": method, "lora": {"rank": 8, "alpha": 16},
               "data": {"dataset": str(tmp / "sft"), "val_fraction": 0.1},
               "train": {"steps": 300, "batch_size": 16, "lr": lr, "warmup_steps": 20, "eval_every": 300,
                         "eval_batches": 8, "checkpoint_every": 300, "log_every": 50, "device": "cpu"},
               "out_dir": str(tmp / method), "merge": method == "lora"}
        (tmp / f"{method}.yaml").write_text(yaml.safe_dump(cfg))
        cf("finetune", str(tmp / f"{method}.yaml"))
        rows[method] = json.loads((tmp / method / "summary.json").read_text())
        print(method, {k: rows[method][k] for k in ("trainable_share", "val_loss_before", "val_loss",
                                                     "tokens_per_s", "peak_memory_bytes")})
    from corpusforge.trainer.finetune.run import load_base, load_finetuned

    adapted = load_finetuned(tmp / "lora").eval()
    _, merged = load_base(tmp / "lora" / "merged")
    x = torch.randint(0, merged.cfg.vocab_size, (4, 256))
    with torch.no_grad():
        diff = float((adapted(x) - merged.eval()(x)).abs().max())
    out = {"conversations": len(pairs), "runs": rows, "lora_merged_max_abs_logit_diff": diff}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print("\n| method | trainable | held-out loss before -> after | tokens/s | peak RSS |")
    print("|---|---|---|---|---|")
    for m, r in rows.items():
        print(f"| {m} | {r['trainable_params']:,} ({r['trainable_share']:.2%}) | {r['val_loss_before']:.3f} -> "
              f"{r['val_loss']:.3f} | {r['tokens_per_s']:,.0f} | {r['peak_memory_bytes'] / 2**20:,.0f} MiB |")
    print(f"LoRA merged vs adapted, max |logit difference|: {diff:.2e}")


if __name__ == "__main__":
    main()
