"""The tokenize stage vs bare ``Tokenizer.encode_batch`` on the same texts, same tokenizer.

Texts: the real corpora in ../shared/data (Tiny Shakespeare paragraphs, zhwiki and CLUE lines),
~5 MB. Tokenizer: byte-level BPE, 32k vocabulary, trained on them. The stage encodes batches of
4,096 documents (as the runner hands them) and builds the ``token_ids`` Arrow column; the bare
call returns Python Encoding objects. Both use the tokenizers thread pool (all cores).

    .venv/bin/python bench/bench_tokenize.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "text"

from corpusforge.stage import StageStats  # noqa: E402
from corpusforge.text.tokenize import Tokenize, train  # noqa: E402


def main():
    texts = (DATA / "tinyshakespeare.txt").read_text().split("\n\n")
    texts += (DATA / "zhwiki_sample.zh.txt").read_text().splitlines()
    texts += (DATA / "clue_corpus_small_sample.zh.txt").read_text().splitlines()
    texts = [t for t in texts if t.strip()]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    tok = train(texts, vocab_size=32_000)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokenizer.json"
        tok.save(str(path))
        stage = Tokenize(Tokenize.Config(tokenizer=str(path)))
        table = pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string()),
                          "token_ids": pa.nulls(len(texts), pa.list_(pa.uint32())),
                          "n_tokens": pa.nulls(len(texts), pa.int64())})
        stage.process(table.slice(0, 100), StageStats())
        best_bare = best_stage = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for i in range(0, len(texts), 4096):
                tok.encode_batch(texts[i:i + 4096], add_special_tokens=False)
            best_bare = min(best_bare, time.perf_counter() - t0)
            t0 = time.perf_counter()
            tokens = 0
            for i in range(0, len(texts), 4096):
                res = stage.process(table.slice(i, 4096), StageStats())
                tokens += pa.compute.sum(res.kept.column("n_tokens")).as_py()
            best_stage = min(best_stage, time.perf_counter() - t0)
    print(f"{len(texts):,} texts, {mb:.1f} MB, {tokens:,} tokens (with document-end tokens), best of 5")
    print(f"  bare Tokenizer.encode_batch   {mb / best_bare:7.1f} MB/s")
    print(f"  text.tokenize stage           {mb / best_stage:7.1f} MB/s   -> {best_bare / best_stage:.2f}x")


if __name__ == "__main__":
    main()
