"""Build the labelled language-identification set (bench/data/langid/udhr.jsonl.gz).

Source: the Universal Declaration of Human Rights, Unicode edition, as packaged by NLTK
(nltk/nltk_data ``packages/corpora/udhr2.zip``; public domain). 44 languages, 12 scripts. For
each language: 20 short documents (the start of an article, cut at a word boundary to 40-80
characters; 15-30 characters for CJK) and 10 long ones (three consecutive articles). The
declaration's first lines (title, preamble heading) are skipped.

    python bench/langid_set.py --nltk-data /work/.mirror/nltk+nltk_data/repo
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import subprocess
import zipfile
from pathlib import Path

COMMIT = "5db857e6f7df11eabb5e5665836db9ec8df07e28"
OUT = Path(__file__).resolve().parent / "data" / "langid" / "udhr.jsonl.gz"
FILES = {  # udhr2 file -> ISO 639-1
    "eng": "en", "fra": "fr", "deu": "de", "spa": "es", "por_PT": "pt", "ita": "it", "nld": "nl", "rus": "ru",
    "ukr": "uk", "pol": "pl", "ces": "cs", "swe": "sv", "dan": "da", "nob": "nb", "fin": "fi", "hun": "hu",
    "ron": "ro", "tur": "tr", "ell_monotonic": "el", "arb": "ar", "pes_1": "fa", "hin": "hi", "ben": "bn",
    "vie": "vi", "ind": "id", "cmn_hans": "zh", "jpn": "ja", "kor": "ko", "tha": "th", "heb": "he", "cat": "ca",
    "hrv": "hr", "slk": "sk", "slv": "sl", "bul": "bg", "lit": "lt", "lav": "lv", "est": "et", "swh": "sw",
    "tgl": "tl", "yor": "yo", "zul": "zu", "srp_cyrl": "sr", "eus": "eu",
}
CJK = {"zh", "ja", "ko", "th"}


def cut(line: str, lo: int, hi: int, cjk: bool) -> str:
    if cjk:
        return line[:hi]
    words, out = line.split(), ""
    for w in words:
        if len(out) + len(w) + 1 > hi and len(out) >= lo:
            break
        out = f"{out} {w}".strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nltk-data", required=True, help="a git clone of nltk/nltk_data")
    args = ap.parse_args()
    blob = subprocess.run(["git", "-C", args.nltk_data, "show", f"{COMMIT}:packages/corpora/udhr2.zip"],
                          check=True, capture_output=True).stdout
    rng = random.Random(0)
    rows = []
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        for name, lang in FILES.items():
            lines = [ln.strip() for ln in z.read(f"udhr2/{name}.txt").decode("utf-8").splitlines()]
            lines = [ln for ln in lines[3:] if len(ln) >= (20 if lang in CJK else 60)]
            cjk = lang in CJK
            for ln in rng.sample(lines, min(20, len(lines))):
                rows.append({"lang": lang, "kind": "short", "text": cut(ln, 15 if cjk else 40, 30 if cjk else 80, cjk)})
            for start in rng.sample(range(len(lines) - 3), min(10, len(lines) - 3)):
                rows.append({"lang": lang, "kind": "long", "text": "\n".join(lines[start:start + 3])})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(OUT, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} documents, {len(FILES)} languages -> {OUT}")


if __name__ == "__main__":
    main()
