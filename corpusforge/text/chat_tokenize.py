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

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from corpusforge.stage import StageResult, StageStats, split
from corpusforge.text.tokenize import EOS, Tokenize, TokenizeConfig, set_columns, too_many_tokens


class ChatTokenizeConfig(TokenizeConfig):
    template: str = Field("<|{role}|>\n{content}", description="The reader's turn_template: a role marker, then "
                          "{content}.")
    train_roles: list[str] = Field(default_factory=lambda: ["assistant"], description="Turns whose tokens are trained on.")
    eos_token: str = Field(EOS, description="Appended to every conversation, trained on.")

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


class ChatTokenize(Tokenize):
    """``text.tokenize`` for conversations: the same tokenizer loading, artifact and token limit;
    the turns tokenized one by one, with a loss mask."""

    name = "text.chat_tokenize"
    Config = ChatTokenizeConfig

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        tok = self._load()
        marker = self.config.marker()
        trained = set(self.config.train_roles)
        texts = table.column("text").to_pylist()
        pieces, owners, problems = [], [], [None] * len(texts)
        for i, text in enumerate(texts):
            turns = split_turns(text, marker)
            if turns is None:
                problems[i] = ("not_a_conversation", "the text does not open with a role marker of the template")
            elif not any(role in trained for role, _, _ in turns):
                problems[i] = ("no_trained_turn", f"no turn of {sorted(trained)}")
            else:
                for role, mark, body in turns:       # the marker is never trained on
                    pieces += [mark, body]
                    owners += [(i, False), (i, role in trained)]
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        ids = [[] for _ in texts]
        mask = [[] for _ in texts]
        for (i, train), enc in zip(owners, encode(pieces, add_special_tokens=False) if pieces else []):
            ids[i] += enc.ids
            mask[i] += [int(train)] * len(enc.ids)
        ok = [p is None for p in problems]
        for i in np.flatnonzero(ok):
            ids[i].append(self._eos)
            mask[i].append(1)
        n_tokens = pa.array([len(ids[i]) if ok[i] else None for i in range(len(texts))], pa.int64())
        table = set_columns(table, {
            "token_ids": pa.array([x if o else None for x, o in zip(ids, ok)], pa.list_(pa.uint32())),
            "n_tokens": n_tokens,
            "loss_mask": pa.array([m if o else None for m, o in zip(mask, ok)], pa.list_(pa.uint8()))})
        stats.counters["tokens"] += sum(len(ids[i]) for i in np.flatnonzero(ok))
        stats.counters["trained_tokens"] += sum(sum(mask[i]) for i in np.flatnonzero(ok))
        too_long, too_long_detail = too_many_tokens(n_tokens, self.config.max_tokens)
        reason = [p[0] if p else r for p, r in zip(problems, too_long.to_pylist())]
        detail = [p[1] if p else d for p, d in
                  zip(problems, too_long_detail.to_pylist() if too_long_detail is not None else [None] * len(texts))]
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)
