"""Training data from corpusforge shards: manifest -> verified shards -> one token stream ->
packed fixed-length sequences -> batches per data-parallel rank and loader worker.

* The dataset is opened by its manifest (corpusforge's ``Dataset``: the only corpusforge code the
  trainer uses besides the schema). Its record schema must be ``text`` at the major version this
  trainer reads, with ``token_ids``; shard checksums are verified when the token stream is built.
* Token stream: the ``token_ids`` of every record in manifest order (so a curriculum written into
  the shard order holds), each ending with the document-end token the tokenize stage appended:
  packing needs no padding. Built once into a memory-mapped ``.npy`` under the run's cache folder,
  keyed by the shards' checksums, and shared by every rank and worker.
* Samples: window i is tokens[i*T : i*T + T + 1] (inputs and targets shifted by one). The last
  ``val_fraction`` of the stream is held out for evaluation.
* Order: samples in stream order, optionally shuffled within windows of ``shuffle_window``
  samples, re-shuffled each epoch from (seed, epoch). With ``epoch_shift`` every epoch after the
  first moves the packing grid by a seeded offset in [0, seq_len), so a second pass over the data
  sees different windows (still packed, no padding; the offset depends on the epoch alone, so
  resume stays exact). ``sampling: random`` instead draws every window at a random offset
  (nanoGPT's sampling: windows overlap, and an epoch is a number of samples, not a partition),
  still from (seed, epoch, position) alone, so it is as deterministic and resumable.
* Batches: every step consumes ``dp * batch_size`` consecutive samples of the epoch's order;
  data-parallel rank r takes its ``batch_size`` of them; loader worker w makes the batches of the
  steps k with k % num_workers == w (DataLoader hands them back in step order).
* State: (epoch, samples consumed in the epoch). ``load_state_dict`` continues with exactly the
  batch the next step would have had, across epoch boundaries, and also under a different
  data-parallel degree (the consumed-sample count does not depend on it; a tail of the epoch too
  small for one step is skipped, as it would have been).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

SUPPORTED_SCHEMA_MAJOR = "1"


class DataError(ValueError):
    """The dataset is not something this trainer can read; the message says why."""


@dataclass
class TokenStream:
    tokens: np.ndarray          # uint32, memory-mapped
    vocab_size: int | None      # from the dataset's tokenizer, when it names one
    eos_id: int | None
    tokenizer_path: Path | None

    @classmethod
    def open(cls, dataset: str | Path, cache_dir: str | Path, *, verify: bool = True, build: bool = True) -> "TokenStream":
        from corpusforge.io.dataset import Dataset
        from corpusforge.errors import CorpusforgeError

        try:
            ds = Dataset.open(dataset)
        except CorpusforgeError as exc:
            raise DataError(str(exc)) from None
        if ds.schema_name != "text":
            raise DataError(f"{dataset}: a {ds.schema_name} dataset; the trainer reads text datasets with token_ids")
        if ds.schema_version.split(".")[0] != SUPPORTED_SCHEMA_MAJOR:
            raise DataError(f"{dataset}: text schema v{ds.schema_version}; this trainer reads v{SUPPORTED_SCHEMA_MAJOR}.x")
        names = {c["name"] for c in ds.manifest.get("columns", [])}
        if "token_ids" not in names or not any(s.get("tokens") for s in ds.manifest.get("sources", {}).values()):
            raise DataError(f"{dataset}: no token_ids (run the text.tokenize stage first)")
        key = hashlib.sha256("".join(s["sha256"] for s in ds.manifest["shards"]).encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"tokens-{key}.npy"
        if not path.exists():
            if not build:
                raise DataError(f"token cache {path} missing (rank 0 builds it)")
            _build_cache(ds, path, verify)
        tokens = np.load(path, mmap_mode="r")
        vocab = eos = tok_path = None
        if ds.manifest.get("artifacts", {}).get("tokenizer"):
            from tokenizers import Tokenizer

            if ds.store.is_local:
                tok_path = ds.root / ds.manifest["artifacts"]["tokenizer"]
            else:                          # an object-store dataset: keep a copy beside the token cache
                tok_path = Path(cache_dir) / f"tokenizer-{key}.json"
                if not tok_path.exists():
                    from corpusforge.io.atomic import write_bytes

                    write_bytes(tok_path, ds.artifact_bytes("tokenizer"))   # atomic: every rank may do this
            tok = Tokenizer.from_file(str(tok_path))
            vocab, eos = tok.get_vocab_size(), tok.token_to_id("<|endoftext|>")
        return cls(tokens, vocab, eos, tok_path)


def _build_cache(ds, path: Path, verify: bool) -> None:
    import pyarrow.compute as pc

    path.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(len(ds.manifest["shards"])):
        total += int(pc.sum(ds.read_shard(i, columns=["n_tokens"]).column(0)).as_py() or 0)
    tmp = path.with_name(path.name + ".tmp.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint32, shape=(total,))
    at = 0
    for i in range(len(ds.manifest["shards"])):
        col = ds.read_shard(i, columns=["token_ids"], verify=verify).column(0).combine_chunks()
        values = col.values.to_numpy(zero_copy_only=False)
        out[at:at + len(values)] = values
        at += len(values)
    if at != total:
        raise DataError(f"{ds.root}: n_tokens says {total} tokens, token_ids hold {at}")
    out.flush()
    del out
    tmp.replace(path)


@dataclass
class PackedSequences:
    """Fixed-length training windows over a token range (no padding)."""

    tokens: np.ndarray
    seq_len: int
    start: int
    end: int

    def __len__(self) -> int:
        # one window fewer than fits, so that every packing offset in [0, seq_len) has as many
        return max(0, (self.end - self.start - 1) // self.seq_len - 1)

    def get(self, indices: np.ndarray, shift: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        return self.get_starts(self.start + shift + indices.astype(np.int64) * self.seq_len)

    def get_starts(self, starts: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        windows = np.stack([np.asarray(self.tokens[s:s + self.seq_len + 1], dtype=np.int64) for s in starts])
        w = torch.from_numpy(windows)
        return w[:, :-1], w[:, 1:]


def split(tokens: np.ndarray, seq_len: int, val_fraction: float) -> tuple[PackedSequences, PackedSequences]:
    cut = int(len(tokens) * (1 - val_fraction))
    return PackedSequences(tokens, seq_len, 0, cut), PackedSequences(tokens, seq_len, cut, len(tokens))


class Batches:
    """The deterministic batch schedule: which samples step k gives to data-parallel rank r."""

    def __init__(self, n_samples: int, batch_size: int, dp_rank: int, dp_size: int, seed: int, shuffle_window: int,
                 seq_len: int = 1, epoch_shift: bool = False, random_windows: bool = False):
        self.n, self.b, self.rank, self.dp = n_samples, batch_size, dp_rank, dp_size
        self.seed, self.window = seed, shuffle_window
        self.seq_len, self.epoch_shift, self.random_windows = seq_len, epoch_shift, random_windows
        self.per_step = batch_size * dp_size
        if self.per_step > n_samples:
            raise DataError(f"one step needs {self.per_step} sequences (batch_size x data-parallel degree), "
                            f"the split has {n_samples}")

    def order(self, epoch: int) -> np.ndarray:
        idx = np.arange(self.n)
        if self.window > 1:
            rng = np.random.default_rng([self.seed, epoch])
            for lo in range(0, self.n, self.window):
                rng.shuffle(idx[lo:lo + self.window])
        return idx

    def shift(self, epoch: int) -> int:
        """Offset of the packing grid in this epoch: epoch 0 starts at 0, later epochs at a
        seeded offset, so that a second pass sees different windows of the same text."""
        if not self.epoch_shift or epoch == 0:
            return 0
        return int(np.random.default_rng([self.seed, epoch, 1]).integers(self.seq_len))

    def positions(self, epoch: int, consumed: int) -> Iterator[tuple[int, int]]:
        """(epoch, first sample of the step) for every step from this state on."""
        while True:
            if consumed + self.per_step > self.n:
                epoch, consumed = epoch + 1, 0
            yield epoch, consumed
            consumed += self.per_step

    def indices(self, order: np.ndarray, consumed: int) -> np.ndarray:
        lo = consumed + self.rank * self.b
        return order[lo:lo + self.b]


class _WorkerBatches(torch.utils.data.IterableDataset):
    def __init__(self, seqs: PackedSequences, sched: Batches, epoch: int, consumed: int):
        self.seqs, self.sched, self.epoch, self.consumed = seqs, sched, epoch, consumed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        cached_epoch, order = None, None
        for k, (epoch, pos) in enumerate(self.sched.positions(self.epoch, self.consumed)):
            if k % nw != wid:
                continue
            if self.sched.random_windows:
                # every step draws dp x batch windows at random offsets, from (seed, epoch, position)
                # alone: the same draw whatever the data-parallel degree; each rank takes its slice
                span = self.seqs.end - self.seqs.start - self.seqs.seq_len - 1
                draw = np.random.default_rng([self.sched.seed, epoch, pos]).integers(0, span, self.sched.per_step)
                yield self.seqs.get_starts(self.seqs.start + self.sched.indices(draw, 0))
                continue
            if epoch != cached_epoch:
                cached_epoch, order, shift = epoch, self.sched.order(epoch), self.sched.shift(epoch)
            yield self.seqs.get(self.sched.indices(order, pos), shift)


class TokenLoader:
    """An endless, resumable iterator of (inputs, targets) batches for one data-parallel rank."""

    def __init__(self, seqs: PackedSequences, batch_size: int, dp_rank: int = 0, dp_size: int = 1, seed: int = 0,
                 shuffle_window: int = 0, num_workers: int = 0, epoch_shift: bool = False, random_windows: bool = False):
        self.seqs = seqs
        self.sched = Batches(len(seqs), batch_size, dp_rank, dp_size, seed, shuffle_window, seqs.seq_len, epoch_shift,
                             random_windows)
        self.num_workers = num_workers
        self.epoch, self.consumed = 0, 0
        self._it = None

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "consumed": self.consumed, "samples": self.sched.n}

    def load_state_dict(self, state: dict) -> None:
        if state.get("samples", self.sched.n) != self.sched.n:
            raise DataError(f"the checkpoint's data has {state['samples']} training sequences, this run's has "
                            f"{self.sched.n}: same dataset, seq_len and val_fraction are needed to resume")
        self.epoch, self.consumed = state["epoch"], state["consumed"]
        self._it = None

    def __iter__(self):
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._it is None:
            ds = _WorkerBatches(self.seqs, self.sched, self.epoch, self.consumed)
            self._it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=self.num_workers,
                                                        persistent_workers=False))
            self._steps = self.sched.positions(self.epoch, self.consumed)
        batch = next(self._it)
        epoch, pos = next(self._steps)
        self.epoch, self.consumed = epoch, pos + self.sched.per_step
        return batch

