"""Saved models cannot print or load a lie unnoticed (issue 34).

The CLI prints only what loading recomputed; a key authenticates a file;
saves are atomic; a model JSON that is not a regular file, or holds
out-of-range numbers, is one clear error.
"""

import hashlib
import io
import json
import os

import numpy as np
import pytest

from fastdp.cli.entry import main
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.persistence import load_model, save_model

from tests._limited_child import run_limited


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    return DPLogisticRegression(epsilon=1.0, delta=1e-5, random_state=0).fit(
        X, (X[:, 0] > 0).astype(int))


def _edit(json_path, change):
    meta = json.loads(json_path.read_text())
    change(meta)
    json_path.write_text(json.dumps(meta))


def _libsvm(path, n=40):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 4))
    lines = [f"{int(x[0] > 0)} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x))
             for x in X]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_evaluate_prints_recomputed_values_not_the_stored_report(tmp_path, model, capsys):
    json_path = save_model(model, tmp_path / "m")

    def forge(meta):
        meta["privacy"]["report"]["epsilon_guaranteed"] = 0.001
        meta["privacy"]["report"]["delta"] = 0.5
        meta["privacy"]["noise_multiplier"] = 1000.0
        meta["privacy"]["sample_rate"] = 0.000123
        meta["privacy"]["n_iter"] = 987654

    _edit(json_path, forge)
    assert main(["evaluate", str(json_path), str(_libsvm(tmp_path / "d.svm"))]) == 0
    out = capsys.readouterr().out
    for forged in ("0.001 ", "1000", "0.000123", "987654", "= 0.5"):
        assert forged not in out
    assert f"{model.epsilon_:.6g}" in out and "NOT authenticated" in out
    sigma = model.privacy_event_.to_dict()["event"]["event"]["noise_multiplier"]
    assert f"{sigma:.6g}" in out  # from the saved event


def test_loaded_report_is_recomputed_from_the_event(tmp_path, model):
    json_path = save_model(model, tmp_path / "m")
    _edit(json_path, lambda m: m["privacy"]["report"].update(epsilon_guaranteed=0.001))
    assert load_model(json_path).privacy_report_ == model.privacy_report_


def _forge_consistently(json_path):
    """δ = 0.5 and ε recomputed for it: no check on the file alone can see this."""
    from fastdp.privacy.rdp import RdpAccountant
    from fastdp.privacy.events import event_from_dict

    def forge(meta):
        event = event_from_dict(meta["privacy"]["event"])
        meta["privacy"]["delta"] = 0.5
        meta["privacy"]["epsilon"] = RdpAccountant().epsilon(event, 0.5)

    _edit(json_path, forge)


def test_a_key_detects_a_consistent_forgery(tmp_path, model):
    json_path = save_model(model, tmp_path / "m", key=b"secret")
    loaded = load_model(json_path, key=b"secret")
    assert loaded.authenticated_ and loaded.epsilon_ == model.epsilon_
    _forge_consistently(json_path)
    assert load_model(json_path).delta_ == 0.5  # loads without a key: the docs say so
    assert load_model(json_path).authenticated_ is False
    with pytest.raises(ValidationError, match="does not verify"):
        load_model(json_path, key=b"secret")


def test_a_key_refuses_unsigned_files_and_other_keys(tmp_path, model):
    unsigned = save_model(model, tmp_path / "u")
    with pytest.raises(ValidationError, match="not authenticated"):
        load_model(unsigned, key="secret")
    signed = save_model(model, tmp_path / "s", key="secret")
    with pytest.raises(ValidationError, match="does not verify"):
        load_model(signed, key="other")


def test_a_key_also_covers_the_arrays(tmp_path, model):
    json_path = save_model(model, tmp_path / "m", key=b"k")
    buffer = io.BytesIO()
    np.savez(buffer, coef=model.coef_ * 2, intercept=np.atleast_1d(model.intercept_),
             classes=model.classes_)
    (tmp_path / "m.npz").write_bytes(buffer.getvalue())
    _edit(json_path, lambda m: m["arrays"].update(
        sha256=hashlib.sha256(buffer.getvalue()).hexdigest()))
    with pytest.raises(ValidationError, match="does not verify"):
        load_model(json_path, key=b"k")


def test_cli_key_file_round_trip(tmp_path, model, capsys):
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    json_path = save_model(model, tmp_path / "m", key=key.read_bytes())
    data = _libsvm(tmp_path / "d.svm")
    assert main(["evaluate", str(json_path), str(data), "--key-file", str(key)]) == 0
    assert "authenticated (its HMAC verified" in capsys.readouterr().out
    other = tmp_path / "other"
    other.write_bytes(b"not the key")
    assert main(["evaluate", str(json_path), str(data), "--key-file", str(other)]) != 0


def test_a_failed_save_leaves_the_old_model_loadable(tmp_path, model):
    old = save_model(model, tmp_path / "m")
    done = run_limited("""
        import resource, signal, sys
        import numpy as np
        from fastdp.persistence import load_model, save_model
        model = load_model(sys.argv[1])
        model.coef_ = np.zeros((1, 100_000))      # an 800 kB array file
        model.n_features_in_ = 100_000
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
        try:
            save_model(model, sys.argv[1])
        except OSError as exc:
            print("failed:", exc.errno)
    """, args=[str(old)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "failed:" in done.stdout
    assert np.array_equal(load_model(old).coef_, model.coef_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.npz"]


def test_a_fifo_model_file_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "m.json")
    done = run_limited("""
        import sys
        from fastdp.exceptions import ValidationError
        from fastdp.persistence import load_model
        try:
            load_model(sys.argv[1])
        except ValidationError as exc:
            print("refused:", exc)
    """, args=[str(tmp_path / "m.json")], timeout=60)
    assert "refused:" in done.stdout and "not a regular file" in done.stdout


def test_a_link_to_a_device_is_refused(tmp_path):
    os.symlink("/dev/zero", tmp_path / "m.json")
    with pytest.raises(ValidationError, match="not a regular file"):
        load_model(tmp_path / "m.json")


@pytest.mark.parametrize("text", ['{"format": "fastdp.model", "x": 1e400}',
                                  "[" * 100_000 + "]" * 100_000])
def test_hostile_json_is_one_clear_error(tmp_path, text):
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(ValidationError):
        load_model(tmp_path / "m.json")


def test_n_iter_out_of_range_is_refused(tmp_path, model):
    json_path = save_model(model, tmp_path / "m")
    text = json_path.read_text().replace(f'"n_iter": {model.n_iter_}', '"n_iter": 1e400')
    json_path.write_text(text)
    with pytest.raises(ValidationError, match="n_iter"):
        load_model(json_path)


def test_nan_in_saved_classes_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    fitted = DPLogisticRegression(random_state=0).fit(X, np.where(X[:, 0] > 0, 1.0, 2.0))
    json_path = save_model(fitted, tmp_path / "m")
    buffer = io.BytesIO()
    np.savez(buffer, coef=fitted.coef_, intercept=np.atleast_1d(fitted.intercept_),
             classes=np.array([1.0, np.nan]))
    (tmp_path / "m.npz").write_bytes(buffer.getvalue())
    _edit(json_path, lambda m: m["arrays"].update(
        sha256=hashlib.sha256(buffer.getvalue()).hexdigest()))
    with pytest.raises(ValidationError, match="non-finite class"):
        load_model(json_path)


def test_predict_refuses_dates(model):
    with pytest.raises(ValidationError, match="dates"):
        model.predict(np.zeros((2, 4), dtype="datetime64[s]"))


def test_labels_as_bytes_are_a_fastdp_error():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValidationError, match="bytes"):
        DPLogisticRegression().fit(X, np.where(X[:, 0] > 0, b"a", b"b"))


def test_a_huge_sparse_model_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "m.json"
    with open(path, "wb") as out:
        out.truncate(6 << 30)  # 6 GiB of NULs, no disk used
    try:
        with pytest.raises(ValidationError, match="more than"):
            load_model(path)
    finally:
        os.unlink(path)
