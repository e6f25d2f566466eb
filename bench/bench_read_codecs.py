"""Line readers in other codecs: the jsonl and text readers vs a bare Python loop, same files.

Files: the real English and Chinese text of ../shared/data/text (Tiny Shakespeare lines, CLUE
and Chinese Wikipedia lines), repeated to about ``--mb`` MB, written as JSON Lines and as plain
lines in three codecs: UTF-8, GB18030 (read with ``encoding: gb18030``) and UTF-16 with a
byte-order mark (read as the mark says). The baseline is what a script would do: ``open`` in the
codec, iterate lines, ``json.loads`` each (jsonl) or strip it (text), keeping the strings.
The readers also build Arrow tables, ids and provenance; the ratio shows what that costs.

    .venv/bin/python bench/bench_read_codecs.py [--mb 60] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpusforge.io.readers.jsonl import JsonlReader  # noqa: E402
from corpusforge.io.readers.text import TextReader  # noqa: E402
from timing import best  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "text"
CODECS = {"utf-8": "utf-8", "gb18030": "gb18030", "utf-16 (mark)": "utf-16"}


def lines(mb: int) -> list[str]:
    base = []
    for name in ("tinyshakespeare.txt", "clue_corpus_small_sample.zh.txt", "zhwiki_sample.zh.txt"):
        base += [l.strip() for l in (SHARED / name).read_text().splitlines() if l.strip()]
    base = [l for l in base if _encodes(l, "gb18030")]
    out, size = [], 0
    while size < mb << 20:
        out += base
        size += sum(len(l.encode()) for l in base)
    return out


def _encodes(s: str, codec: str) -> bool:
    try:
        s.encode(codec)
        return True
    except UnicodeEncodeError:
        return False


def read_all(reader, path: Path) -> int:
    return sum(b.records.num_rows for b in reader.read(path))


def bare_jsonl(path: Path, codec: str) -> int:
    with open(path, encoding=codec) as f:
        return len([json.loads(line)["text"] for line in f])


def bare_text(path: Path, codec: str) -> int:
    with open(path, encoding=codec) as f:
        return len([s for s in (line.rstrip("\r\n") for line in f) if s.strip()])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if not SHARED.exists():
        print(f"{SHARED} not present: skipped")
        return
    docs = lines(a.mb)
    print(f"{len(docs):,} lines, {sum(len(l.encode()) for l in docs) / 1e6:.0f} MB as UTF-8\n")
    print("| reader | codec | file MB | corpusforge MB/s | bare Python loop MB/s | ratio |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, codec in CODECS.items():
            jsonl = Path(tmp) / f"a.{codec}.jsonl"
            text = Path(tmp) / f"a.{codec}.txt"
            jsonl.write_bytes("".join(json.dumps({"text": l}, ensure_ascii=False) + "\n" for l in docs).encode(codec))
            text.write_bytes("".join(l + "\n" for l in docs).encode(codec))
            setting = {} if codec in ("utf-8", "utf-16") else {"encoding": codec}   # utf-16: its mark says so
            for kind, path, make, bare in (
                    ("jsonl", jsonl, lambda: JsonlReader(JsonlReader.Config(paths=["x"], source="s", **setting),
                                                         kind="text", batch_rows=10_000), bare_jsonl),
                    ("text (line)", text, lambda: TextReader(TextReader.Config(paths=["x"], source="s", mode="line",
                                                                               **setting), kind="text", batch_rows=10_000),
                     bare_text)):
                n_ours = read_all(make(), path)
                n_bare = bare(path, codec)
                assert n_ours == n_bare == len(docs), (kind, label, n_ours, n_bare)
                ours, _ = best(lambda: read_all(make(), path), a.repeats)
                base, _ = best(lambda: bare(path, codec), a.repeats)
                mb = path.stat().st_size / 1e6
                print(f"| {kind} | {label} | {mb:.0f} | {mb / ours:.0f} | {mb / base:.0f} | {base / ours:.2f}x |")


if __name__ == "__main__":
    main()
