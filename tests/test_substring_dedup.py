"""text.substring_dedup: exact repeated spans cut from later documents, checked against a
suffix array (pydivsufsort) on real text and on hand-built cases."""

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from conftest import shared, text_config
from corpusforge import runner
from corpusforge.errors import ConfigError
from corpusforge.io.dataset import Dataset
from corpusforge.text.substring_dedup import _cut
from corpusforge.text.substring_tokens import tokens


def _run(tmp_path, docs, stage, n_files=2, unit_bytes=1):
    folder = tmp_path / "in"
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(n_files):
        with open(folder / f"part{f}.jsonl", "w") as fh:
            for d in docs[f * len(docs) // n_files:(f + 1) * len(docs) // n_files]:
                fh.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
    cfg = text_config([{"format": "jsonl", "paths": [str(folder)], "source": "web"}], tmp_path / "out",
                      [{"stage": "text.substring_dedup", **stage}], unit_bytes=unit_bytes)
    summary = runner.run(cfg)
    kept = Dataset.open(tmp_path / "out").read()
    rejected = Dataset.open(tmp_path / "out" / "_rejected").read()
    return summary.stats["stages"]["00:text.substring_dedup"], kept, rejected


def _by_text_order(kept, docs):
    """Output texts in input order (kept rows carry their src_row and src_path)."""
    rows = sorted(kept.to_pylist(), key=lambda r: (r["src_path"], r["src_row"]))
    return [r["text"] for r in rows]


def _suffix_array_cuts(docs: list[str], unit: str, length: int, keep: str) -> list[str]:
    """The reference: every window of ``length`` tokens that occurs twice, found with a suffix
    array and its LCP array over the whole corpus (documents split by unique separators), cut
    from every occurrence but the first (``keep: first``) or from all (``none``)."""
    import pydivsufsort

    tok = tokens(pa.array(docs, pa.large_string()), unit)
    _, dense = np.unique(tok.symbols, return_inverse=True)
    seq, owner, where = [], [], []
    for d in range(len(docs)):
        idx = np.flatnonzero(tok.doc == d)
        seq += list(dense[idx]) + [len(tok.symbols) + d + 1]       # a separator no other place has
        owner += [d] * (len(idx) + 1)
        where += list(range(len(idx) + 1))
    s = np.array(seq, np.uint32)
    sa = pydivsufsort.divsufsort(s)
    lcp = pydivsufsort.kasai(s, sa)          # lcp[i]: common prefix of sa[i] and sa[i + 1]
    cut = [set() for _ in docs]
    i = 0
    while i < len(sa):
        j = i
        while j < len(sa) - 1 and lcp[j] >= length:
            j += 1
        if j > i:                                   # sa[i..j] share their first `length` tokens
            group = sorted((owner[p], where[p]) for p in sa[i:j + 1])
            for d, w in (group[1:] if keep == "first" else group):
                cut[d].update(range(w, w + length))
        i = j + 1
    out = []
    bounds = np.r_[0, np.cumsum(tok.counts())]
    for d, text in enumerate(docs):
        t = sorted(cut[d])
        runs = [(a, b + 1) for a, b in _runs(t)]
        out.append(_cut(text, tok.starts[bounds[d]:bounds[d + 1]], [a for a, _ in runs], [b for _, b in runs], unit)
                   if runs else text)
    return out


def _runs(sorted_positions):
    start = prev = None
    for p in sorted_positions:
        if start is None:
            start = prev = p
        elif p == prev + 1:
            prev = p
        else:
            yield start, prev
            start = prev = p
    if start is not None:
        yield start, prev


def _corpus_with_copies(seed=3):
    text = shared("text", "tinyshakespeare.txt").read_text()
    rng = random.Random(seed)
    docs = [text[i * 2500:(i + 1) * 2500] for i in range(40)]
    for target in (5, 12, 19, 33):                   # passages quoted into later documents
        src = rng.randrange(target)
        a = rng.randrange(0, 1500)
        piece = docs[src][a:a + rng.randrange(400, 900)]
        at = rng.randrange(0, len(docs[target]))
        docs[target] = docs[target][:at] + piece + docs[target][at:]
    docs[25] = docs[25] + docs[25][:700]            # a copy inside the same document
    zh = [l for l in shared("text", "zhwiki_sample.zh.txt").read_text().splitlines() if len(l) > 300][:10]
    docs += zh + [zh[2][50:250] + "，另见。" + zh[7][:150]]
    return docs


@pytest.mark.parametrize("unit,length,keep", [("words", 50, "first"), ("bytes", 100, "first"), ("words", 20, "none")])
def test_same_cuts_as_a_suffix_array(tmp_path, unit, length, keep):
    docs = _corpus_with_copies()
    stats, kept, rejected = _run(tmp_path, docs, {"unit": unit, "min_tokens": length, "keep": keep,
                                                  "min_remaining": 0})
    assert rejected.num_rows == 0
    expected = _suffix_array_cuts(docs, unit, length, keep)
    assert _by_text_order(kept, docs) == expected
    assert sum(a != b for a, b in zip(expected, docs)) >= 5      # the quotes and the Chinese copy were cut
    assert stats["counters"]["documents_with_cuts"] == sum(a != b for a, b in zip(expected, docs))


def test_many_partitions_give_the_same_output(tmp_path):
    docs = _corpus_with_copies(seed=5)
    one, kept1, _ = _run(tmp_path / "a", docs, {"memory_mb": 4096})
    many, kept2, _ = _run(tmp_path / "b", docs, {"memory_mb": 1})
    assert one["counters"]["partitions"] == 1 and many["counters"]["partitions"] > 2
    assert kept1.column("text").to_pylist() == kept2.column("text").to_pylist()
    assert one["counters"]["tokens_cut"] == many["counters"]["tokens_cut"] > 0


def test_hand_built_cases(tmp_path):
    w = [f"w{i}" for i in range(40)]
    a = " ".join(w[:12])                                   # 12 tokens: the repeated span
    docs = [
        f"intro {a} outro",                                # first occurrence: kept whole
        f"other words. {a}, and more words here",          # later copy: cut with its trailing comma
        f"{a} {a}",                                        # twice in one document: both are later copies
        " ".join(w[:6]) + "\n" + " ".join(w[6:12]),        # the span split over two... lines, same tokens
        "x " + " ".join(w[6:18]),                          # overlaps the span's second half only
    ]
    stats, kept, rejected = _run(tmp_path, docs, {"min_tokens": 8, "min_remaining": 2}, n_files=1)
    out = _by_text_order(kept, docs)
    assert out[0] == docs[0]
    assert out[1] == "other words. and more words here"
    # doc 2 has nothing left; doc 3 neither: its 12 tokens repeat doc 0's (spacing is not a token)
    assert rejected.column("reject_reason").to_pylist() == ["substring_duplicate"] * 2
    assert ["0 of 24 words left" in d for d in rejected.column("reject_detail").to_pylist()] == [True, False]
    assert rejected.column("text").to_pylist() == docs[2:4]       # rejected rows keep their text
    # doc 4: w6..w11 (6 tokens) are shared, but w6..w17 is not a repeat of 8: only windows of 8 count
    assert out[2] == docs[4]
    first_id = kept.to_pylist()[0]["id"]
    tags = {r["text"]: r["tag_substring_dup_of"] for r in kept.to_pylist()}
    assert tags[out[1]] == first_id and tags[docs[0]] is None
    counts = {r["text"]: (r["count_substring_dup_spans"], r["count_substring_dup_bytes"]) for r in kept.to_pylist()}
    assert counts[out[1]] == (1, len(docs[1]) - len(out[1]))
    assert stats["counters"]["bytes_cut[web]"] == stats["counters"]["bytes_cut"]
    assert any(k.startswith("repeated_span: intro") or k.startswith("repeated_span: w0") for k in stats["counters"])


def test_spans_never_cross_document_boundaries(tmp_path):
    # doc 0 ends with the first half of a phrase and doc 1 starts with its second half (6 tokens
    # each, under min_tokens); doc 2 holds the whole phrase: joined end to start they would match
    # a window of 8, but no window spans two documents
    w = [f"t{i}" for i in range(12)]
    docs = [" ".join(["a"] * 3 + w[:6]), " ".join(w[6:] + ["b"] * 3), " ".join(w)]
    stats, kept, rejected = _run(tmp_path, docs, {"min_tokens": 8, "min_remaining": 0}, n_files=1)
    assert _by_text_order(kept, docs) == docs and stats["counters"]["repeated_windows"] == 0


def test_cjk_characters_are_tokens(tmp_path):
    zh = "中华人民共和国成立于一九四九年十月一日首都北京是全国的政治文化中心"     # 33 characters
    docs = [f"新闻报道：{zh}。今天天气很好。", f"有人说{zh}，也有人不知道。"]
    stats, kept, _ = _run(tmp_path, docs, {"min_tokens": 30, "min_remaining": 0}, n_files=1)
    out = _by_text_order(kept, docs)
    assert out[0] == docs[0] and out[1] == "有人说也有人不知道。"



def test_cjk_radicals_and_kana_symbols_start_tokens_where_they_stand():
    # Kangxi and CJK radicals are symbols (So) in the Han script: the token pattern counts them, and
    # the pattern that finds token starts swallowed them into the next token's prefix, so the two
    # disagreed in length and substring_dedup failed its unit (every retry: the run) on such text
    texts = pa.array([" ⺀ 中文 ⼀二", "。⿰字", "゛ア゜イ", "x ・ア", "plain words here"])
    tok = tokens(texts, "words")
    assert tok.doc.tolist() == [0] * 5 + [1] + [2] * 2 + [3] * 2 + [4] * 3
    assert tok.starts.tolist() == [1, 3, 4, 6, 7, 2, 1, 3, 0, 3, 0, 6, 12]

def test_flag_mode_keeps_text_and_counts(tmp_path):
    docs = _corpus_with_copies()
    _, kept, rejected = _run(tmp_path, docs, {"action": "flag", "min_remaining": 10_000})
    assert rejected.num_rows == 0 and _by_text_order(kept, docs) == docs
    assert sum(kept.column("count_substring_dup_spans").to_pylist()) >= 5


def test_tokenizer_unit(tmp_path):
    from corpusforge.text.tokenize import train

    text = shared("text", "tinyshakespeare.txt").read_text()
    tok = train(iter([text[:200_000]]), vocab_size=400)
    path = tmp_path / "tok.json"
    tok.save(str(path))
    docs = _corpus_with_copies()[:40]
    stats, kept, _ = _run(tmp_path, docs, {"unit": "tokenizer", "tokenizer": str(path), "min_tokens": 60,
                                           "min_remaining": 0})
    assert stats["counters"]["documents_with_cuts"] >= 4
    with pytest.raises(ConfigError, match="tokenizer"):
        _run(tmp_path / "x", docs[:2], {"unit": "tokenizer"})


def test_report_lists_the_cut_spans_and_bytes_per_source(tmp_path):
    from corpusforge.report.build import generate

    docs = _corpus_with_copies()
    stats, kept, _ = _run(tmp_path, docs, {"min_remaining": 0})
    html, data = generate(tmp_path / "out")
    spans = json.loads(open(data).read())["dedup"]["repeated_spans"]
    assert spans["bytes_cut"] == stats["counters"]["bytes_cut"] == sum(kept.column("count_substring_dup_bytes").to_pylist())
    assert spans["bytes_cut_by_source"] == {"web": spans["bytes_cut"]}
    assert spans["top_spans"] and all(t["occurrences"] >= 2 for t in spans["top_spans"])
    # every listed span is text of the corpus (its first occurrence is kept)
    assert all(any(t["text"][:40] in d for d in docs) for t in spans["top_spans"])
    assert "Repeated spans cut" in open(html).read()


def test_empty_short_and_repeated_documents_are_all_accounted_for(tmp_path):
    w = " ".join(f"w{i}" for i in range(30))
    docs = ["", " ", "one", "。", w, w, "中文" * 40, "中文" * 40 + "尾"]
    stats, kept, rejected = _run(tmp_path, docs, {"min_tokens": 10, "min_remaining": 2}, n_files=1)
    assert kept.num_rows + rejected.num_rows == len(docs) == stats["rows_in"]
    assert rejected.column("reject_reason").to_pylist() == ["substring_duplicate", "substring_duplicate"]
    # "中文" * 40 repeats itself: every window after the first two is a later copy within the document
    assert sorted(kept.column("text").to_pylist()) == sorted(["", " ", "one", "。", w, "中文"])
