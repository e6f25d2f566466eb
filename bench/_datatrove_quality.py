"""Run inside bench/.venv-datatrove: datatrove's Gopher quality + Gopher repetition + C4 filters,
chained like a pipeline, over a JSONL file; print JSON with seconds and rejections by reason."""
import json
import sys
import time
from collections import Counter

from datatrove.data import Document
from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter

docs = [Document(text=json.loads(line)["text"], id=str(i)) for i, line in enumerate(open(sys.argv[1]))]
filters = [GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter()]
for f in filters:            # warm up tokenizers/models outside the timing
    f.filter(Document(text="A warm up sentence. " * 20, id="w"))
reasons = Counter()
start = time.perf_counter()
kept = 0
decisions = []              # per document: kept by all three filters
for doc in docs:
    for f in filters:
        r = f.filter(doc)
        ok, why = (r, None) if isinstance(r, bool) else r
        if not ok:
            reasons[f"{f.name}:{why}"] += 1
            decisions.append(False)
            break
    else:
        kept += 1
        decisions.append(True)
seconds = time.perf_counter() - start
out = {"seconds": seconds, "kept": kept, "docs": len(docs), "reasons": reasons}
if "--decisions" in sys.argv:
    out["decisions"] = decisions
print(json.dumps(out))
