"""Tokenizers: training (``corpusforge train-tokenizer``) and the ``text.tokenize`` stage.

Tokenizers are byte-level (GPT-2 style): text is UTF-8 bytes mapped to printable symbols before
the model sees it, so every script, emoji and control character round-trips exactly:
``decode(encode(text)) == text``. No Unicode normalizer runs inside the tokenizer (normalization
is the pipeline's ``text.normalize`` stage, visible and configurable).

* ``bpe`` (default): byte-level BPE.
* ``unigram``: SentencePiece-style unigram LM over the same byte-level symbols.
* ``char``: one token per character of the training text (not byte-level: unseen characters
  become [UNK]); for character-level models such as nanoGPT's Shakespeare.
* ``wordpiece``: WordPiece over byte-level symbols; continuation pieces carry the prefix
  U+2581 (never a byte-level symbol), which the decoder removes, and every byte symbol is in
  the vocabulary in both positions (up to 256 extra entries), so it round-trips too.

The ``text.tokenize`` stage encodes with ``encode_batch_fast`` (no offsets: the trainer needs
ids only), appends the document-end token, and writes ``token_ids`` (list<uint32>) and
``n_tokens``. The tokenizer file is copied into the output dataset and named in its manifest
(``artifacts.tokenizer``); the manifest's ``sources`` then hold tokens per source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np
import pyarrow as pa
from pydantic import Field

if TYPE_CHECKING:
    from tokenizers import Tokenizer

from corpusforge.errors import ConfigError
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split

EOS = "<|endoftext|>"
PAD = "<|pad|>"
WORDPIECE_PREFIX = "\u2581"
MAX_WORD = 1 << 30   # WordPiece maps longer "words" to [UNK] (default 100): never


def build(model: str, vocab_size: int, special_tokens: list[str], min_frequency: int = 2):
    """An untrained byte-level tokenizer and its trainer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if model == "bpe":
        tok = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=special_tokens, initial_alphabet=alphabet, show_progress=False)
        tok.decoder = decoders.ByteLevel()
    elif model == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                          initial_alphabet=alphabet, unk_token=None, show_progress=False)
        tok.decoder = decoders.ByteLevel()
    elif model == "char":
        # one token per character seen in training (nanoGPT's char-level Shakespeare); characters
        # never seen map to [UNK], so this one round-trips only text over the training alphabet
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        trainer = trainers.WordLevelTrainer(vocab_size=1 << 24, min_frequency=1,
                                            special_tokens=special_tokens + ["[UNK]"], show_progress=False)
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        return tok, trainer
    elif model == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=WORDPIECE_PREFIX,
                                         max_input_chars_per_word=MAX_WORD))
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                            special_tokens=special_tokens + ["[UNK]"], initial_alphabet=alphabet,
                                            continuing_subword_prefix=WORDPIECE_PREFIX, show_progress=False)
        tok.decoder = decoders.Sequence([decoders.Replace(WORDPIECE_PREFIX, ""), decoders.ByteLevel()])
    else:
        raise ConfigError(f"tokenizer model {model!r}: expected bpe, unigram, wordpiece or char")
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return tok, trainer


def train(texts: Iterable[str], *, model: str = "bpe", vocab_size: int = 32_000,
          special_tokens: tuple[str, ...] = (EOS, PAD), min_frequency: int = 2, length: int | None = None):
    tok, trainer = build(model, vocab_size, list(special_tokens), min_frequency)
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    if model == "wordpiece":
        _complete_wordpiece(tok)
    return tok


def _complete_wordpiece(tok) -> None:
    """Give WordPiece every byte symbol in both positions (word start and continuation), so
    no input ever becomes [UNK]: the vocabulary grows by at most 256 entries."""
    from tokenizers import models, pre_tokenizers

    vocab = tok.get_vocab()
    for ch in pre_tokenizers.ByteLevel.alphabet():
        for piece in (ch, WORDPIECE_PREFIX + ch):
            if piece not in vocab:
                vocab[piece] = len(vocab)
    tok.model = models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix=WORDPIECE_PREFIX,
                                 max_input_chars_per_word=MAX_WORD)


def train_for_dataset(dataset_dir: str | Path, *, out: str | Path | None = None, **kw) -> tuple[str, Tokenizer]:
    """Train on a dataset's ``text`` column (streamed), save the tokenizer beside the dataset
    (or at the local path ``out``) and, beside it, name it in the dataset's manifest. The dataset
    may be on an object store; returns where the tokenizer was written, and the tokenizer."""
    from corpusforge.io.dataset import MANIFEST, Dataset, write_manifest

    ds = Dataset.open(dataset_dir)
    if ds.schema_name != "text":
        raise ConfigError(f"{dataset_dir}: a {ds.schema_name} dataset has no text to train a tokenizer on")

    def texts():
        for batch in ds.iter_batches(columns=["text"], batch_size=8192):
            yield from batch.column(0).to_pylist()

    tok = train(texts(), length=ds.num_rows, **kw)
    store = ds.store
    if out and not (store.is_local and Path(out).resolve().parent == Path(store.root).resolve()):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(out))
        return str(out), tok
    name = Path(out).name if out else "tokenizer.json"
    store.write_bytes(store.join(name), tok.to_str(pretty=True).encode())
    manifest = json.loads(store.read_bytes(store.join(MANIFEST)))
    manifest.setdefault("artifacts", {})["tokenizer"] = name
    write_manifest(store.root, manifest, store=store)
    return store.display(store.join(name)), tok


def load_tokenizer(path: str, stage: str) -> "Tokenizer":
    """A ``tokenizers`` file from a local path or a URL; a file that does not load is a config
    error naming the stage's ``tokenizer`` field."""
    from tokenizers import Tokenizer

    from corpusforge.io.readers.base import input_path

    try:
        return Tokenizer.from_str(input_path(path).read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises plain Exception
        raise ConfigError(f"{stage}: cannot load tokenizer {path!r}: {exc}") from None


class TokenizeConfig(StageConfig):
    tokenizer: str = Field(description="tokenizer.json from `corpusforge train-tokenizer` (or any `tokenizers` file); "
                           "a local path or a URL (s3://...), which every worker reads.")
    eos_token: str | None = Field(EOS, description="Appended to every document (null: none).")
    max_tokens: int | None = Field(None, gt=0, description="Reject documents longer than this many tokens.")


class Tokenize(Stage):
    name = "text.tokenize"
    kinds = ("text",)
    Config = TokenizeConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {}          # token_ids and n_tokens are fields of the text schema

    def artifacts(self) -> dict[str, Path]:
        from corpusforge.io.readers.base import input_path

        return {"tokenizer": input_path(self.config.tokenizer)}

    def _load(self):
        if getattr(self, "_tok", None) is None:
            self._tok = load_tokenizer(self.config.tokenizer, self.name)
            self._eos = None
            if self.config.eos_token is not None:
                self._eos = self._tok.token_to_id(self.config.eos_token)
                if self._eos is None:
                    raise ConfigError(f"{self.name}: {self.config.eos_token!r} is not in the tokenizer's vocabulary "
                                      f"(set eos_token to one of its special tokens, or null)")
        return self._tok

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        tok = self._load()
        texts = table.column("text").to_pylist()
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        encodings = encode(texts, add_special_tokens=False)
        token_ids = ids_to_arrow([e.ids for e in encodings], self._eos)
        n_tokens = pa.array(np.diff(token_ids.offsets.to_numpy()), pa.int64())
        table = set_columns(table, {"token_ids": token_ids, "n_tokens": n_tokens})
        stats.counters["tokens"] += int(pa.compute.sum(n_tokens).as_py() or 0)
        reason, detail = too_many_tokens(n_tokens, self.config.max_tokens)
        return split(table, reason, detail, stats)


def set_columns(table: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """Replace these columns, or add them: readers leave the schema's optional fields out."""
    for name, values in columns.items():
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, values) if i >= 0 else table.append_column(name, values)
    return table


def too_many_tokens(n_tokens: pa.Array, max_tokens: int | None) -> tuple[pa.Array, pa.Array | None]:
    """(reason, detail) rejecting documents over ``max_tokens`` (null n_tokens pass)."""
    if not max_tokens:
        return pa.nulls(len(n_tokens), pa.string()), None
    too_long = pa.compute.fill_null(pa.compute.greater(n_tokens, max_tokens), False)
    reason = pa.compute.if_else(too_long, "too_many_tokens", pa.scalar(None, pa.string()))
    detail = pa.compute.if_else(too_long, pa.compute.binary_join_element_wise(
        pa.compute.cast(n_tokens, pa.string()), pa.scalar(f"> max_tokens {max_tokens}"), " "),
        pa.scalar(None, pa.string()))
    return reason, detail


def ids_to_arrow(ids: list[list[int]], eos: int | None) -> pa.ListArray:
    """list<uint32> from Python lists of ids (with ``eos`` appended), built from one flat
    numpy array: no per-element Python objects in Arrow's converter."""
    from itertools import chain

    extra = 0 if eos is None else 1
    lengths = np.fromiter((len(x) + extra for x in ids), dtype=np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if eos is None:
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.uint32, count=int(offsets[-1]))
    else:
        flat = np.fromiter(chain.from_iterable(x + [eos] for x in ids), dtype=np.uint32, count=int(offsets[-1]))
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat))
    raise ValueError("more than 2**31 tokens in one batch: lower batch_rows")
