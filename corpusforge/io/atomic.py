"""Atomic file writes: write a temp file in the same folder, fsync, then rename.

A crash never leaves a half-written file under a final name: readers and ``--resume``
only ever see complete files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def temp_path(path: Path) -> Path:
    """A hidden name beside ``path``, unique to this process: two processes writing the same
    file (a stray worker of a killed run and its resume) never share a temporary file."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def commit(tmp: Path, final: Path) -> None:
    """fsync ``tmp`` and rename it onto ``final`` (atomic on POSIX filesystems)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)


def write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        commit(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from exc


def write_json(path: Path, obj) -> None:
    """Deterministic JSON (sorted keys, fixed indentation), written atomically."""
    write_bytes(Path(path), (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())


class HashingFile:
    """A binary file sink that hashes (sha256) and counts what is written through it, so a
    shard's checksum costs no second pass over the file."""

    def __init__(self, path: Path):
        self._f = open(path, "wb")
        self._sha = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data) -> int:
        self._sha.update(data)
        n = self._f.write(data)
        self.size += n
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self.closed:
            self._f.close()
            self.closed = True

    def hexdigest(self) -> str:
        return self._sha.hexdigest()

    # pyarrow treats any object with these as a writable Python file
    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False
