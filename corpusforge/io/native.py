"""Native file parsers run in a helper process, so that a file which crashes its parser costs that
file, not the run.

Open3D's PLY and OFF mesh readers write past their arrays on a corrupt face list (segfault), and
lazrs aborts the process when a corrupt LAZ chunk table asks for tens of gigabytes; neither is
an exception Python could catch, and a unit that dies on every retry fails the whole run. The
readers of those formats call their parser through :class:`Isolated`: one helper process per
reader, started on first use (a plain ``python -m`` subprocess, so it works in daemonic Dask
workers too) and reused for every file; a parser that kills the helper or runs past
``timeout_s`` raises :class:`ParserCrashed` for that file, and the next file gets a new helper.
Functions and results travel pickled (protocol 5) over the helper's pipes; the helper's own
stdout is sent to stderr, since native libraries print there.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Callable

_COUNTS = struct.Struct("<QQ")          # pickle bytes, out-of-band buffers
_LENGTH = struct.Struct("<Q")


class ParserCrashed(Exception):
    """The parser killed its process, or ran past the time limit, on this file."""


def _send(fd: int, obj) -> None:
    """``obj`` as one frame; arrays go as pickle-5 out-of-band buffers, written from their own
    memory (no copy into the pickle: a LAZ tile's coordinates are hundreds of megabytes)."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    try:
        raws = [b.raw() for b in buffers]
    except BufferError:                  # a non-contiguous buffer: pickle it in band
        data, raws = pickle.dumps(obj, protocol=5), []
    head = _COUNTS.pack(len(data), len(raws)) + b"".join(_LENGTH.pack(r.nbytes) for r in raws)
    for part in (head, data, *raws):
        view = memoryview(part).cast("B")
        while view:
            view = view[os.write(fd, view):]


def _recv(fd: int, deadline: float | None = None):
    """One frame from ``fd``; EOFError at end of file (the peer died), TimeoutError past ``deadline``."""
    n_data, n_buffers = _COUNTS.unpack(_read(fd, _COUNTS.size, deadline))
    lengths = [_LENGTH.unpack(_read(fd, _LENGTH.size, deadline))[0] for _ in range(n_buffers)]
    data = _read(fd, n_data, deadline)
    return pickle.loads(data, buffers=[_read(fd, n, deadline) for n in lengths])


def _read(fd: int, n: int, deadline: float | None) -> bytearray:
    out = bytearray(n)
    view, got = memoryview(out), 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.readv(fd, [view[got:]])
        if not chunk:
            raise EOFError
        got += chunk
    return out


class Isolated:
    """Calls module-level functions in a helper process (see the module docstring)."""

    def __init__(self, timeout_s: float | None = 600.0):
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen | None = None

    def call(self, fn: Callable, *args) -> Any:
        proc = self._helper()
        try:
            _send(proc.stdin.fileno(), (fn, args))
        except OSError:
            self.close()
            raise ParserCrashed(f"{fn.__qualname__}: the helper process was gone") from None
        deadline = time.monotonic() + self.timeout_s if self.timeout_s else None
        try:
            ok, value = _recv(proc.stdout.fileno(), deadline)
        except TimeoutError:
            self.close()
            raise ParserCrashed(f"{fn.__qualname__} ran past {self.timeout_s:g} s: stopped") from None
        except EOFError:
            code = proc.wait()
            self.close()
            raise ParserCrashed(f"{fn.__qualname__} crashed its process ({_exit_name(code)})") from None
        except Exception as exc:  # noqa: BLE001 - an exception type that exists only in the helper
            self.close()
            raise ParserCrashed(f"{fn.__qualname__}: unreadable answer ({type(exc).__name__}: {exc})") from None
        if not ok:
            raise value
        return value

    def _helper(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            # the helper imports this same corpusforge (a checkout on sys.path, not another install)
            root = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
            self._proc = subprocess.Popen([sys.executable, "-m", "corpusforge.io.native"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, bufsize=0, env={**os.environ, "PYTHONPATH": path})
            weakref.finalize(self, _stop, self._proc)
            try:                                 # 1 MiB pipe buffers: big arrays in fewer round trips
                import fcntl

                for fh in (self._proc.stdin, self._proc.stdout):
                    fcntl.fcntl(fh.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
            except (ImportError, OSError):
                pass
        return self._proc

    def close(self) -> None:
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for fh in (proc.stdin, proc.stdout):
        try:
            fh.close()
        except OSError:
            pass


def _exit_name(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _serve() -> None:
    """The helper: read (function, args), answer (True, result) or (False, exception), until EOF."""
    reply = os.dup(1)
    os.dup2(2, 1)                       # what the native libraries print goes to stderr, not into the pipe
    while True:
        try:
            fn, args = _recv(0)
        except EOFError:
            return
        try:
            answer = (True, fn(*args))
        except Exception as exc:  # noqa: BLE001 - the caller decides; it gets the exception itself
            answer = (False, exc)
        except BaseException as exc:    # a Rust panic (pyo3's PanicException) is not an Exception
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                raise
            answer = (False, RuntimeError(f"{type(exc).__name__}: {exc}"))
        try:
            _send(reply, answer)
        except (pickle.PicklingError, TypeError, AttributeError):
            _send(reply, (False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))


if __name__ == "__main__":
    _serve()
