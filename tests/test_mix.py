"""Mixing proportions, curriculum order, and the errors for impossible requests."""

import json

import numpy as np
import pyarrow as pa
import pytest

from corpusforge import schemas
from corpusforge.errors import ConfigError, CorpusforgeError
from corpusforge.io.dataset import Dataset, build_manifest, write_manifest
from corpusforge.io.readers.base import text_table
from corpusforge.io.writer import ShardWriter, WriterOptions
from corpusforge.mix.build import build
from corpusforge.mix.config import from_dict


def make_source(path, name: str, n_docs: int, mean_tokens: int, seed: int):
    """A tokenized text dataset with documents of varied length and a quality score."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(mean_tokens // 4, mean_tokens * 2, n_docs)
    t = text_table(name, [f"{name} document {i}" for i in range(n_docs)])
    t = t.append_column("token_ids", pa.array([list(range(k)) for k in lengths], pa.list_(pa.uint32())))
    t = t.append_column("n_tokens", pa.array(lengths, pa.int64()))
    t = t.append_column("score_quality", pa.array(rng.random(n_docs)))
    record = schemas.load("text")
    target = schemas.dataset_schema(record, {"score_quality": pa.float64()})
    w = ShardWriter(path, "part-00000", target, WriterOptions(shard_rows=max(1, n_docs // 3)))
    w.write(t)
    shards = w.close()
    write_manifest(path, build_manifest(schema=record, target=target, shards=shards, dataset="kept", config_hash="x",
                                        lineage={}, sources={name: {"rows": n_docs, "tokens": int(lengths.sum())}}))
    return int(lengths.sum())


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("src")
    sizes = {"web": make_source(tmp / "web", "web", 4000, 300, 1),       # ~1.2M tokens
             "books": make_source(tmp / "books", "books", 300, 900, 2),  # ~0.3M
             "code": make_source(tmp / "code", "code", 500, 200, 3)}     # ~0.1M
    return tmp, sizes


WEIGHTS = {"web": 0.5, "books": 0.3, "code": 0.2}


def cfg(tmp, weights=None, **kw):
    raw = {"name": "m", "sources": {n: {"path": str(tmp / n), **({"weight": weights[n]} if weights else {})}
                                    for n in ("web", "books", "code")},
           "output": {"path": str(tmp / "out")}, "seed": 0}
    for key, value in kw.items():
        raw[key] = value
    return from_dict(raw)


def test_achieved_shares_within_one_percent_on_a_million_tokens(sources):
    tmp, sizes = sources
    c = cfg(tmp, WEIGHTS, budget=1_000_000)
    stats = build(c)
    mix = stats["mixture"]["sources"]
    for n, w in (("web", 0.5), ("books", 0.3), ("code", 0.2)):
        assert abs(mix[n]["achieved_share"] - w) < 0.01, mix
    assert abs(sum(m["achieved"] for m in mix.values()) - 1_000_000) < 0.01 * 1_000_000
    assert mix["code"]["repeats"] > 1.5              # upsampled: 200k of ~100k available
    assert mix["web"]["repeats"] < 0.5               # downsampled
    ds = Dataset.open(tmp / "out")
    assert ds.verify() == [] and ds.manifest["mixture"]["sources"]["code"]["achieved"] == mix["code"]["achieved"]
    table = ds.read(columns=["tag_mix_source", "tag_mix_pass", "n_tokens"])
    tokens = {n: sum(t for s, t in zip(table.column(0).to_pylist(), table.column(2).to_pylist()) if s == n)
              for n in ("web", "books", "code")}
    assert tokens == {n: mix[n]["achieved"] for n in tokens}      # the shards hold what the manifest says
    # the same seed gives the same bytes
    first = (tmp / "out" / "part-00000-00000.parquet").read_bytes()
    build(c)
    assert (tmp / "out" / "part-00000-00000.parquet").read_bytes() == first


def test_temperature_sampling(sources):
    tmp, sizes = sources
    stats = build(cfg(tmp, temperature=2.0, budget=500_000))
    raw = {n: sizes[n] ** 0.5 for n in sizes}
    for n, m in stats["mixture"]["sources"].items():
        assert abs(m["requested_share"] - raw[n] / sum(raw.values())) < 1e-9
        assert abs(m["achieved_share"] - m["requested_share"]) < 0.01


def test_presets_by_domain(sources):
    tmp, _ = sources
    c = cfg(tmp, preset="continued_pretraining", budget=400_000)
    c.sources["books"].domain = "domain"
    with pytest.raises(ConfigError, match="domain 'code'|no share for domain"):
        build(cfg(tmp, preset="finetune"))
    stats = build(c)
    assert stats["mixture"]["sources"]["books"]["requested_share"] > stats["mixture"]["sources"]["web"]["requested_share"]


def test_curriculum_difficulty_rises_within_window_noise(sources):
    tmp, _ = sources
    c = cfg(tmp, WEIGHTS, budget=300_000, curriculum={"score": "n_tokens", "mode": "smooth", "window": 32, "noise": 0.05})
    build(c)
    d = np.array(Dataset.open(tmp / "out").read(columns=["n_tokens"]).column(0).to_pylist(), dtype=float)
    means = np.array([w.mean() for w in np.array_split(d, 20)])
    noise = 3 * d.std() / np.sqrt(len(d) / 20)               # sampling noise of a window mean
    assert np.all(np.diff(means) > -noise), means
    assert means[-1] > 2 * means[0]
    m = Dataset.open(tmp / "out").manifest
    assert m["order"]["kind"] == "curriculum" and m["order"]["score"] == "n_tokens"


def test_curriculum_by_expression_and_phases(sources):
    tmp, _ = sources
    c = cfg(tmp, temperature=1.0, curriculum={"score": "n_tokens * (1 - score_quality)", "mode": "phases", "window": 8,
                                              "phases": [{"tokens": 100_000, "weights": {"web": 0.8, "code": 0.2}},
                                                         {"tokens": 100_000, "weights": {"web": 0.3, "books": 0.7}}]})
    stats = build(c)
    table = Dataset.open(tmp / "out").read(columns=["tag_mix_source", "n_tokens"])
    src = table.column(0).to_pylist()
    end = stats["order"]["phases"][0]["rows_end"]
    assert "books" not in src[:end] and "code" not in src[end:]
    assert abs(stats["order"]["phases"][0]["units_end"] - 100_000) < 2_000


def test_impossible_requests_are_clear(sources):
    tmp, _ = sources
    with pytest.raises(ConfigError, match="sum to"):
        cfg(tmp, sources={"web": {"path": str(tmp / "web"), "weight": 0.7},
                          "code": {"path": str(tmp / "code"), "weight": 0.7}})
    with pytest.raises(ConfigError, match="unknown source 'blog'"):
        cfg(tmp, temperature=1.0, curriculum={"score": "n_tokens", "mode": "phases",
                                             "phases": [{"tokens": 10, "weights": {"blog": 1.0}}]})
    too_big = cfg(tmp, sources={"code": {"path": str(tmp / "code"), "weight": 1.0, "max_epochs": 1}},
                  budget=10_000_000)
    with pytest.raises(CorpusforgeError, match="max_epochs"):
        build(too_big)
    too_big.on_shortfall = "warn"
    stats = build(too_big, log=lambda m: None)
    assert stats["mixture"]["warnings"] and stats["mixture"]["sources"]["code"]["repeats"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="curriculum.score"):
        build(cfg(tmp, temperature=1.0, curriculum={"score": "no_such_column + 1"}))


def test_trainer_reads_the_curriculum_in_manifest_order(sources):
    tmp, _ = sources
    c = cfg(tmp, temperature=1.0, budget=200_000, curriculum={"score": "n_tokens", "mode": "sorted", "window": 1})
    build(c)
    from corpusforge.trainer.data import TokenStream

    stream = TokenStream.open(tmp / "out", tmp / "cache")
    ds = Dataset.open(tmp / "out")
    lengths = ds.read(columns=["n_tokens"]).column(0).to_pylist()
    assert lengths == sorted(lengths)
    assert len(stream.tokens) == sum(lengths)
    json.dumps(ds.manifest["mixture"])
