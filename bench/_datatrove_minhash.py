"""Run inside bench/.venv-datatrove: datatrove's MinhashDedupSignature with its default config
(5-grams, 14 buckets x 8 hashes, spaCy English word tokenizer) over a JSONL file; print seconds."""
import json
import sys
import tempfile
import time

from datatrove.data import Document
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature

docs = [Document(text=json.loads(line)["text"], id=str(i)) for i, line in enumerate(open(sys.argv[1]))]
with tempfile.TemporaryDirectory() as out:
    stage = MinhashDedupSignature(output_folder=out, config=MinhashConfig())
    stage.run(iter([Document(text="warm up text for the tokenizer " * 5, id="w")]), rank=1, world_size=2)
    start = time.perf_counter()
    stage.run(iter(docs), rank=0, world_size=2)
    seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "docs": len(docs)}))
