"""Hostile input through validation, preprocessing and the estimators (hypothesis).

Every case must end in a correct result or a clear fastdp error
(:class:`~fastdp.exceptions.FastDPError`; validation problems are
:class:`~fastdp.exceptions.ValidationError`), never another exception and
never a crash.  The CSR matrices are built by assigning raw arrays, so they
can break every invariant scipy would otherwise check: unsorted and duplicate
indices, indices out of range or negative, non-monotone or short ``indptr``,
int32/int64 and mixed index types, float32/float64, NaN/inf, huge, tiny and
subnormal values, empty rows and empty matrices.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdp._validation import check_labels, check_X
from fastdp.exceptions import FastDPError, ValidationError
from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.preprocessing import clip_rows, normalize_rows

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

VALUES = st.one_of(
    st.floats(-10, 10),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, -1e-310, 1e300, -1e308,
                     3.4e38, 1e-45, np.nan, np.inf, -np.inf]),
)


@st.composite
def raw_csr(draw, allow_malformed=True):
    """A CSR matrix from raw arrays, plus whether it is structurally valid."""
    n = draw(st.integers(0, 5))
    m = draw(st.integers(0, 5))
    nnz = draw(st.integers(0, 12))
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    indptr_dtype = draw(st.sampled_from([index_dtype, np.int32, np.int64]))
    value_dtype = draw(st.sampled_from([np.float32, np.float64]))
    low, high = (-2, m + 2) if allow_malformed else (0, max(m - 1, 0))
    indices = np.array(draw(st.lists(st.integers(low, high), min_size=nnz, max_size=nnz)),
                       dtype=index_dtype)
    with np.errstate(over="ignore"):
        data = np.array(draw(st.lists(VALUES, min_size=nnz, max_size=nnz)), dtype=value_dtype)
    cuts = sorted(draw(st.lists(st.integers(0, nnz), min_size=max(n - 1, 0), max_size=max(n - 1, 0))))
    indptr = np.array([0] + cuts + [nnz], dtype=indptr_dtype) if n > 0 else np.array([0], dtype=indptr_dtype)
    if allow_malformed and draw(st.booleans()):
        kind = draw(st.sampled_from(["shuffle_indptr", "short_indptr", "bad_end", "bad_start"]))
        if kind == "shuffle_indptr" and indptr.size > 2:
            indptr = indptr[::-1].copy()
        elif kind == "short_indptr":
            indptr = indptr[:-1].copy()
        elif kind == "bad_end":
            indptr = indptr.copy()
            indptr[-1] = nnz + draw(st.integers(1, 3))
        elif kind == "bad_start" and indptr.size:
            indptr = indptr.copy()
            indptr[0] = draw(st.integers(1, 3))
    X = sp.csr_matrix((n, m), dtype=value_dtype)
    X.data, X.indices, X.indptr = data, indices, indptr
    return X


def _structurally_valid(X):
    n, m = X.shape
    p = X.indptr
    if p.ndim != 1 or p.size != n + 1 or p[0] != 0 or np.any(np.diff(p) < 0):
        return False
    nnz = int(p[-1])
    if X.indices.size < nnz or X.data.size < nnz:
        return False
    used = X.indices[:nnz]
    return not (nnz and (used.min() < 0 or used.max() >= m))


def _reference_dense(X):
    """Independent densification: sum every stored entry into its cell (float64 arithmetic
    in the input's dtype, as sum_duplicates does)."""
    n, m = X.shape
    out = np.zeros((n, m), dtype=X.data.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(n):
            for k in range(int(X.indptr[i]), int(X.indptr[i + 1])):
                out[i, X.indices[k]] += X.data[k]
    return out


def _snapshot(X):
    return X.data.copy(), X.indices.copy(), X.indptr.copy()


@FUZZ
@given(raw_csr())
def test_check_X_on_hostile_csr(X):
    before = _snapshot(X)
    valid = _structurally_valid(X)
    try:
        out = check_X(X)
    except ValidationError:
        out = None
    # the user's arrays are never modified, whatever happened
    for a, b in zip(before, _snapshot(X)):
        assert np.array_equal(a, b, equal_nan=True)
    if not valid or 0 in X.shape:
        assert out is None, "malformed or empty CSR input was accepted"
        return
    reference = _reference_dense(X)
    if not np.all(np.isfinite(reference)):
        assert out is None, "non-finite values were accepted"
        return
    assert out is not None, "a valid, finite matrix was rejected"
    assert out.format == "csr" and out.shape == X.shape and out.dtype == X.dtype
    assert out.indices.dtype == out.indptr.dtype and out.indices.dtype in (np.int32, np.int64)
    for i in range(out.shape[0]):
        row = out.indices[out.indptr[i]:out.indptr[i + 1]]
        assert np.all(np.diff(row) > 0)
    assert np.array_equal(out.toarray(), reference)


@st.composite
def hostile_dense(draw):
    shape = draw(st.sampled_from([(0,), (3,), (0, 3), (3, 0), (2, 3), (1, 1), (2, 2, 2)]))
    kind = draw(st.sampled_from(["float32", "float64", "int64", "bool", "object", "complex",
                                 "strings", "ragged"]))
    size = int(np.prod(shape))
    with np.errstate(over="ignore"):
        values = np.array(draw(st.lists(VALUES, min_size=size, max_size=size)),
                          dtype=np.float64).reshape(shape)
    if kind == "float32":
        with np.errstate(over="ignore"):
            return values.astype(np.float32), kind
    if kind == "int64":
        return np.nan_to_num(values, posinf=7, neginf=-7).clip(-9, 9).astype(np.int64), kind
    if kind == "bool":
        return values > 0, kind
    if kind == "object":
        return values.astype(object), kind
    if kind == "complex":
        return values + 1j, kind
    if kind == "strings":
        return np.full(shape, "x"), kind
    if kind == "ragged":
        return [[1.0, 2.0], [3.0]], kind
    return values, kind


@FUZZ
@given(hostile_dense())
def test_check_X_on_hostile_dense(case):
    X, kind = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = check_X(X)
        except ValidationError:
            return
    array = np.asarray(X)
    assert kind not in ("complex", "strings", "ragged"), f"{kind} input was accepted"
    assert array.ndim == 2 and 0 not in array.shape
    assert out.dtype in (np.float32, np.float64) and out.flags.c_contiguous
    assert np.all(np.isfinite(out))
    assert np.array_equal(out, array.astype(out.dtype))


LABELS = st.one_of(
    st.lists(st.sampled_from([0, 1]), min_size=0, max_size=6),
    st.lists(st.sampled_from([-1.0, 1.0, 2.0, np.nan, np.inf]), min_size=0, max_size=6),
    st.lists(st.sampled_from(["no", "yes", "maybe"]), min_size=0, max_size=6),
    st.lists(st.one_of(st.integers(0, 1), st.text(max_size=1)), min_size=1, max_size=6),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=6),
    st.just([[1.0, -1.0]]),
)


@FUZZ
@given(LABELS, st.sampled_from(["binary", "regression"]), st.booleans())
def test_check_labels_on_hostile_labels(y, task, give_n):
    n = len(y) if give_n else None
    try:
        out, classes = check_labels(y, task, n_samples=n)
    except ValidationError:
        return
    array = np.asarray(y)
    assert array.ndim == 1 and array.size > 0
    assert out.dtype == np.float64 and np.all(np.isfinite(out))
    if task == "binary":
        expected = np.unique(array)
        assert len(classes) == 2 and np.array_equal(classes, expected)
        assert np.array_equal(out, np.where(array == classes[1], 1.0, -1.0))
    else:
        assert np.array_equal(out, array.astype(np.float64))


def test_mismatched_lengths_and_bad_tasks():
    with pytest.raises(ValidationError):
        check_labels([1.0, 2.0], "regression", n_samples=3)
    with pytest.raises(ValidationError):
        check_labels([1.0, 2.0], "multiclass")


@FUZZ
@given(raw_csr(allow_malformed=False), st.sampled_from(["normalize", "clip"]))
def test_row_scaling_keeps_its_promise(X, which):
    """normalize_rows gives unit rows, clip_rows rows of norm <= 1, or a clear error."""
    if 0 in X.shape:
        return
    try:
        X = check_X(X)
    except ValidationError:
        return
    scale = normalize_rows if which == "normalize" else clip_rows
    with np.errstate(all="ignore"):
        out = scale(X)
    dense_in = X.toarray().astype(np.float64)
    dense = out.toarray().astype(np.float64)
    assert np.all(np.isfinite(dense))
    norms = np.sqrt((dense.astype(np.longdouble) ** 2).sum(axis=1)).astype(np.float64)
    tolerance = 1e-5 if X.dtype == np.float32 else 1e-12
    assert np.all(norms <= 1.0 + tolerance)
    if which == "normalize":
        # rows whose sum of squares is representable come out with unit norm
        # (extreme rows: see test_normalize_rows_extreme_magnitudes)
        true_norms = np.sqrt((dense_in.astype(np.longdouble) ** 2).sum(axis=1))
        ordinary = (true_norms > 1e-150) & (true_norms < 1e150)
        assert np.allclose(norms[ordinary], 1.0, rtol=tolerance, atol=0), (
            f"rows lost their unit norm: {norms[ordinary]} from {dense_in}")


@pytest.mark.parametrize("value", [1e-300, 5e-324, 1e200, 1e307])
@pytest.mark.parametrize("sparse", [False, True])
def test_normalize_rows_extreme_magnitudes(value, sparse):
    X = np.array([[value, value], [3.0, 4.0], [0.0, 0.0]])
    out = normalize_rows(sp.csr_matrix(X) if sparse else X)
    out = out.toarray() if sparse else out
    norms = np.sqrt((out.astype(np.longdouble) ** 2).sum(axis=1))
    np.testing.assert_allclose(norms.astype(float), [1.0, 1.0, 0.0], rtol=1e-12)
    np.testing.assert_allclose(out[1], [0.6, 0.8], rtol=1e-15)


# ----------------------------------------------------------------------------
# estimators end to end
# ----------------------------------------------------------------------------
@st.composite
def small_problem(draw):
    X = draw(raw_csr(allow_malformed=draw(st.booleans())))
    n = X.shape[0]
    labels = draw(st.sampled_from(["good", "one_class", "nan", "short", "strings"]))
    if labels == "good":
        y = np.resize([0.0, 1.0], n)
    elif labels == "one_class":
        y = np.ones(n)
    elif labels == "nan":
        y = np.resize([0.0, np.nan], n)
    elif labels == "short":
        y = np.resize([0.0, 1.0], max(n - 1, 0))
    else:
        y = np.resize(np.array(["a", "b"]), n)
    return X, y, labels


@FUZZ
@given(small_problem(), st.sampled_from([DPRidge, DPLogisticRegression]),
       st.sampled_from(["dpscd", "dpsgd"]), st.booleans())
def test_estimators_on_hostile_input(problem, estimator, solver, normalize):
    X, y, labels = problem
    model = estimator(epsilon=1.0, solver=solver, epochs=1, normalize=normalize, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(X, y)
        except FastDPError:
            return
    # accepted: the input must have been usable, and the model is finite
    assert _structurally_valid(X) and 0 not in X.shape
    assert len(y) == X.shape[0]
    assert y.dtype.kind not in "fc" or np.all(np.isfinite(y))
    assert np.all(np.isfinite(model.coef_))
    if estimator is DPLogisticRegression:
        assert labels != "one_class"
        assert np.all(np.isfinite(model.predict_proba(X)))


# ----------------------------------------------------------------------------
# every scipy sparse format with randomly edited index arrays (in a child process:
# scipy's converters used to write out of bounds on such input)
# ----------------------------------------------------------------------------
SPARSE_FORMATS_CHILD = r"""
import json, sys
import numpy as np
import scipy.sparse as sp
from fastdp._validation import check_X
from fastdp.exceptions import ValidationError

def dense_of(X, fmt):
    # independent densification from the raw arrays (only for in-range input)
    n, m = X.shape
    out = np.zeros((n, m))
    if fmt == "coo":
        for i, j, v in zip(X.row, X.col, X.data):
            out[i, j] += v
    elif fmt in ("csr", "csc"):
        for major in range(len(X.indptr) - 1):
            for k in range(X.indptr[major], X.indptr[major + 1]):
                i, j = (major, X.indices[k]) if fmt == "csr" else (X.indices[k], major)
                out[i, j] += X.data[k]
    return out

rng = np.random.default_rng(int(sys.argv[1]))
counts = {}
for trial in range(int(sys.argv[2])):
    n, m = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    fmt = str(rng.choice(["coo", "csc", "csr", "bsr", "lil", "dok", "dia"]))
    array_api = bool(rng.integers(2))
    base = sp.random(n, m, density=0.6, format="csr", random_state=int(rng.integers(1 << 30)))
    X = (sp.csr_array(base) if array_api else base).asformat(fmt)
    targets = {"coo": ["row", "col"], "csc": ["indices", "indptr"], "csr": ["indices", "indptr"],
               "bsr": ["indices", "indptr"], "dia": ["offsets"], "lil": ["rows"],
               "dok": ["keys"]}[fmt]
    target = str(rng.choice(targets))
    value = int(rng.choice([-2**40, -7, -1, 0, 1, n, m, n + m, 10**6, 2**31 - 1]))
    edited = True
    if target in ("row", "col", "indices", "indptr", "offsets"):
        array = X.coords[0 if target == "row" else 1] if target in ("row", "col") else getattr(X, target)
        if array.size == 0:
            edited = False
        else:
            with np.errstate(over="ignore"):
                array[int(rng.integers(array.size))] = np.array(value).astype(array.dtype)
    elif target == "rows":
        if X.nnz:
            i = int(rng.integers(n))
            X.rows[i] = X.rows[i] + [value]
            X.data[i] = X.data[i] + [1.0] * int(rng.integers(0, 2))
        else:
            edited = False
    else:
        dict.__setitem__(X, (value, int(rng.integers(m))), 1.0)
    try:
        out = check_X(X)
        outcome = "accepted"
        if fmt in ("coo", "csr", "csc"):
            arrays = [X.row, X.col] if fmt == "coo" else [X.indices]
            in_range = all(a.size == 0 or (a.min() >= 0) for a in arrays)
            if in_range and not np.array_equal(out.toarray(), dense_of(X, fmt)):
                outcome = "wrong result"
    except ValidationError:
        outcome = "refused"
    except Exception as exc:
        outcome = f"{type(exc).__name__}"
    key = f"{fmt}:{outcome}"
    counts[key] = counts.get(key, 0) + 1
print(json.dumps(counts))
"""


@pytest.mark.parametrize("seed", [0, 1])
def test_every_sparse_format_with_edited_indices(seed):
    import json
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", SPARSE_FORMATS_CHILD, str(seed), "400"],
                         capture_output=True, text=True, env=env, cwd=str(root), timeout=600)
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-2000:]}"
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    outcomes = {key.split(":", 1)[1] for key in counts}
    assert outcomes <= {"accepted", "refused"}, counts
    assert sum(v for k, v in counts.items() if k.endswith("refused")) > 100, counts
