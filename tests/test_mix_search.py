"""corpusforge mix search: candidates under caps, the fit on a known optimum, the holdout split,
a whole search end to end (its mix config accepted by corpusforge mix), and a killed search that
resumes to the same result without retraining finished proxies."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
import yaml

from corpusforge import schemas
from corpusforge.errors import ConfigError
from corpusforge.io.dataset import Dataset, build_manifest, write_manifest
from corpusforge.io.readers.base import text_table
from corpusforge.io.writer import ShardWriter, WriterOptions
from corpusforge.mix.build import build as build_mix
from corpusforge.mix.build import heldout_mask, index_source
from corpusforge.mix.config import Holdout
from corpusforge.mix.config import from_dict as mix_config
from corpusforge.mix.search import candidates as cands
from corpusforge.mix.search.config import FitConfig, from_dict
from corpusforge.mix.search.fit import choose
from corpusforge.mix.search.run import search

NAMES = ["a", "b", "c"]
VOCAB = 64


def make_source(path, name: str, n_docs: int, low: int, high: int, seed: int) -> None:
    """A tokenized text dataset whose documents repeat short patterns of token ids in [low, high):
    each source its own little language, so the mixture changes what a model learns."""
    rng = np.random.default_rng(seed)
    motifs = [rng.integers(low, high, 4) for _ in range(6)]
    docs = []
    for _ in range(n_docs):
        k = int(rng.integers(20, 60))
        seq = np.concatenate([motifs[int(rng.integers(0, 6))] for _ in range(k // 4)])
        docs.append([int(t) for t in seq] + [VOCAB - 1])
    t = text_table(name, [f"{name} document {i}" for i in range(n_docs)])
    t = t.append_column("token_ids", pa.array(docs, pa.list_(pa.uint32())))
    t = t.append_column("n_tokens", pa.array([len(d) for d in docs], pa.int64()))
    record = schemas.load("text")
    target = schemas.dataset_schema(record, {})
    w = ShardWriter(path, "part-00000", target, WriterOptions(shard_rows=max(1, n_docs // 2)))
    w.write(t)
    write_manifest(path, build_manifest(schema=record, target=target, shards=w.close(), dataset="kept", config_hash="x",
                                        lineage={}, sources={name: {"rows": n_docs, "tokens": sum(map(len, docs))}}))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search_src")
    make_source(tmp / "a", "a", 200, 0, 20, 1)
    make_source(tmp / "b", "b", 200, 20, 40, 2)
    make_source(tmp / "c", "c", 200, 40, 63, 3)
    return tmp


def search_raw(tmp, out: str, **kw) -> dict:
    raw = {"name": "t", "sources": {n: {"path": str(tmp / n), "max_epochs": 4} for n in NAMES},
           "targets": {"a": {"source": "a", "weight": 0.8}, "b": {"source": "b", "weight": 0.2}},
           "holdout": {"fraction": 0.15}, "budget": 20000,
           "candidates": {"n": 7, "seed": 0},
           "proxy": {"train": {"model": {"n_layer": 1, "n_head": 2, "d_model": 32, "seq_len": 32, "vocab_size": VOCAB},
                               "optim": {"lr": 1e-2, "warmup_steps": 2}, "batch_size": 4, "steps": 12, "log_every": 6}},
           "fit": {"samples": 4000, "top_k": 20, "folds": 3},
           "refine": {"n": 2},
           "verify": {"seeds": [0]},
           "output": {"path": str(tmp / out)}}
    raw.update(kw)
    return raw


# ---- candidates -------------------------------------------------------------------------------------

def test_caps_come_from_available_tokens_max_epochs_and_budget():
    cap = cands.caps({"a": 1000, "b": 100, "c": 10}, {"a": 1, "b": 2, "c": 4}, budget=1000)
    assert cap == {"a": 1.0, "b": 0.2, "c": 0.04}
    with pytest.raises(ConfigError, match="budget"):
        cands.caps({"a": 100, "b": 100}, {"a": 1, "b": 1}, budget=1000)      # 200 tokens can't fill 1000


def test_candidates_stay_under_caps_and_include_the_baselines():
    available = {"a": 100_000, "b": 5_000, "c": 1_000}
    cap = cands.caps(available, {"a": 1, "b": 2, "c": 4}, budget=50_000)      # b <= 0.2, c <= 0.08
    cfg = SimpleNamespace(n=40, prior="uniform", concentration=1.0, temperature=1.0, seed=3)
    out = cands.candidates(NAMES, available, cap, cfg)
    assert [c["id"] for c in out[-2:]] == ["uniform", "temperature1"]
    assert len(out) == 42 and len({c["id"] for c in out}) == 42
    for c in out:
        w = c["weights"]
        assert abs(sum(w.values()) - 1) < 1e-9
        assert all(w[n] <= cap[n] + 1e-9 for n in NAMES), c
    uniform = out[-2]["weights"]                      # 1/3 each would break b's and c's caps: projected
    assert uniform["b"] == pytest.approx(0.2) and uniform["c"] == pytest.approx(0.08)
    assert uniform["a"] == pytest.approx(0.72)
    temp = out[-1]["weights"]                          # T=1: token shares 0.94/0.05/0.01 are under the caps
    assert temp["a"] == pytest.approx(100 / 106) and temp["c"] == pytest.approx(1 / 106)
    again = cands.candidates(NAMES, available, cap, cfg)
    assert again == out                                # seeded: a resumed search draws the same candidates


def test_projection_keeps_a_mixture_and_respects_caps():
    rng = np.random.default_rng(0)
    cap = np.array([0.5, 0.3, 0.4])
    w = cands.project(rng.dirichlet(np.ones(3) * 0.3, size=500), cap)
    assert np.allclose(w.sum(axis=1), 1) and (w <= cap + 1e-9).all() and (w >= 0).all()
    inside = np.array([0.4, 0.3, 0.3])
    assert np.allclose(cands.project(inside, cap), inside)


# ---- the fit finds a known optimum -------------------------------------------------------------------

def synthetic_loss(w: np.ndarray, optimum: np.ndarray, rng) -> np.ndarray:
    d = w - optimum
    return 3.0 + 4.0 * (d ** 2).sum(axis=1) + 2.0 * d[:, 0] * d[:, 1] + rng.normal(0, 0.003, len(w))


@pytest.mark.parametrize("optimum", [[0.6, 0.25, 0.15], [0.2, 0.5, 0.3]])
def test_the_search_finds_a_known_optimum(optimum):
    optimum = np.array(optimum)
    rng = np.random.default_rng(1)
    cap = np.ones(3)
    cfg = SimpleNamespace(n=20, prior="uniform", concentration=1.0, temperature=2.0, seed=0)
    cs = cands.candidates(NAMES, {n: 1000 for n in NAMES}, dict(zip(NAMES, cap)), cfg)
    X = np.array([[c["weights"][n] for n in NAMES] for c in cs])
    chosen = choose(X, synthetic_loss(X, optimum, rng), cap, np.full(3, 1 / 3), FitConfig(samples=20000, top_k=50))
    assert chosen["model"] == "quadratic"              # the only one of the three that can curve
    assert np.abs(chosen["weights"] - optimum).sum() < 0.08, chosen["weights"]
    assert {s["model"] for s in chosen["cv"]} == {"linear", "quadratic", "gbt"}
    assert chosen["cv"][1]["spearman"] > 0.8


def test_the_choice_respects_caps_when_the_optimum_lies_beyond_one():
    optimum = np.array([0.7, 0.2, 0.1])
    cap = np.array([0.5, 1.0, 1.0])
    cfg = SimpleNamespace(n=20, prior="uniform", concentration=1.0, temperature=2.0, seed=0)
    cs = cands.candidates(NAMES, {n: 1000 for n in NAMES}, dict(zip(NAMES, cap)), cfg)
    X = np.array([[c["weights"][n] for n in NAMES] for c in cs])
    chosen = choose(X, synthetic_loss(X, optimum, np.random.default_rng(2)), cap, np.full(3, 1 / 3),
                    FitConfig(samples=20000, top_k=50))
    assert chosen["weights"][0] <= 0.5 + 1e-9
    assert chosen["weights"][0] > 0.42                  # pressed against the cap, where the optimum lies


# ---- the holdout split -------------------------------------------------------------------------------

def test_holdout_parts_are_disjoint_complete_and_stable(sources):
    ids = [f"doc-{i}" for i in range(5000)]
    mask = heldout_mask(ids, 0.1, seed=0)
    assert 0.08 < mask.mean() < 0.12
    assert (heldout_mask(ids[::-1], 0.1, seed=0) == mask[::-1]).all()       # by id, not by position
    assert (heldout_mask(ids, 0.1, seed=1) != mask).any()
    train = index_source("a", str(sources / "a"), None, Holdout(fraction=0.2))
    held = index_source("a", str(sources / "a"), None, Holdout(fraction=0.2, part="heldout"))
    whole = index_source("a", str(sources / "a"), None)
    assert train.rows.height + held.rows.height == whole.rows.height
    tr = set(zip(train.rows["shard"], train.rows["row"]))
    assert not tr & set(zip(held.rows["shard"], held.rows["row"]))
    # a mix with the holdout never contains a held-out document, even when it repeats the source
    out = sources / "mix_holdout"
    build_mix(mix_config({"name": "h", "sources": {"a": {"path": str(sources / "a"), "weight": 1.0, "max_epochs": 3,
                                                         "holdout": {"fraction": 0.2}}},
                          "budget": 2 * train.available, "output": {"path": str(out)}}))
    mixed = set(Dataset.open(out).read(columns=["id"]).column(0).to_pylist())
    held_ids = set(held.rows["id"].to_list())
    assert mixed and not mixed & held_ids


# ---- configs -----------------------------------------------------------------------------------------

def test_config_errors_name_the_field(sources, tmp_path):
    raw = search_raw(sources, "x")
    raw["sources"]["a"]["weight"] = 0.5
    with pytest.raises(ConfigError, match=r"sources\.a\.weight"):
        from_dict(raw)
    raw = search_raw(sources, "x", targets={"z": {"source": "nope"}})
    with pytest.raises(ConfigError, match=r"targets\.z\.source"):
        from_dict(raw)
    raw = search_raw(sources, "x")
    raw["proxy"]["train"]["model"]["n_layr"] = 2
    with pytest.raises(ConfigError, match=r"proxy\.train\.model\.n_layr"):
        from_dict(raw)
    with pytest.raises(ConfigError, match=r"verify\.model\.d_model"):
        from_dict(search_raw(sources, "x", verify={"model": {"d_model": "big"}}))
    raw = search_raw(sources, "x")
    raw["proxy"]["train"]["model"]["d_model"] = 30                   # 30 dims cannot split into 4 heads
    raw["proxy"]["train"]["model"]["n_head"] = 4
    with pytest.raises(ConfigError, match=r"proxy\.train\.model: d_model 30 is not divisible by n_head 4"):
        from_dict(raw)
    # a target slice with no documents names the target
    raw = search_raw(sources, str(tmp_path / "empty"), holdout={"fraction": 1e-6})
    with pytest.raises(ConfigError, match=r"targets\.a: no rows .* heldout part"):
        search(from_dict(raw), log=lambda *_: None)


def test_a_failed_proxy_is_trained_again_on_resume(tmp_path):
    from corpusforge.mix.search.proxy import RESULT, measured

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / RESULT).write_text(json.dumps({"id": "p", "error": "RuntimeError: out of memory"}))
    assert not measured(tmp_path / "p")
    (tmp_path / "p" / RESULT).write_text(json.dumps({"id": "p", "target_loss": 3.0}))
    assert measured(tmp_path / "p") and not measured(tmp_path / "missing")


# ---- a whole search ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def searched(sources):
    cfg = from_dict(search_raw(sources, "search_a"))
    lines = []
    result = search(cfg, log=lines.append)
    return cfg, result, lines


def test_a_search_end_to_end(sources, searched):
    cfg, result, lines = searched
    out = sources / "search_a"
    assert len(result["proxies"]) == 11 and not [p for p in result["proxies"] if "error" in p]
    assert [p["kind"] for p in result["proxies"]].count("refined") == 2       # the second round
    assert {p["id"] for p in result["proxies"] if p["kind"] == "baseline"} == {"uniform", "temperature2"}
    # every proxy trained on the same token budget, evaluated on both target sets
    assert len({p["tokens"] for p in result["proxies"]}) == 1
    assert all(set(p["target_losses"]) == {"a", "b"} for p in result["proxies"])
    # the target is mostly source a's language: the choice leans to a (the prior's share is 1/3)
    assert result["chosen"]["a"] > 0.4, result["chosen"]
    assert result["chosen"]["a"] <= result["sources"]["a"]["cap"] + 1e-6
    assert {s["model"] for s in result["fit"]["cv"]} == {"linear", "quadratic", "gbt"}
    v = result["verification"]
    assert set(v["mixtures"]) == {"chosen", "uniform", "temperature2"}
    assert all(m["mean"] is not None for m in v["mixtures"].values())
    params = {p["id"]: p["params"] for p in v["runs"]}
    assert params["chosen-s0"] > 1.2 * result["proxies"][0]["params"]        # twice the depth
    html = (out / "report.html").read_text()
    assert "Loss landscape per source" in html and "Spearman" in html and "<svg" in html
    assert json.loads((out / "search.json").read_text())["chosen"] == result["chosen"]
    # the mix config is what corpusforge mix takes, with the holdout kept for the target sources
    text = (out / "mix.yaml").read_text()
    assert text.startswith("# chosen by corpusforge mix search t (11 proxies")
    assert "# predicted target loss at the proxies' size" in text and "# verification: chosen" in text
    mix = yaml.safe_load(text)
    assert mix["sources"]["a"]["holdout"]["part"] == "train" and "holdout" not in mix["sources"]["c"]
    assert sum(s["weight"] for s in mix["sources"].values()) == pytest.approx(1, abs=1e-6)
    stats = build_mix(mix_config(mix))
    achieved = {n: s["achieved_share"] for n, s in stats["mixture"]["sources"].items()}
    assert achieved["a"] == pytest.approx(result["chosen"]["a"], abs=0.03)
    # the held-out target documents stayed out of the final mix
    held = index_source("a", str(sources / "a"), None, Holdout(fraction=0.15, part="heldout"))
    mixed = set(Dataset.open(mix["output"]["path"]).read(columns=["id"]).column(0).to_pylist())
    assert not mixed & set(held.rows["id"].to_list())


def test_a_different_config_in_the_same_folder_is_refused(sources, searched):
    raw = search_raw(sources, "search_a", candidates={"n": 8, "seed": 0})
    with pytest.raises(ConfigError, match="output.path"):
        search(from_dict(raw), log=lambda *_: None)


def test_a_killed_search_resumes_without_retraining_and_ends_the_same(sources, searched, tmp_path):
    _, reference, _ = searched
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(search_raw(sources, "search_b")))
    out = sources / "search_b"
    cmd = [sys.executable, "-m", "corpusforge", "mix", "search", str(path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(list((out / "proxies").glob("*/result.json"))) < 3:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.parent.name: (p.stat().st_mtime_ns, p.read_text()) for p in (out / "proxies").glob("*/result.json")}
    assert 3 <= len(done) < 11, "the search must be killed part-way"
    assert not (out / "search.json").exists()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(done)} of 9 proxies already measured (resumed)" in again.stdout + again.stderr   # round 1
    for name, (mtime, text) in done.items():          # finished proxies were kept, not trained again
        result = out / "proxies" / name / "result.json"
        assert result.stat().st_mtime_ns == mtime and result.read_text() == text
    resumed = json.loads((out / "search.json").read_text())
    assert {p["id"]: p["target_loss"] for p in resumed["proxies"]} == \
        {p["id"]: p["target_loss"] for p in reference["proxies"]}
    assert resumed["chosen"] == pytest.approx(reference["chosen"])


def test_the_readme_search_config_and_the_demo_config_are_valid():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("### Choosing the mixture"):]
    block = section[section.index("```yaml") + 7: section.index("```", section.index("```yaml") + 7)]
    cfg = from_dict(yaml.safe_load(block))
    assert set(cfg.targets) == {"zh_wiki", "en_plays", "qa"} and cfg.verify.seeds == [0, 1, 2]
    demo = from_dict(yaml.safe_load((root / "data_samples/configs/demo_mix_search.yaml").read_text()))
    assert demo.parallel.workers == 2
