"""A wheel built from the repository works on its own: installed (not editable) into a fresh
virtual environment, away from the checkout, it runs a text pipeline (record schemas read from
the package), tokenizes, trains, and starts the Prefect server's command line; and it installs a
single import name, ``corpusforge`` (no top-level ``trainer`` or ``flows`` to collide with)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.slow


def _run(cmd, cwd, env, timeout=600):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    # built from a copy of what the wheel is made of, so that no build/ folder is left in (or
    # reused from) the checkout; the links inside corpusforge/ are copied as links
    src = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("corpusforge", "trainer", "flows", "schemas"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp / "dist", src],
         cwd=tmp, env=os.environ)
    wheel = next((tmp / "dist").glob("corpusforge-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, env=os.environ)
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel],
         cwd=tmp, env=os.environ)
    # the dependencies come from this environment's site-packages as a plain path: its .pth files
    # (the editable install's finder among them) are not processed there
    site = Path(subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    return {"names": names, "py": py, "bin": venv / "bin", "env": env, "tmp": tmp}


def test_the_wheel_holds_one_import_name_and_the_schemas(installed):
    tops = {n.split("/")[0] for n in installed["names"] if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"corpusforge"}
    for kind in ("text", "image", "pointcloud", "manifest"):
        assert f"corpusforge/record_schemas/{kind}.json" in installed["names"]
    assert "corpusforge/trainer/train.py" in installed["names"] and "corpusforge/flows/serve.py" in installed["names"]
    r = _run([installed["py"], "-c", "import corpusforge, importlib.util as u; print(corpusforge.__file__); "
              "print(u.find_spec('trainer'), u.find_spec('flows'))"], cwd=installed["tmp"], env=installed["env"])
    where, specs = r.stdout.splitlines()
    assert where.startswith(str(installed["tmp"] / "venv")) and specs == "None None"


def test_the_installed_wheel_runs_a_pipeline_trains_and_serves(installed):
    tmp, env, cf = installed["tmp"], installed["env"], installed["bin"] / "corpusforge"
    cfg = {"name": "wheel", "kind": "text", "output": {"path": str(tmp / "clean")}, "stages": [{"stage": "text.normalize"}],
           "inputs": [{"format": "text", "paths": [str(ROOT / "data_samples/text/books")], "source": "books"}]}
    (tmp / "clean.yaml").write_text(yaml.safe_dump(cfg))
    _run([cf, "run", tmp / "clean.yaml", "-q"], cwd=tmp, env=env)
    _run([cf, "train-tokenizer", tmp / "clean", "--vocab-size", "300"], cwd=tmp, env=env)
    tok = {"name": "tok", "kind": "text", "output": {"path": str(tmp / "tok")}, "inputs": [{"format": "dataset",
           "paths": [str(tmp / "clean")]}], "stages": [{"stage": "text.tokenize", "tokenizer": str(tmp / "clean/tokenizer.json")}]}
    (tmp / "tok.yaml").write_text(yaml.safe_dump(tok))
    _run([cf, "run", tmp / "tok.yaml", "-q"], cwd=tmp, env=env)
    _run([cf, "train", ROOT / "trainer/configs/demo.yaml", f"--set=data.dataset={tmp / 'tok'}", "--set=steps=3",
          "--set=model.seq_len=32", "--set=batch_size=2", "--set=tensorboard=false", f"--set=out_dir={tmp / 'train'}"],
         cwd=tmp, env=env)
    assert json.loads((tmp / "train" / "summary.json").read_text())["steps"] == 3
    r = _run([cf, "serve", "--help"], cwd=tmp, env=env)
    assert "usage" in r.stdout
