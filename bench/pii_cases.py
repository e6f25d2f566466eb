"""Labelled PII cases for the accuracy benchmark and the tests: real formats, generated values.

* Phones: phonenumbers' example numbers (mobile and fixed line) of 40 regions, written the ways
  people write them (E.164, international, national, with dashes, dots, no spaces); and Faker's
  phone formats of every locale it has (a second, independent source of real formats). Each in
  sentences with a phone word nearby and in sentences without one.
* Cards: Luhn-valid numbers of every major network and length, plain, in groups of four with
  spaces, dashes or dots, and Amex's 4-6-5, beside other numbers or run into a word; and
  Luhn-valid numbers that are no card by prefix or length.
* US Social Security numbers (Faker's), with dashes, spaces or none, with and without an SSN word.
* E-mail addresses of 13 locales: Faker's own, and the person's name in its own letters, at an
  ASCII domain and at an IDN one.
* Non-phones that must stay: dates, times, versions, amounts, ranges, order and tracking numbers,
  ISBNs, coordinates, years, Chinese amounts and prices.
"""

from __future__ import annotations

import random

from corpusforge.text.pii_numbers import NETWORKS, card_network_ok, luhn_ok

REGIONS = ["US", "GB", "DE", "FR", "ES", "IT", "IN", "BR", "JP", "CN", "AU", "RU", "MX", "NL", "SE", "PL", "KR",
           "ZA", "NG", "EG", "TR", "AR", "CH", "BE", "IE", "IL", "CA", "PT", "AT", "DK", "NO", "FI", "CZ", "GR",
           "HU", "RO", "UA", "ID", "PH", "VN"]
WITH_CONTEXT = ["Call me on {} tomorrow.", "Phone: {}", "You can reach the office at {}.", "Tel. {} (weekdays)",
                "请拨打{}联系我们。", "联系电话：{}", "My mobile number is {}", "Fax {} or e-mail."]
NO_CONTEXT = ["{}", "John Smith, {}, 42 Elm Street", "- {}\n- next line", "Details: {}."]
# a phone word run into the number, as forms, signatures and PDF text print it; and the same
# numbers run into words that say they are codes, which must stay
GLUED_PHONE_CONTEXTS = ["Tel.{}", "phone{} (office)", "Ph#{}", "Fax{} or e-mail", "call{} now", "Tel No.{}"]
GLUED_CODE_CONTEXTS = ["ID{}", "SKU{} in stock", "ref#{}", "Order No.{}", "v{}", "ABC{}"]


# area codes as they are printed in Chinese (full-width brackets, an em dash) and German (a slash
# with spaces, DIN 5008's old form) text, and a US area code in brackets with spaces; and what
# looks like them but is none (a bracketed range of years, a score list)
CN_AREA = ["010", "020", "021", "022", "023", "024", "025", "027", "028", "029", "0311", "0371", "0431", "0451",
           "0531", "0551", "0571", "0591", "0731", "0755", "0757", "0769", "0871", "0898"]
DE_AREA = ["030", "040", "089", "069", "0221", "0211", "0711", "0431", "0341", "0351"]


def printed_phone_sentences(rng: random.Random, n: int = 40) -> list[tuple[str, tuple[int, int], str]]:
    """[(text, span, how)]: area-code phones in the printed forms above, with a phone word."""
    out = []

    def local(k: int) -> str:
        return str(rng.randint(2, 8)) + "".join(rng.choice("0123456789") for _ in range(k - 1))

    for _ in range(n):
        area = rng.choice(CN_AREA)
        number = local(8 if len(area) == 3 else 7)
        for how, written, t in (("（区号）号码", f"（{area}）{number}", "联系电话：{}，欢迎来电。"),
                                ("区号—号码", f"{area}—{number}", "咨询电话{}（工作日）"),
                                ("(区号) 号码", f"({area}) {number}", "电话：{}")):
            out.append((t.format(written), (t.index("{}"), t.index("{}") + len(written)), how))
        area = rng.choice(DE_AREA)
        written = f"{area} / {local(3)} {rng.randint(10, 99)} {rng.randint(10, 99)}"
        out.append((f"Tel.: {written}", (6, 6 + len(written)), "Vorwahl / Nummer"))
        written = f"( {rng.randint(201, 989)} ) {rng.randint(201, 989)}-{rng.randint(1000, 9999)}"
        out.append((f"Call {written} today.", (5, 5 + len(written)), "( area ) number"))
    return out


def bracketed_ranges(rng: random.Random, n: int = 40) -> list[str]:
    """Years of a life or a period in brackets, and score lists: never phones."""
    out = []
    for _ in range(n):
        a = rng.randint(1700, 1990)
        b = a + rng.randint(20, 90)
        out += [f"Emil Du Bois-Reymond ({a}-{b}) taught there.", f"经济学家孟用潜（{a}－{b}）之女",
                f"the physiologist ( {a}-{b} ) , applied", f"砺卿（{a}—{b}）。", f"Scores {rng.randint(10, 99)} / "
                f"{rng.randint(10, 99)} / {rng.randint(10, 99)} / {rng.randint(10, 99)} today"]
    return out


def glued_phone_sentences(numbers, rng: random.Random):
    """[(text, (start, end), phone word or not)]: each number once run into a phone word, once
    into a code's word (the number written without a leading "+": a code never has one)."""
    out = []
    for number, _ in numbers:
        for templates, ctx in ((GLUED_PHONE_CONTEXTS, True), (GLUED_CODE_CONTEXTS, False)):
            written = number if ctx else number.lstrip("+")
            t = rng.choice(templates)
            start = t.index("{}")
            out.append((t.format(written), (start, start + len(written)), ctx))
    return out


def _fmt_variants(number_obj) -> list[str]:
    import phonenumbers
    from phonenumbers import PhoneNumberFormat as F

    intl = phonenumbers.format_number(number_obj, F.INTERNATIONAL)
    national = phonenumbers.format_number(number_obj, F.NATIONAL)
    out = {phonenumbers.format_number(number_obj, F.E164), intl, national,
           intl.replace(" ", "-"), intl.replace(" ", "."), national.replace(" ", "-")}
    return sorted(out)


def phone_examples() -> list[tuple[str, str]]:
    """(number, how written) for phonenumbers' example numbers of REGIONS."""
    import phonenumbers
    from phonenumbers import PhoneNumberType as T

    out = []
    for region in REGIONS:
        for kind in (T.MOBILE, T.FIXED_LINE):
            ex = phonenumbers.example_number_for_type(region, kind)
            if ex is not None:
                out += [(v, f"phonenumbers {region}") for v in _fmt_variants(ex)]
    return out


def faker_phones(per_locale: int = 6, seed: int = 0) -> list[tuple[str, str]]:
    """(number, locale) from Faker's phone formats of every locale (skipped if Faker is absent)."""
    try:
        import pkgutil

        import faker.providers.phone_number as pn
        from faker import Faker
    except ImportError:
        return []
    out = []
    for mod in pkgutil.iter_modules(pn.__path__):
        try:
            fake = Faker(mod.name)
            fake.seed_instance(seed)
            numbers = [fake.phone_number() for _ in range(per_locale)]
        except AttributeError:
            continue
        out += [(n, mod.name) for n in numbers if n.isascii() and sum(c.isdigit() for c in n) >= 7]
    return out


def phone_sentences(numbers, rng: random.Random):
    """[(text, (start, end), with_context)] placing each number once with a phone word, once without."""
    out = []
    for number, _ in numbers:
        for templates, ctx in ((WITH_CONTEXT, True), (NO_CONTEXT, False)):
            t = rng.choice(templates)
            start = t.index("{}")
            out.append((t.format(number), (start, start + len(number)), ctx))
    return out


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    return next(body + c for c in "0123456789" if luhn_ok(body + c))


def _group(number: str, sep: str) -> str:
    if len(number) == 15:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[i:i + 4] for i in range(0, len(number), 4))


def cards(rng: random.Random, per_kind: int = 20) -> list[tuple[str, str]]:
    """(written card number, network and length) for every network, every length, three ways."""
    out = []
    for name, (prefixes, lengths) in NETWORKS.items():
        for length in sorted(lengths):
            for _ in range(per_kind):
                n = _luhn_complete(rng.choice(prefixes), length, rng)
                out.append((rng.choice([n, _group(n, " "), _group(n, "-")]), f"{name} {length}"))
    return out


# cards next to other numbers, as forms and receipts write them: an expiry date, a CVC, an
# instalment count; a greedy digit-run match that swallows the neighbour fails Luhn
CARD_CONTEXTS = ["Card number {} expires 04/29.", "{} 04/29", "card {} exp 0429 cvv 123", "paid by {} 12 03/27",
                 "{}\n05/31\nCVC: 322", "卡号{} 有效期04/29", "Ref 12 {} thanks", "{} 1"]


# a card run into the label or word beside it, as text pulled out of forms and PDFs prints it
CARD_GLUED_CONTEXTS = ["Card No.{} exp 04/29", "card number {}exp 04/29", "VISA{} valid thru 04/29"]


def faker_cards(per_type: int = 20, seed: int = 0) -> list[tuple[str, str]]:
    """(card number, Faker card type) from Faker's generators of every card type (none without Faker)."""
    try:
        from faker import Faker
        from faker.providers.credit_card import Provider
    except ImportError:
        return []
    fake = Faker("en_US")
    fake.seed_instance(seed)
    return [(fake.credit_card_number(card_type=t), t) for t in Provider.credit_card_types for _ in range(per_type)]


def card_sentences(numbers, rng: random.Random, templates=CARD_CONTEXTS) -> list[tuple[str, tuple[int, int], str]]:
    """[(text, span, template)]: each number written plain or grouped, in one of ``templates``."""
    out = []
    for number, _ in numbers:
        digits = "".join(c for c in number if c.isdigit())
        written = rng.choice([digits, _group(digits, " "), _group(digits, "-")])
        t = rng.choice(templates)
        start = t.index("{}")
        out.append((t.format(written), (start, start + len(written)), t))
    return out


# group separators as web pages (a no-break space), PDFs (double spaces, tabs) and typesetting
# (en dash, a dash with spaces) print them
CARD_SEPARATORS = {"two spaces": "  ", "no-break space": "\u00a0", "tab": "\t", "en dash": "\u2013", "spaced dash": " - "}


def separated(number: str, sep: str) -> str:
    return _group(number, sep)


def dotted(number: str) -> str:
    """A card number printed in groups with dots (4111.1111.1111.1111; Amex 3782.822463.10005)."""
    return _group(number, ".")


# US Social Security numbers: with a word that names them (as forms and letters write them), and
# without one (where a plain nine-digit run is as often an order or reference number)
SSN_WITH_CONTEXT = ["SSN: {}", "My social security number is {}.", "ssn {} on file", "Social Security No. {}",
                    "SS# {}", "the employee's SSN is {} and"]
SSN_NO_CONTEXT = ["Order {} shipped.", "{}", "Ref {} attached.", "John Smith, {}, 42 Elm Street"]


def ssn_sentences(n: int = 60, seed: int = 0) -> list[tuple[str, tuple[int, int], str, bool]]:
    """[(text, span, way, with context)]: Faker's en_US SSNs written with dashes, spaces or none,
    in sentences with and without an SSN word (none without Faker)."""
    try:
        from faker import Faker
    except ImportError:
        return []
    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = fake.ssn().split("-")
        for way, written in (("dashes", f"{a}-{b}-{c}"), ("spaces", f"{a} {b} {c}"), ("plain", a + b + c)):
            for ctx, templates in ((True, SSN_WITH_CONTEXT), (False, SSN_NO_CONTEXT)):
                t = rng.choice(templates)
                start = t.index("{}")
                out.append((t.format(written), (start, start + len(written)), way, ctx))
    return out


# e-mail addresses in people's own letters (RFC 6531 local parts, IDN domains), from Faker's names
# and cities of locales whose alphabets go beyond ASCII; each locale's own top-level domain
EMAIL_LOCALES = {"de_DE": "de", "fr_FR": "fr", "es_ES": "es", "pt_BR": "com.br", "pl_PL": "pl", "cs_CZ": "cz",
                 "tr_TR": "com.tr", "sv_SE": "se", "hu_HU": "hu", "ru_RU": "рф", "uk_UA": "укр", "el_GR": "gr",
                 "vi_VN": "vn"}
EMAIL_CONTEXTS = ["Write to {} today.", "E-mail: {}", "({})", "邮箱{}获取", "Kontakt {}, danke"]


def email_sentences(per_locale: int = 20, seed: int = 0) -> list[tuple[str, tuple[int, int], str]]:
    """[(text, span, kind)]: per locale, Faker's own (ASCII) address, and an address of the
    person's name in their letters at an ASCII domain, and at their city's IDN domain; in one of
    EMAIL_CONTEXTS (none without Faker)."""
    try:
        from faker import Faker
    except ImportError:
        return []
    rng = random.Random(seed)
    out = []
    for locale, tld in EMAIL_LOCALES.items():
        fake = Faker(locale)
        fake.seed_instance(seed)
        for _ in range(per_locale):
            name = ".".join("".join(ch for ch in part.lower() if ch.isalpha())
                            for part in (fake.first_name(), fake.last_name()))
            city = "".join(ch for ch in fake.city().lower() if ch.isalpha() or ch == "-").strip("-")
            for kind, address in (("Faker's own", fake.email()), ("name in its letters", f"{name}@{fake.free_email_domain()}"),
                                  ("name and IDN domain", f"{name}@{city}.{tld}")):
                t = rng.choice(EMAIL_CONTEXTS)
                start = t.index("{}")
                out.append((t.format(address), (start, start + len(address)), kind))
    return out


def luhn_non_cards(rng: random.Random, n: int = 300) -> list[str]:
    """Luhn-valid 12-19 digit numbers that no network issues (by prefix or length)."""
    out = []
    while len(out) < n:
        num = _luhn_complete(rng.choice("0123456789"), rng.randint(12, 19), rng)
        if not card_network_ok(num):
            out.append(num)
    return out


NON_PHONES = [
    "The meeting is on 2019-07-20 at 14:30.", "Due 07/20/2019, shipped 20.07.2019.", "Version 10.0.19041.1288 is out.",
    "Revenue was $1,234,567.89 last year.", "It costs 1234567 USD.", "Order #20230715001 was shipped.",
    "Tracking number: 9400 1000 0000 0000 0000 00", "ISBN 978-3-16-148410-0", "ISBN-13: 9780306406157",
    "Located at 40.7128, -74.0060 in NYC.", "Coordinates 51.5074 -0.1278", "Population: 8 336 817 people",
    "In 1990-2000 the index rose.", "Between 1600 and 2400 points.", "Invoice 2023-0001234 is due.",
    "Build 1.2.3456789 fixed it.", "The range 100000-200000 is typical.", "Serial no. 123456789012",
    "薪金在3000-5000元之间。", "总价款为720000.00元。", "上证综指在1600-2400点之间波动。", "价格表：4700 7000 8100 9200",
    "订单号：2023071500123", "共计1234567元。", "面积约1200000平方米。", "运单号 773012345678901",
    "QQ群：123456789，欢迎加入。", "2019年07月20日", "人口13 9538 0000人", "编号 1101 0519 4912",
    "Model 2021-34567-89 was recalled.", "Account 12345678, sort code 12-34-56.",
]
CHINESE_NON_PII = [
    "薪金在3000-5000元之间，面议。", "本次交易总价款为720000.00元，分三期支付。", "上证综指在1600-2400点区间震荡。",
    "价格表 4700 7000 5400 6800", "QQ群：123456789 欢迎加入讨论。", "2008年销售收入达12345678元，同比增长23%。",
    "全年接待游客1350万人次，收入86.5亿元。", "股票代码600519，收盘价1800.00元。", "公司注册资本10000000元。",
]
