"""text.langid: lingua (default) on real multilingual text, the script detector as fallback."""

import gzip
import json
import unicodedata
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import shared
from corpusforge.stage import StageStats
from corpusforge.text.langid import LangId, LangIdConfig, lingua_detect, script_detect

UDHR = Path(__file__).resolve().parents[1] / "bench" / "data" / "langid" / "udhr.jsonl.gz"


def detect(texts, **cfg):
    t = pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string())})
    res = LangId(LangId.Config(**cfg)).process(t, StageStats())
    return res.kept.column("lang").to_pylist() + res.rejected.column("lang").to_pylist()


def test_lingua_on_44_languages_of_the_udhr_beats_the_script_detector():
    rows = [json.loads(line) for line in gzip.open(UDHR, "rt", encoding="utf-8")]
    text = pa.array([r["text"] for r in rows])
    labels = [r["lang"] for r in rows]
    lingua = lingua_detect(text, LangIdConfig())[0].to_pylist()
    script = script_detect(text, LangIdConfig(detector="script"))[0].to_pylist()
    acc = lambda pred: sum(p == y for p, y in zip(pred, labels)) / len(labels)  # noqa: E731
    assert len(set(labels)) >= 40
    assert acc(lingua) >= 0.95 and acc(script) < 0.3
    short = [p == y for p, y, r in zip(lingua, labels, rows) if r["kind"] == "short"]
    assert sum(short) / len(short) >= 0.95


def test_decomposed_accents_and_cjk_and_letterless_text():
    vi = "Mọi người đều có quyền tự do đi lại và cư trú trong phạm vi lãnh thổ của quốc gia."
    nfd = unicodedata.normalize("NFD", vi)
    assert detect([nfd, "这是一篇关于经济的新闻报道，内容很长。", "これは日本語の文章です。", "12345 678 90", ""]) == \
        ["vi", "zh", "ja", "und", "und"]


def test_languages_limit_and_unknown_code_names_the_field():
    assert detect(["Das ist ein ganz normaler deutscher Satz über das Wetter."], languages=["de", "nl"]) == ["de"]
    with pytest.raises(Exception, match="languages"):
        LangId.Config(languages=["xx", "en"])
    with pytest.raises(Exception, match="at least two"):
        LangId.Config(languages=["en"])


def test_script_detector_stays_available():
    assert detect(["Ceci est une phrase en français, avec des mots."], detector="script") == ["latin"]


def test_real_english_and_chinese_corpora():
    text = shared("text", "tinyshakespeare.txt").read_text()
    plays = [p for p in text.split("\n\n") if len(p) > 200][:100]
    wiki = [ln for ln in shared("text", "zhwiki_sample.zh.txt").read_text().splitlines() if len(ln) > 100][:100]
    langs = detect(plays + wiki)
    assert sum(x == "en" for x in langs[:100]) >= 97
    assert sum(x == "zh" for x in langs[100:]) >= 99
