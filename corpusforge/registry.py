"""Names of stages and readers, as written in pipeline configs, mapped to their classes, and
the one loader of user code that configs name (``package.module:name``).

Modules are imported on first use, so a text pipeline never imports open3d or OpenCV.

Configs are code: a stage, reader, language detector, augmentation op or quality hook written
``package.module:name`` is imported and called. With ``CORPUSFORGE_PLUGIN_MODULES`` set (a comma-
separated list of module names), only those modules and the modules under them may be named;
anything else is a config error. Unset, any importable module may be (configs are trusted input).
"""

from __future__ import annotations

import importlib
import os

STAGES: dict[str, str] = {
    "text.normalize": "corpusforge.text.normalize:Normalize",
    "text.exact_dedup": "corpusforge.text.exact_dedup:ExactDedup",
    "text.langid": "corpusforge.text.langid:LangId",
    "text.quality": "corpusforge.text.quality:Quality",
    "text.quality_classifier": "corpusforge.text.classifier:QualityClassifier",
    "text.pii": "corpusforge.text.pii:Pii",
    "text.tokenize": "corpusforge.text.tokenize:Tokenize",
    "text.chat_tokenize": "corpusforge.text.chat_tokenize:ChatTokenize",
    "text.augment": "corpusforge.text.augment:Augment",
    "pointcloud.denoise": "corpusforge.pointcloud.denoise:Denoise",
    "pointcloud.register": "corpusforge.pointcloud.register:Register",
    "pointcloud.complete": "corpusforge.pointcloud.complete:Complete",
    "pointcloud.augment": "corpusforge.pointcloud.augment:PointAugment",
    "text.near_dedup": "corpusforge.text.near_dedup:NearDedup",
    "text.partial_dedup": "corpusforge.text.partial_dedup:PartialDedup",
    "text.substring_dedup": "corpusforge.text.substring_dedup:SubstringDedup",
    "text.line_dedup": "corpusforge.text.line_dedup:LineDedup",
    "image.validate": "corpusforge.image.validate:Validate",
    "image.quality": "corpusforge.image.quality:Quality",
    "image.near_dedup": "corpusforge.image.near_dedup:ImageNearDedup",
    "image.augment": "corpusforge.image.augment:ImageAugment",
}

READERS: dict[str, str] = {
    "jsonl": "corpusforge.io.readers.jsonl:JsonlReader",
    "text": "corpusforge.io.readers.text:TextReader",
    "parquet": "corpusforge.io.readers.parquet:ParquetReader",
    "images": "corpusforge.io.readers.images:ImageFolderReader",
    "pointcloud": "corpusforge.io.readers.pointcloud:PointCloudReader",
    "dataset": "corpusforge.io.readers.dataset:DatasetReader",
    "warc": "corpusforge.io.readers.warc:WarcReader",
    "csv": "corpusforge.io.readers.tabular:CsvReader",
    "hf_disk": "corpusforge.io.readers.tabular:HfDiskReader",
    "coco": "corpusforge.io.readers.coco:CocoReader",
    "kitti": "corpusforge.io.readers.lidar:KittiReader",
    "las": "corpusforge.io.readers.lidar:LasReader",
    "mesh": "corpusforge.io.readers.mesh:MeshReader",
}


PLUGIN_ALLOWLIST = "CORPUSFORGE_PLUGIN_MODULES"


def load_plugin(spec: str, what: str):
    """The object ``package.module:name`` names, after the allowlist check (see the module's
    docstring). Raises KeyError with the reason."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise KeyError(f"{what} {spec!r} is not package.module:name")
    allowed = [m.strip() for m in os.environ.get(PLUGIN_ALLOWLIST, "").split(",") if m.strip()]
    if allowed and not any(module == m or module.startswith(m + ".") for m in allowed):
        raise KeyError(f"{what} {spec!r}: module {module!r} is not in {PLUGIN_ALLOWLIST} ({', '.join(allowed)})")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise KeyError(f"cannot import {what} {spec!r}: {exc}") from None


def _load(table: dict[str, str], name: str, what: str):
    """Look ``name`` up, or import it directly when written ``package.module:Class`` (a
    user's own stage or reader, importable on PYTHONPATH)."""
    if ":" in name and name not in table:
        return load_plugin(name, what)
    if name not in table:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}")
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def stage_class(name: str):
    return _load(STAGES, name, "stage")


def reader_class(name: str):
    return _load(READERS, name, "input format")
