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
