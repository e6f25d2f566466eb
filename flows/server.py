"""The Prefect server's lifecycle: start ``prefect server start`` on a port, wait until it
answers, and stop it (``local_server``: for the length of a ``with`` block). Used by the deployment
catalogue (``serve.py``) and by flows that need a server of their own (``pipeline.py``'s Dask runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def wait_healthy(api_url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"the Prefect server at {api_url} did not answer within {timeout:.0f} s")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(host: str, port: int, env: dict | None = None, log=None) -> subprocess.Popen:
    """``prefect server start`` in a subprocess (``env``: its environment, e.g. PREFECT_HOME)."""
    exe = Path(sys.executable).with_name("prefect")
    cmd = [str(exe) if exe.exists() else "prefect", "server", "start", "--host", host, "--port", str(port)]
    return subprocess.Popen(cmd, env=dict(env or os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false"),
                            stdout=log, stderr=subprocess.STDOUT if log is not None else None)


class local_server:
    """A Prefect server on a free loopback port for the duration of a ``with`` block; the block
    gets its API URL."""

    def __init__(self, env: dict | None = None, log=subprocess.DEVNULL, timeout: float = 120.0):
        self.env, self.log, self.timeout = env, log, timeout

    def __enter__(self) -> str:
        port = free_port()
        self.proc = start_server("127.0.0.1", port, self.env, self.log)
        url = f"http://127.0.0.1:{port}/api"
        try:
            wait_healthy(url, self.timeout)
        except Exception:
            self.__exit__()
            raise
        return url

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
