"""Fuzzing the compiled kernels (Cython: _scd, _sgd, _glm) with hypothesis.

1. On every input that passes fastdp's validation (canonical CSR, float32 or
   float64 values, int32 or int64 indices, empty rows, one row or column,
   extreme but finite magnitudes), each kernel equals its plain numpy
   reference (the same Gaussians for the noisy kernels).
2. The non-private solvers on extreme magnitudes return finite models or a
   clear fastdp error.
3. Hostile arguments to the kernels' entry points (arrays of the wrong
   length, broken CSR structure, also with ``check_structure=False`` or a
   structure token made for other arrays, batch indices out of range, buffers
   too small, NaN noise, NaN or negative squared norms, short line-search
   arrays) must raise ``fastdp.exceptions.ValidationError``, never corrupt
   memory.  Each call runs in a forked child of a helper process, so a crash
   is reported instead of killing the test run.
4. Random corruptions of valid arguments (hypothesis): a ValidationError or a
   result equal to the intact call's, never a crash.

The same file runs against a bounds-checked build of the kernels (see
docs/auditing.md, "Debug build of the kernels").
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdp._kernels import _glm, _scd, _sgd
from fastdp._validation import check_X
from fastdp.exceptions import FastDPError, ValidationError
from fastdp.solvers.scd import scd
from fastdp.solvers.sgd import sgd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from scd_reference import dual_scd_reference  # noqa: E402
from sgd_reference import run_sgd_reference  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SCD_LOSSES = {"ridge": 0, "logistic": 1, "hinge": 2}
GLM_LOSSES = {"squared": _glm.LOSS_SQUARED, "logistic": _glm.LOSS_LOGISTIC,
              "hinge": _glm.LOSS_HINGE}


@st.composite
def valid_csr(draw, unit_rows=True, extreme=False):
    """A canonical CSR matrix as check_X returns it (possibly with empty rows)."""
    n = draw(st.integers(1, 7))
    m = draw(st.integers(1, 6))
    mask = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    big = [1e-300, 1e-150, 1.0, 1e150, 1e300] if dtype == np.float64 else [1e-30, 1.0, 1e30]
    scale = st.sampled_from(big) if extreme else st.just(1.0)
    values = np.array(draw(st.lists(st.floats(-3, 3, allow_subnormal=False), min_size=n * m,
                                    max_size=n * m))).reshape(n, m) * draw(scale)
    dense = np.where(mask, values, 0.0)
    if unit_rows:
        norms = np.linalg.norm(dense, axis=1, keepdims=True)
        dense = np.divide(dense, norms, out=np.zeros_like(dense), where=norms > 0)
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    X = sp.csr_matrix(dense.astype(dtype))
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    return check_X(X)


@st.composite
def batches(draw, n, max_steps=5):
    steps = draw(st.integers(0, max_steps))
    parts = [np.array(sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))), dtype=np.int64)
             for _ in range(steps)]
    ptr = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    idx = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return parts, ptr, idx


def _labels(n, loss, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n) if loss in ("ridge", "squared") else np.where(
        rng.normal(size=n) > 0, 1.0, -1.0)


def _tolerance(X):
    return 2e-5 if X.dtype == np.float32 else 1e-11


# ----------------------------------------------------------------------------
# 1. kernels equal their references on validated input
# ----------------------------------------------------------------------------
@FUZZ
@given(st.data(), st.sampled_from(list(SCD_LOSSES)), st.booleans(), st.booleans(),
       st.sampled_from([1, 2]))
def test_dual_scd_kernel_matches_reference(data, loss, sequential, lazy, threads):
    X = data.draw(valid_csr())
    n, m = X.shape
    parts, ptr, idx = data.draw(batches(n))
    y = _labels(n, loss, 1)
    lam_n, sigma_prime, clip = 0.3 * n, float(max(len(p) for p in parts) if parts else 1), 0.7
    alpha, v = np.zeros(n, X.dtype), np.zeros(m, X.dtype)
    generator = np.random.default_rng(5)
    with generator.bit_generator.lock:
        _scd.run_dual_scd(
            X.data, X.indices, X.indptr, y, _scd.row_squared_norms(X.data, X.indptr), alpha, v,
            ptr, idx, np.zeros(max(1, int(np.diff(ptr).max(initial=0)))), np.zeros(m, np.int32),
            SCD_LOSSES[loss], lam_n, sigma_prime, clip, 1e-4, sequential, 0.2, 0.3, lazy,
            generator.bit_generator, threads, 1)
    ar, vr, _ = dual_scd_reference(
        X.astype(np.float64), y, np.zeros(n), np.zeros(m), parts, loss=SCD_LOSSES[loss],
        lam_n=lam_n, sigma_prime=sigma_prime, clip=clip, box_eps=1e-4, sequential=sequential,
        noise_std_alpha=0.2, noise_std_v=0.3, lazy_noise=lazy, noise_rng=np.random.default_rng(5))
    tol = _tolerance(X)
    np.testing.assert_allclose(alpha, ar, rtol=tol, atol=tol)
    np.testing.assert_allclose(v, vr, rtol=tol, atol=tol)


@FUZZ
@given(st.data(), st.sampled_from(list(GLM_LOSSES)), st.booleans(), st.sampled_from([1, 2]))
def test_sgd_kernel_matches_reference(data, loss, lazy, threads):
    X = data.draw(valid_csr())
    n, m = X.shape
    _, ptr, idx = data.draw(batches(n))
    y = _labels(n, loss, 2)
    theta = np.random.default_rng(3).normal(size=m)
    w = theta.copy()
    largest = max(int(np.diff(ptr).max(initial=0)), 1)
    _sgd.run_sgd(X.data, X.indices, X.indptr, y, _scd.row_squared_norms(X.data, X.indptr), w,
                 ptr, idx, np.zeros(largest), np.zeros(m, np.int32), GLM_LOSSES[loss], 0.8, 0.9,
                 0.5, 0.4, lazy, np.random.PCG64(8), threads, 1)
    reference, _ = run_sgd_reference(X, y, theta, ptr, idx, loss=loss, clip=0.8,
                                     rho=0.9, kappa=0.5, noise_std=0.4, lazy_noise=lazy,
                                     rng=np.random.Generator(np.random.PCG64(8)))
    np.testing.assert_allclose(w, reference, rtol=1e-10, atol=1e-10)


def _close(actual, expected, scale, rtol=1e-12):
    """|actual - expected| <= rtol * sum of |terms|: rounding depends on the summation order."""
    assert np.all(np.abs(actual - expected) <= rtol * scale), (actual, expected)


def _loss_derivative(loss, z, y):
    if loss == "squared":
        return z - y
    if loss == "logistic":
        return -y / (1.0 + np.exp(y * z))
    return np.where(y * z < 1.0, -y, 0.0)


@FUZZ
@given(st.data(), st.sampled_from(list(GLM_LOSSES)), st.sampled_from([1, 2]),
       st.booleans())
def test_glm_kernels_match_dense_numpy(data, loss, threads, extreme):
    X = data.draw(valid_csr(unit_rows=not extreme, extreme=extreme))
    n, m = X.shape
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=9)), dtype=np.int64)
    dense = X.toarray().astype(np.float64)[rows]
    theta = np.random.default_rng(4).normal(size=m) * (1e-3 if extreme else 1.0)
    y = _labels(n, loss, 6)
    with np.errstate(all="ignore"):
        margins = dense @ theta
        out = np.empty(rows.size)
        _glm.margins(X.data, X.indices, X.indptr, rows, theta, out, num_threads=threads)
        _close(out, margins, np.abs(dense) @ np.abs(theta))
        weights = np.linspace(-1.0, 2.0, rows.size)
        summed = np.zeros(m)
        _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, weights, summed,
                              num_threads=threads)
        _close(summed, dense.T @ weights, np.abs(dense).T @ np.abs(weights))
        coefficients = _loss_derivative(loss, margins, y[rows])
        gradient = np.zeros(m)
        _glm.gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, GLM_LOSSES[loss], gradient,
                          num_threads=threads)
        reference = dense.T @ coefficients
        scale = np.abs(dense).T @ np.abs(coefficients)
    finite = np.isfinite(scale)
    _close(gradient[finite], reference[finite], scale[finite], rtol=1e-9)
    if not extreme:
        clipped = np.zeros(m)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, GLM_LOSSES[loss],
                                  0.5, clipped, num_threads=threads)
        per_row = dense * coefficients[:, None]
        norms = np.linalg.norm(per_row, axis=1, keepdims=True)
        per_row /= np.maximum(1.0, norms / 0.5)
        np.testing.assert_allclose(clipped, per_row.sum(axis=0), rtol=1e-10, atol=1e-12)


@FUZZ
@given(valid_csr(unit_rows=False, extreme=True))
def test_row_squared_norms_match_numpy(X):
    with np.errstate(over="ignore"):
        expected = (X.toarray().astype(np.float64) ** 2).sum(axis=1)
    np.testing.assert_allclose(_scd.row_squared_norms(X.data, X.indptr), expected, rtol=1e-12,
                               atol=0)


# ----------------------------------------------------------------------------
# 2. solvers on extreme magnitudes: finite model or a clear error
# ----------------------------------------------------------------------------
@FUZZ
@given(valid_csr(unit_rows=False, extreme=True), st.sampled_from(["squared", "logistic", "hinge"]),
       st.sampled_from(["scd", "sgd"]))
def test_nonprivate_solvers_on_extreme_magnitudes(X, loss, which):
    n = X.shape[0]
    y = np.resize([1.0, -1.0], n)
    if loss != "squared" and n < 2:
        return
    run = scd if which == "scd" else sgd
    try:
        with np.errstate(all="ignore"):
            result = run(X, y, loss=loss, lam=0.1, epochs=2, random_state=0)
    except FastDPError:
        return
    assert np.all(np.isfinite(result.coef))


# ----------------------------------------------------------------------------
# 3. hostile internal arguments: a ValidationError, never memory corruption
# ----------------------------------------------------------------------------
# X is 6 x 5 (CSR arrays D, I, P; rows 0..5 all non-empty); the names of the
# broken CSR arrays: P_UP (indptr not monotone), P_END (indptr[-1] != nnz),
# P_START (indptr[0] != 0), I_BIG / I_NEG (a column index out of range),
# I_UNSORTED / I_REPEATED (row 0 not strictly increasing), D_SHORT (data
# shorter than indices).  Every call must raise fastdp's ValidationError.
HOSTILE_CALLS = {
    # _glm: lengths and row numbers (always checked)
    "glm_gradient_sum_short_out": "_glm.gradient_sum(D, I, P, y, rows, np.zeros(5), 0, np.zeros(1))",
    "glm_gradient_sum_short_y": "_glm.gradient_sum(D, I, P, y[:1], rows, np.zeros(5), 0, np.zeros(5))",
    "glm_clipped_short_theta": "_glm.clipped_gradient_sum(D, I, P, y, rows, np.zeros(1), 0, 1.0, np.zeros(5))",
    "glm_clipped_nan_clip": "_glm.clipped_gradient_sum(D, I, P, y, rows, np.zeros(5), 0, np.nan, np.zeros(5))",
    "glm_unknown_loss": "_glm.gradient_sum(D, I, P, y, rows, np.zeros(5), 7, np.zeros(5))",
    "glm_rows_out_of_range": "_glm.margins(D, I, P, np.array([0, 99], np.int64), np.zeros(5), np.zeros(2))",
    "glm_rows_negative": "_glm.weighted_row_sum(D, I, P, np.array([-1], np.int64), np.ones(1), np.zeros(5))",
    "glm_margins_short_out": "_glm.margins(D, I, P, rows, np.zeros(5), np.zeros(2))",
    "glm_weighted_sum_short_weights": "_glm.weighted_row_sum(D, I, P, rows, np.ones(2), np.zeros(5))",
    "glm_empty_indptr": "_glm.margins(D, I, P[:0], rows[:0], np.zeros(5), np.zeros(0))",
    "glm_indptr_start": "_glm.margins(D, I, P_START, rows, np.zeros(5), np.zeros(6))",
    "glm_indptr_end": "_glm.margins(D, I, P_END, rows, np.zeros(5), np.zeros(6))",
    "glm_short_data": "_glm.margins(D_SHORT, I, P, rows, np.zeros(5), np.zeros(6))",
    "glm_huge_num_threads": "_glm.margins(D, I, P, BIG_ROWS, np.zeros(5), np.zeros(300), num_threads=10**6)",
    # _glm: CSR structure of the rows read (check_structure=True, the default)
    "glm_margins_short_theta": "_glm.margins(D, I, P, rows, np.zeros(1), np.zeros(6))",
    "glm_weighted_sum_short_out": "_glm.weighted_row_sum(D, I, P, rows, np.ones(6), np.zeros(1))",
    "glm_margins_column_too_big": "_glm.margins(D, I_BIG, P, rows, np.zeros(5), np.zeros(6))",
    "glm_gradient_negative_column": "_glm.gradient_sum(D, I_NEG, P, y, rows, np.zeros(5), 1, np.zeros(5))",
    "glm_indptr_not_monotone": "_glm.weighted_row_sum(D, I, P_UP, rows, np.ones(6), np.zeros(5))",
    "glm_unsorted_row": "_glm.clipped_gradient_sum(D, I_UNSORTED, P, y, rows, np.zeros(5), 1, 1.0, np.zeros(5))",
    "glm_repeated_column": "_glm.clipped_gradient_sum(D, I_REPEATED, P, y, rows, np.zeros(5), 1, 1.0, np.zeros(5))",
    # _scd.row_squared_norms
    "scd_norms_indptr_not_monotone": "_scd.row_squared_norms(D, P_UP)",
    "scd_norms_indptr_past_data": "_scd.row_squared_norms(D[:3], P)",
    "scd_norms_empty_indptr": "_scd.row_squared_norms(D, P[:0])",
    # _scd.run_dual_scd
    "scd_short_v": "scd_call(v=np.zeros(1))",
    "scd_short_alpha": "scd_call(alpha=np.zeros(1))",
    "scd_short_y": "scd_call(labels=y[:2])",
    "scd_batch_out_of_range": "scd_call(ptr=np.array([0, 2], np.int64), idx=np.array([0, 99], np.int64))",
    "scd_batch_ptr_decreasing": "scd_call(ptr=np.array([0, 4, 2], np.int64))",
    "scd_batch_ptr_past_idx": "scd_call(ptr=np.array([0, 9], np.int64))",
    "scd_small_buffer": "scd_call(buffer=np.zeros(1))",
    "scd_short_sq_norms": "scd_call(sq=np.zeros(1))",
    "scd_short_last_noised": "scd_call(last=np.zeros(1, np.int32))",
    "scd_unknown_loss": "scd_call(loss=5)",
    "scd_nan_noise": "scd_call(noise=np.nan)",
    "scd_negative_noise": "scd_call(noise=-1.0)",
    "scd_not_a_bit_generator": "scd_call(bitgen=object())",
    "scd_huge_num_threads": "scd_call(threads=10**6)",
    "scd_indptr_not_monotone": "scd_call(indptr=P_UP)",
    "scd_indptr_end": "scd_call(indptr=P_END)",
    "scd_column_too_big": "scd_call(indices=I_BIG)",
    "scd_unsorted_row": "scd_call(indices=I_UNSORTED)",
    # _sgd.run_sgd
    "sgd_short_w": "sgd_call(w=np.zeros(1))",
    "sgd_short_y": "sgd_call(labels=y[:2])",
    "sgd_short_sq_norms": "sgd_call(sq=np.zeros(1))",
    "sgd_batch_out_of_range": "sgd_call(ptr=np.array([0, 2], np.int64), idx=np.array([0, 99], np.int64))",
    "sgd_batch_ptr_decreasing": "sgd_call(ptr=np.array([0, 4, 2], np.int64))",
    "sgd_small_buffer": "sgd_call(buffer=np.zeros(1))",
    "sgd_short_last_noised": "sgd_call(last=np.zeros(1, np.int32))",
    "sgd_unknown_loss": "sgd_call(loss=5)",
    "sgd_nan_noise": "sgd_call(noise=np.nan)",
    "sgd_not_a_bit_generator": "sgd_call(bitgen=object())",
    "sgd_huge_num_threads": "sgd_call(threads=10**6)",
    "sgd_indptr_not_monotone": "sgd_call(indptr=P_UP)",
    "sgd_column_too_big": "sgd_call(indices=I_BIG)",
    "sgd_repeated_column": "sgd_call(indices=I_REPEATED)",
    "sgd_pending_scales_bad_rho": "_sgd.pending_noise_scales(1.5, 3)",
    # check_structure=False no longer skips the scan (a bad column index used to crash)
    "glm_margins_unchecked_bad_column": "_glm.margins(D, I_BIG, P, rows, np.zeros(5), np.zeros(6), check_structure=False)",
    "glm_margins_unchecked_negative_column": "_glm.margins(D, I_NEG, P, rows, np.zeros(5), np.zeros(6), check_structure=False)",
    "glm_margins_unchecked_bad_indptr": "_glm.margins(D, I, P_UP, rows, np.zeros(5), np.zeros(6), check_structure=False)",
    "glm_clipped_unchecked_bad_column": "_glm.clipped_gradient_sum(D, I_BIG, P, y, rows, np.zeros(5), 1, 1.0, np.zeros(5), check_structure=False)",
    "glm_gradient_unchecked_bad_column": "_glm.gradient_sum(D, I_BIG, P, y, rows, np.zeros(5), 1, np.zeros(5), check_structure=False)",
    "glm_weighted_sum_unchecked_bad_column": "_glm.weighted_row_sum(D, I_BIG, P, rows, np.ones(6), np.zeros(5), check_structure=False)",
    "scd_unchecked_bad_column": "scd_call(indices=I_BIG, check=False)",
    "scd_unchecked_bad_indptr": "scd_call(indptr=P_UP, check=False)",
    "sgd_unchecked_bad_column": "sgd_call(indices=I_BIG, check=False)",
    "sgd_unchecked_negative_column": "sgd_call(indices=I_NEG, check=False)",
    # a structure token proves the structure of its own arrays only
    "glm_margins_token_of_other_arrays": "_glm.margins(D, I_BIG, P, rows, np.zeros(5), np.zeros(6), check_structure=TOKEN)",
    "glm_margins_token_with_short_theta": "_glm.margins(D, I, P, rows, np.zeros(1), np.zeros(6), check_structure=TOKEN)",
    "glm_weighted_sum_token_with_short_out": "_glm.weighted_row_sum(D, I, P, rows, np.ones(6), np.zeros(2), check_structure=TOKEN)",
    "glm_margins_token_other_index_width": "_glm.margins(D, I.astype(np.int32), P.astype(np.int32), rows, np.zeros(5), np.zeros(6), check_structure=TOKEN)",
    "glm_margins_forged_token": "_glm.margins(D, I_BIG, P, rows, np.zeros(5), np.zeros(6), check_structure=FORGED)",
    "scd_token_of_other_arrays": "scd_call(indices=I_BIG, check=TOKEN)",
    "scd_token_with_short_v": "scd_call(v=np.zeros(2), last=np.zeros(2, np.int32), check=TOKEN)",
    "sgd_token_of_other_arrays": "sgd_call(indices=I_BIG, check=TOKEN)",
    "sgd_token_with_short_w": "sgd_call(w=np.zeros(2), last=np.zeros(2, np.int32), check=TOKEN)",
    # squared norms: NaN or negative would silently turn clipping off
    "sgd_nan_sq_norms": "sgd_call(sq=np.where(rows == 3, np.nan, SQ))",
    "sgd_negative_sq_norms": "sgd_call(sq=-SQ)",
    "scd_nan_sq_norms": "scd_call(sq=np.full(6, np.nan))",
    "scd_negative_sq_norms": "scd_call(sq=np.where(rows == 0, -1.0, SQ))",
    # line-search kernels (numba): every array length is checked
    "ls_first_above_short_nu": "_line_search.first_above(np.zeros(5), 0.0, np.zeros(2))",
    "ls_sums_short_u": "_line_search.clipped_loss_sums(np.zeros(9), np.zeros(3), np.zeros(9), np.ones(2), 1, 1.0, np.zeros(3))",
    "ls_sums_short_y": "_line_search.clipped_loss_sums(np.zeros(9), np.zeros(9), np.zeros(1), np.ones(2), 1, 1.0, np.zeros(3))",
    "ls_sums_short_out": "_line_search.clipped_loss_sums(np.zeros(9), np.zeros(9), np.zeros(9), np.ones(8), 1, 1.0, np.zeros(3))",
    "ls_queries_short_sums": "_line_search.armijo_queries(np.zeros(2), np.ones(8), 0.0, 0.0, np.zeros(8))",
    "ls_queries_short_out": "_line_search.armijo_queries(np.zeros(9), np.ones(8), 0.0, 0.0, np.zeros(1))",
    "ls_backtracking_short_nu": "_line_search.noisy_backtracking(np.zeros(9), np.zeros(9), np.ones(9), np.ones(8), 1, 1.0, 0.0, 0.0, 0.0, np.zeros(1), np.zeros(9), np.zeros(8))",
    "ls_backtracking_short_queries": "_line_search.noisy_backtracking(np.zeros(9), np.zeros(9), np.ones(9), np.ones(8), 1, 1.0, 0.0, 0.0, 0.0, np.zeros(8), np.zeros(9), np.zeros(1))",
}

# the same calls with valid arguments must run (the checks refuse only what is wrong)
VALID_CALLS = {
    "glm_margins_token": "_glm.margins(D, I, P, rows, np.zeros(5), np.zeros(6), check_structure=TOKEN)",
    "glm_margins_token_long_theta": "_glm.margins(D, I, P, rows, np.zeros(9), np.zeros(6), check_structure=TOKEN)",
    "glm_margins_unchecked": "_glm.margins(D, I, P, rows, np.zeros(5), np.zeros(6), check_structure=False)",
    "glm_clipped_token": "_glm.clipped_gradient_sum(D, I, P, y, rows, np.zeros(5), 1, 1.0, np.zeros(5), check_structure=TOKEN)",
    "scd_token": "scd_call(check=TOKEN)",
    "sgd_token": "sgd_call(check=TOKEN)",
    "sgd_infinite_sq_norm": "sgd_call(sq=np.where(rows == 3, np.inf, SQ))",
    "sgd_nan_sq_norms_without_clipping": "sgd_call(sq=np.full(6, np.nan), clip=np.inf)",
    "ls_first_above": "_line_search.first_above(np.zeros(5), 0.0, np.zeros(5))",
    "ls_backtracking": "_line_search.noisy_backtracking(np.zeros(9), np.zeros(9), np.ones(9), np.ones(8), 1, 1.0, 0.0, 0.0, 0.0, np.zeros(8), np.zeros(9), np.zeros(8))",
}

CHILD = r"""
import json, os, sys
import numpy as np
import scipy.sparse as sp
from fastdp._kernels import _glm, _line_search, _scd, _sgd
from fastdp._validation import structure_token
from fastdp.exceptions import ValidationError

dense = np.arange(1.0, 31.0).reshape(6, 5) * (np.arange(30).reshape(6, 5) % 3 != 1)
X = sp.csr_matrix(dense)
D, I, P = X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)
assert np.all(np.diff(P) >= 2)
P_UP = P.copy(); P_UP[2] = P[4]
P_END = P.copy(); P_END[-1] -= 1
P_START = P.copy(); P_START[0] = 1
I_BIG = I.copy(); I_BIG[-1] = 10**6
I_NEG = I.copy(); I_NEG[0] = -3
I_UNSORTED = I.copy(); I_UNSORTED[[0, 1]] = I[[1, 0]]
I_REPEATED = I.copy(); I_REPEATED[1] = I[0]
D_SHORT = D[:-1].copy()
y, rows = np.ones(6), np.arange(6, dtype=np.int64)
BIG_ROWS = np.zeros(300, np.int64)
SQ = _scd.row_squared_norms(D, P)
FULL = np.array([0, 6], np.int64)
X64 = sp.csr_matrix((6, 5))
X64.data, X64.indices, X64.indptr = D, I, P
TOKEN = structure_token(X64)

class _StructureToken:  # a look-alike: the kernels must not trust it
    def __init__(self):
        self.indices, self.indptr, self.n_features = I_BIG, P, 5
FORGED = _StructureToken()

def scd_call(alpha=None, v=None, ptr=FULL, idx=rows, buffer=None, sq=SQ, labels=y,
             last=None, loss=0, noise=0.1, bitgen=None, threads=1, indices=I, indptr=P,
             check=True):
    _scd.run_dual_scd(D, indices, indptr, labels, sq, np.zeros(6) if alpha is None else alpha,
                      np.zeros(5) if v is None else v, ptr, idx,
                      np.zeros(6) if buffer is None else buffer,
                      np.zeros(5, np.int32) if last is None else last, loss, 6.0,
                      1.0, 1.0, 1e-4, False, 0.1, noise, True,
                      np.random.PCG64(0) if bitgen is None else bitgen, threads, 64,
                      check_structure=check)

def sgd_call(w=None, ptr=FULL, idx=rows, buffer=None, sq=SQ, labels=y, last=None, loss=0,
             noise=0.1, bitgen=None, threads=1, indices=I, indptr=P, check=True, clip=1.0):
    _sgd.run_sgd(D, indices, indptr, labels, sq, np.zeros(5) if w is None else w, ptr, idx,
                 np.zeros(6) if buffer is None else buffer,
                 np.zeros(5, np.int32) if last is None else last, loss, clip, 1.0, 0.1, noise,
                 True, np.random.PCG64(0) if bitgen is None else bitgen, threads, 64,
                 check_structure=check)

results = {}
for name, call in json.loads(sys.argv[1]).items():
    pid = os.fork()
    if pid == 0:  # the child: 0 = returned, 3 = ValidationError, 4 = another exception
        code = 0
        try:
            eval(call)
        except ValidationError:
            code = 3
        except Exception:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    results[name] = ("signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status)
                     else {0: "returned", 3: "raised", 4: "raised another exception"}.get(
                         os.WEXITSTATUS(status), "exit %d" % os.WEXITSTATUS(status)))
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def hostile_outcomes():
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    calls = dict(HOSTILE_CALLS, **VALID_CALLS)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(calls)],
                         capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(HOSTILE_CALLS))
def test_hostile_kernel_arguments_raise(hostile_outcomes, name):
    assert hostile_outcomes[name] == "raised", f"{name}: {hostile_outcomes[name]}"


@pytest.mark.parametrize("name", sorted(VALID_CALLS))
def test_valid_kernel_arguments_run(hostile_outcomes, name):
    assert hostile_outcomes[name] == "returned", f"{name}: {hostile_outcomes[name]}"


# ----------------------------------------------------------------------------
# 4. random corruptions: refused exactly when the arguments are invalid
# ----------------------------------------------------------------------------
def _in_child(call):
    """Run ``call()`` in a forked child: "returned", "raised" (ValidationError),
    "raised another exception" or the signal that killed it."""
    pid = os.fork()
    if pid == 0:  # the child (one thread: the kernels run serially with num_threads=1)
        code = 0
        try:
            call()
        except ValidationError:
            code = 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return {0: "returned", 3: "raised", 4: "raised another exception"}[os.WEXITSTATUS(status)]


def _rows_readable(indices, indptr, rows, n_features):
    """Independent statement of the kernels' contract for the rows they read."""
    nnz, n = len(indices), len(indptr) - 1
    if n < 0 or indptr[0] != 0 or indptr[-1] != nnz:
        return False
    for j in rows:
        if not 0 <= j < n or not 0 <= indptr[j] <= indptr[j + 1] <= nnz:
            return False
        cols = indices[indptr[j]:indptr[j + 1]]
        if cols.size and (np.any(np.diff(cols) <= 0) or cols[0] < 0 or cols[-1] >= n_features):
            return False
    return True


@st.composite
def corrupted(draw):
    """Valid CSR arrays, rows and a model length, then one random corruption."""
    X = draw(valid_csr())
    n, m = X.shape
    indices, indptr = X.indices.copy(), X.indptr.copy()
    rows = np.array(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)), np.int64)
    n_theta = m
    what = draw(st.sampled_from(["indices", "indptr", "rows", "theta", "none"]))
    if what == "indices" and indices.size:
        k = draw(st.integers(0, indices.size - 1))
        indices[k] = draw(st.sampled_from([-1, m, m + 7, 2**30, int(indices[k - 1])]))
    elif what == "indptr":
        indptr[draw(st.integers(0, n))] = draw(st.integers(-2, indices.size + 3))
    elif what == "rows":
        rows[draw(st.integers(0, rows.size - 1))] = draw(st.sampled_from([-1, n, n + 4, -2**40]))
    elif what == "theta":
        n_theta = draw(st.integers(0, m - 1))
    return X, indices, indptr, rows, n_theta


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corrupted(), st.sampled_from(["margins", "weighted_row_sum", "run_sgd", "run_dual_scd"]),
       st.booleans())
def test_corrupted_arguments_are_refused_exactly_when_invalid(case, kernel, check):
    """``check`` is the check_structure flag: False must not let anything through."""
    X, indices, indptr, rows, n_theta = case
    n, m = X.shape
    theta = np.linspace(-1.0, 1.0, n_theta)
    if kernel in ("margins", "weighted_row_sum"):
        readable = _rows_readable(indices, indptr, rows, n_theta)
        out = np.zeros(rows.size if kernel == "margins" else n_theta)

        def call():
            if kernel == "margins":
                _glm.margins(X.data, indices, indptr, rows, theta, out, check_structure=check)
            else:
                _glm.weighted_row_sum(X.data, indices, indptr, rows, np.ones(rows.size), out,
                                      check_structure=check)
    else:
        ptr = np.array([0, rows.size], np.int64)
        readable = (_rows_readable(indices, indptr, np.arange(max(len(indptr) - 1, 0)), n_theta)
                    and np.all((rows >= 0) & (rows < n)))
        y = np.resize([1.0, -1.0], n)
        sq = np.ones(n)

        def call():
            if kernel == "run_sgd":
                _sgd.run_sgd(X.data, indices, indptr, y, sq, theta.copy(), ptr, rows,
                             np.zeros(rows.size), np.zeros(n_theta, np.int32), 1, 1.0, 0.9, 0.1,
                             0.3, True, np.random.PCG64(0), 1, 64, check_structure=check)
            else:
                _scd.run_dual_scd(X.data, indices, indptr, y, sq, np.zeros(n, X.dtype),
                                  np.zeros(n_theta, X.dtype), ptr, rows, np.zeros(rows.size),
                                  np.zeros(n_theta, np.int32), 1, 0.5 * n, 2.0, 1.0, 1e-4,
                                  False, 0.1, 0.1, True, np.random.PCG64(0), 1, 64,
                                  check_structure=check)
    outcome = _in_child(call)
    assert outcome == ("returned" if readable else "raised"), (kernel, outcome)
    if readable and kernel == "margins":  # accepted: the result is the matrix's
        call()
        expected = [X.data[indptr[j]:indptr[j + 1]].astype(np.float64)
                    @ theta[indices[indptr[j]:indptr[j + 1]]] for j in rows]
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=0)
