"""A saved pipeline cannot load a hostile member (issue 34).

Each case edits a saved pipeline's JSON (or its array file) as a hostile
sender would; loading must give one clear ValidationError, quickly and in
bounded memory (the costly cases run in a child process with limits).
"""

import hashlib
import io
import json
import os
import zipfile

import numpy as np
import pytest
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (FunctionTransformer, Normalizer, PolynomialFeatures,
                                   StandardScaler)

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.persistence import load_model, save_model

from tests._limited_child import run_limited


def _xy():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    return X, (X[:, 0] > 0).astype(int)


def _save(tmp_path, *steps, allow_non_private=False):
    X, y = _xy()
    pipe = make_pipeline(*steps, DPLogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    return save_model(pipe, tmp_path / "p", allow_non_private=allow_non_private)


def _edit(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _set_params(**params):
    return lambda meta: meta["steps"][0]["params"].update(params)


def _set_step(**fields):
    return lambda meta: meta["steps"][0].update(fields)


def _refused(path, match=None):
    with pytest.raises(ValidationError, match=match):
        load_model(path)


@pytest.mark.parametrize("step, change, match", [
    (PolynomialFeatures(2), _set_params(degree=10_000), "degree"),
    (Normalizer(), _set_step(n_features_in=10**11), "n_features_in"),
    (Normalizer(), _set_step(n_features_in="abc"), "n_features_in"),
    (Normalizer(), _set_step(n_features_in=True), "n_features_in"),
    (Normalizer(), _set_params(norm="bogus"), "norm"),
    (FunctionTransformer(np.tanh), _set_params(kw_args={"where": False}), "kw_args"),
    (FunctionTransformer(np.tanh), _set_params(func={"numpy_ufunc": "add"}), "one input"),
    (FunctionTransformer(np.tanh), _set_params(func="print"), "func"),
    (Normalizer(), _set_step(n_features_in=4), "features"),
], ids=["poly-degree", "normalizer-1e11", "normalizer-abc", "normalizer-bool",
        "norm-bogus", "where-false", "binary-ufunc", "func-string", "width-chain"])
def test_hostile_member_parameters_are_refused(tmp_path, step, change, match):
    path = _save(tmp_path, step)
    _edit(path, change)
    _refused(path, match)


def test_a_data_fitted_scaler_forged_as_per_example_is_refused(tmp_path):
    path = _save(tmp_path, StandardScaler(), allow_non_private=True)

    def forge(meta):
        meta["steps"][0]["per_example"] = True
        meta["private"] = True

    _edit(path, forge)
    _refused(path, "privacy class")


def test_too_many_steps_are_refused(tmp_path):
    path = _save(tmp_path, Normalizer())
    _edit(path, lambda meta: meta["steps"].extend([{"name": f"s{i}", "class": "passthrough"}
                                                   for i in range(100_000)]))
    _refused(path, "steps")


def _replace_npz(path, payload):
    npz = path.with_name("p.npz")
    npz.write_bytes(payload)
    _edit(path, lambda meta: meta["arrays"].update(sha256=hashlib.sha256(payload).hexdigest()))


def _refused_in_bounded_memory(path, memory_gib):
    """``load_model(path)`` in a child process limited to ``memory_gib``: a ValidationError."""
    done = run_limited("""
        import sys, warnings
        warnings.simplefilter("ignore")
        from fastdp.exceptions import ValidationError
        from fastdp.persistence import load_model
        try:
            load_model(sys.argv[1])
        except ValidationError as exc:
            print("refused:", exc)
    """, memory_gib=memory_gib, args=[str(path)])
    assert "refused:" in done.stdout, done.stderr[-2000:]


def test_array_header_claiming_745_gib_is_refused_in_bounded_memory(tmp_path):
    path = _save(tmp_path, StandardScaler(), allow_non_private=True)
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)})
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("standardscaler.mean_.npy", buffer.getvalue() + b"\0" * 64)
    _replace_npz(path, archive.getvalue())
    _refused_in_bounded_memory(path, memory_gib=2)


def test_deflate_bomb_is_refused_in_bounded_memory(tmp_path):
    path = _save(tmp_path, StandardScaler(), allow_non_private=True)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<f8", "fortran_order": False, "shape": (2**23,)})
        out.writestr("standardscaler.mean_.npy", header.getvalue() + b"\0" * 2**26)
    _replace_npz(path, archive.getvalue())
    _refused_in_bounded_memory(path, memory_gib=1.5)


def test_npz_link_to_a_device_is_refused(tmp_path):
    path = _save(tmp_path, Normalizer())
    os.unlink(path.with_name("p.npz"))
    os.symlink("/dev/zero", path.with_name("p.npz"))
    _refused(path)


def test_final_file_outside_the_folder_is_refused(tmp_path):
    path = _save(tmp_path, Normalizer())
    _edit(path, lambda meta: meta["final"].update(file="../x.final.json"))
    _refused(path, "file name")


def test_deeply_nested_event_is_one_error(tmp_path):
    path = _save(tmp_path, Normalizer())
    final = path.with_name("p.final.json")
    meta = json.loads(final.read_text())
    meta["privacy"]["event"] = "EVENT"
    depth = 100_000
    event = ('{"kind": "self_composed", "count": 1, "event": ' * depth
             + '{"kind": "gaussian", "noise_multiplier": 1.0, "adjacency": "add_remove"}'
             + "}" * depth)
    final.write_text(json.dumps(meta).replace('"EVENT"', event))
    _edit(path, lambda m: m["final"].update(
        sha256=hashlib.sha256(final.read_bytes()).hexdigest()))
    _refused(path)


@pytest.mark.parametrize("params, match", [
    ({"token_pattern": r"(\w|\w)+!"}, "token_pattern"),
    ({"ngram_range": [1, 1_000_000]}, "ngram_range"),
    ({"n_features": 2**40}, "n_features"),
])
def test_hostile_hashing_vectorizer_is_refused(tmp_path, params, match):
    docs = ["the cat sat", "dogs bark loudly"] * 50
    y = np.array([0, 1] * 50)
    pipe = make_pipeline(HashingVectorizer(n_features=2**8),
                         DPLogisticRegression(epsilon=2.0, random_state=0)).fit(docs, y)
    path = save_model(pipe, tmp_path / "p")
    _edit(path, _set_params(**params))
    _refused(path, match)


def test_a_key_authenticates_every_file_of_a_pipeline(tmp_path):
    X, y = _xy()
    pipe = make_pipeline(Normalizer(), DPLogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    path = save_model(pipe, tmp_path / "p", key=b"k")
    assert load_model(path, key=b"k")[-1].authenticated_
    final = path.with_name("p.final.json")
    meta = json.loads(final.read_text())
    meta["fit"]["fit_time"] = 123.0  # any edit of a member file
    final.write_text(json.dumps(meta))
    _edit(path, lambda m: m["final"].update(
        sha256=hashlib.sha256(final.read_bytes()).hexdigest()))
    with pytest.raises(ValidationError, match="does not verify"):
        load_model(path, key=b"k")
