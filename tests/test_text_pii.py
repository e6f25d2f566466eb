"""PII: every recognizer (positive and negative, English and Chinese contexts), policies,
false positives on numbers that are not identifiers, window exactness, bad input."""

import random
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import shared
from corpusforge.stage import StageStats
from corpusforge.text.pii import Pii
from corpusforge.text.pii_recognizers import cn_id_ok, luhn_ok

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

VALID_ID = "11010519491231002X"          # the standard example, valid check character
BAD_ID = "110105194912310021"            # same, wrong check character


@pytest.fixture(scope="module")
def pii():
    return Pii()


def scrub(stage, texts):
    t = pa.table({"text": texts, "lang": pa.nulls(len(texts), pa.string())})
    stats = StageStats()
    res = stage.process(t, stats)
    return res, stats


# identifier, entity type, contexts (English and Chinese), as planted in real sentences
PLANTED = [
    ("anna.lee@example.org", "EMAIL_ADDRESS"),
    ("+44 20 7946 0958", "PHONE_NUMBER"),
    ("(415) 555-2671", "PHONE_NUMBER"),
    ("4111 1111 1111 1111", "CREDIT_CARD"),
    ("DE89 3704 0044 0532 0130 00", "IBAN_CODE"),
    ("203.0.113.42", "IP_ADDRESS"),
    ("2001:db8:85a3::8a2e:370:7334", "IP_ADDRESS"),
    ("219-09-9999", "US_SSN"),
    ("13812345678", "CN_MOBILE"),
    ("+86 138 1234 5678", "CN_MOBILE"),
    ("138-1234-5678", "CN_MOBILE"),
    ("010-62345678", "CN_LANDLINE"),
    ("(0755) 8765 4321", "CN_LANDLINE"),
    (VALID_ID, "CN_RESIDENT_ID"),
    ("6222021234567890128", "CN_BANK_CARD"),
]
CONTEXTS = ["Contact: {} for details.", "联系方式{}，请勿外传。", "号{}", "Items:\n- {}\n- other", "at line end {}",
            "（{}）", "邮箱或号码：{}。"]


@pytest.mark.parametrize("value,entity", PLANTED)
def test_every_planted_identifier_is_replaced(pii, value, entity):
    assert luhn_ok("6222021234567890128") and cn_id_ok(VALID_ID)
    texts = [ctx.format(value) for ctx in CONTEXTS]
    res, stats = scrub(pii, texts)
    for original, out in zip(texts, res.kept.column("text").to_pylist()):
        assert value not in out, (original, out)
        assert "<" in out
    col = "count_pii_" + entity.lower()
    # counted under its own type (phones may be claimed by the more specific Chinese recognizer)
    assert sum(res.kept.column(col).to_pylist()) + sum(res.kept.column("count_pii_phone_number").to_pylist()) >= len(texts)


def test_passport_needs_a_keyword(pii):
    res, _ = scrub(pii, ["护照号码：E12345678。", "Passport No. G87654321", "产品型号E12345678已售罄。"])
    out = res.kept.column("text").to_pylist()
    assert out[0] == "护照号码：<PASSPORT>。" and out[1] == "Passport No. <PASSPORT>"
    assert out[2] == "产品型号E12345678已售罄。"


@pytest.mark.parametrize("text", [
    "The meeting is on 2019-07-20 at 14:30.",          # date
    "价格为12345元，共计169.3万元。",                    # prices, amounts
    "订单号：2023071500123",                           # 13-digit order number: not a phone, card or ID
    "身份证号" + BAD_ID + "无效。",                       # wrong check character
    "卡号6222021234567890121错误",                     # fails Luhn
    "Version 1.2.3 released in 1987.",
    "公元1686年重建，1898年扩建。",
])
def test_numbers_that_are_not_identifiers_are_left_alone(pii, text):
    res, _ = scrub(pii, [text])
    assert res.kept.column("text").to_pylist() == [text]


def test_false_positive_rate_on_real_chinese_text_is_low(pii):
    lines = [l for l in shared("text", "zhwiki_sample.zh.txt").read_text().splitlines() if l.strip()][:800]
    res, stats = scrub(pii, lines)
    found = sum(v for k, v in stats.counters.items() if k.startswith("found_"))
    # encyclopedia articles hold almost no personal identifiers: what is found is mostly
    # numbers shaped like phone numbers (catalogue numbers, coordinates)
    assert found / len(lines) < 0.05, stats.counters


def test_policies_tag_mask_hash_drop():
    stage = Pii(Pii.Config(policy={"EMAIL_ADDRESS": "mask", "CN_MOBILE": "hash", "CN_RESIDENT_ID": "drop"},
                           hash_salt="a-salt-of-16-chars!"))
    texts = ["mail anna@example.org", "手机13812345678", "身份证" + VALID_ID, "card 4111 1111 1111 1111"]
    res, stats = scrub(stage, texts)
    kept = res.kept.column("text").to_pylist()
    assert kept[0] == "mail " + "*" * len("anna@example.org")
    assert kept[1].startswith("手机") and "13812345678" not in kept[1] and len(kept[1]) > 40   # sha256 hex
    assert kept[2] == "card <CREDIT_CARD>"
    assert res.rejected.column("reject_reason").to_pylist() == ["pii.drop"]
    assert "CN_RESIDENT_ID" in res.rejected.column("reject_detail")[0].as_py()
    again, _ = scrub(stage, texts)
    assert again.kept.column("text").to_pylist() == kept                     # salted hash is deterministic


def test_config_errors():
    with pytest.raises(ValueError, match="hash_salt"):
        Pii.Config(policy={"default": "hash"})
    with pytest.raises(ValueError, match="spacy_model"):
        Pii.Config(entities=["PERSON"])
    with pytest.raises(ValueError, match="unknown entity"):
        Pii.Config(entities=["EMAIL"])


def test_missing_spacy_model_is_a_clear_error():
    from corpusforge.errors import ConfigError

    stage = Pii(Pii.Config(entities=["PERSON", "EMAIL_ADDRESS"], spacy_model="en_core_web_nonexistent"))
    with pytest.raises(ConfigError, match="cannot be loaded"):
        scrub(stage, ["John Smith lives in Paris"])


@pytest.mark.parametrize("config", ["default", "with_urls"])
def test_windows_give_exactly_presidios_findings(config):
    """The pre-scan + windows path equals presidio with every recognizer on the whole document."""
    from bench_pii import CONFIGS, corpora

    shared("text", "clue_corpus_small_sample.zh.txt")
    pii = Pii(Pii.Config(**list(CONFIGS.values())[0 if config == "default" else 1]))
    analyzer, _ = pii._engines()
    rng = random.Random(0)
    for docs in corpora(seed=3).values():
        for d in rng.sample(docs, 300) + ["see vpa2...an and x.com，www.例子.cn/路径 then 'http://a.org/x'"]:
            full = analyzer.analyze(text=d, language="xx", entities=pii.config.entities,
                                    score_threshold=pii.config.min_score)
            assert {(r.entity_type, r.start, r.end) for r in Pii._resolve(full)} == \
                   {(r.entity_type, r.start, r.end) for r in pii.find(d)}


def test_records_keep_counts_not_values_and_stats_total_by_type(pii):
    res, stats = scrub(pii, ["a@b.com and c@d.org", "13812345678", "nothing"])
    assert res.kept.column("count_pii_email_address").to_pylist() == [2, 0, 0]
    assert stats.counters["found_EMAIL_ADDRESS"] == 2 and stats.counters["found_CN_MOBILE"] == 1
    assert stats.counters["docs_analyzed"] == 2


def test_bad_input_long_documents_and_number_strings(pii):
    long_doc = ("word " * 200_000) + " reach me at x@y.com"
    numbers = "1234567890" * 20_000
    res, _ = scrub(pii, [long_doc, numbers, "", "\x00\x01"])
    assert res.kept.num_rows == 4
    out = res.kept.column("text").to_pylist()
    assert out[0].endswith("<EMAIL>")
    assert isinstance(out[1], str)
