"""PII stage vs presidio on every document: throughput and identical findings.

Baseline: the same presidio AnalyzerEngine (same recognizers, model-free engine) called on every
document, then AnonymizerEngine.anonymize with the same operators, one document at a time.
corpusforge: the ``text.pii`` stage (pre-scan over the batch, presidio on windows around hits).
Findings are compared per document after the same overlap resolution.

Corpora (real text from ../shared/data): English = Tiny Shakespeare in ~2 KB documents, Chinese =
CLUE news/web (which has real e-mail addresses, phone numbers and URLs); in both, 10% of the
documents get 1-3 planted identifiers, random but valid (emails, phones, Luhn-valid cards, IBANs,
IPs, SSNs, Chinese mobiles, landlines, check-digit-valid IDs, bank cards), so that repeated values
do not flatter anything.

    .venv/bin/python bench/bench_pii.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "text"

from corpusforge.stage import StageStats  # noqa: E402
from corpusforge.text.pii import FOLD_FULL_WIDTH, Pii  # noqa: E402
from corpusforge.text.pii_recognizers import CN_ID_CHECK, CN_ID_WEIGHTS, luhn_ok  # noqa: E402

def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    for check in "0123456789":
        if luhn_ok(body + check):
            return body + check
    raise AssertionError


def _cn_id(rng: random.Random) -> str:
    body = f"110105{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{rng.randint(0, 999):03d}"
    return body + CN_ID_CHECK[sum(int(c) * w for c, w in zip(body, CN_ID_WEIGHTS)) % 11]


def plant(rng: random.Random) -> str:
    """A random but valid identifier of a random kind, in a short context."""
    d = lambda n: "".join(rng.choice("0123456789") for _ in range(n))  # noqa: E731
    kind = rng.randrange(11)
    return [
        lambda: f"write to {rng.choice(['anna', 'li.wei', 'j.smith'])}{d(3)}@{rng.choice(['example.org', 'mail.cn'])}",
        lambda: f"call +1 ({rng.randint(201, 989)}) {rng.randint(200, 999)}-{d(4)}",
        lambda: "card " + " ".join(_luhn_complete("4", 16, rng)[i:i + 4] for i in range(0, 16, 4)),
        lambda: "IBAN DE89 3704 0044 0532 0130 00" if rng.random() < 0.5 else "IBAN GB82 WEST 1234 5698 7654 32",
        lambda: f"from {rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        lambda: f"SSN {rng.randint(100, 665)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}",
        lambda: f"手机1{rng.choice('3589')}{d(9)}",
        lambda: f"电话0{rng.choice(['10', '21', '755'])}-{rng.randint(2, 8)}{d(7)}",
        lambda: "身份证" + _cn_id(rng),
        lambda: "卡号" + _luhn_complete("62", 19, rng),
        lambda: "fe80::" + ":".join(f"{rng.randrange(65536):x}" for _ in range(4)),
    ][kind]()


def corpora(seed=0):
    rng = random.Random(seed)
    text = (DATA / "tinyshakespeare.txt").read_text()
    en = [text[i:i + 2000] for i in range(0, len(text) - 2000, 2000)]
    zh = [l for l in (DATA / "clue_corpus_small_sample.zh.txt").read_text().splitlines() if l.strip()]
    for docs in (en, zh):
        for i in range(len(docs)):
            if rng.random() < 0.1:
                for _ in range(rng.randint(1, 3)):
                    pos = rng.randrange(len(docs[i]))
                    docs[i] = docs[i][:pos] + " " + plant(rng) + " " + docs[i][pos:]
    return {"English (Tiny Shakespeare)": en, "Chinese (CLUE)": zh}


CONFIGS = {
    "corpusforge default (every pattern type but URL, Chinese included)": {},
    "issue's set (email, phone, card, IP, IBAN, URL)": {
        "entities": ["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IP_ADDRESS", "IBAN_CODE", "URL"]},
}


def stock_presidio(entities):
    """presidio's predefined recognizers (its phone regions, its card pattern) for the types it has."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NoOpNlpEngine
    from presidio_analyzer.predefined_recognizers import (CreditCardRecognizer, EmailRecognizer, IbanRecognizer,
                                                          IpRecognizer, PhoneRecognizer, UrlRecognizer,
                                                          UsSsnRecognizer)

    kinds = {"EMAIL_ADDRESS": EmailRecognizer, "PHONE_NUMBER": PhoneRecognizer, "CREDIT_CARD": CreditCardRecognizer,
             "IBAN_CODE": IbanRecognizer, "IP_ADDRESS": IpRecognizer, "URL": UrlRecognizer, "US_SSN": UsSsnRecognizer}
    registry = RecognizerRegistry(supported_languages=["en"])
    active = [e for e in entities if e in kinds]
    for e in active:
        registry.add_recognizer(kinds[e]())
    engine = AnalyzerEngine(nlp_engine=NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "none"}]),
                            registry=registry, supported_languages=["en"])

    def analyze(text):
        return engine.analyze(text=text, language="en", entities=active, score_threshold=0.35)
    analyze.entities = active
    return analyze


def main():
    for label, cfg in CONFIGS.items():
        print(f"== {label}")
        run(Pii(Pii.Config(**cfg)))


def run(stage: Pii):
    analyzer, anonymizer = stage._engines()   # builds and warms up the engines both sides use
    ops = stage._operators
    for name, docs in corpora().items():
        mb = sum(len(d.encode()) for d in docs) / 1e6
        table = pa.table({"text": docs, "lang": pa.nulls(len(docs), pa.string())})
        stage.process(table.slice(0, 10), StageStats())                 # warm up
        t0 = time.perf_counter()
        res = stage.process(table, StageStats())
        cf = time.perf_counter() - t0
        t0 = time.perf_counter()
        base_found, base_text = [], []
        for d in docs:
            # the stage reads full-width digits as ASCII (offsets unchanged): presidio gets that view too
            r = analyzer.analyze(text=d.translate(FOLD_FULL_WIDTH), language="xx", entities=stage.config.entities,
                                 score_threshold=stage.config.min_score)
            base_text.append(anonymizer.anonymize(text=d, analyzer_results=Pii._resolve(r), operators=ops).text
                             if r else d)
            base_found.append(r)
        base = time.perf_counter() - t0
        ours = [{(r.entity_type, r.start, r.end) for r in stage.find(d)} for d in docs]
        theirs = [{(r.entity_type, r.start, r.end) for r in Pii._resolve(b)} for b in base_found]
        same = sum(a == b for a, b in zip(ours, theirs))
        total = sum(len(b) for b in theirs)
        stock = stock_presidio(stage.config.entities)
        t0 = time.perf_counter()
        for d in docs:
            stock(d)
        stock_s = time.perf_counter() - t0
        texts_same = sum(a == b for a, b in zip(res.kept.column("text").to_pylist(), base_text))
        print(f"{name}: {len(docs)} docs, {mb:.2f} MB, {total} findings")
        print(f"  presidio per document  {mb / base:8.2f} MB/s")
        print(f"  presidio's own recognizers per document ({', '.join(stock.entities)}) {mb / stock_s:8.2f} MB/s")
        print(f"  corpusforge text.pii   {mb / cf:8.2f} MB/s   -> {base / cf:.1f}x the same recognizers, "
              f"{stock_s / cf:.1f}x presidio's own")
        print(f"  identical findings in {same}/{len(docs)} documents; identical output text in {texts_same}/{len(docs)}")


if __name__ == "__main__":
    main()
