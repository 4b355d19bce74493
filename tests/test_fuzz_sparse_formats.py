"""Corrupted sparse matrices of every scipy format through fit and the kernels (hypothesis).

Issue 18, item 1 and "done when": a COO or CSC matrix whose index arrays were
edited after construction made scipy write out of bounds inside fastdp's
validation.  Here hypothesis builds matrices of all seven scipy formats (csr,
csc, coo, bsr, lil, dok, dia), as ``*_matrix`` and ``*_array``, and corrupts
their structure: indices, indptr, row/col coordinates, DIA offsets, LIL rows
and DOK keys edited to negative, out-of-range and huge values (2**31 - 1,
2**40), arrays of the wrong length or dtype, unsorted and duplicate entries
(valid scipy input, which must be summed), lying ``has_sorted_indices`` flags.
Each matrix goes through

* ``check_X`` and ``row_norms`` (every estimator and solver validates with them);
* an estimator's ``fit`` (DP-SGD, DP-SCD, or the exact optimum at epsilon = inf);
* for the compressed formats, the raw arrays into the compiled kernels
  ``margins`` and ``row_squared_norms`` (with ``check_structure`` True and False);

and each call must either raise a clear fastdp error or succeed *correctly*:
an accepted matrix equals the independent densification of its raw arrays
(values are multiples of 1/8, so duplicate sums are exact), a fitted model is
bit-identical to the fit on that densified matrix, kernel outputs match numpy.
A valid matrix (unsorted or duplicate entries included) must be accepted.

Everything runs in a child process so that a crash (scipy or a kernel writing
out of bounds) fails the test instead of killing the run; the child prints
each example before running it, so the parent shows the one that crashed.
The repository's hypothesis profile (``tests/conftest.py``: derandomised on
CI) is loaded in the child.  The default run is 10 examples per format (a few
seconds after the child's imports); the ``slow`` variant runs 3000 in all.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r'''
import itertools, json, sys, warnings
import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, sys.argv[2])
import conftest  # noqa: F401  (the repository's hypothesis profile)

from fastdp._kernels import _glm, _scd
from fastdp._validation import check_X, row_norms
from fastdp.exceptions import FastDPError
from fastdp.linear_model import DPLogisticRegression, DPRidge

FORMATS = ("csr", "csc", "coo", "bsr", "lil", "dok", "dia")
HUGE = [-2**40, -(2**31), -7, -1, 2**31 - 1, 2**40]
COUNTS = {}


class Invalid(Exception):
    """The raw arrays do not define a matrix (the contract of check_sparse_structure)."""


def _ints(values):
    """An index array as int64; an ndarray must have an integer dtype even when empty."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise Invalid("index array")
        return values.astype(np.int64)
    values = list(values)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise Invalid("index list")
    return np.array(values, dtype=np.int64).reshape(-1)


def _in(values, upper):
    if values.size and (values.min() < 0 or values.max() >= upper):
        raise Invalid("index out of range")


def reference(X):
    """Independent densification from the raw arrays (loops), or Invalid."""
    n, m = X.shape
    out = np.zeros((n, m))
    fmt = X.format
    if fmt in ("csr", "csc", "bsr"):
        if fmt == "bsr":
            if X.data.ndim != 3:
                raise Invalid("bsr data")
            r, c = X.data.shape[1:]
            n_major, n_minor = n // r, m // c
        else:
            if X.data.ndim != 1:
                raise Invalid("data")
            n_major, n_minor = (n, m) if fmt == "csr" else (m, n)
        indptr, indices = _ints(X.indptr), _ints(X.indices)
        if (indptr.size != n_major + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0)
                or indptr[-1] > min(indices.size, X.data.shape[0])):
            raise Invalid("indptr")
        _in(indices[:indptr[-1]], n_minor)
        for major in range(n_major):
            for k in range(indptr[major], indptr[major + 1]):
                if fmt == "csr":
                    out[major, indices[k]] += X.data[k]
                elif fmt == "csc":
                    out[indices[k], major] += X.data[k]
                else:
                    out[major * r:(major + 1) * r, indices[k] * c:(indices[k] + 1) * c] += X.data[k]
    elif fmt == "coo":
        row, col = _ints(X.coords[0]), _ints(X.coords[1])
        if X.data.ndim != 1 or not row.size == col.size == X.data.size:
            raise Invalid("coo lengths")
        _in(row, n)
        _in(col, m)
        for i, j, v in zip(row, col, X.data):
            out[i, j] += v
    elif fmt == "lil":
        for i in range(n):
            cols = _ints(list(X.rows[i]))
            if cols.size != len(X.data[i]):
                raise Invalid("lil lengths")
            _in(cols, m)
            for j, v in zip(cols, X.data[i]):
                out[i, j] += v
    elif fmt == "dok":
        for key, v in X.items():   # what scipy converts (X._dict on scipy >= 1.13)
            if (not isinstance(key, tuple) or len(key) != 2
                    or not all(isinstance(k, (int, np.integer)) for k in key)):
                raise Invalid("dok key")
            i, j = int(key[0]), int(key[1])
            if not (0 <= i < n and 0 <= j < m):
                raise Invalid("dok key range")
            out[i, j] += v
    else:  # dia
        offsets = _ints(X.offsets)
        if (X.data.ndim != 2 or offsets.size != X.data.shape[0]
                or np.unique(offsets).size != offsets.size
                or (offsets.size and (offsets.min() <= -max(n, 1) or offsets.max() >= max(m, 1)))):
            raise Invalid("dia offsets")
        for d, o in enumerate(offsets):
            for j in range(max(0, o), min(m, n + o, X.data.shape[1])):
                out[j - o, j] += X.data[d, j]
    return out


@st.composite
def corrupted_sparse(draw, fmt):
    """A matrix of format ``fmt`` and either API, then one structural corruption (or none)."""
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    mask = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
    eighths = np.array(draw(st.lists(st.integers(1, 16), min_size=n * m, max_size=n * m)))
    dense = np.where(mask, eighths.reshape(n, m) / 8.0, 0.0)
    array_api = draw(st.booleans())
    X = (sp.csr_array if array_api else sp.csr_matrix)(dense).asformat(fmt)
    kind = draw(st.sampled_from(["none", "edit", "edit", "length", "dtype", "noncanonical"]))
    value = draw(st.sampled_from(HUGE + [n, m, n + m]))
    pick = draw(st.integers(0, 1 << 20))
    if fmt in ("csr", "csc", "bsr"):
        target = draw(st.sampled_from(["indices", "indptr"]))
        array = getattr(X, target)
        if kind == "edit" and array.size:
            with np.errstate(over="ignore"):
                array[pick % array.size] = np.array(value).astype(array.dtype)
        elif kind == "length":
            setattr(X, target, array[:-1].copy() if array.size else np.zeros(1, array.dtype))
        elif kind == "dtype":
            setattr(X, target, array.astype(draw(st.sampled_from([np.float64, np.int8, np.uint16]))))
        elif kind == "noncanonical" and fmt != "bsr" and X.nnz:
            # the same matrix as unsorted, duplicated entries (valid scipy input), flags lying
            nnz = X.nnz
            k = pick % nnz
            major = np.repeat(np.arange(X.indptr.size - 1), np.diff(X.indptr))
            half = X.data[k] / 2.0
            data = np.concatenate([X.data, [half]])
            data[k] = half
            indices = np.concatenate([X.indices, [X.indices[k]]])
            major = np.concatenate([major, [major[k]]])
            order = np.lexsort((-indices, major))  # descending within each row: unsorted
            counts = np.bincount(major, minlength=X.indptr.size - 1)
            X.data, X.indices = data[order], indices[order].astype(X.indices.dtype)
            X.indptr = np.concatenate([[0], np.cumsum(counts)]).astype(X.indptr.dtype)
            X.has_sorted_indices = True   # a lie scipy believes
    elif fmt == "coo":
        target = draw(st.integers(0, 1))
        coords = list(X.coords)
        if kind == "edit" and X.nnz:
            with np.errstate(over="ignore"):
                coords[target][pick % X.nnz] = np.array(value).astype(coords[target].dtype)
        elif kind == "length" and X.nnz:
            coords[target] = coords[target][:-1].copy()
        elif kind == "dtype":
            coords[target] = coords[target].astype(np.float64)
        elif kind == "noncanonical" and X.nnz:
            k = pick % X.nnz
            X.data[k] /= 2.0
            coords = [np.concatenate([c, [c[k]]])[::-1].copy() for c in coords]
            X.data = np.concatenate([X.data, [X.data[k]]])[::-1].copy()
        X.coords = tuple(coords)
    elif fmt == "lil":
        i = pick % n
        if kind == "edit":
            X.rows[i] = list(X.rows[i]) + [value]
            X.data[i] = list(X.data[i]) + [1.0]
        elif kind == "length":
            X.rows[i] = list(X.rows[i]) + [0]
        elif kind == "dtype":
            X.rows[i] = list(X.rows[i]) + [0.5]
            X.data[i] = list(X.data[i]) + [1.0]
        elif kind == "noncanonical" and X.rows[i]:
            X.rows[i] = list(X.rows[i])[::-1] + [X.rows[i][0]]
            X.data[i] = list(X.data[i])[::-1] + [0.125]
    elif fmt == "dok":
        entries = getattr(X, "_dict", X)  # where scipy keeps them (bypassing its checks)
        if kind == "edit":
            key = (value, pick % m) if pick % 2 else (pick % n, value)
            dict.__setitem__(entries, key, 1.0)
        elif kind == "dtype":
            dict.__setitem__(entries, (0.5, 0), 1.0)
        elif kind == "length":
            dict.__setitem__(entries, (0, 0, 0), 1.0)
    else:  # dia
        if kind == "edit" and X.offsets.size:
            with np.errstate(over="ignore"):
                X.offsets[pick % X.offsets.size] = np.array(value).astype(X.offsets.dtype)
        elif kind == "length" and X.offsets.size:
            X.offsets = X.offsets[:-1].copy()
        elif kind == "dtype":
            X.offsets = X.offsets.astype(np.float64)
        elif kind == "noncanonical" and X.offsets.size > 1:
            X.offsets[1] = X.offsets[0]   # repeated diagonal: refused
    return X, fmt, kind, array_api


def record(key):
    COUNTS[key] = COUNTS.get(key, 0) + 1


def fit(estimator, solver, X, y):
    # eager noise: the draws do not depend on which zeros a format stores explicitly (BSR
    # blocks, DIA bands), so the fit on the densified matrix must give the same bits
    params = dict(solver=solver, epochs=1, batch_size=1, random_state=3, lazy_noise=False)
    if solver == "exact":
        params["epsilon"] = np.inf
    else:
        params["noise_multiplier"] = 1.0  # calibration is not what is fuzzed here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return estimator(**params).fit(X, y)
        except FastDPError as exc:
            return exc


def kernel_readable(data, indices, indptr, n_features):
    """The kernels' contract for CSR arrays (docs/auditing.md), stated independently."""
    indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)  # no wrap-around
    if indptr.size == 0 or indptr[0] != 0 or indptr[-1] != indices.size or indices.size > data.size:
        return False
    if np.any(np.diff(indptr) < 0):
        return False
    for j in range(indptr.size - 1):
        cols = indices[indptr[j]:indptr[j + 1]]
        if cols.size and (np.any(np.diff(cols) <= 0) or cols[0] < 0 or cols[-1] >= n_features):
            return False
    return True


def kernel_calls(X, fmt):
    """Raw compressed arrays into the kernels, as CSR rows (CSC: rows of the transpose)."""
    if fmt not in ("csr", "csc"):
        return
    data, indices, indptr = X.data, X.indices, X.indptr
    if not (isinstance(indices, np.ndarray) and isinstance(indptr, np.ndarray)
            and indices.dtype == indptr.dtype and indices.dtype in (np.int32, np.int64)
            and data.dtype == np.float64 and data.ndim == 1):
        return  # wrong dtypes stop at Cython's signature dispatch (not fastdp's to check)
    n_features = X.shape[1] if fmt == "csr" else X.shape[0]
    rows = np.arange(max(indptr.size - 1, 0), dtype=np.int64)
    theta = np.linspace(-1.0, 2.0, n_features)
    readable = kernel_readable(data, indices, indptr, n_features)
    for check in (True, False):
        out = np.zeros(rows.size)
        try:
            _glm.margins(data, indices, indptr, rows, theta, out, check_structure=check)
        except FastDPError:
            assert not readable, "the kernel refused valid CSR arrays"
            record(f"kernel:{fmt}:refused")
            continue
        assert readable, f"margins accepted invalid CSR arrays (check_structure={check})"
        expected = [data[indptr[j]:indptr[j + 1]] @ theta[indices[indptr[j]:indptr[j + 1]]]
                    for j in rows]
        np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        record(f"kernel:{fmt}:accepted")
    try:
        norms = _scd.row_squared_norms(data, indptr)
    except FastDPError:
        record(f"kernel_norms:{fmt}:refused")
    else:
        wide = indptr.astype(np.int64)
        assert (wide.size and wide[0] == 0 and np.all(np.diff(wide) >= 0)
                and wide[-1] <= data.size), "row_squared_norms accepted a bad indptr"
        expected = [float(np.sum(data[indptr[j]:indptr[j + 1]] ** 2)) for j in rows]
        np.testing.assert_allclose(norms, expected, rtol=1e-13)
        record(f"kernel_norms:{fmt}:accepted")


MODELS = st.sampled_from([(DPRidge, "dpsgd"), (DPLogisticRegression, "dpsgd"),
                          (DPLogisticRegression, "dpscd"), (DPRidge, "exact"),
                          (DPLogisticRegression, "exact")])


def check_one(case, model):
    X, fmt, kind, array_api = case
    estimator, solver = model
    print(f"{fmt} {'array' if array_api else 'matrix'} {X.shape} {kind} {solver}",
          file=sys.stderr, flush=True)  # (a repr could itself fail on a corrupted matrix)
    try:
        ref = reference(X)
    except Invalid:
        ref = None
    # 1. validation
    try:
        out = check_X(X)
    except FastDPError:
        assert ref is None, f"a valid {fmt} matrix ({kind}) was refused"
        record(f"check_X:{fmt}:refused")
    else:
        assert ref is not None, f"an invalid {fmt} matrix ({kind}) was accepted"
        assert np.array_equal(out.toarray(), ref), f"{fmt} ({kind}) accepted with other values"
        np.testing.assert_allclose(row_norms(X), np.linalg.norm(ref, axis=1), rtol=1e-14)
        record(f"check_X:{fmt}:accepted")
    # 2. an estimator's fit, against the fit on the independently densified matrix
    n = X.shape[0]
    y = np.arange(n, dtype=float) if estimator is DPRidge else np.arange(n) % 2
    got = fit(estimator, solver, X, y)
    if ref is None:
        assert isinstance(got, FastDPError), f"fit accepted an invalid {fmt} matrix ({kind})"
        record(f"fit:{fmt}:refused")
    else:
        expected = fit(estimator, solver, sp.csr_matrix(ref), y)
        if isinstance(expected, FastDPError):
            assert isinstance(got, FastDPError)
            record(f"fit:{fmt}:refused (as the valid matrix)")
        else:
            assert not isinstance(got, FastDPError), f"fit refused a valid {fmt} matrix: {got}"
            assert np.array_equal(got.coef_, expected.coef_), f"{fmt} ({kind}): another model"
            assert np.array_equal(got.intercept_, expected.intercept_)
            record(f"fit:{fmt}:accepted")
    # 3. the kernels, on the raw arrays
    kernel_calls(X, fmt)


for fmt in FORMATS:  # every format gets its share of the examples
    @settings(max_examples=max(1, int(sys.argv[1]) // len(FORMATS)), deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    @given(corrupted_sparse(fmt), MODELS)
    def run(case, model):
        check_one(case, model)

    run()
print(json.dumps(COUNTS))
'''


def _run_child(n_examples, timeout):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CHILD, str(n_examples), str(ROOT / "tests")],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=timeout)
    start = done.stderr.find("Traceback")
    assert done.returncode == 0, (
        f"child exited with {done.returncode} (negative: killed by that signal); "
        + (f"error:\n{done.stderr[start:start + 4000]}" if start >= 0
           else f"last examples:\n{done.stderr[-4000:]}"))
    return json.loads(done.stdout.strip().splitlines()[-1])


FORMATS = ("csr", "csc", "coo", "bsr", "lil", "dok", "dia")


def test_corrupted_sparse_formats_never_crash_fit_or_kernels():
    """A few seconds: every format is exercised (10 examples each), both outcomes occur."""
    counts = _run_child(70, timeout=600)
    for fmt in FORMATS:
        assert any(key.split(":")[1] == fmt for key in counts), (fmt, counts)
    assert any(key.endswith(":accepted") for key in counts), counts
    assert any(key.endswith(":refused") for key in counts), counts


@pytest.mark.slow
def test_corrupted_sparse_formats_never_crash_fit_or_kernels_long():
    """3000 examples: every format both accepted and refused, many times, through
    validation, fit and (csr, csc) the kernels."""
    counts = _run_child(3000, timeout=3600)
    for fmt in FORMATS:
        for stage in ("check_X", "fit"):
            assert counts.get(f"{stage}:{fmt}:accepted", 0) >= 10, (stage, fmt, counts)
            assert counts.get(f"{stage}:{fmt}:refused", 0) >= 10, (stage, fmt, counts)
    for fmt in ("csr", "csc"):
        assert counts.get(f"kernel:{fmt}:accepted", 0) >= 10, counts
        assert counts.get(f"kernel:{fmt}:refused", 0) >= 10, counts
