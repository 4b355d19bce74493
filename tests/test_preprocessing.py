"""Tests of fastdp/preprocessing.py against scikit-learn and closed forms."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MaxAbsScaler, normalize

from fastdp.exceptions import ValidationError
from fastdp.preprocessing import (
    NotPrivateWarning,
    clip_rows,
    normalize_rows,
    paper_preprocess,
    row_norms,
    scale_features_public,
)


def _data(rng, dtype=np.float64, sparse=False, n=60, d=9):
    X = rng.standard_normal((n, d)) * rng.lognormal(0, 2, size=(n, 1))
    X[rng.random((n, d)) < 0.6] = 0.0
    X[3] = 0.0  # an all-zero row
    X = X.astype(dtype)
    return sp.csr_matrix(X) if sparse else X


def _dense(X):
    return X.toarray() if sp.issparse(X) else X


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normalize_rows_equals_sklearn(rng, sparse, dtype):
    X = _data(rng, dtype, sparse)
    out = normalize_rows(X)
    reference = normalize(X, norm="l2")
    assert sp.issparse(out) == sparse and out.dtype == dtype
    if dtype == np.float64:  # same summation order and division: bit-identical
        np.testing.assert_array_equal(_dense(out), _dense(reference))
    else:  # fastdp accumulates the float32 norms in float64
        np.testing.assert_allclose(_dense(out), _dense(reference), rtol=1e-6, atol=0)
    norms = row_norms(out)
    np.testing.assert_allclose(np.delete(norms, 3), 1.0, rtol=10 * np.finfo(dtype).eps)
    assert norms[3] == 0.0


def test_normalize_rows_does_not_modify_input(rng):
    X = _data(rng, sparse=True)
    before = X.data.copy()
    normalize_rows(X)
    np.testing.assert_array_equal(X.data, before)


def test_normalize_rows_handles_unsorted_and_int_input():
    X = sp.csr_matrix((np.array([3, 4]), np.array([1, 0]), np.array([0, 2])), shape=(1, 2))
    out = normalize_rows(X)
    np.testing.assert_allclose(out.toarray(), [[0.8, 0.6]])
    np.testing.assert_allclose(normalize_rows(np.array([[0, 2]])), [[0.0, 1.0]])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("max_norm", [0.3, 1.0, 7.5])
def test_clip_rows_closed_form(rng, sparse, max_norm):
    X = _data(rng, sparse=sparse)
    dense = _dense(X)
    norms = np.linalg.norm(dense, axis=1)
    expected = dense * np.minimum(1.0, max_norm / np.where(norms > 0, norms, 1.0))[:, None]
    out = clip_rows(X, max_norm)
    assert sp.issparse(out) == sparse
    np.testing.assert_allclose(_dense(out), expected, rtol=1e-14)
    assert np.all(row_norms(out) <= max_norm)  # exact, no rounding slack
    unclipped = norms <= max_norm
    np.testing.assert_array_equal(_dense(out)[unclipped], dense[unclipped])


def test_clip_rows_bound_is_exact_under_rounding():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((5000, 7)) * 10
    for bound in [1.0, 0.1, 3.3]:
        assert np.all(row_norms(clip_rows(X, bound)) <= bound)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf, np.nan, [1.0, 2.0]])
def test_clip_rows_rejects_bad_bound(bad):
    with pytest.raises(ValidationError):
        clip_rows(np.ones((2, 2)), bad)


def test_nan_input_rejected():
    with pytest.raises(ValidationError, match="NaN"):
        normalize_rows(np.array([[np.nan, 1.0]]))


@pytest.mark.parametrize("sparse", [False, True])
def test_scale_features_public_closed_form(rng, sparse):
    X = _data(rng, sparse=sparse)
    lower = -np.linspace(1.0, 3.0, X.shape[1])
    upper = np.linspace(0.5, 4.0, X.shape[1])
    out = scale_features_public(X, lower, upper)
    expected = np.clip(_dense(X), lower, upper) / np.maximum(-lower, upper)
    assert sp.issparse(out) == sparse
    np.testing.assert_allclose(_dense(out), expected, rtol=1e-15)
    assert np.abs(_dense(out)).max() <= 1.0
    if sparse:
        assert out.nnz == X.nnz  # zeros stay zeros: no densification


def test_scale_features_public_without_clipping_and_scalar_bounds(rng):
    X = _data(rng)
    out = scale_features_public(X, -2.0, 2.0, clip=False)
    np.testing.assert_allclose(out, X / 2.0)


def test_scale_features_public_zero_width_feature():
    out = scale_features_public(np.array([[1.0, 3.0]]), [0.0, 0.0], [0.0, 4.0])
    np.testing.assert_allclose(out, [[0.0, 0.75]])


@pytest.mark.parametrize(
    "lower, upper, sparse, match",
    [
        ([0.0, 1.0], [1.0, 0.0], False, "lower must be <= upper"),
        ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], False, "shape"),
        ([0.0, np.nan], [1.0, 1.0], False, "finite"),
        ([0.5, 0.0], [1.0, 1.0], True, "contain 0"),
    ],
)
def test_scale_features_public_validates_bounds(lower, upper, sparse, match):
    X = np.array([[0.5, 0.25], [0.0, 1.0]])
    X = sp.csr_matrix(X) if sparse else X
    with pytest.raises(ValidationError, match=match):
        scale_features_public(X, lower, upper)


@pytest.mark.parametrize("sparse", [False, True])
def test_paper_preprocess_equals_sklearn_pipeline(rng, sparse):
    X = _data(rng, sparse=sparse)
    X_test = _data(rng, sparse=sparse, n=20)
    y = rng.standard_normal(X.shape[0]) + 5
    y_test = rng.standard_normal(20) + 5
    with pytest.warns(NotPrivateWarning, match="NOT differentially private"):
        result = paper_preprocess(X, y, "regression", X_test=X_test, y_test=y_test)
    scaler = MaxAbsScaler().fit(X)
    np.testing.assert_allclose(_dense(result.X), _dense(normalize(scaler.transform(X))), rtol=1e-14)
    np.testing.assert_allclose(_dense(result.X_test), _dense(normalize(scaler.transform(X_test))), rtol=1e-14)
    np.testing.assert_allclose(result.y, y - y.mean(), rtol=1e-14)
    np.testing.assert_allclose(result.y_test, y_test - y.mean(), rtol=1e-14)  # TRAIN mean
    assert result.private is False
    np.testing.assert_allclose(result.max_abs, np.where(scaler.scale_ == 0, 1.0, scaler.scale_))


def test_paper_preprocess_classification_labels(rng):
    X = _data(rng)
    y01 = (rng.random(X.shape[0]) > 0.5).astype(float)
    with pytest.warns(NotPrivateWarning):
        result = paper_preprocess(X, y01, "classification")
    np.testing.assert_array_equal(result.y, np.where(y01 == 1, 1.0, -1.0))
    assert result.label_offset == 0.0 and result.X_test is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = paper_preprocess(X, 2 * y01 - 1, "classification", warn=False)
    np.testing.assert_array_equal(same.y, result.y)
    with pytest.raises(ValidationError, match="labels"):
        paper_preprocess(X, y01 + 3, "classification", warn=False)


def test_paper_preprocess_argument_checks(rng):
    X = _data(rng)
    with pytest.raises(ValidationError, match="task"):
        paper_preprocess(X, np.zeros(X.shape[0]), "ranking", warn=False)
    with pytest.raises(ValidationError, match="rows"):
        paper_preprocess(X, np.zeros(3), "regression", warn=False)
    with pytest.raises(ValidationError, match="features"):
        paper_preprocess(X, np.zeros(X.shape[0]), "regression", X_test=np.ones((2, 3)), warn=False)


def test_not_private_warning_is_a_user_warning():
    assert issubclass(NotPrivateWarning, UserWarning)


def test_edited_coo_indices_are_refused_by_the_row_maps():
    """normalize_rows / clip_rows check the sparse structure before scipy converts it
    (an edited COO matrix made scipy write out of bounds); run in a child process."""
    import subprocess
    import sys

    code = (
        "import scipy.sparse as sp\n"
        "from fastdp.preprocessing import clip_rows, normalize_rows\n"
        "from fastdp.exceptions import ValidationError\n"
        "for f in (normalize_rows, clip_rows):\n"
        "    X = sp.random(40, 5, density=0.5, format='coo', random_state=0)\n"
        "    X.row[0] = 10**6\n"
        "    try:\n"
        "        f(X)\n"
        "    except ValidationError:\n"
        "        print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.count("refused") == 2, done.stderr[-2000:]
