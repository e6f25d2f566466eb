"""Numbers that are not personal data (amounts, quantities), and payment cards by network.

``is_amount`` is shared by every number-shaped recognizer (phones, Chinese mobiles, landlines,
QQ numbers): a number written with a currency before it or a unit after it (``¥720000``,
``3000-5000元``, ``1600-2400点``, ``12 000 km``) is a quantity, never a phone or an account.

``PaymentCardRecognizer`` replaces presidio's credit-card recognizer, whose pattern misses the
2-series Mastercard range, 19-digit Visa and 12-digit Maestro numbers: a number of 12 to 19
digits (spaces or dashes allowed) is a card when it passes Luhn *and* its prefix and length
belong to a card network (ISO/IEC 7812 issuer ranges as the networks publish them). A
Luhn-valid number of another prefix or length (one in ten random numbers passes Luhn) is not.
"""

from __future__ import annotations

from typing import List

import regex
from presidio_analyzer import EntityRecognizer, RecognizerResult

CURRENCY_BEFORE = regex.compile(r"(?:[$€£¥￥₹₩₽]|US\$|HK\$|NT\$|A\$|C\$|RMB|CNY|USD|EUR|GBP|JPY|HKD|Rs\.?|人民币|"
                                r"价|價|售|约|約|共|计|計|合计|金额|金額)\s?$", regex.IGNORECASE)
UNIT_AFTER = regex.compile(
    r"^\s?(?:[元圆萬万亿億千百%％‰点點年月日号號次人个個件倍块塊吨噸米股手只台位名家所辆輛套间間户戶]|"
    r"美元|港元|港币|欧元|英镑|日元|公里|平方|亩|公斤|克|天|小时|分钟|秒|"
    r"(?:tons?|km|kg|mi|miles|usd|eur|gbp|cny|rmb|dollars?|euros?|pounds?|yuan|percent|people|points?|"
    r"years?|units?|shares?|votes?|copies|visitors|users|words|bytes|[kmg]b)(?![\p{Latin}]))",
    regex.IGNORECASE)


def is_amount(text: str, start: int, end: int) -> bool:
    """True when the number text[start:end] is written as an amount or a quantity."""
    return bool(CURRENCY_BEFORE.search(text, max(0, start - 6), start) or UNIT_AFTER.match(text[end:end + 12]))


def luhn_ok(digits: str) -> bool:
    d = [int(c) for c in digits if c.isdigit()]
    if len(d) < 12:
        return False
    total = 0
    for i, v in enumerate(reversed(d)):
        if i % 2:
            v *= 2
            if v > 9:
                v -= 9
        total += v
    return total % 10 == 0


def _r(lo: int, hi: int) -> list[str]:
    return [str(p) for p in range(lo, hi + 1)]


# network -> (prefixes, lengths)
NETWORKS = {
    "visa": (["4"], {13, 16, 19}),
    "mastercard": (_r(51, 55) + _r(2221, 2720), {16}),
    "amex": (["34", "37"], {15}),
    "discover": (["6011", "65"] + _r(644, 649) + _r(622126, 622925), set(range(16, 20))),
    # JCB publishes 3528-3589; test generators (Faker, and so presidio-research-style sets) issue JCB
    # numbers over the whole 35 block, and Luhn + length still guard it
    "jcb": (["35"], set(range(16, 20))),
    "jcb_legacy": (["2131", "1800"], {15}),
    "unionpay": (["62", "81"], set(range(16, 20))),
    "maestro": (["50", "56", "57", "58", "6304", "6390", "67", "0604"], set(range(12, 20))),
    "diners": (_r(300, 305) + ["3095", "36", "38", "39"], set(range(14, 20))),
    "mir": (_r(2200, 2204), set(range(16, 20))),
    "rupay": (["60", "82", "508", "353", "356"], {16}),
    "troy": (["9792"], {16}),
}
_BY_PREFIX = {}
for _name, (_prefixes, _lengths) in NETWORKS.items():
    for _p in _prefixes:
        _BY_PREFIX.setdefault(_p, set()).update(_lengths)
_PREFIX_LENGTHS = sorted({len(p) for p in _BY_PREFIX})


def card_network_ok(digits: str) -> bool:
    """The number's prefix and length belong to a card network."""
    return any(len(digits) in _BY_PREFIX.get(digits[:n], ()) for n in _PREFIX_LENGTHS)


def is_card(number: str) -> bool:
    digits = "".join(c for c in number if c.isdigit())
    return 12 <= len(digits) <= 19 and card_network_ok(digits) and luhn_ok(digits)


CARD_SEP = r"(?:[ \t\u00a0\u2007\u202f]{1,2}|[ ]?[\-\u2010\u2011\u2013\u2014][ ]?)"


class PaymentCardRecognizer(EntityRecognizer):
    """CREDIT_CARD: 12-19 digits, single spaces or dashes between groups, Luhn and a network's
    prefix and length."""

    # up to 40 digits: a card and a number beside it ("4111 ... 1111 04/29", "no. 12 4111 ... 1111") are
    # one candidate, and card_spans finds the card among its groups. Never the digits after a
    # decimal point or a sign, nor a part of a longer dotted number; a dot after a label is fine
    # ("Card No.5500 ..."). The groups may be printed with dots ("4111.1111.1111.1111", Amex 4.6.5).
    # Between groups: up to two spaces of any kind (a PDF's double space, HTML's no-break space, a
    # tab) or a dash (hyphen, en or em dash) with a space either side or none.
    CANDIDATE = regex.compile(rf"(?<![\d\-+])(?<!\d[.,])(?:\d(?:{CARD_SEP}?\d){{11,39}}|\d{{4}}(?:\.\d{{4,6}}){{2}}"
                              r"(?:\.\d{1,5}){0,2})(?!\d|[.,]\d)")
    # a candidate may touch Latin letters only when they are a word of letters alone ("card 4111...exp",
    # "VISA4111..."): text from forms and PDFs runs labels into numbers, while letters mixed with
    # digits around the run make it part of a code (a hash, a serial) that holds no card
    LETTERS_BEFORE = regex.compile(r"[\p{Latin}\d_]*\p{Latin}$")
    LETTERS_AFTER = regex.compile(r"\p{Latin}[\p{Latin}\d_]*")

    def __init__(self, supported_language: str = "xx"):
        super().__init__(supported_entities=["CREDIT_CARD"], supported_language=supported_language,
                         name="PaymentCardRecognizer")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None) -> List[RecognizerResult]:
        out = []
        for m in self.CANDIDATE.finditer(text):
            if not self.apart_from_codes(text, m.start(), m.end()):
                continue
            out += [RecognizerResult("CREDIT_CARD", m.start() + s, m.start() + e, 1.0) for s, e in card_spans(m.group())]
        return out

    def apart_from_codes(self, text: str, start: int, end: int) -> bool:
        """No letters touch text[start:end], or those that do are words of letters alone."""
        before = self.LETTERS_BEFORE.search(text, max(0, start - 64), start)
        after = self.LETTERS_AFTER.match(text, end, min(len(text), end + 64))
        return all(w is None or w.group().isalpha() for w in (before, after))


GROUP = regex.compile(r"\d+")


def card_spans(candidate: str) -> list[tuple[int, int]]:
    """Cards inside a candidate digit run: the whole run, else runs of whole groups printed as
    cards are printed.

    The candidate pattern is greedy, so a card followed by a short number ("4111111111111111 02/28",
    "card 4111 1111 1111 1111 0") or preceded by one ("no. 12 4111 ...") is one candidate that fails
    Luhn; the card is a run of its whole groups at either end of the candidate. Groups are never
    split, and a run counts only when it is grouped as cards are printed (one plain run,
    4-4-4-4..., Amex 4-6-5, Diners 4-6-4): any run of a list of numbers ("3 5 7 12 4 ...",
    "1201 1202 1203 ...") passes Luhn by chance one time in ten, so the runs tried are kept few.
    Then the leftmost, then the longest.
    """
    if is_card(candidate):
        return [(0, len(candidate))]
    groups = [(g.start(), g.end()) for g in GROUP.finditer(candidate)]
    last = len(groups) - 1
    passing = []
    for i, j in [(0, j) for j in range(last + 1)] + [(i, last) for i in range(1, last + 1)]:   # runs at an end
        sizes = [e - s for s, e in groups[i:j + 1]]
        printed = (len(sizes) == 1 or all(n == 4 for n in sizes[:-1]) and sizes[-1] <= 4
                   or sizes in ([4, 6, 5], [4, 6, 4]))
        s, e = groups[i][0], groups[j][1]
        if printed and 12 <= sum(sizes) <= 19 and is_card(candidate[s:e]):
            passing.append((s, s - e, e))
    found: list[tuple[int, int]] = []
    for s, _, e in sorted(passing):
        if all(e <= fs or s >= fe for fs, fe in found):
            found.append((s, e))
    return sorted(found)
