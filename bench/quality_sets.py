"""Build the labelled quality sets the shipped classifiers are trained, calibrated and tested on.

Every document is real public text; a label says whether a careful reader would keep it in a
pretraining corpus (1, "curated") or drop it (0, "raw web"):

English (bench/data/quality/en.jsonl.gz)
  1  Wikipedia articles (WikiText-2 valid/test, detokenized; pytorch/examples)
  1  news articles' bodies, as annotated by people (scrapinghub/article-extraction-benchmark)
  1  main text of real web pages (trafilatura's test pages in English, extracted by trafilatura)
  1  speeches (NLTK's State of the Union and inaugural addresses, public domain)
  1  other genres of good writing: film reviews by people (NLTK's movie_reviews, CC BY 4.0),
     drama (Tiny Shakespeare, ../shared/data), technical documentation (docstrings of Python's
     standard library, PSF licence)
  0  what else those same web pages hold: navigation, teasers, footers, cookie and share text,
     comment widgets (the page's visible text minus its main text, resiliparse), and whole pages
     whose main text is under half of their visible text (what a WET extract of them gives)
Chinese (bench/data/quality/zh.jsonl.gz)
  1  Chinese Wikipedia paragraphs (../shared/data zhwiki sample)
  1  news bodies of real Chinese news pages (GeneralNewsExtractor's and GerapyAutoExtractor's test
     pages, extracted by trafilatura)
  0  the rest of those pages, and their list/index pages (navigation, rolling headlines, ads)

Documents are split train/dev/test (70/15/15) by their page or article, so text of one page never
lands on two sides. Sources, commits and licenses: bench/data/quality/SOURCES.md.

    python bench/quality_sets.py --mirrors /work/.mirror
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import xxhash

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "data" / "quality"
SHARED = ROOT.parent / "shared" / "data" / "text"
REPOS = {  # mirror folder -> commit
    "pytorch+examples": "77f55b912142e11fcfdf5b530231fb9c52f181e8",
    "scrapinghub+article-extraction-benchmark": "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010",
    "adbar+trafilatura": "e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5",
    "nltk+nltk_data": "5db857e6f7df11eabb5e5665836db9ec8df07e28",
    "kingname+GeneralNewsExtractor": "de4a338071e2edc0f075e70c924f0b70d76a5bd7",
    "Gerapy+GerapyAutoExtractor": "d65ddd09d4714db4615ea0d522829b20ca7805e5",
}
MAX_CHARS = 6000
SENTENCE_END = re.compile(r"[.!?。！？…][\"'”’」』）)]?")


def clip(text: str) -> str:
    """At most MAX_CHARS characters, cut after the last sentence end (a cut mid-sentence would
    teach the rules and the classifier that good documents end without punctuation)."""
    if len(text) <= MAX_CHARS:
        return text
    ends = [m.end() for m in SENTENCE_END.finditer(text, 0, MAX_CHARS)]
    return text[:ends[-1]] if ends and ends[-1] > MAX_CHARS // 2 else text[:MAX_CHARS]


class Mirror:
    def __init__(self, root: Path, name: str):
        path = root / name / "repo"
        self.git = path / ".git" if (path / ".git").is_dir() else path
        self.commit = REPOS[name]

    def ls(self, folder: str) -> list[str]:
        out = subprocess.run(["git", "-C", str(self.git), "ls-tree", "-r", "--name-only", "-z", self.commit, folder],
                             check=True, capture_output=True).stdout.decode()
        return [p for p in out.split("\0") if p]

    def read(self, path: str) -> bytes:
        return subprocess.run(["git", "-C", str(self.git), "show", f"{self.commit}:{path}"],
                              check=True, capture_output=True).stdout


def split_of(group: str) -> str:
    h = xxhash.xxh64_intdigest(group.encode()) % 100
    return "train" if h < 70 else "dev" if h < 85 else "test"


def detokenize(text: str) -> str:
    text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").replace(" <unk>", "")
    text = re.sub(r" ([.,;:!?)\]}%])", r"\1", text)
    text = re.sub(r"([(\[{$]) ", r"\1", text)
    return re.sub(r" (n't|'s|'re|'ve|'d|'ll|'m)\b", r"\1", text).replace(' " ', ' "')


def wikitext(m: Mirror):
    for part in ("valid", "test"):
        raw = m.read(f"word_language_model/data/wikitext-2/{part}.txt").decode()
        for i, article in enumerate(re.split(r"\n \= (?=[^=])", raw)):
            body = [ln.strip() for ln in article.splitlines()[1:] if ln.strip() and not ln.strip().startswith("=")]
            text = "\n".join(detokenize(ln) for ln in body)
            if len(text) > 300:
                yield {"text": clip(text), "label": 1, "source": "en_wikipedia", "group": f"wt2-{part}-{i}"}


def visible_and_main(html: str, main: str | None = None) -> tuple[str, str]:
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    visible = extract_plain_text(html, main_content=False, alt_texts=False, links=False)
    if main is None:
        main = trafilatura.extract(html, favor_precision=True, include_comments=False, include_tables=False) or ""
    return visible, main


def web_page(visible: str, main: str, lang_ok, group: str, prefix: str):
    """Positive: the main text. Negative: the visible lines not in the main text, in chunks, and the
    whole page when its main text is under half of what is visible."""
    main_lines = {ln.strip() for ln in main.splitlines() if ln.strip()}
    if len(main) >= 300 and lang_ok(main):
        yield {"text": clip(main), "label": 1, "source": f"{prefix}_main_text", "group": group}
    rest = [ln.strip() for ln in visible.splitlines() if ln.strip() and ln.strip() not in main_lines]
    chunk, n = [], 0
    for ln in rest + [None]:
        if ln is not None:
            chunk.append(ln)
        if (ln is None or sum(map(len, chunk)) > 1500) and sum(map(len, chunk)) >= 200:
            text = "\n".join(chunk)
            if lang_ok(text):
                yield {"text": text, "label": 0, "source": f"{prefix}_boilerplate", "group": group}
            chunk, n = [], n + 1
    if main and len(main) < 0.5 * len(visible) and len(visible) >= 300 and lang_ok(visible):
        yield {"text": clip(visible), "label": 0, "source": f"{prefix}_whole_page", "group": group}


def english(root: Path):
    import pyarrow as pa

    from corpusforge.text.langid import LangIdConfig, lingua_detect

    def is_en(text: str) -> bool:
        return lingua_detect(pa.array([text[:2000]]), LangIdConfig())[0][0].as_py() == "en"

    yield from wikitext(Mirror(root, "pytorch+examples"))
    m = Mirror(root, "scrapinghub+article-extraction-benchmark")
    truth = json.loads(m.read("ground-truth.json"))
    for key, item in truth.items():
        html = gzip.decompress(m.read(f"html/{key}.html.gz")).decode("utf-8", "replace")
        visible, main = visible_and_main(html, item.get("articleBody") or "")
        yield from web_page(visible, main, is_en, f"aeb-{key}", "en_news")
    m = Mirror(root, "adbar+trafilatura")
    for path in m.ls("tests/eval") + m.ls("tests/cache"):
        html = m.read(path).decode("utf-8", "replace")
        if not is_en(html[-20000:]) and not is_en(html[:20000]):
            continue
        visible, main = visible_and_main(html)
        yield from web_page(visible, main, is_en, f"traf-{path}", "en_web")
    m = Mirror(root, "nltk+nltk_data")
    for corpus in ("state_union", "inaugural"):
        with zipfile.ZipFile(io.BytesIO(m.read(f"packages/corpora/{corpus}.zip"))) as z:
            for name in z.namelist():
                if name.endswith(".txt"):
                    text = z.read(name).decode("utf-8", "replace").strip()
                    yield {"text": clip(text), "label": 1, "source": "en_speeches", "group": name}
    yield from other_genres(m)


def other_genres(m: "Mirror"):
    """Good writing that is neither encyclopedia nor news, so that the classifier learns prose
    against boilerplate rather than "looks like Wikipedia": people's film reviews, drama, and
    technical documentation."""
    import importlib
    import inspect

    with zipfile.ZipFile(io.BytesIO(m.read("packages/corpora/movie_reviews.zip"))) as z:
        names = sorted(n for n in z.namelist() if n.endswith(".txt"))
        for name in names[::7]:                       # 286 of the 2,000 reviews
            text = detokenize_review(z.read(name).decode("utf-8", "replace"))
            yield {"text": clip(text), "label": 1, "source": "en_reviews", "group": name}
    plays = (SHARED / "tinyshakespeare.txt").read_text(encoding="utf-8")
    for i in range(0, len(plays) - 2500, 2500 * 3):    # every third passage of 2,500 characters
        start = plays.rfind("\n\n", 0, i) + 2 if i else 0
        yield {"text": plays[start:start + 2500].rsplit("\n\n", 1)[0], "label": 1, "source": "en_drama",
               "group": f"shakespeare-{i // 30_000}"}        # neighbouring passages on one side of the split
    for module in DOC_MODULES:
        mod = importlib.import_module(module)
        seen = set()
        for _, obj in sorted(inspect.getmembers(mod), key=lambda kv: kv[0]):
            doc = inspect.getdoc(obj)
            if doc and len(doc.split()) >= 80 and doc not in seen:
                seen.add(doc)
                yield {"text": clip(doc), "label": 1, "source": "en_docs", "group": f"stdlib-{module}"}


# modules of Python's standard library whose docstrings are read as technical documentation
DOC_MODULES = ["argparse", "asyncio", "collections", "csv", "datetime", "decimal", "email", "fractions", "heapq",
               "http.client", "itertools", "json", "logging", "pathlib", "random", "re", "socket", "sqlite3",
               "statistics", "string", "subprocess", "tarfile", "textwrap", "threading", "typing", "unittest",
               "urllib.request", "xml.etree.ElementTree", "zipfile", "functools", "inspect", "pickle", "shutil",
               "tempfile", "enum", "dataclasses", "contextlib", "codecs", "calendar", "difflib"]


def detokenize_review(text: str) -> str:
    """NLTK's movie reviews are lowercased and tokenized: join punctuation and clitics back and
    capitalize sentence starts, so the rules read them as the prose they were."""
    text = re.sub(r" ([.,;:!?)\]])", r"\1", text.replace("\n", " "))
    text = re.sub(r"([(\[]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    text = re.sub(r"\bi\b", "I", text)
    text = re.sub(r"\s{2,}", " ", text.strip())
    return re.sub(r"(^|[.!?] )([a-z])", lambda mm: mm.group(1) + mm.group(2).upper(), text)


def chinese(root: Path):
    import pyarrow as pa

    from corpusforge.text.langid import LangIdConfig, script_detect

    def is_zh(text: str) -> bool:
        return script_detect(pa.array([text]), LangIdConfig(detector="script"))[0][0].as_py() == "zh"

    wiki = (SHARED / "zhwiki_sample.zh.txt").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(wiki):
        if len(line.strip()) >= 200:
            yield {"text": clip(line.strip()), "label": 1, "source": "zh_wikipedia", "group": f"zhwiki-{i}"}
    for name, folder in (("kingname+GeneralNewsExtractor", "tests"), ("Gerapy+GerapyAutoExtractor", "samples")):
        m = Mirror(root, name)
        for path in m.ls(folder):
            if not path.endswith(".html") or path.endswith("/sample.html"):
                continue
            html = m.read(path).decode("utf-8", "replace")
            visible, main = visible_and_main(html)
            if "/list/" in path:   # index pages: all of it is headlines, links and navigation
                main = ""
            yield from web_page(visible, main, is_zh, f"{name}-{path}", "zh_news")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", type=Path, required=True, help="folder of git clones named owner+repo")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for lang, rows in (("en", english(args.mirrors)), ("zh", chinese(args.mirrors))):
        seen, n = set(), {}
        # mtime 0: the same sets make the same bytes
        with io.TextIOWrapper(gzip.GzipFile(OUT / f"{lang}.jsonl.gz", "wb", mtime=0), encoding="utf-8") as f:
            for r in rows:
                key = xxhash.xxh64_intdigest(r["text"].encode())
                if key in seen:
                    continue
                seen.add(key)
                r["split"] = split_of(r["group"])
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                n[(r["source"], r["split"])] = n.get((r["source"], r["split"]), 0) + 1
        print(lang, json.dumps({f"{s}/{p}": c for (s, p), c in sorted(n.items())}, indent=0))


if __name__ == "__main__":
    main()
