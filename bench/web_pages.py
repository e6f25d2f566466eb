"""Web pages with a known main text, for the WARC reader's tests and the extractor benchmark.

Each page wraps real paragraphs (Tiny Shakespeare, Chinese Wikipedia, CLUE news from
../shared/data, or the project's own samples when that is absent) in the boilerplate real pages
carry: a navigation menu, a cookie banner, a sidebar of links, related-article teasers, a
comment section and a footer. The main paragraphs are the ground truth an extractor should
return, and nothing else.
"""

from __future__ import annotations

import html
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "text"

NAV_EN = ["Home", "World", "Business", "Technology", "Science", "Sport", "Culture", "Opinion", "Subscribe", "Sign in"]
NAV_ZH = ["首页", "新闻", "财经", "科技", "体育", "娱乐", "汽车", "房产", "登录", "注册"]
BOILER_EN = ["We use cookies to improve your experience. By continuing you accept our cookie policy.",
             "Copyright 2026 Example Media Group. All rights reserved.", "Share this article on social media",
             "Related: Ten things you did not know about the weather", "Most read this week", "Advertisement"]
BOILER_ZH = ["本网站使用 Cookie 以改善您的体验，继续浏览即表示您同意我们的政策。", "版权所有 © 2026 示例传媒 保留所有权利",
             "分享到微博 微信 QQ空间", "相关阅读：你不知道的十件事", "本周最热", "广告"]


def paragraphs(lang: str, seed: int, n_pages: int) -> list[list[str]]:
    rng = random.Random(seed)
    if lang == "en":
        src = SHARED / "tinyshakespeare.txt"
        text = src.read_text() if src.exists() else "\n\n".join(p.read_text() for p in sorted((ROOT / "data_samples/text/books").glob("book_*.txt")))
        blocks = [" ".join(b.split()) for b in text.split("\n\n") if len(b) > 200]
    else:
        src = SHARED / "zhwiki_sample.zh.txt"
        lines = src.read_text().splitlines() if src.exists() else []
        clue = SHARED / "clue_corpus_small_sample.zh.txt"
        lines += clue.read_text().splitlines() if clue.exists() else []
        blocks = [line.strip() for line in lines if len(line.strip()) > 80] or ["中文示例段落。" * 20]
    return [[rng.choice(blocks) for _ in range(rng.randint(3, 8))] for _ in range(n_pages)]


def page(title: str, paras: list[str], lang: str, rng: random.Random, charset: str = "utf-8",
         declare_meta: bool = True) -> str:
    nav = NAV_EN if lang == "en" else NAV_ZH
    boiler = BOILER_EN if lang == "en" else BOILER_ZH
    e = html.escape
    links = "".join(f'<li><a href="/{i}">{e(w)}</a></li>' for i, w in enumerate(nav))
    side = "".join(f'<li><a href="/s/{i}">{e(rng.choice(boiler))}</a></li>' for i in range(6))
    comments = "".join(f'<div class="comment"><span class="user">user{i}</span><p>{e(rng.choice(boiler))}</p></div>'
                       for i in range(3))
    body = "".join(f"<p>{e(p)}</p>" for p in paras)
    meta = f'<meta charset="{charset}">' if declare_meta else ""
    return (f'<!DOCTYPE html><html lang="{lang}"><head>{meta}<title>{e(title)}</title>'
            f'<script>var tracking = {{"id": 42}};</script><style>body {{font: 14px sans-serif}}</style></head><body>'
            f'<div class="cookie-banner">{e(boiler[0])}</div>'
            f'<header><nav><ul>{links}</ul></nav></header>'
            f'<main><article><h1>{e(title)}</h1>{body}</article>'
            f'<section class="related"><h3>{e(boiler[4])}</h3><ul>{side}</ul></section>'
            f'<section class="comments">{comments}</section></main>'
            f'<aside><ul>{side}</ul><div class="ad">{e(boiler[5])}</div></aside>'
            f'<footer><p>{e(boiler[1])}</p><p>{e(boiler[2])}</p></footer></body></html>')


def pages(n: int, seed: int = 0) -> list[dict]:
    """n pages, alternating English and Chinese: {url, lang, title, html (str), main (list of paragraphs)}."""
    rng = random.Random(seed)
    out = []
    for lang in ("en", "zh"):
        for i, paras in enumerate(paragraphs(lang, seed, (n + 1) // 2 if lang == "en" else n // 2)):
            title = paras[0][:40]
            out.append({"url": f"https://example.{'com' if lang == 'en' else 'cn'}/{lang}/{i}", "lang": lang,
                        "title": title, "html": page(title, paras, lang, rng), "main": paras})
    rng.shuffle(out)
    return out


def write_warc(path: Path, responses: list[dict], gzip: bool = True, with_requests: bool = True) -> Path:
    """A WARC of HTTP responses: each {url, body (bytes), content_type, status (200)}, each preceded
    by its request record when ``with_requests``, as crawlers write them."""
    import uuid
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=gzip)
        def fixed(url: str, kind: str) -> dict:      # repeatable files: no clock, no random ids
            return {"WARC-Date": "2026-11-21T00:00:00Z",
                    "WARC-Record-ID": f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, kind + url)}>"}

        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "corpusforge tests"}))
        for r in responses:
            if with_requests:
                req = StatusAndHeaders("GET / HTTP/1.1", [("Host", "example.com")], is_http_request=True)
                writer.write_record(writer.create_warc_record(r["url"], "request", http_headers=req,
                                                              warc_headers_dict=fixed(r["url"], "request")))
            status = r.get("status", 200)
            headers = StatusAndHeaders(f"{status} {'OK' if status == 200 else 'Moved'}",
                                       [("Content-Type", r.get("content_type", "text/html; charset=utf-8"))],
                                       protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(r["url"], "response", payload=BytesIO(r["body"]),
                                                          http_headers=headers,
                                                          warc_headers_dict=fixed(r["url"], "response")))
    return path
