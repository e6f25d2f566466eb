import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLES = ROOT / "data_samples"

os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")  # no INFO lines at interpreter exit


def shared(*parts: str) -> Path:
    """A file of ../shared/data, or skip the test when the folder is absent (a user's machine)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (real data lives in ../shared/data)")
    return path


@pytest.fixture
def write_jsonl(tmp_path):
    def write(name: str, records: list, raw_lines: list[bytes] = ()) -> Path:
        path = tmp_path / name
        with open(path, "wb") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False).encode() + b"\n")
            for line in raw_lines:
                f.write(line)
        return path
    return write


def text_config(inputs: list[dict], out: Path, stages: list[dict] | None = None, **extra) -> dict:
    cfg = {"name": "t", "kind": "text", "inputs": inputs, "stages": stages or [], "output": {"path": str(out)}}
    cfg.update(extra)
    return cfg


@pytest.fixture(scope="session")
def s3_server():
    """An S3 API on 127.0.0.1 (moto's server): the environment that points boto/s3fs at it."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)      # one log line per request otherwise
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    yield {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    srv.stop()


@pytest.fixture
def s3(s3_server, monkeypatch, request):
    """A fresh bucket on the loopback S3 server; this process (and those it starts) see it.
    Yields (s3fs filesystem, "s3://bucket")."""
    import fsspec

    for k, v in s3_server.items():
        monkeypatch.setenv(k, v)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    bucket = "cf-" + "".join(ch for ch in request.node.name.lower() if ch.isalnum())[:40]
    fs.mkdir(bucket)
    yield fs, f"s3://{bucket}"
