"""Names of stages and readers, as written in pipeline configs, mapped to their classes.

Modules are imported on first use, so a text pipeline never imports open3d or OpenCV.
"""

from __future__ import annotations

import importlib

STAGES: dict[str, str] = {
    "text.normalize": "corpusforge.text.normalize:Normalize",
    "text.exact_dedup": "corpusforge.text.exact_dedup:ExactDedup",
    "text.langid": "corpusforge.text.langid:LangId",
    "text.quality": "corpusforge.text.quality:Quality",
    "text.quality_classifier": "corpusforge.text.classifier:QualityClassifier",
    "text.pii": "corpusforge.text.pii:Pii",
    "text.tokenize": "corpusforge.text.tokenize:Tokenize",
    "text.augment": "corpusforge.text.augment:Augment",
    "pointcloud.denoise": "corpusforge.pointcloud.denoise:Denoise",
    "pointcloud.register": "corpusforge.pointcloud.register:Register",
    "pointcloud.complete": "corpusforge.pointcloud.complete:Complete",
    "pointcloud.augment": "corpusforge.pointcloud.augment:PointAugment",
    "text.near_dedup": "corpusforge.text.near_dedup:NearDedup",
    "text.partial_dedup": "corpusforge.text.partial_dedup:PartialDedup",
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


def _load(table: dict[str, str], name: str, what: str):
    """Look ``name`` up, or import it directly when written ``package.module:Class`` (a
    user's own stage or reader, importable on PYTHONPATH)."""
    if ":" in name and name not in table:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise KeyError(f"cannot import {what} {name!r}: {exc}") from None
    if name not in table:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}")
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def stage_class(name: str):
    return _load(STAGES, name, "stage")


def reader_class(name: str):
    return _load(READERS, name, "input format")
