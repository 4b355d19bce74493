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
    # the stored event still gives the stored epsilon (independent recomputation), and the
    # report names the accountant that gave it (the default "auto": its own PLD here)
    assert loaded.accountant == "auto" and loaded.privacy_report_.accountant == "auto (pld_own)"
    eps = get_accountant("pld_own").epsilon(loaded.privacy_event_, loaded.delta_)
    assert eps == pytest.approx(model.epsilon_, rel=1e-12)
    assert eps < get_accountant("rdp").epsilon(loaded.privacy_event_, loaded.delta_)
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


# ---------------------------------------------------------------------------
# hostile model folders (issue 18, item 13)
# ---------------------------------------------------------------------------
def _replace_arrays(folder, payload, name="m"):
    """Write ``payload`` as the model's .npz and make the JSON's SHA-256 match it."""
    import hashlib

    (folder / f"{name}.npz").write_bytes(payload)
    meta = json.loads((folder / f"{name}.json").read_text())
    meta["arrays"]["sha256"] = hashlib.sha256(payload).hexdigest()
    (folder / f"{name}.json").write_text(json.dumps(meta))


def _zip(members, compression=None):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression or zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy(array=None, header=None):
    """A .npy file: ``array``'s, or a hand-written ``header`` dict with no data behind it."""
    import io

    buffer = io.BytesIO()
    if header is None:
        np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=True)
    else:
        np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


@pytest.mark.parametrize("file", ["../outside.npz", "/tmp/outside.npz", "sub/m.npz",
                                  "sub\\m.npz", "", ".", "..", "m.json", None, 5, ["m.npz"]])
def test_array_file_outside_the_folder_is_one_clear_error(tmp_path, data, file):
    """A ``file`` entry naming anything but a plain .npz beside the JSON is refused
    (before: ``Path.with_name`` raised a raw ValueError for a path)."""
    folder = tmp_path / "model"
    save_model(_fit(DPLogisticRegression, data), folder / "m")
    (tmp_path / "outside.npz").write_bytes((folder / "m.npz").read_bytes())
    _edit(folder, lambda meta: meta["arrays"].update(file=file))
    with pytest.raises(ValidationError, match="plain '.npz' file name|missing"):
        load_model(folder / "m")


def test_npz_symlink_out_of_the_folder_is_not_followed(tmp_path, data):
    """model.npz -> a valid array file elsewhere (same bytes, same SHA-256): refused
    (before: followed and loaded).  A link inside the folder is fine."""
    folder = tmp_path / "model"
    model = _fit(DPLogisticRegression, data)
    save_model(model, folder / "m")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "m.npz").rename(elsewhere / "m.npz")
    (folder / "m.npz").symlink_to(elsewhere / "m.npz")
    with pytest.raises(ValidationError, match="outside the model's folder"):
        load_model(folder / "m")
    # a symlinked directory chain leading out is refused the same way
    (folder / "m.npz").unlink()
    (folder / "hop").symlink_to(elsewhere)
    (folder / "m.npz").symlink_to(folder / "hop" / "m.npz")
    with pytest.raises(ValidationError, match="outside the model's folder"):
        load_model(folder / "m")
    # inside the folder: the link resolves beside the JSON
    (folder / "m.npz").unlink()
    (elsewhere / "m.npz").rename(folder / "real.npz")
    (folder / "m.npz").symlink_to("real.npz")
    np.testing.assert_array_equal(load_model(folder / "m").coef_, model.coef_)


def test_npz_header_claiming_745_gib_is_refused_without_allocating(tmp_path, data):
    """A 200-byte .npz whose coef header claims 10**11 float64 (745 GiB): one
    ValidationError, nothing allocated.  Loaded in a child process (before the fix
    numpy tried to allocate the claimed array), which must exit cleanly."""
    import subprocess
    import sys
    import textwrap

    save_model(_fit(DPLogisticRegression, data), tmp_path / "m")
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**11,)}
    _replace_arrays(tmp_path, _zip({"coef.npy": _npy(header=header) + b"\0" * 64,
                                    "intercept.npy": _npy(np.zeros(1))}))
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))  # no 745 GiB, ever
        from fastdp.exceptions import ValidationError
        from fastdp.persistence import load_model
        try:
            load_model({str(tmp_path / "m")!r})
        except ValidationError as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "header claims 800000000000 bytes" in done.stdout


@pytest.mark.parametrize("members, match", [
    ({"coef.npy": "object", "intercept.npy": None}, "dtype"),
    ({"coef.npy": None, "intercept.npy": None, "evil.npy": None}, "unexpected member"),
    ({"coef.npy": None, "intercept.npy": None, "../coef.npy": None}, "unexpected member"),
    ({"coef.npy": "short", "intercept.npy": None}, "header claims"),
    ({"coef.npy": "long", "intercept.npy": None}, "header claims"),
    ({"coef.npy": "complex", "intercept.npy": None}, "dtype"),
    ({"coef.npy": "garbage", "intercept.npy": None}, "unreadable"),
])
def test_hostile_array_members_are_one_clear_error(tmp_path, data, members, match):
    model = _fit(DPLogisticRegression, data)
    save_model(model, tmp_path / "m")
    coef, intercept = model.coef_, np.atleast_1d(model.intercept_)
    content = {}
    for name, kind in members.items():
        base = coef if name.startswith("coef") else intercept
        if kind == "object":
            content[name] = _npy(np.array([{"a": 1}], dtype=object))
        elif kind == "short":
            content[name] = _npy(base)[:-8]
        elif kind == "long":
            content[name] = _npy(base) + b"\0" * 8
        elif kind == "complex":
            content[name] = _npy(base.astype(complex))
        elif kind == "garbage":
            content[name] = b"\x93NUMPY\x09\x00garbage"
        else:
            content[name] = _npy(base)
    _replace_arrays(tmp_path, _zip(content))
    with pytest.raises(ValidationError, match=match):
        load_model(tmp_path / "m")


def test_deflated_member_claiming_more_than_deflate_can_hold_is_refused(tmp_path, data):
    """A zip bomb (a member whose declared size is beyond deflate's ratio) is refused
    from the directory entry, before decompressing."""
    import struct
    import zipfile

    model = _fit(DPLogisticRegression, data)
    save_model(model, tmp_path / "m")
    payload = bytearray(_zip({"coef.npy": _npy(model.coef_),
                              "intercept.npy": _npy(np.atleast_1d(model.intercept_))},
                             compression=zipfile.ZIP_DEFLATED))
    central = payload.rfind(b"PK\x01\x02")       # the last member's central directory entry
    struct.pack_into("<I", payload, central + 24, 2**31)   # its uncompressed size
    _replace_arrays(tmp_path, bytes(payload))
    with pytest.raises(ValidationError, match="claims|unreadable"):
        load_model(tmp_path / "m")


def test_a_model_saved_compressed_by_hand_still_loads(tmp_path, data):
    """The checks refuse only what save_model could not have written: a re-zipped
    (deflated) archive with the same arrays loads."""
    import zipfile

    model = _fit(DPLinearSVC, data)
    save_model(model, tmp_path / "m")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        content = {f"{k}.npy": _npy(npz[k]) for k in npz.files}
    _replace_arrays(tmp_path, _zip(content, compression=zipfile.ZIP_DEFLATED))
    loaded = load_model(tmp_path / "m")
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
