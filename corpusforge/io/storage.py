"""Where a run's files live: a local folder, or a folder on an object store named by an
fsspec URL (``s3://bucket/prefix``, ``gs://...``, ``az://...``, ``memory://...``).

The runner, the dataset reader and the report go through a :class:`Store` for every file
they write or list, so the same code writes a dataset to a local disk, to a shared
filesystem mounted on every node, or to a bucket that every Dask worker can reach.

How a file becomes visible, atomically
--------------------------------------
* **Local (and mounted shared) filesystems**: written under a hidden temp name next to the
  final one, fsynced, renamed (``io.atomic``). POSIX rename is atomic.
* **Object stores**: an object becomes visible only when its upload completes (a single
  PUT, or the last call of a multipart upload), and there is no rename. So a file is written
  to a local temp file first, then uploaded to its *final key*: a process killed mid-upload
  leaves no object, never a truncated one. A store of the "filesystem" kind without that
  guarantee (sftp, a plain network share reached through fsspec) should be mounted and used
  as a local path instead.

Credentials and endpoints are fsspec's own: the usual environment (``AWS_ACCESS_KEY_ID``,
``AWS_ENDPOINT_URL``, ``GOOGLE_APPLICATION_CREDENTIALS`` ...) or fsspec's configuration
(``FSSPEC_S3_ENDPOINT_URL``, ``~/.config/fsspec/*.json``). Nothing secret goes into a
pipeline config, its hash or its lineage.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from corpusforge.io.atomic import commit, temp_path, write_bytes


def is_url(path) -> bool:
    return "://" in str(path)


def scratch_dir() -> Path:
    """Local scratch space for uploads and for object-store files a step needs on disk
    (``CORPUSFORGE_SCRATCH``, else the system temp folder)."""
    root = Path(os.environ.get("CORPUSFORGE_SCRATCH") or tempfile.gettempdir()) / "corpusforge-scratch"
    root.mkdir(parents=True, exist_ok=True)
    return root


SCRATCH_MAX_IDLE_S = 24 * 3600


def prune_scratch() -> None:
    """Delete what killed processes left in the scratch folder: anything not touched for a day
    (copies of decisions are touched whenever a filter uses them; uploads take minutes)."""
    now = time.time()
    for entry in scratch_dir().iterdir():
        try:
            if now - entry.stat().st_mtime > SCRATCH_MAX_IDLE_S:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        except OSError:
            pass                        # another process got there first


class Store:
    """One root folder: ``fs`` is its fsspec filesystem, and every path handed to or returned
    by the methods is a path *of that filesystem* (for a local store, an absolute path)."""

    def __init__(self, url: str | Path, base: Path | None = None):
        import fsspec

        url = str(url)
        if not is_url(url):
            p = Path(url).expanduser()
            url = str(p if p.is_absolute() else (Path(base) if base else Path.cwd()) / p)
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.is_local = "file" in _protocols(self.fs)
        self.root = self.root.rstrip("/") or "/"
        self.url = self.root if self.is_local else self.fs.unstrip_protocol(self.root)

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    # -- names -------------------------------------------------------------------------
    def join(self, *parts: str) -> str:
        return "/".join([self.root, *(str(p).strip("/") for p in parts if str(p))])

    def display(self, path: str) -> str:
        """The path as a user writes it (a URL for an object store)."""
        return path if self.is_local else self.fs.unstrip_protocol(path)

    @property
    def arrow_fs(self):
        """The pyarrow filesystem for ``pq.read_table(path, filesystem=...)``: Arrow's native
        local filesystem, or fsspec's through Arrow's handler."""
        import pyarrow.fs as pafs

        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    # -- reading ------------------------------------------------------------------------
    def _fresh(self, path: str) -> None:
        # other processes write to the same store: never answer from a stale listing cache
        if not self.is_local:
            self.fs.invalidate_cache(path)

    def exists(self, path: str) -> bool:
        self._fresh(path)
        return self.fs.exists(path)

    def is_empty_dir(self, path: str) -> bool:
        """True when nothing is stored under ``path``."""
        self._fresh(path)
        if self.is_local:
            p = Path(path)
            return not p.exists() or (p.is_dir() and not any(p.iterdir()))
        try:
            return not self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return True

    def glob(self, pattern: str) -> list[str]:
        self._fresh(pattern.rsplit("/", 1)[0])
        return sorted(self.fs.glob(pattern))

    def files_under(self, path: str) -> list[str]:
        """Every file below ``path`` (recursive), sorted; none for a missing folder."""
        self._fresh(path)
        return sorted(self.fs.find(path))

    def size(self, path: str) -> int:
        self._fresh(path)
        return int(self.fs.size(path))

    def read_bytes(self, path: str) -> bytes:
        if self.is_local:
            return Path(path).read_bytes()
        return self.fs.cat_file(path)

    def read_json(self, path: str):
        return json.loads(self.read_bytes(path))

    def read_json_or_none(self, path: str):
        """The file's JSON, or None when it does not exist: one request to an object store,
        where ``exists`` then ``read_json`` is two or three (a missing key is also listed as a
        possible folder)."""
        try:
            return json.loads(self.read_bytes(path))
        except FileNotFoundError:
            return None

    def open(self, path: str, mode: str = "rb"):
        if self.is_local:
            return open(path, mode)
        return self.fs.open(path, mode)

    # -- writing ------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        if self.is_local:                  # object stores have no folders to make
            Path(path).mkdir(parents=True, exist_ok=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        if self.is_local:
            write_bytes(Path(path), data)
            return
        try:
            self.fs.pipe_file(path, data)  # one PUT: the object appears whole or not at all
        except OSError as exc:
            raise self._write_error(path, exc) from exc

    def _write_error(self, path: str, exc: OSError) -> OSError:
        return OSError(exc.errno, f"cannot write {self.display(path)}: {exc.strerror or exc}")

    def write_json(self, path: str, obj) -> None:
        """Deterministic JSON (sorted keys, fixed indentation), written atomically."""
        self.write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())

    def staging_path(self, final: str) -> Path:
        """Where to write ``final`` before :meth:`commit`: a hidden temp file beside it
        (local), or a local scratch file (object store)."""
        if self.is_local:
            Path(final).parent.mkdir(parents=True, exist_ok=True)
            return temp_path(Path(final))
        fd, name = tempfile.mkstemp(prefix="upload-", suffix=Path(final).suffix, dir=scratch_dir())
        os.close(fd)
        return Path(name)

    def commit(self, staged: Path, final: str) -> None:
        """Make the staged file visible under ``final``, atomically; the staged file is gone after."""
        if self.is_local:
            commit(staged, Path(final))
            return
        try:
            self.fs.put_file(str(staged), final)
        except OSError as exc:
            raise self._write_error(final, exc) from exc
        finally:
            staged.unlink(missing_ok=True)

    def discard(self, staged: Path | None) -> None:
        if staged is not None:
            staged.unlink(missing_ok=True)

    @contextmanager
    def local_dir(self, path: str, upload: bool = False):
        """``path`` as a local folder, for code that works on files on disk (numpy, memory maps):
        the folder itself on a local store; on an object store a scratch folder that holds a
        download of it, or (``upload``) whose files are uploaded under ``path`` on a clean exit."""
        if self.is_local:
            Path(path).mkdir(parents=True, exist_ok=True)
            yield Path(path)
            return
        with tempfile.TemporaryDirectory(prefix="local-", dir=scratch_dir()) as tmp:
            if not upload:
                self.get_dir(path, Path(tmp))
            yield Path(tmp)
            if upload:
                self.put_dir(Path(tmp), path)

    def put_dir(self, local: Path, path: str) -> None:
        """Upload every file of the complete local folder ``local`` under ``path``: each is one
        object, visible once whole."""
        for f in sorted(p for p in Path(local).rglob("*") if p.is_file()):
            final = f"{path}/{f.relative_to(local).as_posix()}"
            try:
                self.fs.put_file(str(f), final)
            except OSError as exc:
                raise self._write_error(final, exc) from exc

    def get_dir(self, path: str, local: Path) -> None:
        """Download every file under ``path`` into the local folder ``local``."""
        for f in self.files_under(path):
            target = Path(local) / f[len(path):].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(f, str(target))

    def rm(self, path: str) -> None:
        """Delete a file, or a folder and everything under it; a missing path is fine."""
        if self.is_local:
            p = Path(path)
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
            return
        self._fresh(path)
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass


def _protocols(fs) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)
