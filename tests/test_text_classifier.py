import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from conftest import shared
from corpusforge.errors import ConfigError
from corpusforge.stage import StageStats
from corpusforge.text.classifier import HashedNgrams, QualityClassifier, QualityModel, train


def _corpora():
    pos = [l for l in shared("text", "zhwiki_sample.zh.txt").read_text().splitlines() if len(l) > 100]
    neg = [l for l in shared("text", "clue_corpus_small_sample.zh.txt").read_text().splitlines() if len(l) > 100]
    return pos, neg


def test_features_are_hashed_signed_and_normalized():
    x = HashedNgrams(dims=1 << 12).transform(["the cat sat", "the cat sat", ""])
    assert x.shape == (3, 1 << 12)
    assert np.allclose((x[0] - x[1]).toarray(), 0) and x[2].nnz == 0
    assert np.isclose(np.sqrt(x[0].multiply(x[0]).sum()), 1.0)


def test_train_save_load_apply_round_trip(tmp_path):
    pos, neg = _corpora()
    model, metrics = train(pos, neg, dims=1 << 16)
    assert metrics["accuracy"] > 0.85          # Wikipedia vs web/news, held out
    model.save(tmp_path / "m.npz")
    stage = QualityClassifier(QualityClassifier.Config(model=str(tmp_path / "m.npz"), threshold=0.5))
    table = pa.table({"text": pos[-50:] + neg[-50:], "lang": pa.array(["zh"] * 100)})
    stats = StageStats()
    res = stage.process(table, stats)
    scores = np.array(res.kept.column("score_quality_classifier").to_pylist()
                      + res.rejected.column("score_quality_classifier").to_pylist())
    assert res.kept.num_rows + res.rejected.num_rows == 100
    assert set(res.rejected.column("reject_reason").to_pylist()) <= {"classifier.low_score"}
    kept = set(res.kept.column("text").to_pylist())
    assert len(kept & set(pos[-50:])) > len(kept & set(neg[-50:]))
    loaded = QualityModel.load(tmp_path / "m.npz")
    cjk = np.ones(100, bool)
    assert np.allclose(loaded.predict(pos[-50:] + neg[-50:], cjk),
                       model.predict(pos[-50:] + neg[-50:], cjk), atol=1e-6)
    assert scores.min() >= 0 and scores.max() <= 1


def test_missing_or_wrong_model_file_is_a_clear_error(tmp_path):
    stage = QualityClassifier(QualityClassifier.Config(model=str(tmp_path / "nope.npz")))
    with pytest.raises(ConfigError, match="train-classifier"):
        stage.process(pa.table({"text": ["x"], "lang": pa.nulls(1, pa.string())}), StageStats())


def test_cli_trains_a_model(tmp_path):
    pos, neg = _corpora()
    r = subprocess.run([sys.executable, "-m", "corpusforge", "train-classifier",
                        "--positive", str(shared("text", "zhwiki_sample.zh.txt")),
                        "--negative", str(shared("text", "clue_corpus_small_sample.zh.txt")),
                        "--out", str(tmp_path / "q.npz"), "--log2-dims", "16", "--limit", "600"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "accuracy" in r.stdout and (tmp_path / "q.npz").exists()
    r = subprocess.run([sys.executable, "-m", "corpusforge", "train-classifier", "--positive", str(tmp_path / "x"),
                        "--negative", str(tmp_path / "y"), "--out", str(tmp_path / "z.npz")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr
