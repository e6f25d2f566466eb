"""Phone numbers as people write them: shape, context and the phonenumbers library, scored.

presidio's phone recognizer keeps only numbers that ``phonenumbers`` calls valid for one of a few
regions, so real numbers written in other countries' formats, with a trunk ``(0)``, a short area
code or an extension are missed ("(37) 788-063", "699 956 915", "+1-984-182-0190x1234"), while an
amount such as "3000-5000" can pass as a valid local number. Here a number is a candidate by its
shape (7 to 15 digits in groups joined by single separators, an optional ``+``/``00`` country
code, an area code in brackets, an extension) and is scored:

* what it is not, first: a date, an IP address, a decimal amount, coordinates, an ISBN, a range of
  round numbers, a number glued to a currency or a unit (``元``, ``%``, ``km``) and a number whose
  nearest keyword says what else it is (order, invoice, ISBN, QQ, 订单, 编号 ...) are never phones;
* its shape: an international prefix that ``phonenumbers`` accepts scores 0.85 (0.6 if only
  possible); a bracketed area code, three or more groups, or a national trunk ``0`` (before two
  groups, or leading a bare run of 9-11 digits) score 0.5; any other bare digit run or pair of
  groups scores 0.2, below the stage's threshold: such numbers are everywhere in text;
* its context: a phone word (tel, phone, call, fax, 手机, 电话, 联系 ...) as the nearest keyword in
  the same sentence, up to 40 characters before or 16 after, adds 0.4.

Validity in a region is not asked of national numbers: written formats differ too much from the
library's metadata (the misses above), and the shape and context decide at every threshold.
"""

from __future__ import annotations

import datetime as _dt
from typing import List

import regex
from presidio_analyzer import EntityRecognizer, RecognizerResult

from corpusforge.text.pii_numbers import is_amount

SEPARATORS = " -./\u00a0\u2010\u2011\u2013\u2014"
# every candidate's main part holds 7+ digits joined by at most 4 of these characters: the
# stage's pre-scan trigger
TRIGGER = r"\d(?:[ \-./\u00a0\u2010\u2011\u2013\u2014()]{0,4}\d){6,}"
EXTENSION = regex.compile(r"[ ]?(?:x|ext\.?|extn\.?|extension|#|转|分机)[ ]?\d{1,6}$", regex.IGNORECASE)
GROUPS = regex.compile(r"\d+")

PHONE_WORDS = (r"phone|telephone|tel|tél|ph|mob|mobile|cell|cellphone|fax|call|calling|dial|ring|text|sms|"
               r"whatsapp|hotline|helpline|contact|reach|telefon|teléfono|telefone|telefono|"
               r"handy|móvil|movil|celular|portable|手机|手機|电话|電話|联系|聯繫|聯絡|致电|拨打|撥打|来电|热线|"
               r"熱線|传真|傳真|座机|咨询|諮詢|服务台|客服")
OTHER_WORDS = (r"isbn|issn|doi|order|invoice|tracking|shipment|parcel|account|acct|iban|routing|sku|serial|"
               r"model|part|patent|case|ref|reference|ticket|policy|passport|licen[cs]e|ssns?|ss ?#|ssid|social security|"
               r"zip|postal|postcode|version|build|page|pages|pp|vol|isin|cusip|lot|batch|qq|扣扣|群|订单|單號|"
               r"单号|编号|編號|运单|運單|快递|快遞|账号|帐号|賬號|卡号|卡號|型号|型號|序列号|身份证|身份證|邮编|郵編|"
               r"专利|專利|合同|金额|金額|价格|價格|总价|價款|价款|薪|工资|指数|指數|综指|股价|人口|面积|代码|代碼|"
               r"股票|证券|批准文号|统一社会信用代码|注册号|登记号")
# "number", "no." and 号码 take their meaning from the word before them (phone number, serial no.,
# account number); alone ("my number is") they mean a phone
GENERIC_WORDS = r"number|numbers|nr|no|num|号码|號碼"
KEYWORD = regex.compile(rf"(?<![\p{{Latin}}])(?:(?P<phone>{PHONE_WORDS})|(?P<other>{OTHER_WORDS})|"
                        rf"(?P<generic>{GENERIC_WORDS}))(?![\p{{Latin}}])", regex.IGNORECASE)
BEFORE, AFTER = 40, 16
# a chain of digit groups, each joined by one separator (or a bracket); the lookbehind keeps
# numbers glued to letters, signs and other numbers out (ID-5551234, v10.0.1, 3.14159), except
# after a phone word run into the number as forms and PDFs print it (phone4155552671,
# tel.415-555-2671, Ph#..., Fax+1 ..., Tel No.4155552671)
_SEP = r"[ \-./\u00a0\u2010\u2011\u2013\u2014]"
# a slash or dash with a space either side (German "030 / 123 45 67", "415 - 555 - 2671"): also how
# ranges and fractions are written, so such a number is a phone only with a phone word (score)
_SPACED = r" [/\-\u2013\u2014] "
SPACED = regex.compile(_SPACED)
# digits, or bracketed: (0755), (0), (+370), (06 1), ( 415 ); never a bracketed range of years (1833-1890)
_GROUP = r"(?:\( ?\+?(?:\d{1,6}|\d{1,3}[ \-]\d{1,3}) ?\)|\d{1,15})"
CHAIN = regex.compile(
    rf"(?:(?<=(?<![\p{{Latin}}])(?:{PHONE_WORDS})(?:\s?(?:no|nr|num|number))?[.:#]?)"   # a phone word run into it
    r"|(?<![\p{Latin}\d+@_\-./,#$€£¥￥]|\d[ \-./]))"      # else never inside a longer chain or a code
    r"(?:\+\s?|\b00[ \-.]?)?"                           # international prefix: +44, 0049
    rf"{_GROUP}(?:(?:{_SEP}\s?|{_SPACED}|(?<=\))|(?=\(|\s\())\s?{_GROUP}){{0,7}}"
    r"(?:[ ]?(?:x|ext\.?|extn\.?|extension|#|转|分机)[ ]?\d{1,6})?"   # extension
    r"(?![\p{Latin}\d%％‰]|[.,\-:]\d)", regex.IGNORECASE)
CLAUSE_END = regex.compile(r"[。；;！？!?\n](?!.*[。；;！？!?\n])", regex.DOTALL)   # the last one in the text


def _date_like(groups: list[str], seps: set[str]) -> bool:
    if len(groups) != 3 or len(seps) != 1 or not seps <= set("-./ "):
        return False
    a, b, c = groups
    for y, m, d in ((a, b, c), (c, b, a), (c, a, b)):
        if len(y) in (2, 4) and 1 <= len(m) <= 2 and 1 <= len(d) <= 2:
            year = int(y) if len(y) == 4 else 2000
            try:
                _dt.date(year, int(m), int(d))
                return len(y) == 2 or 1000 <= year <= 2999
            except ValueError:
                continue
    return False


def _isbn(digits: str) -> bool:
    if len(digits) == 13 and digits[:3] in ("978", "979"):
        return sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(digits)) % 10 == 0
    return False


def _not_a_phone(span: str, groups: list[str], seps: set[str]) -> bool:
    digits = "".join(groups)
    if not 7 <= len(digits) <= 15 or len(set(digits)) == 1:
        return True
    if _date_like(groups, seps) or _isbn(digits):
        return True
    if seps == {"."} and len(groups) == 4 and all(len(g) <= 3 and int(g) <= 255 for g in groups):
        return True                                   # an IPv4 address
    if "." in seps and len(groups) == 2 and len(groups[1]) <= 2:
        return True                                   # a decimal amount: 720000.00
    if "." in seps and len(seps) > 1 and not span.startswith(("+", "00")):
        return True                                   # decimals in a range or pair: 1.0840-1.1460
    if len(groups) >= 6 and all(len(g) <= 2 for g in groups) and not span.startswith(("+", "00")):
        return True                                   # a list of small numbers: 13 17 18 20 21 23
    if sum(len(g) == 1 for g in groups) > 2:
        return True                                   # an OID or a section number: 1.3.6.1.4.1.311
    return False


class ContextPhoneRecognizer(EntityRecognizer):
    """PHONE_NUMBER by shape, context and phonenumbers (see the module's docstring)."""

    def __init__(self, supported_language: str = "xx"):
        super().__init__(supported_entities=["PHONE_NUMBER"], supported_language=supported_language,
                         name="ContextPhoneRecognizer")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None) -> List[RecognizerResult]:
        out = []
        for m in CHAIN.finditer(text):
            start, end = m.span()
            span = m.group()
            while span and span[-1] in SEPARATORS + "(":
                span, end = span[:-1], end - 1
            score = self.score(text, start, end, span)
            if score is not None:
                out.append(RecognizerResult("PHONE_NUMBER", start, end, score))
        return out

    def score(self, text: str, start: int, end: int, span: str) -> float | None:
        main = EXTENSION.sub("", span)
        groups = GROUPS.findall(main)
        seps = {ch for ch in main.strip("+(") if not ch.isdigit() and ch not in "()+"}
        if _not_a_phone(main, groups, seps) or is_amount(text, start, end):
            return None
        context = self.keyword_near(text, start, end)
        if context == "other":
            return None
        brackets = "(" in main
        zero_trunk = groups[0].startswith("0") and groups[0][1:2] != "0" and (
            (len(groups) == 2 and len(groups[0]) >= 2) or (len(groups) == 1 and 9 <= len(groups[0]) <= 11))
        round_numbers = len(groups) >= 2 and all(g.endswith("00") for g in groups)
        spaced = SPACED.search(main) is not None          # "030 / 123 45 67": a range or fraction's shape too
        shaped = (brackets or len(groups) >= 3 or zero_trunk) and not round_numbers and not spaced
        ssn_shape = seps == {"-"} and [len(g) for g in groups] == [3, 2, 4]
        if ssn_shape:
            shaped = False                            # the shape of a US SSN (001-... included: not "00" + 1)
        score = 0.5 if shaped else 0.2
        if main.startswith(("+", "00")) and not ssn_shape:   # with its country code: the library can judge it
            valid = self.validity("+" + main[2:] if main.startswith("00") else main)
            score = max(score, {2: 0.85, 1: 0.6}.get(valid, 0.3))
        if context == "phone":
            score += 0.4
        return min(score, 1.0)

    @staticmethod
    def keyword_near(text: str, start: int, end: int) -> str | None:
        """'phone' or 'other' by the keyword nearest the number (before it, else after it)."""
        lo = max(0, start - BEFORE)
        stop = CLAUSE_END.search(text[lo:start])         # context stays inside the sentence
        lo = lo + stop.end() if stop else lo
        found = list(KEYWORD.finditer(text, lo, start))
        while len(found) >= 2 and found[-1].group("generic") and found[-1].start() - found[-2].end() <= 12:
            found.pop()                                  # "serial no." -> serial; "phone number" -> phone
        if not found:
            hi = min(len(text), end + AFTER)
            stop = CLAUSE_END.search(text, end, hi)
            found = [k for k in [KEYWORD.search(text, end, stop.start() if stop else hi)] if k]
        if not found:
            return None
        return "other" if found[-1].group("other") else "phone"

    @staticmethod
    def validity(number: str) -> int:
        """2: valid, 1: possible, 0: neither, for a number with its country code."""
        import phonenumbers

        try:
            parsed = phonenumbers.parse(number, None)
        except phonenumbers.NumberParseException:
            return 0
        if phonenumbers.is_valid_number(parsed):
            return 2
        return 1 if phonenumbers.is_possible_number(parsed) else 0
