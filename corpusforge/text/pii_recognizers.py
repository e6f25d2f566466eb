"""presidio recognizers for corpusforge: Chinese identifiers, and CJK-safe builds of presidio's own.

Every recognizer here is an ordinary presidio ``PatternRecognizer`` (or presidio's own class),
so users add theirs the presidio way (a subclass, or a YAML file of patterns).

CJK safety: presidio's patterns use ``\\b`` and ``\\w``, which in Unicode mode treat Chinese
characters as word characters: ``邮箱john@example.com获取`` has no word boundary before ``j``
and the email is missed, and ``电话13812345678`` hides the number. ``build_recognizers`` compiles
every pattern recognizer with the ``regex.ASCII`` flag, so ``\\b``, ``\\w`` and ``\\d`` are ASCII
and a CJK character is a boundary; the patterns written here use digit lookarounds
(``(?<!\\d)``, ``(?!\\d)``) instead of ``\\b`` anyway.
"""

from __future__ import annotations

import datetime as _dt
from typing import List, Optional

import regex  # presidio's regex engine
from presidio_analyzer import Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import (EmailRecognizer, IbanRecognizer, IpRecognizer, UrlRecognizer,
                                                      UsSsnRecognizer)

from corpusforge.text.pii_numbers import PaymentCardRecognizer, is_amount, luhn_ok  # noqa: F401 (luhn_ok re-exported)
from corpusforge.text.pii_phone import ContextPhoneRecognizer

ASCII_FLAGS = regex.DOTALL | regex.MULTILINE | regex.IGNORECASE | regex.ASCII
# letters an internationalized address (RFC 6531 local part, IDN domain) is written in: Latin
# with accents, Greek, Cyrillic. CJK is left out: Chinese and Japanese text runs words into an
# ASCII address with no space (``邮箱zhang@163.com获取``), so a Han character is a boundary.
# (a combining mark counts after a letter only: an emoji's variation selector is no letter)
ADDRESS_LETTER = r"(?:[\p{Latin}\p{Greek}\p{Cyrillic}0-9]\p{M}*)"
NON_ASCII_LETTER = regex.compile(r"(?V1)[[\p{Latin}\p{Greek}\p{Cyrillic}]--\p{ASCII}]")
NON_ASCII_ADDRESS_CHAR = regex.compile(r"(?V1)[[\p{Latin}\p{Greek}\p{Cyrillic}\p{M}]--\p{ASCII}]")   # inside one
CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
CN_ID_CHECK = "10X98765432"


def cn_id_ok(number: str) -> bool:
    """GB 11643-1999: ISO 7064 MOD 11-2 check character, and a real birth date."""
    number = number.upper()
    if len(number) != 18 or not number[:17].isdigit():
        return False
    if CN_ID_CHECK[sum(int(c) * w for c, w in zip(number[:17], CN_ID_WEIGHTS)) % 11] != number[17]:
        return False
    try:
        born = _dt.date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    return _dt.date(1880, 1, 1) <= born <= _dt.date.today()


class NotAnAmount:
    """Mixin for number recognizers: a match written as an amount or quantity is dropped."""

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        results = super().analyze(text, entities, nlp_artifacts, regex_flags)
        return [r for r in results if not is_amount(text, r.start, r.end)]


class CnMobileRecognizer(NotAnAmount, PatternRecognizer):
    """Mainland mobile numbers: 1[3-9]x xxxx xxxx, with or without +86/86, spaces or dashes."""

    PATTERNS = [Pattern("cn mobile", r"(?<![\d+])(?:\+?86[\s-]?)?1[3-9]\d(?:[\s-]?\d{4}){2}(?!\d)", 0.85)]

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_entity="CN_MOBILE", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)


class CnLandlineRecognizer(NotAnAmount, PatternRecognizer):
    """Landlines with an area code: 010-12345678, (0755) 1234 5678, 021 87654321, +86 10 12345678;
    an extension after a dash is part of the number (0571-87654321-8001, as Chinese listings print it)."""

    _EXT = r"(?:-\d{1,5}(?![\d-]))?"
    PATTERNS = [
        Pattern("cn landline", r"(?<![\d+])(?:\(0\d{2,3}\)|0(?:10|2\d|[3-9]\d{2}))[\s-]?\d{3,4}[\s-]?\d{4}"
                + _EXT + r"(?!\d)", 0.6),
        Pattern("cn landline intl", r"(?<![\d+])\+86[\s-]?(?:10|2\d|[3-9]\d{2})[\s-]?\d{3,4}[\s-]?\d{4}"
                + _EXT + r"(?!\d)", 0.7),
    ]

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_entity="CN_LANDLINE", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)


class CnResidentIdRecognizer(PatternRecognizer):
    """18-character resident identity numbers, validated by their MOD 11-2 check character and date;
    also printed for reading as region, birth date and the rest apart ("110105 19491231 002X",
    one space or dash, the same twice)."""

    PATTERNS = [Pattern("cn resident id",
                        r"(?<![0-9A-Za-z])[1-9]\d{5}([ \-]?)(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
                        r"\1\d{3}[\dXx](?![0-9A-Za-z])", 0.5)]

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_entity="CN_RESIDENT_ID", patterns=self.PATTERNS,
                         supported_language=supported_language, global_regex_flags=ASCII_FLAGS, **kw)

    def validate_result(self, pattern_text: str) -> Optional[bool]:
        return cn_id_ok(pattern_text.replace(" ", "").replace("-", ""))


class CnBankCardRecognizer(PatternRecognizer):
    """UnionPay bank cards (62..., 16-19 digits, optionally in groups of 4), Luhn-validated."""

    PATTERNS = [Pattern("cn bank card", r"(?<!\d)62\d{2}(?:[\s-]?\d{4}){3}(?:[\s-]?\d{1,3})?(?!\d)", 0.5)]

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_entity="CN_BANK_CARD", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)

    def validate_result(self, pattern_text: str) -> Optional[bool]:
        return luhn_ok(pattern_text)


class CnPassportRecognizer(PatternRecognizer):
    """Passport numbers (E/G + 8 digits, E + letter + 7 digits, P/S/D + 7 digits). The shapes are
    common in product codes, so a match counts only with a passport keyword (护照, passport) in the
    ``window`` characters before it. presidio's context enhancer needs NLP tokens, which the
    model-free engine does not produce, so the check is done here."""

    PATTERNS = [Pattern("cn passport", r"(?<![0-9A-Za-z])(?:[EG]\d{8}|E[A-Z]\d{7}|[PSD]\d{7})(?![0-9A-Za-z])", 0.8)]
    KEYWORDS = regex.compile(r"护照|passport|護照|旅行证件", regex.IGNORECASE)

    def __init__(self, supported_language: str = "xx", window: int = 30, **kw):
        super().__init__(supported_entity="CN_PASSPORT", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)
        self.window = window

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        results = super().analyze(text, entities, nlp_artifacts, regex_flags)
        return [r for r in results if self.KEYWORDS.search(text, max(0, r.start - self.window), r.start)]


class ContextSsnRecognizer(UsSsnRecognizer):
    """presidio's US SSN recognizer (its patterns, its checks), with its context words read here.

    presidio raises a weak match (a plain ``536221234``, presidio's score 0.05) when a context word
    stands before it, but that pass needs NLP tokens, which the model-free engine never makes: an
    SSN written without separators after "SSN:" was missed. Here a match with an SSN word
    (social security, SSN, SS#, SSID) in the ``window`` characters before it gets presidio's own
    boost (+0.35, at least 0.4); without one, a plain nine-digit run stays below the threshold
    (it is as often an order or a reference number)."""

    KEYWORDS = regex.compile(r"(?<![a-z])(?:ssns?|ss ?#|ssid|social[\s\-]+sec(?:urity)?)(?![a-z])", regex.IGNORECASE)
    BOOST, MIN_WITH_CONTEXT = 0.35, 0.4

    def __init__(self, supported_language: str = "xx", window: int = 30, **kw):
        super().__init__(supported_language=supported_language, **kw)
        self.window = window

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        results = super().analyze(text, entities, nlp_artifacts, regex_flags)
        for r in results:
            if self.KEYWORDS.search(text, max(0, r.start - self.window), r.start):
                r.score = min(1.0, max(r.score + self.BOOST, self.MIN_WITH_CONTEXT))
        return results


class DottedChainSafeIpRecognizer(IpRecognizer):
    """presidio's IP recognizer, less IPv4 matches that are four numbers of a longer dotted chain
    (an OID ``1.3.6.1.4.1.311``, a version ``33.1.23.45.67.89``): an address stands alone."""

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        return [r for r in super().analyze(text, entities, nlp_artifacts, regex_flags)
                if ":" in text[r.start:r.end] or not self.in_dotted_chain(text, r.start, r.end)]

    @staticmethod
    def in_dotted_chain(text: str, start: int, end: int) -> bool:
        before, after = text[max(0, start - 2):start], text[end:end + 2]
        return (len(before) == 2 and before[0].isdigit() and before[1] == ".") or (
            len(after) == 2 and after[0] == "." and after[1].isdigit())


class CjkSafeUrlRecognizer(UrlRecognizer):
    """presidio's URL recognizer, with matches run to the end of the URL, cut at the first CJK (or
    other non-address) character and without trailing sentence punctuation
    (``www.example.cn/path今天`` -> ``www.example.cn/path``).

    Running to the end: presidio's pattern has no boundary after its list of top-level domains,
    and the list lacks some (``.biz``), so ``https://shop.biz/cart`` matched as ``https://shop.bi``
    and scrubbing left ``z/cart`` behind; likewise ``.community`` matched as ``.com``. Accented,
    Greek and Cyrillic letters belong to the URL (``https://münchen.de/rathaus``,
    ``.../wiki/Müller``): the ASCII-only pattern matched ``nchen.de/rathaus`` and ``.../wiki/M``.
    """

    TRIM = ".,;:!?)]}'\""
    # the rest of a host name cut inside a label, its port and its path (presidio's path shape)
    HOST_REST = regex.compile(rf"(?:{ADDRESS_LETTER}|[A-Za-z\-])*(?:\.(?:{ADDRESS_LETTER}|[A-Za-z\-])+)*(?::\d+)?"
                              r"(?:/[^\s()<>\"']*)?")
    # an IDN host's letters before presidio's ASCII match, and its scheme
    HOST_START = regex.compile(rf"(?:[A-Za-z][A-Za-z0-9+.\-]*://)?(?:{ADDRESS_LETTER}|[A-Za-z.\-])*$")

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        out = []
        for r in super().analyze(text, entities, nlp_artifacts, regex_flags):
            if r.start > 0 and NON_ASCII_LETTER.match(text[r.start - 1]):
                r.start = self.HOST_START.search(text, max(0, r.start - 256), r.start).start()
            if r.end < len(text) and (text[r.end].isascii() and text[r.end].isalnum() or text[r.end] == "-"
                                      or NON_ASCII_LETTER.match(text[r.end])):
                r.end = self.HOST_REST.match(text, r.end).end()
            span = text[r.start:r.end]
            cut = next((i for i, ch in enumerate(span) if ord(ch) > 127 and not NON_ASCII_ADDRESS_CHAR.match(ch)),
                       len(span))
            span = span[:cut].rstrip(self.TRIM)
            if len(span) >= 4:
                r.end = r.start + len(span)
                out.append(r)
        return out


class CnQqRecognizer(NotAnAmount, PatternRecognizer):
    """QQ numbers (5-11 digits, no leading 0) with 'QQ'/'扣扣' just before them. Group numbers
    (QQ群, 群号) name a public chat group, not a person: they count only with ``groups=True``."""

    PATTERNS = [Pattern("cn qq", r"(?<!\d)[1-9]\d{4,10}(?!\d)", 0.7)]
    KEYWORD = regex.compile(r"(?:qq|扣扣)\s*(?P<group>群|group)?\s*(?:号码|號碼|号|號|账号|帳號|number|no\.?|id)?"
                            r"\s*(?P<group2>群)?\s*[:：]?\s*$", regex.IGNORECASE)
    GROUP = regex.compile(r"群号|群號|群[:：]", regex.IGNORECASE)

    def __init__(self, supported_language: str = "xx", groups: bool = False, **kw):
        super().__init__(supported_entity="CN_QQ", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)
        self.groups = groups

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        out = []
        for r in super().analyze(text, entities, nlp_artifacts, regex_flags):
            before = text[max(0, r.start - 12):r.start]
            k = self.KEYWORD.search(before)
            if k is None and not (self.groups and self.GROUP.search(before)):
                continue
            if not self.groups and (self.GROUP.search(before) or (k and (k.group("group") or k.group("group2")))):
                continue
            out.append(r)
        return out


# WeChat: the word (and the homophones ads use to dodge filters), then an optional label
_WECHAT = r"(?:微信|薇信|威信|徽信|v信|(?<![a-z])(?:weixin|wechat|wx|vx))"
_WECHAT_LABEL = r"(?:(?:号码|號碼|号|號|账号|帳號|id)\s*(?:是|为|為|is)?\s*[:：]?|(?:是|为|為|is)?\s*[:：])"
_WECHAT_ID = r"(?<![a-z0-9_\-])(?:[a-z][a-z0-9_\-]{5,19}|[1-9]\d{4,10})(?![a-z0-9_\-])"


class CnWechatRecognizer(PatternRecognizer):
    """WeChat IDs right after 微信 / WeChat / wx / vx (or 薇信, 威信, V信): a handle of 6-20 letters,
    digits, ``_`` or ``-`` starting with a letter, or the QQ or mobile number the account is found
    by. A handle of letters alone counts only after a label (微信号, WeChat ID, a colon): "your
    WeChat account" names no account. Official accounts (微信公众号) are public: the keyword must
    stand right before the ID, so they never match. Each pattern matches from the keyword and keeps
    the ID alone (``\\K``): the regex looks for the rare keyword, never tries every word as a handle."""

    PATTERNS = [Pattern("wechat id after a label", rf"{_WECHAT}\s*{_WECHAT_LABEL}\s*\K{_WECHAT_ID}", 0.7),
                Pattern("wechat id with a digit, _ or -", rf"{_WECHAT}\s*\K(?=[a-z0-9_\-]*[0-9_\-]){_WECHAT_ID}", 0.7)]

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_entity="CN_WECHAT", patterns=self.PATTERNS, supported_language=supported_language,
                         global_regex_flags=ASCII_FLAGS, **kw)


class SuffixCutEmailRecognizer(EmailRecognizer):
    """presidio's e-mail recognizer, finding addresses run into the following word
    (``nu@digifun.cnWAP: ...``): when the last label is no public suffix, it is cut to the
    longest prefix that is one, at a lower-to-upper case change first. The suffix list is the
    snapshot bundled with tldextract (no network).

    And addresses with accented, Greek or Cyrillic letters (``josé.garcía@correo.es``,
    ``info@münchen.de``, ``почта@пример.рф``): presidio's ASCII pattern found ``a@correo.es`` in
    the first, and scrubbing left the name ``josé.garcí`` in the text; here the whole address is
    one finding."""

    INTERNATIONAL = regex.compile(
        rf"(?<!{ADDRESS_LETTER}|[._%+\-])(?:{ADDRESS_LETTER}|[_%+\-])(?:{ADDRESS_LETTER}|[._%+\-])*"
        rf"@{ADDRESS_LETTER}(?:(?:{ADDRESS_LETTER}|-)*{ADDRESS_LETTER})?"
        rf"(?:\.{ADDRESS_LETTER}(?:(?:{ADDRESS_LETTER}|-)*{ADDRESS_LETTER})?)*\.(?:\p{{Latin}}{{2,}}|\p{{Cyrillic}}{{2,}}|"
        rf"\p{{Greek}}{{2,}}|xn--[a-z0-9\-]+)", regex.IGNORECASE)

    def __init__(self, supported_language: str = "xx", **kw):
        super().__init__(supported_language=supported_language, **kw)
        import tldextract

        self._extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    def validate_result(self, pattern_text: str):
        # a known public suffix ends the domain; the domain may be one itself (``x@gov.ua``,
        # ``x@bielawa.pl``: a registry's own domain, where presidio's check on ``fqdn`` said no)
        return self._extract(pattern_text).suffix != ""

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None, regex_flags=None) -> List[RecognizerResult]:
        out = super().analyze(text, entities, nlp_artifacts, regex_flags)
        for m in regex.finditer(r"(?<![\w.+-])[\w.+%-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", text,
                                flags=regex.ASCII):
            if any(r.start <= m.start() < r.end for r in out):
                continue
            cut = self._cut(m.group())
            if cut:
                out.append(RecognizerResult("EMAIL_ADDRESS", m.start(), m.start() + len(cut), 0.5))
        if not text.isascii():
            out = self._international(text, out)
        return out

    def _international(self, text: str, found: list) -> list:
        """Addresses with non-ASCII letters, whole; an ASCII finding inside one gives way to it."""
        for m in self.INTERNATIONAL.finditer(text):
            if m.group().isascii():
                continue
            address = m.group() if self.validate_result(m.group()) else self._cut(m.group())
            if not address:
                continue
            start, end = m.start(), m.start() + len(address)
            inside = [r for r in found if r.start >= start and r.end <= end]
            if any(r.start < end and r.end > start for r in found if r not in inside):
                continue
            found = [r for r in found if r not in inside]
            found.append(RecognizerResult("EMAIL_ADDRESS", start, end, max([1.0] + [r.score for r in inside])))
        return found

    def _cut(self, address: str) -> str | None:
        head, _, last = address.rpartition(".")
        changes = [i for i in range(1, len(last)) if last[i - 1].islower() and last[i].isupper()]
        for n in changes + list(range(len(last) - 1, 1, -1)):
            candidate = f"{head}.{last[:n]}"
            parts = self._extract(candidate)
            if parts.domain and parts.suffix.lower().rsplit(".", 1)[-1] == last[:n].lower():
                return candidate
        return None


PRESIDIO = {
    "EMAIL_ADDRESS": SuffixCutEmailRecognizer, "CREDIT_CARD": PaymentCardRecognizer, "IBAN_CODE": IbanRecognizer,
    "IP_ADDRESS": DottedChainSafeIpRecognizer, "URL": CjkSafeUrlRecognizer, "US_SSN": ContextSsnRecognizer,
}
CHINESE = {
    "CN_MOBILE": CnMobileRecognizer, "CN_LANDLINE": CnLandlineRecognizer, "CN_RESIDENT_ID": CnResidentIdRecognizer,
    "CN_BANK_CARD": CnBankCardRecognizer, "CN_PASSPORT": CnPassportRecognizer, "CN_QQ": CnQqRecognizer,
    "CN_WECHAT": CnWechatRecognizer,
}
ALL_ENTITIES = [*PRESIDIO, "PHONE_NUMBER", *CHINESE]


def build_recognizers(entities: list[str], language: str, qq_groups: bool = False) -> list:
    """The recognizers for ``entities``, compiled ASCII-safe."""
    out = []
    for name in entities:
        if name == "PHONE_NUMBER":
            out.append(ContextPhoneRecognizer(supported_language=language))
        elif name == "CN_QQ":
            out.append(CnQqRecognizer(supported_language=language, groups=qq_groups))
        elif name in PRESIDIO:
            rec = PRESIDIO[name](supported_language=language)
            rec.global_regex_flags = ASCII_FLAGS
            out.append(rec)
        elif name in CHINESE:
            out.append(CHINESE[name](supported_language=language))
    return out
