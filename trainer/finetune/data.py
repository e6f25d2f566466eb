"""Fine-tuning data: tokenized conversations (``text.chat_tokenize``) -> packed, masked batches.

* The dataset's records carry ``token_ids`` and ``loss_mask`` (text schema >= 1.1.0); a dataset
  without ``loss_mask`` trains on every token (plain documents).
* The last ``val_fraction`` of the conversations (manifest order) are held out.
* Packing (``packing: true``): conversations are laid in order into rows of ``seq_len + 1``
  tokens; one that does not fit in the row's remainder starts the next row (the remainder is
  padding), so no conversation is split and none crosses a row. A conversation longer than a
  row is cut to it (counted in ``truncated``). ``packing: false``: one conversation per row.
* A row gives inputs ``x = row[:-1]``, targets ``y = row[1:]`` with -100 wherever the target
  token is not trained on (``loss_mask`` 0), is padding, or belongs to another conversation than
  its input, and the document ids the model turns into a block-diagonal attention mask and
  per-conversation positions (``model.Documents``): attention never crosses conversations.
* Batches: each step takes ``dp * batch_size`` rows of a seeded per-epoch permutation; rank r
  takes its slice. The state is (epoch, rows consumed): resume continues with the next batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from corpusforge.errors import ConfigError
from corpusforge.trainer.model import IGNORE


class FinetuneDataError(ConfigError):
    """The data or the base cannot be fine-tuned on; the message names the config field."""


@dataclass
class Conversations:
    tokens: list[np.ndarray]          # uint32 per conversation
    masks: list[np.ndarray]           # uint8 per conversation (all ones for plain documents)

    @classmethod
    def open(cls, dataset: str | Path) -> "Conversations":
        import pyarrow.compute as pc

        from corpusforge.errors import CorpusforgeError
        from corpusforge.io.dataset import Dataset

        try:
            ds = Dataset.open(dataset)
        except CorpusforgeError as exc:
            raise FinetuneDataError(f"data.dataset: {exc}") from None
        table = ds.read(["token_ids"] + (["loss_mask"] if "loss_mask" in ds.arrow_schema().names else []))
        if "token_ids" not in table.column_names:
            raise FinetuneDataError(f"data.dataset: {dataset} has no token_ids (run text.chat_tokenize first)")
        ids = table.column("token_ids").combine_chunks()
        keep = pc.is_valid(ids)
        ids = ids.filter(keep)
        lengths = pc.list_value_length(ids).to_numpy(zero_copy_only=False)
        flat = ids.flatten().to_numpy(zero_copy_only=False).astype(np.uint32)
        cuts = np.cumsum(lengths)[:-1]
        if "loss_mask" in table.column_names:
            mask_col = table.column("loss_mask").combine_chunks().filter(keep)
            masks_flat = mask_col.flatten().to_numpy(zero_copy_only=False).astype(np.uint8)
            if len(masks_flat) != len(flat):
                raise FinetuneDataError("data.dataset: loss_mask and token_ids differ in length")
        else:
            masks_flat = np.ones(len(flat), np.uint8)
        if not len(lengths):
            raise FinetuneDataError(f"data.dataset: {dataset} has no tokenized records")
        return cls(np.split(flat, cuts), np.split(masks_flat, cuts))

    def split(self, val_fraction: float) -> tuple["Conversations", "Conversations"]:
        n_val = int(round(len(self.tokens) * val_fraction)) if len(self.tokens) > 1 else 0
        n_val = min(max(n_val, 1 if val_fraction > 0 else 0), len(self.tokens) - 1)
        cut = len(self.tokens) - n_val
        return (Conversations(self.tokens[:cut], self.masks[:cut]),
                Conversations(self.tokens[cut:], self.masks[cut:]))


@dataclass
class PackedRows:
    tokens: np.ndarray      # (rows, T + 1) int64
    trained: np.ndarray     # (rows, T + 1) bool: the token is a training target
    doc: np.ndarray         # (rows, T + 1) int64: conversation id within the row, -1 padding
    truncated: int

    @classmethod
    def pack(cls, conv: Conversations, seq_len: int, packing: bool = True) -> "PackedRows":
        width = seq_len + 1
        rows, fill, truncated = [], width, 0      # fill: tokens used in the current row
        for ids, mask in zip(conv.tokens, conv.masks):
            if len(ids) > width:
                ids, mask, truncated = ids[:width], mask[:width], truncated + 1
            if not packing or fill + len(ids) > width:
                rows.append([])
                fill = 0
            rows[-1].append((ids, mask))
            fill += len(ids)
        tokens = np.zeros((len(rows), width), np.int64)
        trained = np.zeros((len(rows), width), bool)
        doc = np.full((len(rows), width), -1, np.int64)
        for r, parts in enumerate(rows):
            at = 0
            for d, (ids, mask) in enumerate(parts):
                tokens[r, at:at + len(ids)] = ids
                trained[r, at:at + len(ids)] = mask.astype(bool)
                doc[r, at:at + len(ids)] = d
                at += len(ids)
        return cls(tokens, trained, doc, truncated)

    def __len__(self) -> int:
        return len(self.tokens)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x, y, doc) for these rows: y is -100 where the target is not trained on, padding, or
        in another conversation than its input."""
        t, m, d = self.tokens[rows], self.trained[rows], self.doc[rows]
        x, y = t[:, :-1], t[:, 1:].copy()
        y[~m[:, 1:] | (d[:, 1:] != d[:, :-1]) | (d[:, 1:] < 0)] = IGNORE
        return torch.from_numpy(x.copy()), torch.from_numpy(y), torch.from_numpy(d[:, :-1].copy())


class RowLoader:
    """Seeded, rank-aware, resumable batches of packed rows."""

    def __init__(self, rows: PackedRows, batch_size: int, rank: int = 0, world: int = 1, seed: int = 0):
        if len(rows) < batch_size * world:
            raise FinetuneDataError(f"train.batch_size: {batch_size} x {world} ranks is more than the "
                                    f"{len(rows)} packed training rows")
        self.rows, self.batch_size, self.rank, self.world, self.seed = rows, batch_size, rank, world, seed
        self.epoch, self.consumed = 0, 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.consumed = int(state["epoch"]), int(state["consumed"])

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        step = self.batch_size * self.world
        if self.consumed + step > len(self.rows):
            self.epoch, self.consumed = self.epoch + 1, 0
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.rows))
        mine = order[self.consumed + self.rank * self.batch_size: self.consumed + (self.rank + 1) * self.batch_size]
        self.consumed += step
        return self.rows.batch(mine)
