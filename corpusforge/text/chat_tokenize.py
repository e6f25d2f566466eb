"""Supervised fine-tuning data: conversations -> ``token_ids`` + ``loss_mask``.

A conversation reaches this stage as one text, rendered by the reader's chat template
(``jsonl`` with ``turns_field``, ``turn_template: "<|{role}|>\\n{content}"``, ``turn_separator:
"\\n"``), so every stage before it (normalize, PII, dedup) cleaned the text a model will see. This
stage splits the text back into turns at the template's role markers (a marker at the start of a
line: ``<|user|>`` then a newline), tokenizes each turn on its own with the dataset's tokenizer,
and writes:

* ``token_ids``: the turns' tokens in order (marker, content, separator), the document-end token
  last;
* ``loss_mask``: 1 on the tokens of trained turns (``train_roles``, default the assistant's)
  after their marker, and on the closing document-end token; 0 on everything else (system and
  user turns, every role marker). The trainer computes the loss only where it is 1.

Rejected: ``not_a_conversation`` (the text does not start with a role marker: it was not rendered
by this template), ``no_trained_turn`` (no turn of a trained role, nothing to learn from),
``too_many_tokens`` (over ``max_tokens``, when set).
"""

from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field, field_validator

from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split
from corpusforge.text.tokenize import EOS, load_tokenizer


class ChatTokenizeConfig(StageConfig):
    tokenizer: str = Field(description="tokenizer.json (from `corpusforge train-tokenizer`, or any `tokenizers` file).")
    template: str = Field("<|{role}|>\n{content}", description="The reader's turn_template: a role marker, then "
                          "{content}.")
    train_roles: list[str] = Field(default_factory=lambda: ["assistant"], description="Turns whose tokens are trained on.")
    eos_token: str = Field(EOS, description="Appended to every conversation, trained on.")
    max_tokens: int | None = Field(None, gt=0, description="Reject conversations longer than this many tokens.")

    @field_validator("template")
    @classmethod
    def _marker_then_content(cls, v: str) -> str:
        head, sep, _ = v.partition("{content}")
        if not sep or "{role}" not in head or not head.replace("{role}", "").strip():
            raise ValueError("needs a role marker before {content}, such as '<|{role}|>\\n{content}'")
        return v

    def marker(self) -> re.Pattern:
        """The role marker at the start of a line, the role captured."""
        head = self.template.partition("{content}")[0]
        before, _, after = head.partition("{role}")
        return re.compile(rf"(?m)^{re.escape(before)}(?P<role>[\w\-]+){re.escape(after)}")


def split_turns(text: str, marker: re.Pattern) -> list[tuple[str, str, str]] | None:
    """[(role, marker text, rest of the turn up to the next marker)], or None when the text does
    not open with a marker."""
    found = list(marker.finditer(text))
    if not found or found[0].start() != 0:
        return None
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [(m.group("role"), m.group(0), text[m.end():end]) for m, end in zip(found, ends)]


class ChatTokenize(Stage):
    name = "text.chat_tokenize"
    kinds = ("text",)
    Config = ChatTokenizeConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {}          # token_ids, n_tokens and loss_mask are fields of the text schema

    def artifacts(self):
        from corpusforge.io.readers.base import input_path

        return {"tokenizer": input_path(self.config.tokenizer)}

    def _load(self):
        if getattr(self, "_tok", None) is None:
            from corpusforge.errors import ConfigError

            self._tok = load_tokenizer(self.config.tokenizer, self.name)
            self._eos = self._tok.token_to_id(self.config.eos_token)
            if self._eos is None:
                raise ConfigError(f"text.chat_tokenize.eos_token: {self.config.eos_token!r} is not in the "
                                  f"tokenizer's vocabulary")
            self._marker = self.config.marker()
        return self._tok

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        tok = self._load()
        trained = set(self.config.train_roles)
        texts = table.column("text").to_pylist()
        pieces, owners, reasons = [], [], [None] * len(texts)
        for i, text in enumerate(texts):
            turns = split_turns(text, self._marker)
            if turns is None:
                reasons[i] = ("not_a_conversation", "the text does not open with a role marker of the template")
                continue
            if not any(role in trained for role, _, _ in turns):
                reasons[i] = ("no_trained_turn", f"no turn of {sorted(trained)}")
                continue
            for role, mark, body in turns:       # the marker is never trained on
                pieces += [mark, body]
                owners += [(i, False), (i, role in trained)]
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        encoded = encode(pieces, add_special_tokens=False) if pieces else []
        ids = [[] for _ in texts]
        mask = [[] for _ in texts]
        for (i, train), enc in zip(owners, encoded):
            ids[i] += enc.ids
            mask[i] += [int(train)] * len(enc.ids)
        token_ids, loss_mask, n_tokens = [], [], []
        for i in range(len(texts)):
            if reasons[i] is None:
                ids[i].append(self._eos)
                mask[i].append(1)
                if self.config.max_tokens and len(ids[i]) > self.config.max_tokens:
                    reasons[i] = ("too_many_tokens", f"{len(ids[i])} > max_tokens {self.config.max_tokens}")
            token_ids.append(ids[i] if reasons[i] is None else None)
            loss_mask.append(mask[i] if reasons[i] is None else None)
            n_tokens.append(len(ids[i]) if reasons[i] is None else None)
            if reasons[i] is None:
                stats.counters["tokens"] += len(ids[i])
                stats.counters["trained_tokens"] += int(sum(mask[i]))
        for name, values in (("token_ids", pa.array(token_ids, pa.list_(pa.uint32()))),
                             ("n_tokens", pa.array(n_tokens, pa.int64())),
                             ("loss_mask", pa.array(loss_mask, pa.list_(pa.uint8())))):
            j = table.schema.get_field_index(name)
            table = table.set_column(j, name, values) if j >= 0 else table.append_column(name, values)
        reason = pa.array([r[0] if r else None for r in reasons], pa.string())
        detail = pa.array([r[1] if r else None for r in reasons], pa.string())
        return split(table, reason, detail, stats)

