
from corpusforge.io.readers.base import text_table
from corpusforge.stage import StageStats
from corpusforge.text.normalize import Normalize


def _run(texts, **cfg):
    stage = Normalize(Normalize.Config(**cfg))
    stats = StageStats()
    res = stage.process(text_table("s", texts), stats)
    return res, stats


def test_nfkc_controls_and_whitespace():
    res, stats = _run(["Ｆｕｌｌ\u3000width  ﬁ\r\n\r\n\r\n\r\nnext\u200b line \x07end  ", "ok"])
    assert res.kept.column("text").to_pylist() == ["Full width fi\n\nnext line end", "ok"]
    assert res.kept.column("count_normalize_chars_changed").to_pylist()[1] == 0
    assert stats.counters["docs_changed"] == 1


def test_chinese_text_kept_and_nfc_keeps_fullwidth_punctuation():
    zh = "你好，世界！这是一个测试。"
    assert _run([zh], form="NFKC")[0].kept.column("text")[0].as_py() == "你好,世界!这是一个测试。"
    assert _run([zh], form="NFC")[0].kept.column("text")[0].as_py() == zh


def test_emoji_zwj_sequences_survive():
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    assert _run([f"a {family} b"])[0].kept.column("text")[0].as_py() == f"a {family} b"


def test_empty_after_normalization_is_rejected_with_reason():
    res, stats = _run(["\u200b\x00  \n\n", "fine"])
    assert res.kept.num_rows == 1
    assert res.rejected.column("reject_reason").to_pylist() == ["too_short_after_normalize"]
    assert "0 chars" in res.rejected.column("reject_detail")[0].as_py()
    assert stats.rejected_by_reason == {"too_short_after_normalize": 1}


def test_giant_single_line_and_mixed_scripts():
    big = ("word " * 200_000) + "中文 русский عربى"
    res, _ = _run([big])
    assert res.kept.column("text")[0].as_py().endswith("中文 русский عربى")
