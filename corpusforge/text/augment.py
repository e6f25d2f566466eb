"""Text augmentation: new records derived from existing ones, deterministic per seed.

Operations (each with a ``rate``), after EDA (Wei & Zou 2019) plus document mixing:

| op | what (units: words; characters for zh/ja) |
|---|---|
| ``synonym`` | each unit that has synonyms is replaced with probability ``rate`` (Chinese: dictionary words found in the text) |
| ``insert`` | ``rate`` x units synonyms (or, without any, copies of random units) inserted at random places |
| ``delete`` | each unit deleted with probability ``rate`` (at least one kept) |
| ``swap`` | ``rate`` x units random pairs of units swapped |
| ``shuffle_sentences`` | sentence order shuffled |
| ``mix`` | sentence mixing with another document of the batch: the first half of one, the second half of the other (``unit: words`` mixes words instead) |
| ``plugin`` | ``function: package.module:fn`` with ``fn(texts: list[str], seed: int) -> list[str]``: the interface for model-based rewriting (back-translation, masked-LM infilling), which needs models this project does not ship |

Every new record keeps its parent's source, language and provenance, gets a new id (hash of
parent id, op and seed), ``tag_augment_parent`` and ``tag_augment_op``; its scores are null
(they described the parent). The originals pass through unchanged. Randomness is seeded per
(seed, parent id, op), so the output does not depend on batch sizes or worker counts (``mix``
pairs documents within a batch, which is fixed for a given config).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Literal


import pyarrow as pa
import xxhash
from pydantic import Field

from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, empty_rejected
from corpusforge.text.features import is_cjk, languages

BUILT_IN = Path(__file__).with_name("synonyms.json")
SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")


class AugmentOp(StageConfig):
    op: Literal["synonym", "insert", "delete", "swap", "shuffle_sentences", "mix", "plugin"]
    rate: float = Field(0.1, ge=0, le=1)
    unit: Literal["sentences", "words"] = Field("sentences", description="mix: what to mix.")
    function: str | None = Field(None, description="plugin: package.module:function(texts, seed) -> texts")


class AugmentConfig(StageConfig):
    ops: list[AugmentOp] = Field(min_length=1)
    fraction: float = Field(1.0, ge=0, le=1, description="Share of documents augmented (chosen by seed).")
    synonyms: str | None = Field(None, description="JSON {word: [synonyms]} or {lang: {word: [...]}}; default: built-in.")
    seed: int = 0


class Augment(Stage):
    name = "text.augment"
    kinds = ("text",)
    Config = AugmentConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"tag_augment_parent": pa.string(), "tag_augment_op": pa.string()}

    def _table(self) -> dict[str, dict[str, list[str]]]:
        if getattr(self, "_syn", None) is None:
            raw = json.loads(Path(self.config.synonyms or BUILT_IN).read_text(encoding="utf-8"))
            raw.pop("_comment", None)
            if raw and all(isinstance(v, list) for v in raw.values()):
                raw = {"*": raw}            # one table for every language
            self._syn = raw
        return self._syn

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        c: AugmentConfig = self.config
        texts = table.column("text").to_pylist()
        ids = table.column("id").to_pylist()
        cjk = is_cjk(languages(table))
        langs = self._langs = languages(table)
        chosen = [i for i in range(len(texts)) if _rng(c.seed, ids[i], "pick").random() < c.fraction]
        new_rows, parents, ops, slots = [], [], [], []
        for slot, op in enumerate(c.ops):
            if op.op == "plugin":
                fn = _load(op.function)
                outs = fn([texts[i] for i in chosen], c.seed) if chosen else []
                results = list(zip(chosen, outs))
            else:
                results = [(i, self._apply(op, texts, i, ids, bool(cjk[i]), langs[i], chosen)) for i in chosen]
            for i, text in results:
                if text is None or text == texts[i]:
                    stats.counters[f"unchanged_{op.op}"] += 1
                    continue
                new_rows.append(text)
                parents.append(i)
                ops.append(op.op)
                slots.append(slot)
                stats.counters[f"created_{op.op}"] += 1
        table = table.append_column("tag_augment_parent", pa.nulls(table.num_rows, pa.string())) \
                     .append_column("tag_augment_op", pa.nulls(table.num_rows, pa.string()))
        if not new_rows:
            return StageResult(table, empty_rejected(table))
        derived = table.take(pa.array(parents, pa.int64()))
        keep = {"id", "source", "lang", "src_path", "src_row", "meta"}
        cols = {}
        for name in derived.column_names:
            if name == "text":
                cols[name] = pa.array(new_rows, pa.string())
            elif name == "id":
                # the parent, the op's place in the config and the seed: the same id whatever the batching
                cols[name] = pa.array([xxhash.xxh3_128_hexdigest(f"{ids[p]}\0{slot}\0{o}\0{c.seed}".encode())
                                       for p, o, slot in zip(parents, ops, slots)], pa.string())
            elif name == "tag_augment_parent":
                cols[name] = pa.array([ids[p] for p in parents], pa.string())
            elif name == "tag_augment_op":
                cols[name] = pa.array(ops, pa.string())
            elif name in keep:
                cols[name] = derived.column(name)
            else:
                cols[name] = pa.nulls(len(new_rows), derived.schema.field(name).type)
        out = pa.concat_tables([table, pa.table(cols, schema=table.schema)])
        return StageResult(out, empty_rejected(out), created=len(new_rows))

    # -- the operations ----------------------------------------------------------------------
    def _apply(self, op: AugmentOp, texts, i, ids, cjk: bool, lang: str, chosen) -> str | None:
        rng = _rng(self.config.seed, ids[i], op.op)
        text = texts[i]
        if op.op == "shuffle_sentences":
            sents = SENTENCE.split(text)
            sents = [s for s in sents if s]
            if len(sents) < 2:
                return None
            rng.shuffle(sents)
            return ("" if cjk else " ").join(sents)
        if op.op == "mix":
            others = [j for j in chosen if j != i and self._langs[j] == lang]     # same language only
            if not others:
                return None
            j = rng.choice(others)
            if op.unit == "sentences":
                a, b = [s for s in SENTENCE.split(text) if s], [s for s in SENTENCE.split(texts[j]) if s]
                return ("" if cjk else " ").join(a[: max(1, len(a) // 2)] + b[len(b) // 2:])
            a, b = _units(text, cjk), _units(texts[j], cjk)
            return _join(a[: len(a) // 2] + b[len(b) // 2:], cjk)
        syn = {**self._table().get("*", {}), **self._table().get(lang, {})}
        if op.op == "synonym" and cjk:
            if not syn:
                return None
            pattern = re.compile("|".join(sorted(map(re.escape, syn), key=len, reverse=True)))
            return pattern.sub(lambda m: rng.choice(syn[m.group()]) if rng.random() < op.rate else m.group(), text)
        units = _units(text, cjk)
        if not units:
            return None
        if op.op == "synonym":
            out = []
            for u in units:
                key = u.lower()
                out.append(_case_like(rng.choice(syn[key]), u) if key in syn and rng.random() < op.rate else u)
            return _join(out, cjk)
        if op.op == "delete":
            out = [u for u in units if rng.random() >= op.rate] or [rng.choice(units)]
            return _join(out, cjk)
        n = max(1, int(round(op.rate * len(units))))
        if op.op == "swap":
            out = list(units)
            for _ in range(n):
                a, b = rng.randrange(len(out)), rng.randrange(len(out))
                out[a], out[b] = out[b], out[a]
            return _join(out, cjk)
        if op.op == "insert":
            out = list(units)
            candidates = [s for u in units for s in syn.get(u.lower(), [])] or units
            for _ in range(n):
                out.insert(rng.randrange(len(out) + 1), rng.choice(candidates))
            return _join(out, cjk)
        raise AssertionError(op.op)


def _rng(seed: int, parent: str, op: str) -> random.Random:
    return random.Random(xxhash.xxh64_intdigest(f"{seed}\0{parent}\0{op}".encode()))


def _units(text: str, cjk: bool) -> list[str]:
    return list(text) if cjk else text.split()


def _join(units: list[str], cjk: bool) -> str:
    return "".join(units) if cjk else " ".join(units)


def _case_like(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def _load(spec: str | None):
    if not spec or ":" not in spec:
        raise ValueError("plugin op needs function: package.module:function")
    from corpusforge.registry import load_plugin

    try:
        return load_plugin(spec, "augmentation plugin")
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None



