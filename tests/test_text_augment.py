import json

import pyarrow as pa
import pytest

from conftest import text_config
from corpusforge import runner
from corpusforge.io.dataset import Dataset
from corpusforge.stage import StageStats
from corpusforge.text.augment import Augment

EN = "The old engineers repaired the big bridge near the river. Many students studied the road. It was important."
ZH = "研究人员仔细地修复了港口的古老灯塔。学生们经常在这里工作。这个问题很重要。"


def _table(texts, ids=None):
    n = len(texts)
    return pa.table({"id": ids or [f"d{i}" for i in range(n)], "source": ["s"] * n, "text": texts,
                     "lang": pa.nulls(n, pa.string()), "src_path": ["p"] * n, "src_row": pa.array(range(n), pa.int64()),
                     "meta": pa.nulls(n, pa.string()), "score_q": pa.array([0.5] * n)})


def run(texts, ops, **cfg):
    stats = StageStats()
    res = Augment(Augment.Config(ops=ops, **cfg)).process(_table(texts), stats)
    return res, stats


@pytest.mark.parametrize("op", ["synonym", "insert", "delete", "swap", "shuffle_sentences"])
def test_each_op_makes_a_linked_new_record(op):
    res, stats = run([EN, ZH], [{"op": op, "rate": 0.3}])
    rows = res.kept.to_pylist()
    new = [r for r in rows if r["tag_augment_op"] == op]
    assert res.created == len(new) == 2 and stats.counters[f"created_{op}"] == 2
    assert [r["tag_augment_parent"] for r in new] == ["d0", "d1"]
    assert all(r["text"] not in (EN, ZH) for r in new)
    assert all(r["score_q"] is None and r["src_path"] == "p" for r in new)
    assert [r["text"] for r in rows[:2]] == [EN, ZH]          # originals untouched


def test_synonyms_come_from_the_table():
    res, _ = run([EN], [{"op": "synonym", "rate": 1.0}])
    new = res.kept.column("text").to_pylist()[1]
    assert "old" not in new.split() and "repaired" not in new.split()
    zh, _ = run([ZH], [{"op": "synonym", "rate": 1.0}])
    assert "修复" not in zh.kept.column("text").to_pylist()[1] and "重要" not in zh.kept.column("text").to_pylist()[1]


def test_user_synonym_table(tmp_path):
    (tmp_path / "syn.json").write_text(json.dumps({"bridge": ["viaduct"]}))
    res, _ = run([EN], [{"op": "synonym", "rate": 1.0}], synonyms=str(tmp_path / "syn.json"))
    assert "viaduct" in res.kept.column("text").to_pylist()[1]


def test_mix_pairs_documents_of_the_same_language():
    other = "A quiet farmer planted trees behind the market. The choir sang at noon. Rain came later."
    res, _ = run([EN, other, ZH], [{"op": "mix"}])
    mixed = [r for r in res.kept.to_pylist() if r["tag_augment_op"] == "mix"]
    assert len(mixed) == 2                             # the Chinese document has no partner
    assert all(not any("\u4e00" <= ch <= "\u9fff" for ch in r["text"]) for r in mixed)


def test_deterministic_and_independent_of_batching():
    texts = [f"{EN} Number {i}." for i in range(20)]
    ops = [{"op": "swap", "rate": 0.2}, {"op": "delete", "rate": 0.2}]
    whole, _ = run(texts, ops, fraction=0.5)
    again, _ = run(texts, ops, fraction=0.5)
    assert whole.kept.column("text") == again.kept.column("text")
    halves = [Augment(Augment.Config(ops=ops, fraction=0.5)).process(_table(texts[a:b], [f"d{i}" for i in range(a, b)]),
                                                                     StageStats()).kept for a, b in ((0, 10), (10, 20))]
    derived = lambda t: sorted(r["id"] + r["text"] for r in t.to_pylist() if r["tag_augment_op"])  # noqa: E731
    assert derived(whole.kept) == derived(pa.concat_tables(halves))
    assert 0 < whole.created < 40                                    # fraction picks some documents


def test_plugin_interface(tmp_path, monkeypatch):
    (tmp_path / "backtranslate.py").write_text("def run(texts, seed):\n    return [t.upper() for t in texts]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res, _ = run([EN], [{"op": "plugin", "function": "backtranslate:run"}])
    assert res.kept.column("text").to_pylist()[1] == EN.upper()


def test_accounting_through_the_runner(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"{EN} {i}"}) + "\n" for i in range(10)))
    s = runner.run(text_config([{"format": "jsonl", "paths": [str(tmp_path / "in.jsonl")], "source": "w"}],
                               tmp_path / "o", [{"stage": "text.augment", "ops": [{"op": "swap"}]}]))
    t = s.stats["totals"]
    assert t["created"] == 10 and t["kept"] == 20 and t["accounting_ok"]
    assert Dataset.open(tmp_path / "o").read().column("tag_augment_parent").null_count == 10
