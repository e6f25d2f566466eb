"""Generate corpusforge's demo samples: English and Chinese text, images, point clouds.

Everything here is made by this script (deterministic, seed 0), so data_samples/ holds no
third-party data. It includes the bad inputs a real corpus has: malformed JSON lines,
invalid UTF-8, an empty file, exact and near duplicates, a truncated JPEG, a PNG named
.jpg, a zero-byte image, a PCD with a broken header and clouds with NaN points.

    python data_samples/make_samples.py            # writes into data_samples/
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

LOW_QUALITY_EN = [
    "click here click here click here BUY NOW!!! $$$ ### @@@",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "home | about | contact | login | register | cart | help",
    "ok",
    "{ } { } { } function() { return 0; } { } { }",
]


EN_WORDS = {
    "adj": "old new small quiet busy narrow wooden northern early famous broken bright ancient local rural coastal "
           "modern heavy careful patient young cheerful distant hidden".split(),
    "noun": "bridge clock wall map gate boat bank orchard roof station letter lantern mill harbour market library "
            "school garden tower river chapel barn road square fountain ferry".split(),
    "who": "engineers farmers students teachers volunteers nurses fishermen bakers painters pilots carpenters "
           "historians gardeners musicians children neighbours officials doctors".split(),
    "verb": "measured repaired described painted carried studied photographed rebuilt cleaned counted tested "
            "mapped restored explained recorded planted visited guarded moved sketched".split(),
    "prep": "near behind beside above below inside along across past toward".split(),
    "when": "yesterday recently afterwards meanwhile eventually today later earlier again finally".split(),
}
ZH_WORDS = {
    "when": "昨天 去年 上周 今天 前天 早晨 傍晚 深夜 春天 秋天 冬天 夏天".split(),
    "who": "工程师 农民 学生 教师 志愿者 护士 渔民 面包师 画家 木匠 历史学家 园丁 医生 邻居 官员".split(),
    "where": "港口 市场 小镇 山谷 磨坊 山路 市政厅 海岸 车站 花园 学校 图书馆 广场 河边".split(),
    "verb": "测量 修复 记录 粉刷 搬运 研究 拍摄 重建 清理 绘制 参观 检查 保护 移动".split(),
    "num": "一座 两座 三条 几排 一批 一套 几间 一箱".split(),
    "noun": "石桥 旧钟 城墙 地图 大门 木船 河岸 橡树 屋顶 灯塔 信件 钟楼 果园 渡船".split(),
    "adv": "仔细地 认真地 悄悄地 迅速地 耐心地 小心地".split(),
}


def _sentence(rng: random.Random, zh: bool) -> str:
    w = {k: rng.choice(v) for k, v in (ZH_WORDS if zh else EN_WORDS).items()}
    if zh:
        return f"{w['when']}，{w['who']}在{w['where']}{w['adv']}{w['verb']}了{w['num']}{w['noun']}。"
    other = {k: rng.choice(v) for k, v in EN_WORDS.items()}
    s = (f"The {w['adj']} {w['who']} {w['verb']} the {other['adj']} {w['noun']} {w['prep']} the "
         f"{other['noun']} {w['when']}.")
    return s


def _doc(rng: random.Random, zh: bool, lo: int, hi: int, n_paragraphs: tuple[int, int] = (2, 4)) -> str:
    """Paragraphs of template sentences (no sentence repeated within a document)."""
    paragraphs, seen = [], set()
    for _ in range(rng.randint(*n_paragraphs)):
        sents = []
        while len(sents) < rng.randint(lo, hi):
            s = _sentence(rng, zh)
            if s not in seen:
                seen.add(s)
                sents.append(s)
        paragraphs.append(("" if zh else " ").join(sents))
    return "\n\n".join(paragraphs)


FOOTERS = ["Share this article: Facebook | Twitter | Email", "Subscribe to our newsletter for weekly updates."]
JUNK_EN = ["buy cheap {0} online best price {0} discount {0} free shipping click here",
           "home | products | {0} | cart | login | register | help | contact",
           "{0} {0} {0} top 10 {0} deals 2024 {0} coupon code {0} sale",
           "Error 404: page not found. Return to home page. {0}",
           "tags: {0}, news, sport, weather, video, photos, more {0}"]
JUNK_ZH = ["点击这里购买{0}最低价格{0}优惠{0}免费送货", "首页 | 产品 | {0} | 购物车 | 登录 | 注册",
           "{0}{0}{0}热门{0}排行榜 {0}优惠券", "标签：{0}，新闻，体育，视频，图片"]
JUNK_WORDS = ["shoes", "phone", "watch", "laptop", "bags", "手机", "电脑", "鞋子", "手表"]


def _contact(rng: random.Random, zh: bool) -> str:
    """A made-up contact line in a valid format (for the PII stage to scrub)."""
    d = lambda n: "".join(rng.choice("0123456789") for _ in range(n))  # noqa: E731
    if zh:
        return rng.choice([f"联系电话：1{rng.choice('3589')}{d(9)}。", f"咨询热线010-6{d(7)}。",
                           f"邮箱：service{d(3)}@example.cn，欢迎来信。"])
    return rng.choice([f"Contact: press{d(3)}@example.org or +1 (415) 555-{d(4)}.",
                       f"Call our office on +44 20 7946 {d(4)} for details."])


def make_text(out: Path, rng: random.Random) -> None:
    out.mkdir(parents=True, exist_ok=True)
    en = [_doc(rng, False, 3, 6) for _ in range(160)]
    en = [d + "\n\n" + _contact(rng, False) if i % 8 == 0 else d for i, d in enumerate(en)]   # PII to scrub
    en = [d + "\n\n" + "\n".join(FOOTERS) if i % 3 else d for i, d in enumerate(en)]   # site boilerplate
    en += en[:8]                                                  # exact duplicates
    en += [d.replace("the", "the the", 1) + " Minor edit." for d in en[8:14]]   # near duplicates
    en += LOW_QUALITY_EN
    rng.shuffle(en)
    with open(out / "web_en.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(en):
            f.write(json.dumps({"text": text, "url": f"https://example.org/en/{i}", "title": f"Page {i}"}) + "\n")
        f.write('{"text": "a line cut off in the middle\n')            # malformed JSON
        f.write('{"title": "no text field"}\n')
    with open(out / "web_en.jsonl", "ab") as f:
        f.write(b'{"text": "bad byte \xff in the middle"}\n')          # invalid UTF-8
    zh = [_doc(rng, True, 3, 6) for _ in range(100)]
    zh = [d + _contact(rng, True) if i % 6 == 0 else d for i, d in enumerate(zh)]
    zh += zh[:5]
    rng.shuffle(zh)
    with gzip.GzipFile(out / "news_zh.jsonl.gz", "wb", mtime=0) as f:
        for i, text in enumerate(zh):
            f.write((json.dumps({"content": text, "id": f"zh-{i}"}, ensure_ascii=False) + "\n").encode())
    (out / "empty.jsonl").write_bytes(b"")
    books = out / "books"
    books.mkdir(exist_ok=True)
    book_texts = [_doc(rng, False, 8, 12, n_paragraphs=(3, 4)) for _ in range(6)]
    for i, text in enumerate(book_texts):
        (books / f"book_{i:02d}.txt").write_text(text + "\n", encoding="utf-8")
    # a web page quoting two paragraphs of a book: a partial copy
    with open(out / "web_en.jsonl", "a", encoding="utf-8") as f:
        quote = book_texts[0].split("\n\n")[1]
        f.write(json.dumps({"text": "As the book puts it:\n\n" + quote, "url": "https://example.org/en/quote"}) + "\n")
        # a long page quoting 60 words of an earlier page: most of it is new, so it is not a partial
        # copy, but the quoted span (50+ words, seen first in the earlier page) is cut by text.substring_dedup
        own = _doc(random.Random(1), False, 10, 12, n_paragraphs=(4, 5))
        quoted = max((d for d in en[30:] if d not in LOW_QUALITY_EN), key=lambda d: len(d.split()))
        passage = " ".join(quoted.split()[:60])
        head, tail = own.split("\n\n", 1)
        f.write(json.dumps({"text": f"{head}\n\nOne passage stayed with me: \"{passage}\"\n\n{tail}",
                            "url": "https://example.org/en/review"}) + "\n")
    # raw junk for training the demo's quality classifier (negative side)
    with open(out / "junk_for_classifier.txt", "w", encoding="utf-8") as f:   # one document per line
        for i in range(120):
            tpl = rng.choice(JUNK_ZH if i % 3 == 0 else JUNK_EN)
            f.write(tpl.format(rng.choice(JUNK_WORDS)) + f" {i}\n")
    (books / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me, na\xefve fa\xe7ade.\n".encode("latin-1"))


def make_images(out: Path, rng: random.Random) -> None:
    from PIL import Image, ImageDraw, ImageFilter

    out.mkdir(parents=True, exist_ok=True)
    nrng = np.random.default_rng(0)

    def scene(k: int, size=(192, 144)) -> Image.Image:
        w, h = size
        x = np.linspace(0, 1, w)[None, :, None]
        y = np.linspace(0, 1, h)[:, None, None]
        base = np.concatenate([np.sin(3 * x + k) * 0.5 + 0.5 + 0 * y, y + 0 * x, (x * y + k / 10) % 1], axis=2)
        img = Image.fromarray((base * 255).astype(np.uint8))
        d = ImageDraw.Draw(img)
        for _ in range(6):
            x0, y0 = rng.randrange(w - 40), rng.randrange(h - 40)
            d.ellipse([x0, y0, x0 + rng.randrange(15, 40), y0 + rng.randrange(15, 40)],
                      fill=tuple(rng.randrange(256) for _ in range(3)))
            d.rectangle([x0 // 2, y0 // 2, x0 // 2 + 20, y0 // 2 + 12], outline=(0, 0, 0), width=2)
        noise = nrng.normal(0, 6, (h, w, 3))
        return Image.fromarray(np.clip(np.asarray(img, np.float64) + noise, 0, 255).astype(np.uint8))

    for k in range(12):
        scene(k).save(out / f"photo_{k:02d}.jpg", quality=90)
    src = Image.open(out / "photo_00.jpg")
    src.resize((144, 108)).save(out / "photo_00_small.jpg", quality=85)          # near duplicates
    src.save(out / "photo_00_q40.jpg", quality=40)
    src.transpose(Image.FLIP_LEFT_RIGHT).save(out / "photo_00_mirror.jpg", quality=90)
    Image.open(out / "photo_01.jpg").filter(ImageFilter.GaussianBlur(4)).save(out / "photo_01_blurred.jpg")
    Image.open(out / "photo_02.jpg").point(lambda v: v // 8).save(out / "photo_02_dark.jpg")
    Image.new("RGB", (160, 120), (128, 128, 128)).save(out / "flat_grey.png")
    Image.new("RGB", (600, 20), (200, 10, 10)).save(out / "banner_strip.png")
    rgba = scene(20).convert("RGBA")
    rgba.putalpha(Image.new("L", rgba.size, 128))
    rgba.save(out / "with_alpha.png")
    scene(21).convert("L").save(out / "grey.png")
    scene(22).convert("CMYK").save(out / "cmyk.jpg")
    Image.fromarray((np.linspace(0, 65535, 128 * 96).reshape(96, 128)).astype(np.uint16)).save(out / "depth16.png")
    scene(23).save(out / "really_a_png.jpg", format="PNG")                      # wrong extension
    data = (out / "photo_03.jpg").read_bytes()
    (out / "truncated.jpg").write_bytes(data[: len(data) // 3])               # corrupt
    (out / "zero_bytes.jpg").write_bytes(b"")
    (out / "not_an_image.png").write_bytes(b"this is a text file pretending to be a PNG\n")
    frames = [scene(30 + i, (64, 48)) for i in range(3)]
    frames[0].save(out / "animated.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)


def _write_pcd(path: Path, xyz: np.ndarray, binary: bool, extra_header: str = "") -> None:
    n = len(xyz)
    header = (f"# .PCD v0.7 - made by corpusforge make_samples\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\n"
              f"TYPE F F F\nCOUNT 1 1 1\nWIDTH {n}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {n}\n{extra_header}"
              f"DATA {'binary' if binary else 'ascii'}\n")
    with open(path, "wb") as f:
        f.write(header.encode())
        if binary:
            f.write(xyz.astype("<f4").tobytes())
        else:
            f.write("".join(f"{a:.6f} {b:.6f} {c:.6f}\n" for a, b, c in xyz).encode())


def _write_ply(path: Path, xyz: np.ndarray, rgb: np.ndarray) -> None:
    n = len(xyz)
    header = ("ply\nformat binary_little_endian 1.0\ncomment made by corpusforge make_samples\n"
              f"element vertex {n}\nproperty float x\nproperty float y\nproperty float z\n"
              "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n")
    rec = np.zeros(n, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("r", "u1"), ("g", "u1"), ("b", "u1")])
    rec["x"], rec["y"], rec["z"] = xyz.T
    rec["r"], rec["g"], rec["b"] = rgb.T
    with open(path, "wb") as f:
        f.write(header.encode())
        f.write(rec.tobytes())


def make_pointclouds(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    def torus(n, R=1.0, r=0.35):
        u, v = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n)
        return np.stack([(R + r * np.cos(v)) * np.cos(u), (R + r * np.cos(v)) * np.sin(u), r * np.sin(v)], 1)

    def box(n, size=(2.0, 1.0, 0.6)):
        pts = rng.uniform(-0.5, 0.5, (n, 3))
        axis = rng.integers(0, 3, n)
        pts[np.arange(n), axis] = np.sign(pts[np.arange(n), axis]) * 0.5
        return pts * np.asarray(size)

    t = torus(4000) + rng.normal(0, 0.005, (4000, 3))
    outliers = rng.uniform(-2, 2, (60, 3))
    _write_ply(out / "torus_noisy.ply", np.vstack([t, outliers]).astype(np.float32),
               rng.integers(0, 255, (4060, 3)).astype(np.uint8))
    b = box(3000)
    # two partial views of the same box, the second rotated 25 degrees about z and shifted
    view0 = b[b[:, 0] < 0.4]
    c, s = np.cos(np.radians(25)), np.sin(np.radians(25))
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    view1 = (b[b[:, 0] > -0.4] @ rot.T) + np.array([0.3, -0.1, 0.05])
    _write_pcd(out / "crate_view0.pcd", view0, binary=False)
    _write_pcd(out / "crate_view1.pcd", view1, binary=True)
    sphere = rng.normal(size=(1500, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    sphere[::50] = np.nan                                        # sensor dropouts
    np.savetxt(out / "sphere_with_nans.xyz", sphere, fmt="%.6f")
    np.save(out / "plane.npy", np.c_[rng.uniform(-1, 1, (800, 2)), rng.normal(0, 0.002, 800)].astype(np.float32))
    (out / "broken_header.pcd").write_text("VERSION 0.7\nFIELDS x y z\nSIZE 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
                                           "WIDTH 2\nHEIGHT 1\nPOINTS 2\nDATA ascii\n0 0 0\n1 1 1\n")
    (out / "empty.xyz").write_text("")


def make_acquisition(out: Path, rng: random.Random) -> None:
    """One small input of every acquisition format, made from the samples above, with the flaws
    the readers must handle: a WARC with UTF-8 and GBK pages, a lying charset header, a non-HTML
    response and a redirect; a truncated WARC; chat turns, CSV, a save_to_disk folder; a COCO file
    with a missing image and a tar of images; KITTI scans (one of a bad length) with labels and
    calibration; a LAZ tile; meshes, one with degenerate faces and one with none."""
    import gzip
    import io
    import json
    import sys
    import tarfile

    import pyarrow as pa

    sys.path.insert(0, str(HERE.parent / "bench"))
    from web_pages import page, write_warc

    out.mkdir(parents=True, exist_ok=True)
    books = [" ".join(b.split()) for p in sorted((HERE / "text" / "books").glob("book_*.txt"))
             for b in p.read_text().split("\n\n") if len(b) > 120]
    with gzip.open(HERE / "text" / "news_zh.jsonl.gz", "rt") as f:
        news = [json.loads(line)["content"] for line in f if line.strip()][:20]
    prng = random.Random(1)
    web = out / "web"
    web.mkdir(exist_ok=True)
    en = [page(books[i][:40], books[i:i + 4], "en", prng) for i in range(0, 12, 4)]
    zh = [page(news[i][:20], news[i:i + 3], "zh", prng) for i in range(0, 9, 3)]
    responses = [{"url": f"https://example.com/en/{i}", "body": h.encode()} for i, h in enumerate(en)]
    responses += [{"url": f"https://example.cn/zh/{i}", "body": h.encode()} for i, h in enumerate(zh[:1])]
    responses.append({"url": "https://gbk.example.cn/1", "content_type": "text/html; charset=gbk",
                      "body": zh[1].replace('charset="utf-8"', 'charset="gbk"').encode("gbk", "replace")})
    responses.append({"url": "https://liar.example.cn/2", "content_type": "text/html; charset=iso-8859-1",
                      "body": zh[2].replace('<meta charset="utf-8">', "").encode("gbk", "replace")})
    responses.append({"url": "https://example.com/logo.png", "content_type": "image/png", "body": b"\x89PNG\r\n\x1a\n"})
    responses.append({"url": "https://example.com/old", "status": 301, "body": b""})
    write_warc(web / "crawl.warc.gz", responses)
    data = (web / "crawl.warc.gz").read_bytes()
    (web / "cut_short.warc.gz").write_bytes(data[: int(len(data) * 0.6)])

    chat = out / "chat"
    chat.mkdir(exist_ok=True)
    with open(chat / "conversations.jsonl", "w") as f:
        for i in range(6):
            turns = [{"role": "user", "content": books[i][:80]}, {"role": "assistant", "content": books[i + 1][:160]}]
            f.write(json.dumps({"id": i, "messages": turns}) + "\n")
        f.write(json.dumps({"id": 99, "messages": "not a list"}) + "\n")
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    with open(tables / "reviews.csv", "w", newline="") as f:
        import csv

        w = csv.writer(f)
        w.writerow(["review_id", "stars", "text"])
        for i in range(8):
            w.writerow([i, 1 + i % 5, books[i][:200]])
        f.write("8,5\n")                                           # a short row
    hf = out / "hf_dataset" / "train"
    hf.mkdir(parents=True, exist_ok=True)
    (out / "hf_dataset" / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    table = pa.table({"text": news[:10] + [None], "url": [f"https://news.example.cn/{i}" for i in range(11)]})
    with pa.ipc.new_stream(hf / "data-00000-of-00001.arrow", table.schema) as w:
        w.write_table(table, max_chunksize=4)
    (hf / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (hf / "dataset_info.json").write_text(json.dumps({"features": {"text": {"dtype": "string"}, "url": {"dtype": "string"}}}))

    from PIL import Image

    coco = out / "coco"
    (coco / "images").mkdir(parents=True, exist_ok=True)
    photos = sorted((HERE / "images").glob("photo_0[3-8].jpg"))
    entries, anns = [], []
    for i, p in enumerate(photos):
        (coco / "images" / p.name).write_bytes(p.read_bytes())
        w, h = Image.open(p).size
        entries.append({"id": i + 1, "file_name": p.name, "width": w, "height": h})
        for k in range(1 + i % 3):
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1 + (i + k) % 2,
                         "bbox": [10 * k, 12, 40, 30], "area": 1200, "iscrowd": 0,
                         "segmentation": [[10, 12, 50, 12, 50, 42, 10, 42]]})
    entries.append({"id": 99, "file_name": "missing.jpg", "width": 10, "height": 10})
    anns.append({"id": 999, "image_id": 12345, "category_id": 1, "bbox": [0, 0, 1, 1]})     # names no image
    (coco / "annotations.json").write_text(json.dumps(
        {"images": entries, "annotations": anns, "categories": [{"id": 1, "name": "ball"}, {"id": 2, "name": "box"}]}))
    with tarfile.open(out / "photos.tar", "w") as tf:
        for p in sorted((HERE / "images").glob("photo_1*.jpg")):
            tf.add(p, arcname=f"{'outdoor' if p.stem.endswith('0') else 'indoor'}/{p.name}")
        tf.add(HERE / "images" / "truncated.jpg", arcname="indoor/truncated.jpg")

    nrng = np.random.default_rng(3)
    kitti = out / "kitti"
    for d in ("velodyne", "label_2", "calib"):
        (kitti / d).mkdir(parents=True, exist_ok=True)
    ground = np.c_[nrng.uniform(0, 30, (3000, 2)) - [0, 15], np.full(3000, -1.7) + nrng.normal(0, 0.02, 3000)]
    car = nrng.uniform([-2.0, -0.8, -1.7], [2.0, 0.8, -0.2], (600, 3)) + [12.0, 2.0, 0]
    pts = np.vstack([ground, car])
    scan = np.c_[pts, nrng.uniform(0, 1, len(pts))].astype("<f4")
    (kitti / "velodyne" / "000000.bin").write_bytes(scan.tobytes())
    (kitti / "velodyne" / "000001.bin").write_bytes(scan.tobytes()[:-6])            # cut short
    # the car in camera coordinates (KITTI's nominal axes): bottom centre, h w l, yaw
    (kitti / "label_2" / "000000.txt").write_text(
        "Car 0.00 0 -1.57 600 170 700 220 1.50 1.60 4.00 -2.00 1.70 12.00 -1.57\n"
        "DontCare -1 -1 -10 500 170 520 190 -1 -1 -1 -1000 -1000 -1000 -10\n")
    (kitti / "calib" / "000000.txt").write_text(
        "R0_rect: 1 0 0 0 1 0 0 0 1\nTr_velo_to_cam: 0 -1 0 0 0 0 -1 0 1 0 0 0\n")

    import laspy

    lidar = out / "lidar"
    lidar.mkdir(exist_ok=True)
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.scales = [0.001, 0.001, 0.001]
    header.offsets = [500000.0, 4100000.0, 0.0]
    las = laspy.LasData(header)
    n = 4000
    las.x = 500000 + nrng.uniform(0, 50, n)
    las.y = 4100000 + nrng.uniform(0, 50, n)
    las.z = 120 + nrng.normal(0, 0.3, n)
    las.intensity = nrng.integers(0, 4000, n).astype(np.uint16)
    las.classification = np.where(nrng.random(n) < 0.8, 2, 5).astype(np.uint8)
    las.red, las.green, las.blue = (nrng.integers(0, 65535, n).astype(np.uint16) for _ in range(3))
    las.write(lidar / "tile.laz")

    meshes = out / "meshes"
    meshes.mkdir(exist_ok=True)
    v = [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)]
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),
             (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    (meshes / "cube.off").write_text("OFF\n8 12 0\n" + "".join(f"{a} {b} {c}\n" for a, b, c in v)
                                     + "".join(f"3 {a} {b} {c}\n" for a, b, c in faces))
    (meshes / "pyramid_degenerate.obj").write_text(
        "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 0.5 1\nv 2 2 2\n"
        "f 1 2 5\nf 2 3 5\nf 3 4 5\nf 4 1 5\nf 1 3 2\nf 1 4 3\nf 1 1 2\nf 2 5 5\n")     # last two degenerate
    (meshes / "points_only.off").write_text("OFF\n3 0 0\n0 0 0\n1 0 0\n0 1 0\n")


def main() -> None:
    rng = random.Random(0)
    make_text(HERE / "text", rng)
    make_images(HERE / "images", rng)
    make_pointclouds(HERE / "pointclouds")
    make_acquisition(HERE / "acquire", rng)
    total = sum(p.stat().st_size for p in HERE.rglob("*") if p.is_file())
    print(f"data_samples: {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
