"""Saving and loading scikit-learn pipelines that end in a fastdp estimator."""

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import (Binarizer, FunctionTransformer, MaxAbsScaler, MinMaxScaler,
                                   Normalizer, PolynomialFeatures, RobustScaler, StandardScaler)

from fastdp import cli
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.persistence import load_model, save_model
from fastdp.preprocessing import NotPrivateWarning


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    return X, y


def _same_outputs(a, b, X):
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize("steps", [
    [Normalizer()],
    [Normalizer(norm="l1")],
    [Binarizer(threshold=0.2)],
    [PolynomialFeatures(degree=2, interaction_only=True), Normalizer(norm="max")],
    [FunctionTransformer(np.tanh), Normalizer()],
    [FunctionTransformer(None), "passthrough", Normalizer()],
], ids=["l2", "l1", "binarizer", "poly", "ufunc", "passthrough"])
def test_per_example_pipeline_round_trip(tmp_path, data, steps):
    X, y = data
    pipe = make_pipeline(*steps, DPLogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    save_model(pipe, tmp_path / "pipe")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        loaded = load_model(tmp_path / "pipe")
    assert isinstance(loaded, Pipeline) and loaded.private_
    assert [name for name, _ in loaded.steps] == [name for name, _ in pipe.steps]
    _same_outputs(pipe, loaded, X)
    assert loaded[-1].epsilon_ == pipe[-1].epsilon_


def test_regressor_and_svc_pipelines(tmp_path, data):
    X, y = data
    for i, est in enumerate([DPRidge(epsilon=2.0, random_state=1),
                             DPLinearSVC(epsilon=2.0, random_state=1)]):
        pipe = make_pipeline(Normalizer(), est).fit(X, y if i else X[:, 0])
        save_model(pipe, tmp_path / f"p{i}")
        loaded = load_model(tmp_path / f"p{i}")
        np.testing.assert_array_equal(pipe.predict(X), loaded.predict(X))


def test_text_pipelines(tmp_path):
    docs = ["the cat sat", "dogs bark loudly", "cats purr softly", "a dog runs"] * 40
    y = np.array([0, 1, 0, 1] * 40)
    pipe = make_pipeline(HashingVectorizer(n_features=2 ** 8, dtype=np.float32),
                         DPLogisticRegression(epsilon=2.0, random_state=0)).fit(docs, y)
    save_model(pipe, tmp_path / "text")
    loaded = load_model(tmp_path / "text")
    assert loaded[0].dtype is np.float32
    _same_outputs(pipe, loaded, docs)
    records = [{"w": 1.0, "x": 2.0}, {"y": 1.0}] * 50
    pipe = make_pipeline(FeatureHasher(n_features=16),
                         DPLogisticRegression(epsilon=2.0, random_state=0)).fit(records,
                                                                                y[:100])
    save_model(pipe, tmp_path / "hash")
    _same_outputs(pipe, load_model(tmp_path / "hash"), records)


@pytest.mark.parametrize("scaler", [StandardScaler(), MinMaxScaler(), MaxAbsScaler(),
                                    RobustScaler()], ids=lambda s: type(s).__name__)
def test_data_fitted_scalers_are_not_private(tmp_path, data, scaler):
    X, y = data
    pipe = make_pipeline(scaler, DPLogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    with pytest.raises(ValidationError, match="not be private"):
        save_model(pipe, tmp_path / "s")
    assert not (tmp_path / "s.json").exists()
    save_model(pipe, tmp_path / "s", allow_non_private=True)
    assert json.loads((tmp_path / "s.json").read_text())["private"] is False
    with pytest.warns(NotPrivateWarning, match="not private"):
        loaded = load_model(tmp_path / "s")
    assert not loaded.private_
    _same_outputs(pipe, loaded, X)


def test_unsavable_steps_are_refused(tmp_path, data):
    X, y = data
    est = DPLogisticRegression(epsilon=1.0, random_state=0)
    for step, match in [(FunctionTransformer(lambda z: z), "callable"),
                        (make_pipeline(Normalizer()), "Pipeline"),
                        (Normalizer(), None)]:
        pipe = make_pipeline(step, est).fit(X, y)
        if match is None:
            continue
        with pytest.raises(ValidationError, match=match):
            save_model(pipe, tmp_path / "bad")
    with pytest.raises(ValidationError, match="fastdp estimators"):
        save_model(make_pipeline(Normalizer(), StandardScaler()).fit(X), tmp_path / "bad")


def _saved(tmp_path, data):
    X, y = data
    pipe = make_pipeline(Normalizer(), StandardScaler(),
                         DPLogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    save_model(pipe, tmp_path / "m", allow_non_private=True)
    return tmp_path / "m.json"


@pytest.mark.parametrize("edit", ["final_json", "final_npz", "steps_npz", "private", "file_path",
                                  "class", "per_example"])
def test_modified_files_are_refused(tmp_path, data, edit):
    path = _saved(tmp_path, data)
    meta = json.loads(path.read_text())
    if edit == "final_json":
        final = tmp_path / "m.final.json"
        final.write_text(final.read_text().replace('"fit_time"', '"fit_time" ', 1))
    elif edit == "final_npz":
        (tmp_path / "m.final.npz").write_bytes((tmp_path / "m.npz").read_bytes())
    elif edit == "steps_npz":
        (tmp_path / "m.npz").write_bytes((tmp_path / "m.final.npz").read_bytes())
    elif edit == "private":
        meta["private"] = True
    elif edit == "file_path":
        meta["final"]["file"] = "../m.final.json"
    elif edit == "class":
        meta["steps"][0]["class"] = "os.system"
    elif edit == "per_example":
        meta["steps"][1]["per_example"] = True
    path.write_text(json.dumps(meta))
    with pytest.raises(ValidationError), warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        load_model(path)


def test_missing_field_is_one_error(tmp_path, data):
    path = _saved(tmp_path, data)
    meta = json.loads(path.read_text())
    del meta["steps"][0]["params"]
    path.write_text(json.dumps(meta))
    with pytest.raises(ValidationError, match="missing field 'params'"):
        load_model(path)


def test_cli_evaluates_a_saved_pipeline(tmp_path, data, capsys):
    X, y = data
    pipe = make_pipeline(Normalizer(), DPLogisticRegression(epsilon=1.0, random_state=0))
    pipe.fit(X, y)
    save_model(pipe, tmp_path / "pipe")
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(sp.csr_matrix(X), y, str(tmp_path / "d.svm"))
    assert cli.main(["evaluate", str(tmp_path / "pipe"), str(tmp_path / "d.svm")]) == 0
    out = capsys.readouterr().out
    assert "Pipeline (Normalizer -> DPLogisticRegression)" in out
    assert f"accuracy {pipe.score(X, y):.6g}" in out
