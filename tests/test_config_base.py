"""One config system: pipeline, mix, train and compress configs share the strict base, the YAML
loader, the ``--set`` grammar (list indices included) and the error type, whose message names
the field."""

import pytest

from conftest import ROOT
from corpusforge.config import load_config
from corpusforge.config_base import StrictModel, apply_overrides, parse_set, read_yaml
from corpusforge.errors import ConfigError
from corpusforge.mix.config import MixConfig
from corpusforge.mix.config import load as load_mix
from corpusforge.trainer.compress.common import CompressConfig
from corpusforge.trainer.compress.common import load_config as load_compress
from corpusforge.trainer.config import TrainConfig
from corpusforge.trainer.config import load as load_train
from corpusforge.trainer.model import ModelConfig

CONFIGS = ROOT / "data_samples" / "configs"


def test_every_config_is_a_strict_model():
    for model in (MixConfig, TrainConfig, CompressConfig, ModelConfig):
        assert issubclass(model, StrictModel)


def test_the_set_grammar():
    assert parse_set(["a.b=1", "c.0=x", "d=[1, 2]", "e=3e-4", "f=true", "g="]) == \
        {"a.b": 1, "c.0": "x", "d": [1, 2], "e": "3e-4", "f": True, "g": None}
    raw = {"stages": [{"stage": "x", "k": 1}], "out": {}}
    apply_overrides(raw, parse_set(["stages.0.k=2", "out.path=o", "new.deep.key=v"]), "cfg")
    assert raw == {"stages": [{"stage": "x", "k": 2}], "out": {"path": "o"}, "new": {"deep": {"key": "v"}}}
    for bad, msg in ((["nokey"], "expected KEY=VALUE"), (["stages.5.k=1"], "stages.5.k: no such place"),
                     (["stages.x.k=1"], "stages.x.k: no such place"), (["a=[1"], "not valid YAML")):
        with pytest.raises(ConfigError, match=msg):
            apply_overrides(raw, parse_set(bad), "cfg")
    with pytest.raises(ConfigError, match="config file not found"):
        read_yaml(ROOT / "no-such.yaml")


def test_the_same_overrides_reach_every_kind_of_config(tmp_path):
    pipeline = load_config(CONFIGS / "demo_text.yaml", parse_set(["stages.0.form=NFKC", "output.path=x"]))
    assert pipeline.stages[0]["form"] == "NFKC" and pipeline.output.path == "x"
    mix = load_mix(CONFIGS / "demo_mix.yaml", parse_set(["sources.web.weight=0.6", "sources.books.weight=0.1", "curriculum.window=8"]))
    assert mix.sources["web"].weight == 0.6 and mix.curriculum.window == 8
    train = load_train(ROOT / "trainer/configs/demo.yaml", ["parallel.mode=ddp", "optim.lr=3e-4", "model.n_layer=3"])
    assert train.parallel.mode == "ddp" and train.optim.lr == 3e-4 and train.model.n_layer == 3
    comp = load_compress(ROOT / "trainer/configs/compress_demo.yaml", ["quantize.methods.0=nf4", "distill.student.n_layer=1"])
    assert comp.quantize.methods == ["nf4"] and comp.distill.student.n_layer == 1


@pytest.mark.parametrize("load,path,override,field", [
    (lambda p, o: load_config(p, parse_set(o)), CONFIGS / "demo_text.yaml", "output.compresion=zstd", "output.compresion"),
    (lambda p, o: load_mix(p, parse_set(o)), CONFIGS / "demo_mix.yaml", "sources.web.weight=heavy", "sources.web.weight"),
    (load_train, ROOT / "trainer/configs/demo.yaml", "optim.lr=fast", "optim.lr"),
    (load_train, ROOT / "trainer/configs/demo.yaml", "model.norm=batchnorm", "model.norm"),
    (load_train, ROOT / "trainer/configs/demo.yaml", "parallel.microbatches=3", "parallel.microbatches"),
    (load_compress, ROOT / "trainer/configs/compress_demo.yaml", "prune.sparsity=2", "prune.sparsity"),
    (load_compress, ROOT / "trainer/configs/compress_demo.yaml", "distill.student.n_heads=2", "distill.student.n_heads"),
], ids=["pipeline", "mix", "train-type", "train-choice", "train-combination", "compress-range", "compress-nested"])
def test_one_error_type_names_the_field(load, path, override, field):
    sets = [override] + (["parallel.mode=pp"] if "microbatches" in override else [])
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load(path, sets)
