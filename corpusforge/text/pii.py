"""PII scrubbing with presidio (analyzer + anonymizer), fast and exact.

Recognizers (``pii_recognizers.py``): presidio's email, phone (phonenumbers, international
formats), credit card (Luhn), IBAN, IP v4/v6, URL (off by default: many corpora keep URLs) and
US SSN; and Chinese mainland mobile and landline numbers, resident identity numbers (MOD 11-2
check), UnionPay bank cards (Luhn) and passport numbers (with a keyword nearby). All pattern
recognizers run with ASCII word boundaries, so identifiers touching Chinese characters are found.

The NLP engine is presidio's model-free ``no_op`` engine: no spaCy model is needed or downloaded.
Names, places and organisations (PERSON, LOCATION, ORGANIZATION; off by default) come from
``pii_ner.py``: an installed spaCy package for English and jieba's tags for Chinese (the ``[ner]``
extra). They run on every document, outside the windows below; a missing package is a config
error naming it, and nothing is ever downloaded.

Speed without changing what is found:
1. Pre-scan (columnar, polars regex over the whole batch): every match of a built-in recognizer
   contains a trigger: an ``@`` (email), a run of 7+ digits with separators (phones, cards, IBAN,
   SSN, Chinese numbers), a dotted quad or ``x:y:z`` (IP), a scheme or dotted host (URL). Only
   documents with a trigger go to presidio.
2. Windows: presidio runs on the text around the triggers, with only the recognizers the
   triggers call for and only as much context as each needs: 3 characters for phone numbers, 48
   for the other numbers, and for emails, URLs and IPs the run of address characters (non-space
   ASCII; accented, Greek, Cyrillic letters) around the trigger (at most ``window`` either
   side). A finding that touches a window edge is re-checked on the whole document, so
   findings equal those of presidio with every recognizer on the whole document
   (``bench/bench_pii.py`` and the tests check it).
User recognizers (``recognizers_yaml``) have unknown shapes: with them the pre-scan is off unless
``prescan_extra`` gives a regex that every one of their matches contains.

Policy per entity type: ``tag`` (``<EMAIL>``), ``mask`` (``*`` per character), ``hash`` (salted
sha256, salt from config: deterministic), or ``drop`` (reject the document as ``pii.drop``).
Records get ``count_pii_<type>`` columns: how many were replaced, never the values.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import Field, field_validator, model_validator

from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split
from corpusforge.text.pii_ner import (DEFAULT_SPACY_MODEL, NER_ENTITIES, ChineseNerRecognizer, SpacyNerRecognizer,
                                      require)
from corpusforge.text.pii_numbers import CARD_SEP
from corpusforge.text.pii_phone import TRIGGER as PHONE_TRIGGER
from corpusforge.text.pii_recognizers import ALL_ENTITIES, NON_ASCII_ADDRESS_CHAR

DEFAULT_ENTITIES = [e for e in ALL_ENTITIES if e != "URL"]
TAGS = {"EMAIL_ADDRESS": "<EMAIL>", "PHONE_NUMBER": "<PHONE>", "CREDIT_CARD": "<CREDIT_CARD>", "IBAN_CODE": "<IBAN>",
        "IP_ADDRESS": "<IP>", "URL": "<URL>", "US_SSN": "<SSN>", "CN_MOBILE": "<PHONE>", "CN_LANDLINE": "<PHONE>",
        "CN_RESIDENT_ID": "<ID_NUMBER>", "CN_BANK_CARD": "<BANK_CARD>", "CN_PASSPORT": "<PASSPORT>", "CN_QQ": "<QQ>",
        "CN_WECHAT": "<WECHAT>",
        "PERSON": "<PERSON>", "LOCATION": "<LOCATION>", "ORGANIZATION": "<ORGANIZATION>"}
WARM_UP = ("mail a.b@example.com, call +1 415 555 2671 or 13812345678, card 4111 1111 1111 1111, "
           "ip 10.0.0.1 fe80::1, see www.example.org, 护照E12345678")
LANGUAGE = "xx"   # pattern recognizers are language-independent: one registry for every document
# Pre-scan triggers: every match of an entity contains its trigger, derived from its recognizer's
# patterns; a window runs only the recognizers whose triggers it holds (a date or an amount in
# Chinese news calls for the phone recognizer alone, not for the ten that a generic "7+ digits"
# trigger used to call).
DIGITS = ["CREDIT_CARD", "IBAN_CODE", "US_SSN", "CN_MOBILE", "CN_LANDLINE", "CN_RESIDENT_ID",
          "CN_BANK_CARD", "CN_PASSPORT"]
TRIGGERS = [
    (r"@", ["EMAIL_ADDRESS", "URL"]),
    (rf"\d(?:{CARD_SEP}?\d){{11,}}", ["CREDIT_CARD", "CN_BANK_CARD"]),   # 12-19 digits, spaces or dashes between
    (r"\d{4}\.\d{4,6}\.\d{4}", ["CREDIT_CARD"]),                    # a card's groups printed with dots
    (r"(?i)[a-z]{2}\d{2}", ["IBAN_CODE"]),                           # an IBAN opens with country + check digits
    (r"\d{3}-\d{6}|\d{5}-\d{4}|\d{3}[- .]?\d{2}[- .]?\d{4}", ["US_SSN"]),   # presidio's five SSN shapes
    (r"1[3-9]\d[\s-]?\d{4}", ["CN_MOBILE"]),
    (r"\d{3,4}[\s-]?\d{4}", ["CN_LANDLINE"]),                        # the local number every landline ends with
    (r"\d{6}[ \-]?\d{8}[ \-]?\d{3}", ["CN_RESIDENT_ID"]),       # 17 digits, or 6 8 4 apart
    (r"(?i)护照|護照|passport|旅行证件", ["CN_PASSPORT"]),           # a passport counts only with its keyword
    (PHONE_TRIGGER, ["PHONE_NUMBER"]),
    (r"(?i)qq|扣扣", ["CN_QQ"]),
    # spelled out, not (?i): the case-folding alternation scans 1.4x slower, on every document
    (r"[微薇威徽vV]信|[wW][eE](?:[iI][xX][iI][nN]|[cC][hH][aA][tT])|[wWvV][xX]", ["CN_WECHAT"]),
    (r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}", ["IP_ADDRESS", "URL"]),
    (r"[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f]", ["IP_ADDRESS"]),
    # every presidio URL match has "." + a top-level domain of 2+ letters
    (r"(?i)\.[a-z]{2}", ["URL", "EMAIL_ADDRESS"]),
]
# Context each entity needs around its trigger. phonenumbers looks only at the characters next to
# a number (and is the one expensive recognizer, so its windows are kept tight); an IBAN starts
# up to ~10 characters before its first long digit run and a passport needs its keyword within 30
# characters; emails and URLs can be long (``window`` in the config). Entities with the same
# margin are analyzed in one presidio call.
MARGIN = {"PHONE_NUMBER": 48, "CN_QQ": 48, "CN_WECHAT": 48, **{e: 48 for e in DIGITS}}
# Emails, URLs and IPs contain no whitespace, and no character but ASCII and (an internationalized
# e-mail address) accented, Greek or Cyrillic letters: a match lies inside the run of such
# characters around its trigger, plus the quote or bracket next to it.
ADDRESS_RUN = {"EMAIL_ADDRESS", "URL", "IP_ADDRESS"}
RUN_MARGIN = 3
# identifiers whose recognizer verifies a check digit: when one overlaps a shape-only finding
# (a phone guessed from digit groups), the verified one is what the digits are
CHECK_DIGIT = {"CREDIT_CARD", "CN_BANK_CARD", "CN_RESIDENT_ID", "IBAN_CODE"}
# full-width digits, signs and brackets -> ASCII, character for character (offsets unchanged):
# （010）12345678 is how Chinese text writes an area code
FOLD_FULL_WIDTH = str.maketrans({**{chr(0xFF10 + i): str(i) for i in range(10)},
                                 "＋": "+", "－": "-", "（": "(", "）": ")"})
# folding costs a pass over the text (str.translate, ~30 MB/s): only texts that need it, and full-width
# brackets (in nearly every Chinese text) only where one touches a digit
FULL_WIDTH = re.compile(r"[０-９＋－]|（[ +]?\d|\d ?）")
# windows closer than this are analyzed as one: each presidio call has a fixed cost (registry
# lookup, context pass, copies) that outweighs scanning a few hundred more characters
MERGE_GAP = 256


class PiiConfig(StageConfig):
    entities: list[str] = Field(default_factory=lambda: list(DEFAULT_ENTITIES),
                                description=f"Entity types to scrub; known: {', '.join(ALL_ENTITIES + NER_ENTITIES)}.")
    policy: dict[str, Literal["tag", "mask", "hash", "drop"]] = Field(
        default_factory=dict, description="Per entity type; `default` sets the rest (tag).")
    tags: dict[str, str] = Field(default_factory=dict, description="Replacement text per entity type for `tag`.")
    hash_salt: str | None = Field(None, min_length=16, description="Salt for `hash` (at least 16 characters).")
    min_score: float = Field(0.35, ge=0, le=1, description="presidio confidence below which a finding is ignored.")
    qq_groups: bool = Field(False, description="Also scrub QQ group numbers (QQ群); they name public groups.")
    spacy_model: str | None = Field(DEFAULT_SPACY_MODEL, description="Installed spaCy package for English PERSON/"
                                    "LOCATION/ORGANIZATION (null: no English NER).")
    chinese_ner: bool = Field(True, description="Chinese PERSON/LOCATION/ORGANIZATION from jieba's tags.")
    recognizers_yaml: str | None = Field(None, description="presidio recognizers YAML with your own patterns.")
    prescan: bool = True
    prescan_extra: str | None = Field(None, description="Regex that every match of your own recognizers contains.")
    window: int = Field(256, ge=32, description="Characters of context around pre-scan hits given to presidio.")

    @field_validator("entities")
    @classmethod
    def _known(cls, v):
        unknown = [e for e in v if e not in ALL_ENTITIES + NER_ENTITIES]
        if unknown:
            raise ValueError(f"unknown entity type(s) {unknown}; known: {', '.join(ALL_ENTITIES + NER_ENTITIES)}")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        policies = {**{e: self.policy.get("default", "tag") for e in self.entities}, **self.policy}
        if "hash" in policies.values() and not self.hash_salt:
            raise ValueError("policy `hash` needs hash_salt (>= 16 characters) so that hashing is deterministic")
        if self.ner_entities():
            if not self.spacy_model and not self.chinese_ner:
                raise ValueError("PERSON/LOCATION/ORGANIZATION need spacy_model (English) or chinese_ner")
            if self.spacy_model:
                require(self.spacy_model, "spacy_model")
            if self.chinese_ner:
                require("jieba", "chinese_ner")
        return self

    def ner_entities(self) -> list[str]:
        return [e for e in self.entities if e in NER_ENTITIES]

    def policy_of(self, entity: str) -> str:
        return self.policy.get(entity, self.policy.get("default", "tag"))


def _address_char(ch: str) -> bool:
    """A character an address can hold: non-space ASCII, or an accented, Greek or Cyrillic letter
    (an internationalized e-mail address)."""
    return not ch.isspace() and (ch < "\x80" or NON_ASCII_ADDRESS_CHAR.match(ch) is not None)


def _address_run(text: str, start: int, end: int, cap: int) -> tuple[int, int]:
    """The run of address characters around text[start:end], plus RUN_MARGIN, at most ``cap``
    characters either side."""
    lo, hi = start, end
    while lo > max(0, start - cap) and _address_char(text[lo - 1]):
        lo -= 1
    while hi < min(len(text), end + cap) and _address_char(text[hi]):
        hi += 1
    return max(0, lo - RUN_MARGIN), min(len(text), hi + RUN_MARGIN)


def count_column(entity: str) -> str:
    return "count_pii_" + entity.lower()


class Pii(Stage):
    name = "text.pii"
    kinds = ("text",)
    Config = PiiConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {count_column(e): pa.int64() for e in self.config.entities}

    # -- presidio engines, built once per process ------------------------------------------
    def _engines(self):
        if getattr(self, "_analyzer", None) is not None:
            return self._analyzer, self._anonymizer
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NoOpNlpEngine
        from presidio_anonymizer import AnonymizerEngine
        from presidio_anonymizer.entities import OperatorConfig

        from corpusforge.text.pii_recognizers import ASCII_FLAGS, build_recognizers

        c: PiiConfig = self.config
        nlp = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "none"}])
        registry = RecognizerRegistry(supported_languages=[LANGUAGE], global_regex_flags=ASCII_FLAGS)
        for rec in build_recognizers(c.entities, LANGUAGE, c.qq_groups):
            registry.add_recognizer(rec)
        if c.ner_entities() and c.spacy_model:
            registry.add_recognizer(SpacyNerRecognizer(c.spacy_model, LANGUAGE))
        if c.ner_entities() and c.chinese_ner:
            registry.add_recognizer(ChineseNerRecognizer(LANGUAGE))
        if c.recognizers_yaml:
            registry.add_recognizers_from_yaml(c.recognizers_yaml)
        self._analyzer = AnalyzerEngine(nlp_engine=nlp, registry=registry, supported_languages=[LANGUAGE])
        self._anonymizer = AnonymizerEngine()
        self._recognizers = {}
        self._artifacts = nlp.process_text("", LANGUAGE)   # the no_op engine's artifacts: empty
        # one-time loads (tldextract's suffix list, phonenumbers' region metadata) happen here,
        # not inside the first batch
        self._analyzer.analyze(text=WARM_UP, language=LANGUAGE, entities=c.entities)
        self._operators = {}
        for e in c.entities:
            p = c.policy_of(e)
            if p == "tag":
                self._operators[e] = OperatorConfig("replace", {"new_value": c.tags.get(e, TAGS.get(e, f"<{e}>"))})
            elif p == "mask":
                self._operators[e] = OperatorConfig("mask", {"masking_char": "*", "chars_to_mask": 10_000,
                                                             "from_end": False})
            elif p == "hash":
                self._operators[e] = OperatorConfig("hash", {"hash_type": "sha256", "salt": c.hash_salt})
        return self._analyzer, self._anonymizer

    def triggers(self) -> list[tuple[str, list[str]]] | None:
        """(regex, entity types it can reveal) for the active entities; None = no pre-scan."""
        c: PiiConfig = self.config
        if not c.prescan or (c.recognizers_yaml and not c.prescan_extra):
            return None       # findings could be anywhere: analyze every document in full
        if getattr(self, "_triggers", None) is None:
            import regex

            out = [(rx, [e for e in ents if e in c.entities]) for rx, ents in TRIGGERS]
            out = [(rx, ents) for rx, ents in out if ents]
            if c.prescan_extra:
                out.append((c.prescan_extra, [e for e in c.entities if e not in NER_ENTITIES]))
            self._triggers = [(regex.compile(rx), ents) for rx, ents in out]
        return self._triggers

    def prescan_pattern(self) -> str | None:
        trig = self.triggers()
        return None if trig is None else "|".join(f"(?:{rx.pattern})" for rx, _ in trig)

    # -- finding ----------------------------------------------------------------------------
    def find(self, text: str) -> list:
        """Non-overlapping findings (what is counted): see :meth:`find_raw`."""
        return self._resolve(self.find_raw(text))

    def find_raw(self, text: str) -> list:
        """presidio's findings on ``text`` (score >= min_score, overlaps included), computed on the windows around pre-scan hits with the recognizers those
        hits call for; identical to analyzing the whole text with every recognizer.

        Full-width digits, plus and minus signs (``１３８１２３４５６７８``, common in Chinese text
        that was not NFKC-normalized) are read as ASCII: one character for one, so the offsets are
        the text's own."""
        if FULL_WIDTH.search(text):
            text = text.translate(FOLD_FULL_WIDTH)
        ner = self.config.ner_entities()
        found = self._analyze(text, ner) if ner else []
        structured = [e for e in self.config.entities if e not in NER_ENTITIES]
        trig = self.triggers()
        if trig is None:
            return found + self._analyze(text, structured)
        return found + self._find_structured(text, structured, trig)

    def _find_structured(self, text: str, entities: list[str], trig) -> list:
        margins = {}                              # margin -> entities analyzed with it
        for e in entities:
            margins.setdefault("run" if e in ADDRESS_RUN else MARGIN.get(e, self.config.window), set()).add(e)
        hits = [(m.start(), m.end(), set(ents)) for rx, ents in trig for m in rx.finditer(text)]
        if not hits:
            return []
        found = []
        for margin, group in sorted(margins.items(), key=lambda kv: str(kv[0])):
            if margin == "run":
                spans = sorted((*_address_run(text, s, e, self.config.window), ents & group)
                               for s, e, ents in hits if ents & group)
            else:
                spans = sorted((max(0, s - margin), min(len(text), e + margin), ents & group)
                               for s, e, ents in hits if ents & group)
            windows = []                          # [start, end, entity set], merged
            for s, e, ents in spans:
                if windows and s <= windows[-1][1] + MERGE_GAP:
                    windows[-1][1] = max(windows[-1][1], e)
                    windows[-1][2].update(ents)
                else:
                    windows.append([s, e, set(ents)])
            for s, e, ents in windows:
                results = self._analyze(text[s:e], sorted(ents))
                if any((r.start == 0 and s > 0) or (r.end == e - s and e < len(text)) for r in results):
                    # a finding touches the window's edge: decide this group on the whole document
                    every = sorted(set().union(*(wn[2] for wn in windows)))
                    found = [r for r in found if r.entity_type not in group] + self._analyze(text, every)
                    break
                for r in results:
                    r.start += s
                    r.end += s
                    found.append(r)
        return found

    def _analyze(self, text: str, entities: list[str]) -> list:
        """presidio's AnalyzerEngine.analyze, in the steps it takes with the model-free engine:
        each recognizer for ``entities``, the score threshold, its duplicate removal. Called
        directly, it skips what costs more than the recognizers on a short window (a context pass
        that needs NLP tokens the no_op engine never makes, and a deep copy of every result).
        User recognizers (``recognizers_yaml``) may rely on that pass: they go through the engine."""
        analyzer, _ = self._engines()
        if self.config.recognizers_yaml:
            return analyzer.analyze(text=text, language=LANGUAGE, entities=entities,
                                    score_threshold=self.config.min_score)
        from presidio_analyzer import EntityRecognizer

        key = tuple(entities)
        if key not in self._recognizers:
            self._recognizers[key] = analyzer.registry.get_recognizers(language=LANGUAGE, entities=list(entities))
        results = []
        for rec in self._recognizers[key]:
            if not rec.is_loaded:
                rec.load()
                rec.is_loaded = True
            results += rec.analyze(text=text, entities=list(entities), nlp_artifacts=self._artifacts) or []
        results = [r for r in results if r.score >= self.config.min_score]
        return EntityRecognizer.remove_duplicates(results)

    @staticmethod
    def _resolve(results: list) -> list:
        """Non-overlapping findings, as the anonymizer replaces them: a number that passes a check
        digit (card, Chinese ID, IBAN) wins over anything else it overlaps (a card's digits and the
        expiry after it read as one long "phone"); then a finding inside a longer one gives way to it
        (``(016)097-5351`` inside ``(016)097-5351x3933``); then the higher score wins, then the
        longer span, then the earlier; at a tie a phone, read from digit groups alone, gives way to
        an identifier of its own shape (``498 52 4970``: an SSN's 3-2-4, which phonenumbers also
        accepts)."""
        checked = [r for r in results if r.entity_type in CHECK_DIGIT]
        if checked:
            results = checked + [r for r in results if r.entity_type not in CHECK_DIGIT and
                                 all(r.end <= c.start or r.start >= c.end for c in checked)]
        outer, best_start, best_end = [], -1, -1
        for r in sorted(results, key=lambda r: (r.start, -r.end)):
            if r.end < best_end or (r.end == best_end and best_start < r.start):
                continue                                    # strictly inside an earlier finding
            outer.append(r)
            if r.end > best_end:
                best_start, best_end = r.start, r.end
        chosen = []
        for r in sorted(outer, key=lambda r: (-r.score, -(r.end - r.start), r.start, r.entity_type == "PHONE_NUMBER",
                                              r.entity_type)):
            if all(r.end <= o.start or r.start >= o.end for o in chosen):
                chosen.append(r)
        return sorted(chosen, key=lambda r: r.start)

    # -- the stage ----------------------------------------------------------------------------
    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        c: PiiConfig = self.config
        _, anonymizer = self._engines()
        texts = table.column("text").to_pylist()
        n = len(texts)
        pattern = self.prescan_pattern()
        if pattern is not None and n and not c.ner_entities():
            candidates = np.flatnonzero(pl.Series(texts, dtype=pl.String).str.contains(pattern).fill_null(False).to_numpy())
        else:
            candidates = np.arange(n)
        stats.counters["docs_analyzed"] += len(candidates)
        counts = {e: np.zeros(n, np.int64) for e in c.entities}
        reason = np.full(n, None, dtype=object)
        detail = np.full(n, None, dtype=object)
        out = list(texts)
        for i in candidates:
            found = self.find(texts[i])
            if not found:
                continue
            drop = sorted({r.entity_type for r in found if c.policy_of(r.entity_type) == "drop"})
            for r in found:
                counts[r.entity_type][i] += 1
                stats.counters[f"found_{r.entity_type}"] += 1
            if drop:
                reason[i], detail[i] = "pii.drop", f"contains {', '.join(drop)} (policy drop)"
                continue
            # the resolved findings, not the raw ones: the anonymizer's own overlap rule knows nothing
            # of check digits, and what is replaced must be what is counted
            out[i] = anonymizer.anonymize(text=texts[i], analyzer_results=found, operators=self._operators).text
        table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(out, pa.string()))
        for e in c.entities:
            table = table.append_column(count_column(e), pa.array(counts[e], pa.int64()))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)
