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

EN_SENTENCES = [
    "The river runs past the old mill before it turns east toward the harbour.",
    "Engineers measured the load on the bridge every hour during the storm.",
    "A good loaf needs flour, water, salt and a great deal of patience.",
    "The committee published its findings after two years of careful review.",
    "Most of the village gardens grow beans, onions and a few rows of potatoes.",
    "She repaired the clock by replacing a worn gear with one she cut by hand.",
    "Rainfall in the region has fallen by a fifth over the last three decades.",
    "The library keeps its rarest maps in a cool room without windows.",
    "Students compared the two translations line by line and noted every difference.",
    "Farmers in the valley rotate their crops to keep the soil healthy.",
    "The new tram line cut the journey from the station to the hospital in half.",
    "Bees visit thousands of flowers to gather enough nectar for one spoon of honey.",
    "He wrote the first draft in a week and spent a year revising it.",
    "The museum restored the ship's hull using timber from the same forest.",
    "Children learn to read faster when adults read aloud to them every day.",
    "The observatory recorded a faint comet moving slowly across the northern sky.",
    "Local bakers start work at four in the morning to have bread ready by seven.",
    "The treaty was signed in the spring and took effect the following winter.",
    "Volunteers planted two hundred oak trees along the edge of the new park.",
    "A simple model explained most of the variation in the measured temperatures.",
    "The orchestra rehearsed the final movement until the timing was exact.",
    "Fishing boats returned early because the wind had changed direction.",
    "The report recommends better drainage for the roads that flood each autumn.",
    "Her grandmother kept a diary of the weather for more than forty years.",
    "The software team fixed the bug by checking the input before parsing it.",
    "Old photographs show the square as a busy market with stalls on every side.",
    "The recipe calls for slow cooking so that the beans stay whole.",
    "Researchers tracked the birds with small tags that weigh less than a gram.",
    "The council agreed to repair the school roof before the next term begins.",
    "Walking the coastal path takes about six hours if the tide is low.",
]

ZH_SENTENCES = [
    "这条河流经老磨坊，然后向东流向港口。",
    "暴风雨期间，工程师每小时测量一次桥梁的荷载。",
    "做一个好面包需要面粉、水、盐和足够的耐心。",
    "委员会经过两年的认真审查后公布了调查结果。",
    "村里的菜园大多种植豆角、洋葱和几行土豆。",
    "她用手工切削的齿轮替换了磨损的零件，修好了那座钟。",
    "过去三十年里，该地区的降雨量减少了五分之一。",
    "图书馆把最珍贵的地图保存在一间没有窗户的阴凉房间里。",
    "学生们逐行比较两个译本，并记下每一处差异。",
    "山谷里的农民轮作庄稼，以保持土壤肥沃。",
    "新的有轨电车线路把从车站到医院的时间缩短了一半。",
    "蜜蜂要采集成千上万朵花的花蜜，才能酿出一勺蜂蜜。",
    "他用一周写完初稿，又花了一年时间反复修改。",
    "博物馆用同一片森林的木材修复了船体。",
    "如果大人每天给孩子朗读，孩子学会阅读会更快。",
    "天文台记录到一颗暗淡的彗星缓缓划过北方的天空。",
    "当地的面包师凌晨四点开始工作，七点前把面包烤好。",
    "条约在春天签署，并于次年冬天生效。",
    "志愿者沿着新公园的边缘种下了两百棵橡树。",
    "一个简单的模型解释了测量温度的大部分变化。",
    "乐团反复排练最后一个乐章，直到节奏完全准确。",
    "因为风向改变，渔船提前返回了港口。",
    "报告建议为每年秋天都会被淹的道路改善排水。",
    "她的祖母坚持记录天气日记长达四十多年。",
    "软件团队在解析之前先检查输入，从而修复了这个错误。",
    "老照片显示，这个广场曾是一个热闹的集市，四周都是摊位。",
]

LOW_QUALITY_EN = [
    "click here click here click here BUY NOW!!! $$$ ### @@@",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "home | about | contact | login | register | cart | help",
    "ok",
    "{ } { } { } function() { return 0; } { } { }",
]


def _doc(rng: random.Random, sentences: list[str], lo: int, hi: int, sep: str) -> str:
    paragraphs = []
    for _ in range(rng.randint(2, 4)):
        paragraphs.append(sep.join(rng.choice(sentences) for _ in range(rng.randint(lo, hi))))
    return "\n\n".join(paragraphs)


def make_text(out: Path, rng: random.Random) -> None:
    out.mkdir(parents=True, exist_ok=True)
    en = [_doc(rng, EN_SENTENCES, 3, 7, " ") for _ in range(160)]
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
    zh = [_doc(rng, ZH_SENTENCES, 4, 9, "") for _ in range(100)] + []
    zh += zh[:5]
    rng.shuffle(zh)
    with gzip.GzipFile(out / "news_zh.jsonl.gz", "wb", mtime=0) as f:
        for i, text in enumerate(zh):
            f.write((json.dumps({"content": text, "id": f"zh-{i}"}, ensure_ascii=False) + "\n").encode())
    (out / "empty.jsonl").write_bytes(b"")
    books = out / "books"
    books.mkdir(exist_ok=True)
    for i in range(6):
        (books / f"book_{i:02d}.txt").write_text(_doc(rng, EN_SENTENCES, 8, 14, " ") + "\n", encoding="utf-8")
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


def main() -> None:
    rng = random.Random(0)
    make_text(HERE / "text", rng)
    make_images(HERE / "images", rng)
    make_pointclouds(HERE / "pointclouds")
    total = sum(p.stat().st_size for p in HERE.rglob("*") if p.is_file())
    print(f"data_samples: {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
