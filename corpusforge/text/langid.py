"""Language identification, per document, written to ``lang``.

Two detectors ship:

``lingua`` (default): lingua-language-detector, an n-gram model of 75 languages whose models ship
inside its wheel (nothing is downloaded), run over the first ``sample_chars`` characters of each
document on all cores. The script detector runs first: documents whose dominant script is Han,
kana or Hangul keep its answer (zh/ja/ko: kana decides Japanese, which a character model can miss
on kanji-heavy text); so does plainly English text (English function words at least
``english_fast_path`` of 30+ words: on the UDHR no other language passes 0.12); lingua reads the rest, and where it finds no language (digits, symbols)
the script detector's answer stands (``und`` with fewer than ``min_letters`` letters). ``languages`` limits lingua to the languages a
corpus can hold (faster and more accurate). Codes are ISO 639-1 (``en``, ``fr``, ``zh``).

``script``: the fast fallback, columnar: it counts characters of each script in
the first 2,000 characters with Arrow regex kernels (RE2 Unicode classes; non-Latin scripts
only for documents that have non-ASCII bytes) and picks the dominant one.

* Han -> ``zh``, or ``ja`` when Hiragana/Katakana make up at least 10% of Han + kana; Hangul -> ``ko``;
  Cyrillic -> ``ru``; Arabic -> ``ar``; Devanagari -> ``hi``; Greek -> ``el``; Thai -> ``th``.
* Latin -> ``en`` when English function words make up at least ``english_min_stopword_ratio``
  of the words, otherwise ``latin`` (a Latin-script language that is not English).
* Scripts are compared by estimated words (a CJK character counts 1, letters of alphabetic
  scripts 1/4), so a Chinese article quoting Latin names stays ``zh``.
* Fewer than ``min_letters`` (weighted) letters -> ``und`` (undetermined).

Script detection cannot tell Spanish from French (bench/RESULTS.md measures both detectors on
40 languages). Your own detector plugs in with ``detector: package.module:function``
(``function(texts: list[str]) -> (langs, confidences)``).
Documents whose language is not in ``keep`` (when given) are rejected.
"""

from __future__ import annotations

import unicodedata


import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from corpusforge.errors import ConfigError
from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split

SCRIPTS = {  # lang code -> RE2 class; order breaks ties
    "latin": r"\p{Latin}", "zh": r"\p{Han}", "kana": r"[\p{Hiragana}\p{Katakana}]", "ko": r"\p{Hangul}",
    "ru": r"\p{Cyrillic}", "ar": r"\p{Arabic}", "hi": r"\p{Devanagari}", "el": r"\p{Greek}", "th": r"\p{Thai}",
}
EN_FUNCTION_WORDS = r"(?i)\b(the|and|of|to|in|is|that|it|was|for|with|as|on|be|at|by|this|have|from|are)\b"
CJK_LANGS = frozenset({"zh", "ja", "ko"})


class LangIdConfig(StageConfig):
    detector: str = Field("lingua", description="'lingua', 'script', or 'package.module:function' for your own.")
    languages: list[str] | None = Field(None, description="lingua: ISO 639-1 codes it may answer (default: all 75).")
    sample_chars: int = Field(300, ge=50, description="lingua: characters read from the start of each document.")
    english_fast_path: float | None = Field(
        0.2, ge=0, le=1, description="lingua: accept `en` without lingua when English function words are at least "
        "this share of 30+ words (other languages stay under 0.12 on the UDHR); null asks lingua always.")
    keep: list[str] | None = Field(None, description="Reject documents whose language is not listed.")
    min_letters: float = Field(3, ge=0)
    english_min_stopword_ratio: float = Field(0.05, ge=0, le=1)
    overwrite: bool = Field(False, description="Replace a `lang` that the input already set.")

    @model_validator(mode="after")
    def _known_languages(self):
        if self.detector == "lingua" and self.languages is not None:
            _lingua_languages(tuple(self.languages))     # raises a ConfigError naming the field
        return self


def _script_chars(text, pattern: str) -> np.ndarray:
    """Characters of one script per document: the length lost by deleting its runs (one
    regex replace over runs is several times faster than counting single-character matches)."""
    kept = pc.replace_substring_regex(text, pattern + "+", "")
    return (pc.utf8_length(text).to_numpy(zero_copy_only=False)
            - pc.utf8_length(kept).to_numpy(zero_copy_only=False)).astype(np.float64)


def script_detect(text: pa.ChunkedArray | pa.Array, cfg: LangIdConfig, sample_chars: int = 2000
                  ) -> tuple[pa.Array, pa.Array]:
    """Dominant script of the first ``sample_chars`` characters of each document."""
    lang, conf, _ = _script_detect(text, cfg, sample_chars)
    return lang, conf


def _script_detect(text, cfg: LangIdConfig, sample_chars: int):
    """script_detect, plus each document's words and English function words (zero where the
    script is not Latin), which lingua_detect's English fast path reads."""
    text = pc.utf8_slice_codeunits(text, 0, sample_chars)
    names = list(SCRIPTS)
    counts = np.zeros((len(text), len(names)))
    counts[:, 0] = _script_chars(text, SCRIPTS["latin"])
    non_ascii = pc.greater(pc.binary_length(text), pc.utf8_length(text)).to_numpy(zero_copy_only=False)
    if non_ascii.any():   # other scripts are all outside ASCII: skip them for pure-ASCII batches
        sub = text.filter(pa.array(non_ascii))
        for j, name in enumerate(names[1:], start=1):
            counts[non_ascii, j] = _script_chars(sub, SCRIPTS[name])
    # compare scripts by estimated words, not characters: a CJK character or Hangul syllable
    # is about a word, an alphabetic script needs about four letters for one
    word_weight = np.array([1.0 if n in ("zh", "kana", "ko", "th") else 0.25 for n in names])
    counts = counts * word_weight
    names = np.array(names)
    total = counts.sum(axis=1)
    best = counts.argmax(axis=1)
    lang = names[best].astype(object)
    han = counts[:, names.tolist().index("zh")]
    kana = counts[:, names.tolist().index("kana")]
    # Japanese prose is 30-60% kana; a Chinese article quoting a Japanese title has a few
    lang[(kana >= 0.1 * (han + kana)) & (kana > 0) & ((lang == "zh") | (lang == "kana"))] = "ja"
    lang[lang == "kana"] = "ja"
    conf = np.divide(counts[np.arange(len(best)), best] + np.where(lang == "ja", han, 0), np.maximum(total, 1))
    latin = lang == "latin"
    words = fw = np.zeros(len(lang), np.int64)
    if latin.any():
        words = pc.count_substring_regex(text, r"\S+").to_numpy(zero_copy_only=False)
        fw = pc.count_substring_regex(text, EN_FUNCTION_WORDS).to_numpy(zero_copy_only=False)
        english = latin & (fw >= cfg.english_min_stopword_ratio * np.maximum(words, 1))
        lang[english] = "en"
    lang[total < cfg.min_letters] = "und"
    return pa.array(lang, pa.string()), pa.array(np.clip(conf, 0, 1), pa.float64()), (words, fw)


class LangId(Stage):
    name = "text.langid"
    kinds = ("text",)
    Config = LangIdConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"score_langid_confidence": pa.float64()}

    def _detector(self):
        if self.config.detector == "script":
            return lambda texts: script_detect(texts, self.config)
        if self.config.detector == "lingua":
            return lambda texts: lingua_detect(texts, self.config)
        from corpusforge.registry import load_plugin

        try:
            user = load_plugin(self.config.detector, "detector")
        except KeyError as exc:
            raise ConfigError(f"text.langid.detector: {exc.args[0]}") from None

        def run(texts):
            langs, conf = user(texts.to_pylist())
            return pa.array(langs, pa.string()), pa.array(conf, pa.float64())
        return run

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        cfg: LangIdConfig = self.config
        lang, conf = self._detector()(table.column("text"))
        if not cfg.overwrite:
            lang = pc.coalesce(table.column("lang"), lang)
        table = table.set_column(table.schema.get_field_index("lang"), "lang", lang)
        table = table.append_column("score_langid_confidence", conf)
        for value, count in zip(*_vc(lang)):
            stats.counters[f"lang_{value}"] += count
        reason = detail = None
        if cfg.keep:
            bad = pc.invert(pc.is_in(lang, pa.array(cfg.keep)))
            reason = pc.if_else(bad, pa.scalar("language_not_kept"), pa.scalar(None, pa.string()))
            detail = pc.if_else(bad, pc.binary_join_element_wise(pa.scalar("lang "), lang,
                                                                 pa.scalar(f" not in {cfg.keep}"), ""),
                                pa.scalar(None, pa.string()))
        else:
            reason = pa.nulls(table.num_rows, pa.string())
        return split(table, reason, detail, stats)


def _lingua_languages(codes: tuple[str, ...] | None):
    from lingua import Language

    if codes is None:
        return Language.all()
    known = {lang.iso_code_639_1.name.lower(): lang for lang in Language.all()}
    unknown = [c for c in codes if c.lower() not in known]
    if unknown:
        raise ConfigError(f"text.langid.languages: {unknown} are not lingua languages "
                          f"(ISO 639-1 codes: {', '.join(sorted(known))})")
    if len(codes) < 2:
        raise ConfigError("text.langid.languages: lingua needs at least two languages")
    return [known[c.lower()] for c in codes]


_DETECTORS: dict = {}


def lingua_detector(codes: tuple[str, ...] | None):
    """One lingua detector per process and language set (its models load lazily, once)."""
    if codes not in _DETECTORS:
        from lingua import LanguageDetectorBuilder

        langs = _lingua_languages(codes)
        _DETECTORS[codes] = LanguageDetectorBuilder.from_languages(*langs).build()
    return _DETECTORS[codes]


def lingua_detect(text: pa.ChunkedArray | pa.Array, cfg: LangIdConfig) -> tuple[pa.Array, pa.Array]:
    """lingua over the documents the script detector cannot settle (see the module docstring)."""
    script_lang, script_conf, (words, fw) = _script_detect(text, cfg, 2000)
    lang = np.array(script_lang.to_pylist(), dtype=object)
    conf = script_conf.to_numpy(zero_copy_only=False).copy()
    # scripts the script detector does not know (Bengali, Hebrew, ...) come back as und: ask lingua
    ask = ~np.isin(lang, ["zh", "ja", "ko"])
    if cfg.english_fast_path is not None:
        ask &= ~((lang == "en") & (words >= 30) & (fw >= cfg.english_fast_path * words))
    ask = np.flatnonzero(ask)
    if len(ask):
        sample = pc.utf8_slice_codeunits(text, 0, cfg.sample_chars)
        # lingua's models are of composed text: decomposed accents (NFD, common in macOS-made
        # and some CMS pages) would read as unknown characters (Vietnamese became Tagalog)
        docs = [unicodedata.normalize("NFC", d) for d in sample.take(pa.array(ask)).to_pylist()]
        detector = lingua_detector(tuple(cfg.languages) if cfg.languages else None)
        for i, values in zip(ask, detector.compute_language_confidence_values_in_parallel(docs)):
            # lingua gives all-zero values when no language model matches (digits, symbols)
            if values and values[0].value > 0:
                lang[i] = values[0].language.iso_code_639_1.name.lower()
                conf[i] = values[0].value
    return pa.array(lang, pa.string()), pa.array(np.clip(conf, 0, 1), pa.float64())


def _vc(arr):
    vc = pc.value_counts(arr)
    return vc.field("values").to_pylist(), vc.field("counts").to_pylist()
