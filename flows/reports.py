"""Dataset reports over HTTP on loopback, for the Prefect UI's artifact links.

Browsers refuse ``file://`` links from an ``http://`` page, so a report link on a flow run's page
did not open. ``corpusforge serve`` starts this server beside Prefect's (127.0.0.1, port 4201 by
default) and sets ``CORPUSFORGE_REPORTS_URL``; flows then link ``/report?path=...``.

It serves one kind of file only: a ``_report.html`` whose folder is a corpusforge dataset (a
``_manifest.json`` beside it), read-only. Any other path is refused (403), so the server cannot
be used to read other files of the machine.
"""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

from corpusforge.io.dataset import MANIFEST
from corpusforge.io.dataset import REPORT_HTML as REPORT

ENV = "CORPUSFORGE_REPORTS_URL"


def report_link(path: str) -> str:
    """The address to show for a dataset's report: through the report server when one runs,
    else ``file://`` for a local path, or the object-store URL itself."""
    if "://" in path:
        return path
    base = os.environ.get(ENV)
    absolute = str(Path(path).resolve())
    return f"{base}/report?path={quote(absolute)}" if base else Path(absolute).as_uri()


def servable(path: str) -> Path | None:
    """The report file ``path`` names, when it is one this server may serve."""
    p = Path(path).resolve()
    if p.name != REPORT or not p.is_file() or not (p.parent / MANIFEST).is_file():
        return None
    return p


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        paths = parse_qs(url.query).get("path", [])
        target = servable(paths[0]) if url.path == "/report" and len(paths) == 1 else None
        if target is None:
            self.send_error(403, "only dataset reports are served")
            return
        body = target.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def start(host: str = "127.0.0.1", port: int = 4201) -> tuple[ThreadingHTTPServer, str]:
    """Serve reports in a daemon thread; returns the server and its base URL (also put in the
    environment, where the flows this process serves read it)."""
    server = ThreadingHTTPServer((host, port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="reports").start()
    url = f"http://{host}:{server.server_address[1]}"
    os.environ[ENV] = url
    return server, url
