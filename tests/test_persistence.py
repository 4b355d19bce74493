"""save_model / load_model: JSON + .npz round trips with the privacy metadata."""
import json
import math

import numpy as np
import pytest

import fastdp
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.persistence import load_model, model_paths, read_model_metadata, save_model
from fastdp.preprocessing import normalize_rows
from fastdp.privacy.accountants import get_accountant


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = normalize_rows(rng.standard_normal((300, 8)))
    w = rng.standard_normal(8)
    return X, X @ w, np.where(X @ w > 0, "spam", "ham")


def _fit(cls, data, **kwargs):
    X, y_reg, y_cls = data
    y = y_reg if cls is DPRidge else y_cls
    params = dict(epsilon=2.0, delta=1e-5, batch_size=30, epochs=3, random_state=11)
    params.update(kwargs)
    return cls(**params).fit(X, y)


@pytest.mark.parametrize("cls", [DPRidge, DPLogisticRegression, DPLinearSVC])
def test_round_trip_keeps_model_and_privacy_metadata(tmp_path, data, cls):
    model = _fit(cls, data)
    json_path = save_model(model, tmp_path / "sub" / "model")
    assert json_path == tmp_path / "sub" / "model.json"
    assert (tmp_path / "sub" / "model.npz").is_file()
    loaded = load_model(tmp_path / "sub" / "model.npz")   # any of the two names works
    X = data[0]
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    assert loaded.get_params() == model.get_params()
    assert loaded.privacy_event_ == model.privacy_event_
    for attr in ("epsilon_", "delta_", "noise_multiplier_", "sample_rate_", "clip_", "n_iter_",
                 "sampler_", "n_features_in_"):
        assert getattr(loaded, attr) == getattr(model, attr), attr
    assert loaded.privacy_report_ == model.privacy_report_
    assert loaded.history_ is None
    # the stored event still gives the stored epsilon (independent recomputation)
    eps = get_accountant("rdp").epsilon(loaded.privacy_event_, loaded.delta_)
    assert eps == pytest.approx(model.epsilon_, rel=1e-12)
    if cls is not DPRidge:
        np.testing.assert_array_equal(loaded.classes_, ["ham", "spam"])
        np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))


def test_file_is_plain_json_with_version_seed_and_event(tmp_path, data):
    model = _fit(DPLogisticRegression, data, random_state=5)
    save_model(model, tmp_path / "m.json")
    meta = json.loads((tmp_path / "m.json").read_text())
    assert meta["format"] == "fastdp.model" and meta["version"] == 2
    assert meta["fastdp_version"] == fastdp.__version__
    privacy = meta["privacy"]
    assert privacy["seed"] == 5 and privacy["delta"] == 1e-5
    assert privacy["noise_multiplier"] == pytest.approx(model.noise_multiplier_, rel=0, abs=0)
    assert privacy["event"]["kind"] == "self_composed"
    assert meta["params"]["ledger"] is None
    # the arrays need no pickle
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["classes", "coef", "intercept"]
    assert read_model_metadata(tmp_path / "m")["estimator"] == "DPLogisticRegression"


def test_non_private_fit_round_trips_infinite_epsilon(tmp_path, data):
    model = _fit(DPRidge, data, epsilon=np.inf)
    save_model(model, tmp_path / "free")
    text = (tmp_path / "free.json").read_text()
    assert "Infinity" not in text and '"inf"' in text
    loaded = load_model(tmp_path / "free")
    assert math.isinf(loaded.epsilon_) and math.isinf(loaded.epsilon)
    assert loaded.privacy_report_ is None and loaded.delta_ == 0.0


def test_tampered_or_missing_arrays_are_refused(tmp_path, data):
    model = _fit(DPRidge, data)
    save_model(model, tmp_path / "a")
    save_model(_fit(DPRidge, data, random_state=12), tmp_path / "b")
    (tmp_path / "a.npz").write_bytes((tmp_path / "b.npz").read_bytes())
    with pytest.raises(ValidationError, match="SHA-256"):
        load_model(tmp_path / "a")
    (tmp_path / "b.npz").unlink()
    with pytest.raises(ValidationError, match="missing"):
        load_model(tmp_path / "b")


@pytest.mark.parametrize("content, match", [
    ("not json", "invalid JSON"),
    ('{"format": "something else"}', "not a fastdp model"),
])
def test_foreign_files_are_refused(tmp_path, content, match):
    (tmp_path / "x.json").write_text(content)
    with pytest.raises(ValidationError, match=match):
        load_model(tmp_path / "x")


def test_wrong_version_and_unknown_estimator(tmp_path, data):
    save_model(_fit(DPRidge, data), tmp_path / "m")
    meta = json.loads((tmp_path / "m.json").read_text())
    meta["version"] = 99
    (tmp_path / "m.json").write_text(json.dumps(meta))
    with pytest.raises(ValidationError, match="version 99"):
        load_model(tmp_path / "m")
    meta["version"], meta["estimator"] = 1, "os.system"
    (tmp_path / "m.json").write_text(json.dumps(meta))
    with pytest.raises(ValidationError, match="unknown estimator"):
        load_model(tmp_path / "m")


def test_unfitted_and_foreign_estimators_are_refused(tmp_path):
    from sklearn.linear_model import Ridge

    with pytest.raises(ValidationError, match="not fitted"):
        save_model(DPRidge(), tmp_path / "m")
    with pytest.raises(ValidationError, match="fastdp estimators"):
        save_model(Ridge().fit([[0.0], [1.0]], [0.0, 1.0]), tmp_path / "m")
    with pytest.raises(ValidationError, match="no fastdp model"):
        load_model(tmp_path / "missing")


def test_model_paths():
    for name in ("dir/model", "dir/model.json", "dir/model.npz"):
        j, n = model_paths(name)
        assert (str(j), str(n)) == ("dir/model.json", "dir/model.npz")


# --------------------------------------------------- the model's own row map
@pytest.mark.parametrize("normalize", ["auto", "clip", True])
def test_row_map_and_intercept_survive_a_round_trip(tmp_path, normalize):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 5)) * 4.0       # raw rows, far above norm 1
    y = (X[:, 0] + 2.0 > 0).astype(int)
    model = DPLogisticRegression(epsilon=1.0, normalize=normalize, intercept_scaling=0.7,
                                 random_state=0).fit(X, y)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.row_map_ == model.row_map_ and loaded.intercept_[0] != 0.0
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_multiclass_models_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((600, 6))
    y = np.argmax(X[:, :3], axis=1)
    for model in (DPLogisticRegression(epsilon=2.0, random_state=0).fit(X, y),
                  DPLinearSVC(epsilon=2.0, random_state=0).fit(X, y)):
        save_model(model, tmp_path / "m")
        loaded = load_model(tmp_path / "m")
        assert loaded.multi_class_ == model.multi_class_ and loaded.epsilon_ == model.epsilon_
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def _edit(tmp_path, change):
    meta = json.loads((tmp_path / "m.json").read_text())
    change(meta)
    (tmp_path / "m.json").write_text(json.dumps(meta))


def test_forged_epsilon_is_refused(tmp_path, data):
    save_model(_fit(DPLogisticRegression, data), tmp_path / "m")
    _edit(tmp_path, lambda meta: meta["privacy"].update(epsilon=0.001))
    with pytest.raises(ValidationError, match="modified"):
        load_model(tmp_path / "m")


def test_forged_delta_or_event_is_refused(tmp_path, data):
    save_model(_fit(DPLogisticRegression, data), tmp_path / "m")
    _edit(tmp_path, lambda meta: meta["privacy"].update(delta=0.5))
    with pytest.raises(ValidationError, match="modified"):
        load_model(tmp_path / "m")


def test_nan_coefficients_and_inconsistent_classes_are_refused(tmp_path, data):
    import io

    model = _fit(DPLogisticRegression, data)
    for arrays in ({"coef": np.full_like(model.coef_, np.nan)},
                   {"classes": np.array(["a", "b", "c"])},
                   {"classes": np.array(["a", "a"])}):
        save_model(model, tmp_path / "m")
        with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
            content = {k: npz[k] for k in npz.files}
        content.update(arrays)
        buffer = io.BytesIO()
        np.savez(buffer, **content)
        (tmp_path / "m.npz").write_bytes(buffer.getvalue())
        import hashlib

        _edit(tmp_path, lambda meta: meta["arrays"].update(
            sha256=hashlib.sha256(buffer.getvalue()).hexdigest()))
        with pytest.raises(ValidationError, match="non-finite|inconsistent"):
            load_model(tmp_path / "m")


def test_version_1_files_load_with_their_row_rule(tmp_path, data):
    """A file written before the row map existed: normalise-or-reject, no intercept."""
    X = data[0]
    model = _fit(DPLogisticRegression, data, normalize=True, fit_intercept=False)
    save_model(model, tmp_path / "m")

    def to_v1(meta):
        meta["version"] = 1
        for key in ("row_map", "solver", "multi_class"):
            meta["fit"].pop(key)
        for key in ("fit_intercept", "intercept_scaling"):
            meta["params"].pop(key)
        meta["params"]["normalize"] = True
    _edit(tmp_path, to_v1)
    loaded = load_model(tmp_path / "m")
    assert loaded.row_map_.bound == "normalize" and not loaded.row_map_.fit_intercept
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("section, key", [("fit", "n_features_in"), ("privacy", "delta"),
                                          ("privacy", "epsilon"), ("privacy", "event")])
def test_missing_fields_are_one_clear_error(tmp_path, data, section, key):
    save_model(_fit(DPLogisticRegression, data), tmp_path / "m")
    _edit(tmp_path, lambda meta: meta[section].pop(key))
    with pytest.raises(ValidationError, match=key):
        load_model(tmp_path / "m")
