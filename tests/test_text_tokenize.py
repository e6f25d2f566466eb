import json

import pyarrow as pa
import pytest

from conftest import shared, text_config
from corpusforge import runner
from corpusforge.cli import main as cli
from corpusforge.errors import ConfigError
from corpusforge.io.dataset import Dataset
from corpusforge.stage import StageStats
from corpusforge.text.tokenize import EOS, Tokenize, train

SAMPLES = ["Hello, world!  Two  spaces.", "中文测试：你好，世界。", "mixed 中文 and English 😀👨\u200d👩\u200d👧",
           "ctrl\x00\x07\ttab\r\n\x1b[0m", "  leading and trailing  ", "ʻŌlelo Hawaiʻi – naïve café", "", "\n\n\n",
           "日本語のテキストと한국어 텍스트", "x" * 5000]


@pytest.fixture(scope="module")
def corpus():
    text = shared("text", "tinyshakespeare.txt").read_text().split("\n\n")[:2000]
    return text + shared("text", "zhwiki_sample.zh.txt").read_text().splitlines()[:1000]


@pytest.mark.parametrize("model", ["bpe", "unigram", "wordpiece"])
def test_round_trip_every_script(corpus, model):
    tok = train(corpus, model=model, vocab_size=1500)
    for s in SAMPLES:
        ids = tok.encode(s, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == s, (model, s)
    assert tok.token_to_id(EOS) is not None and tok.token_to_id("<|pad|>") is not None


def _dataset(tmp_path, texts):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    runner.run(text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "web"}],
                           tmp_path / "clean", [{"stage": "text.normalize"}]))
    return tmp_path / "clean"


def test_train_tokenizer_cli_names_it_in_the_manifest(tmp_path, corpus):
    ds = _dataset(tmp_path, corpus[:500])
    assert cli(["train-tokenizer", str(ds), "--vocab-size", "800"]) == 0
    m = Dataset.open(ds).manifest
    assert m["artifacts"]["tokenizer"] == "tokenizer.json" and (ds / "tokenizer.json").exists()
    assert Dataset.open(ds).verify() == []            # the manifest rewrite kept every checksum


def test_tokenize_stage_through_the_runner(tmp_path, corpus):
    ds = _dataset(tmp_path, corpus[:300])
    cli(["train-tokenizer", str(ds), "--vocab-size", "800"])
    cfg = text_config([{"format": "dataset", "paths": [str(ds)]}], tmp_path / "tok",
                      [{"stage": "text.tokenize", "tokenizer": str(ds / "tokenizer.json")}])
    summary = runner.run(cfg)
    out = Dataset.open(tmp_path / "tok")
    table = out.read()
    assert table.schema.field("token_ids").type == pa.list_(pa.uint32())
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    eos = tok.token_to_id(EOS)
    for row in table.to_pylist()[:50]:
        assert row["token_ids"][-1] == eos and row["n_tokens"] == len(row["token_ids"])
        assert tok.decode(row["token_ids"][:-1]) == row["text"]
    m = out.manifest
    assert m["artifacts"] == {"tokenizer": "tokenizer.json"}
    assert m["sources"]["web"]["tokens"] == sum(table.column("n_tokens").to_pylist())
    assert summary.stats["stages"]["00:text.tokenize"]["counters"]["tokens"] == m["sources"]["web"]["tokens"]
    # the dataset reader kept the upstream ids and provenance
    assert set(table.column("id").to_pylist()) <= set(Dataset.open(ds).read().column("id").to_pylist())


def test_tokenize_straight_after_a_reader(tmp_path, corpus):
    """Readers leave token_ids / n_tokens out of their tables: the stage adds them."""
    tok = train(corpus[:300], vocab_size=600)
    tok.save(str(tmp_path / "t.json"))
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus[:40]))
    cfg = text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "web"}], tmp_path / "tok",
                      [{"stage": "text.tokenize", "tokenizer": str(tmp_path / "t.json")}])
    summary = runner.run(cfg)
    table = Dataset.open(tmp_path / "tok").read()
    assert summary.kept_rows > 0 and table.column("n_tokens").to_pylist() == [len(t) for t in table.column("token_ids").to_pylist()]


def test_tokenize_errors_are_clear(tmp_path, corpus):
    stage = Tokenize(Tokenize.Config(tokenizer=str(tmp_path / "missing.json")))
    t = pa.table({"text": ["x"], "token_ids": pa.nulls(1, pa.list_(pa.uint32())), "n_tokens": pa.nulls(1, pa.int64())})
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        stage.process(t, StageStats())
    tok = train(corpus[:200], vocab_size=500, special_tokens=("<s>",))
    tok.save(str(tmp_path / "t.json"))
    with pytest.raises(ConfigError, match="not in the tokenizer's vocabulary"):
        Tokenize(Tokenize.Config(tokenizer=str(tmp_path / "t.json"))).process(t, StageStats())


def test_max_tokens_rejects_with_reason(tmp_path, corpus):
    tok = train(corpus[:200], vocab_size=500)
    tok.save(str(tmp_path / "t.json"))
    t = pa.table({"text": ["short", "word " * 500], "token_ids": pa.nulls(2, pa.list_(pa.uint32())),
                  "n_tokens": pa.nulls(2, pa.int64())})
    res = Tokenize(Tokenize.Config(tokenizer=str(tmp_path / "t.json"), max_tokens=100)).process(t, StageStats())
    assert res.kept.num_rows == 1 and res.rejected.column("reject_reason").to_pylist() == ["too_many_tokens"]


def test_dataset_reader_refuses_other_record_kinds(tmp_path, corpus):
    ds = _dataset(tmp_path, corpus[:10])
    cfg = {"name": "x", "kind": "image", "inputs": [{"format": "dataset", "paths": [str(ds)]}],
           "output": {"path": str(tmp_path / "o")}}
    with pytest.raises(ConfigError, match="holds text records"):
        runner.run(cfg)
