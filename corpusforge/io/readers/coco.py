"""COCO-style annotation files: one record per image entry, with its annotations as metadata.

``paths`` name the annotation JSON files (``instances_*.json``); images are looked up under
``images_dir`` (relative to the JSON's folder; default: the JSON's folder itself, then its
``images/`` subfolder). Each record gets ``label`` = the category with the most annotations on
the image (ties: the first by name), and ``meta``: ``coco_id``, ``file_name``,
``categories`` (all, counted) and ``annotations`` (``bbox`` [x, y, w, h], ``category``,
``area``, ``iscrowd``, ``segmentation`` as given). An image entry whose file is missing is
rejected as ``missing_file``; annotations that point to no image entry are counted in the
rejected row ``orphan_annotations``; a JSON file that does not parse or has no ``images`` list is
rejected as ``bad_annotations``. Image bytes go through the same checks as the folder reader.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path, PurePosixPath
from typing import Iterator

from pydantic import Field

from corpusforge import schemas
from corpusforge.io.storage import is_url
from corpusforge.image.decode import DEFAULT_MAX_PIXELS
from corpusforge.io.readers.base import ReadBatch, Reader, ReaderConfig, describe_os_error
from corpusforge.io.readers.images import image_batch


class CocoConfig(ReaderConfig):
    images_dir: str | None = Field(None, description="Folder of the image files, relative to the JSON file's folder.")
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)


class CocoReader(Reader):
    format = "coco"
    kinds = ("image",)
    Config = CocoConfig
    suffixes = (".json",)

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: CocoConfig = self.config
        try:
            doc = json.loads(path.read_bytes())
            images = doc["images"]
            if not isinstance(images, list):
                raise TypeError("'images' is not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            yield image_batch(cfg.source, b"", str(path), reject=("bad_annotations", describe_os_error(exc)))
            return
        # entries are data too: a malformed one costs itself (counted or rejected), never the file
        categories = {_key(c["id"]): str(c.get("name", c["id"])) for c in _entries(doc, "categories")
                      if "id" in c}
        by_image = defaultdict(list)
        ids = {_key(im.get("id")) for im in images if isinstance(im, dict)}
        annotations = _entries(doc, "annotations")
        listed = doc.get("annotations")
        orphans = len(listed) - len(annotations) if isinstance(listed, list) else 0    # entries that are not objects
        for ann in annotations:
            if _key(ann.get("image_id")) in ids:
                by_image[_key(ann["image_id"])].append(ann)
            else:
                orphans += 1
        roots = [path.parent / cfg.images_dir] if cfg.images_dir else [path.parent, path.parent / "images"]
        for i, im in enumerate(images):
            if not isinstance(im, dict):
                yield image_batch(cfg.source, b"", f"{path}#images[{i}]", meta={"entry": i},
                                  reject=("bad_annotations", f"images[{i}] is {type(im).__name__}, not an object"))
                continue
            name = str(im.get("file_name", ""))
            anns = by_image.get(_key(im.get("id")), [])
            counts = Counter(categories.get(_key(a.get("category_id")), str(a.get("category_id"))) for a in anns)
            meta = {"coco_id": im.get("id"), "file_name": name, "annotation_file": str(path),
                    "categories": dict(sorted(counts.items())),
                    "annotations": [{"bbox": a.get("bbox"), "category": categories.get(_key(a.get("category_id"))),
                                     "area": a.get("area"), "iscrowd": a.get("iscrowd", 0),
                                     "segmentation": a.get("segmentation")} for a in anns]}
            label = max(sorted(counts), key=lambda k: counts[k]) if counts else None
            escape = outside(roots, name)
            if escape:
                yield image_batch(cfg.source, b"", str(path), meta=meta, reject=("unsafe_path", escape))
                continue
            file = next((r / name for r in roots if name and (r / name).is_file()), None)
            if file is None:
                yield image_batch(cfg.source, b"", str(roots[0] / name), meta=meta,
                                  reject=("missing_file", f"{name!r} not found under {', '.join(map(str, roots))}"))
                continue
            try:
                data = file.read_bytes()
            except OSError as exc:
                yield image_batch(cfg.source, b"", str(file), meta=meta, reject=("unreadable_file", describe_os_error(exc)))
                continue
            yield image_batch(cfg.source, data, str(file), label, meta, cfg.max_pixels)
        if orphans:
            yield image_batch(cfg.source, b"", str(path), meta={"orphan_annotations": orphans},
                              reject=("orphan_annotations", f"{orphans} annotations name no image entry "
                                                            "(or are not objects)"))
        if not images:
            yield ReadBatch(schemas.load("image").empty_table())


def _entries(doc: dict, name: str) -> list[dict]:
    """The objects of the list ``doc[name]``; anything else in it, or a non-list, gives none."""
    value = doc.get(name)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _key(value):
    """An id as a dict key: a list or object id (hostile or hand-made JSON) by its JSON text."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def outside(roots: list[Path], name: str) -> str | None:
    """Why ``file_name`` would leave the images folder (absolute, ``..``, a link out), or None.
    An annotation file is data, not a licence to read /etc/hostname into rejected/."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (len(name) > 1 and name[1] == ":"):
        return f"file_name {name!r} leaves the images folder: not read"
    for root in roots:
        if is_url(root) or not (root / name).exists():
            continue
        if not (root / name).resolve().is_relative_to(root.resolve()):
            return f"file_name {name!r} is a link out of the images folder: not read"
    return None
