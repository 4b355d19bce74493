"""Tests of the multinomial (DP-)SGD kernel (fastdp/_kernels/_multinomial.pyx).

Exactness: the kernel against the numpy reference (``multinomial_reference.py``,
same standard normals) in lazy and eager mode, for both value and index
dtypes, K = 2 and K > 2, with the scale ``a`` folded into ``w`` mid-call.
Clipping: a lone example of huge norm moves Theta by exactly kappa C in
Frobenius norm, along its unclipped gradient.  Distribution: the noise of
rows never read has the closed-form variance, and lazy and eager runs give
the same output distribution.  Statistical tests use fixed seeds
(deterministic outcome); with fresh seeds each assertion's false-alarm rate
is at most 1e-4 (stated per test).
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
from scipy import stats
from scipy.special import softmax

from fastdp._kernels import _multinomial
from fastdp._kernels._scd import row_squared_norms
from fastdp._validation import structure_token
from fastdp.exceptions import ValidationError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from multinomial_reference import run_multinomial_reference  # noqa: E402


def _problem(rng, n, d, K, density, value_dtype=np.float64, index_dtype=np.int32):
    """Unit-norm sparse rows and labels from a planted softmax model."""
    X = sp.random(n, d, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X, dtype=value_dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    scores = np.asarray(X.astype(np.float64) @ (3.0 * rng.normal(size=(d, K))))
    y = np.argmax(scores + rng.gumbel(size=(n, K)), axis=1).astype(np.int64)
    return X, y


def _poisson_batches(rng, n, q, n_steps):
    sizes = rng.binomial(n, q, size=n_steps)
    parts = [np.sort(rng.choice(n, size=k, replace=False)) for k in sizes]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    idx = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return ptr, idx


def _run(X, y, theta, ptr, idx, *, clip, rho, kappa, noise_std, lazy, seed, num_threads=1,
         parallel_min_rows=16, check_structure=True):
    """Run the kernel from Theta = theta (K x d); returns (Theta, n_draws)."""
    w = np.array(np.asarray(theta, dtype=np.float64).T, order="C")   # a copy, always
    K = w.shape[1]
    largest = max(int(np.diff(ptr).max(initial=0)), 1)
    draws = _multinomial.run_multinomial_sgd(
        X.data, X.indices, X.indptr, y, row_squared_norms(X.data, X.indptr), w, ptr, idx,
        np.zeros(largest * K), np.zeros(X.shape[1], np.int32), clip, rho, kappa, noise_std,
        lazy, np.random.PCG64(seed), num_threads, parallel_min_rows,
        check_structure=check_structure)
    return w.T.copy(), draws


def _reference(X, y, theta, ptr, idx, *, lazy, seed, **params):
    return run_multinomial_reference(X, y, theta, ptr, idx, lazy_noise=lazy,
                                     rng=np.random.Generator(np.random.PCG64(seed)), **params)


@pytest.mark.parametrize("K", [2, 5])
@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("dtypes", [(np.float64, np.int32), (np.float32, np.int64)])
def test_kernel_matches_numpy_reference(rng, K, lazy, dtypes):
    X, y = _problem(rng, 120, 30, K, 0.15, *dtypes)
    ptr, idx = _poisson_batches(rng, 120, 0.1, 25)
    theta0 = rng.normal(size=(K, 30)) * 0.3
    params = dict(clip=0.7, rho=0.97, kappa=0.3, noise_std=0.4)
    theta, draws = _run(X, y, theta0, ptr, idx, lazy=lazy, seed=7, **params)
    ref, ref_draws = _reference(X, y, theta0, ptr, idx, lazy=lazy, seed=7, **params)
    np.testing.assert_allclose(theta, ref, rtol=1e-9, atol=1e-11)
    assert draws == ref_draws
    assert draws < 25 * 30 * K if lazy else draws == 25 * 30 * K


@pytest.mark.parametrize("clip", [0.05, np.inf])
def test_noiseless_kernel_matches_reference(rng, clip):
    """sigma = 0: the exact steps (clipping active for almost every row, or none)."""
    X, y = _problem(rng, 200, 40, 4, 0.1)
    ptr, idx = _poisson_batches(rng, 200, 0.2, 30)
    params = dict(clip=clip, rho=0.99, kappa=0.5, noise_std=0.0)
    theta, draws = _run(X, y, np.zeros((4, 40)), ptr, idx, lazy=True, seed=0, **params)
    ref, _ = _reference(X, y, np.zeros((4, 40)), ptr, idx, lazy=True, seed=0, **params)
    np.testing.assert_allclose(theta, ref, rtol=1e-11, atol=1e-13)
    assert draws == 0


def test_scale_fold_mid_call_is_exact(rng):
    # rho = 0.3: a = 0.3^t drops below 1e-100 after 192 steps and is folded twice.
    X, y = _problem(rng, 50, 12, 3, 0.3)
    ptr, idx = _poisson_batches(rng, 50, 0.2, 450)
    params = dict(clip=1.0, rho=0.3, kappa=0.5, noise_std=1.0)
    for lazy in (True, False):
        theta, _ = _run(X, y, np.zeros((3, 12)), ptr, idx, lazy=lazy, seed=3, **params)
        ref, _ = _reference(X, y, np.zeros((3, 12)), ptr, idx, lazy=lazy, seed=3, **params)
        np.testing.assert_allclose(theta, ref, rtol=1e-9, atol=1e-12)


def test_softmax_is_stable_for_huge_scores(rng):
    """Scores of +-1e4 (exp overflows without the shift): finite, matches scipy's softmax."""
    X, y = _problem(rng, 30, 6, 3, 0.5)
    theta0 = rng.normal(size=(3, 6)) * 1e4
    ptr = np.array([0, 30], np.int64)
    idx = np.arange(30, dtype=np.int64)
    theta, _ = _run(X, y, theta0, ptr, idx, clip=np.inf, rho=1.0, kappa=1.0, noise_std=0.0,
                    lazy=True, seed=0)
    R = softmax(np.asarray(X @ theta0.T), axis=1)
    R[np.arange(30), y] -= 1.0
    np.testing.assert_allclose(theta, theta0 - np.asarray(R.T @ X), rtol=1e-12, atol=1e-9)


def test_clipping_bounds_a_lone_examples_contribution_by_clip(rng):
    """One example of norm 1e6 in the only batch, sigma = 0: Theta_1 - rho Theta_0 = -kappa
    clip(g, C) with ||clip(g, C)||_F = C exactly, along the unclipped gradient."""
    d, K, C, kappa, rho = 8, 4, 0.3, 0.7, 0.9
    x = np.zeros(d)
    x[[1, 4, 6]] = [3e5, -8e5, 5e5]
    X = sp.csr_matrix(x[None, :])
    y = np.array([2], np.int64)
    theta0 = rng.normal(size=(K, d)) * 1e-6
    ptr = np.array([0, 1], np.int64)
    idx = np.array([0], np.int64)
    theta, _ = _run(X, y, theta0, ptr, idx, clip=C, rho=rho, kappa=kappa, noise_std=0.0,
                    lazy=True, seed=0)
    step = (rho * theta0 - theta) / kappa
    np.testing.assert_allclose(np.linalg.norm(step), C, rtol=1e-12)
    r = softmax(theta0 @ x)
    r[2] -= 1.0
    g = np.outer(r, x)
    np.testing.assert_allclose(step, g * C / np.linalg.norm(g), rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("lazy", [True, False])
def test_thread_count_does_not_change_bits(rng, lazy):
    X, y = _problem(rng, 3000, 400, 6, 0.02)
    ptr, idx = _poisson_batches(rng, 3000, 0.1, 12)
    results = [_run(X, y, np.zeros((6, 400)), ptr, idx, clip=0.5, rho=0.999, kappa=0.01,
                    noise_std=0.5, lazy=lazy, seed=11, num_threads=nt)[0] for nt in (1, 2, 3)]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


def test_structure_scan_changes_no_bit(rng):
    X, y = _problem(rng, 150, 40, 3, 0.1, np.float64, np.int64)
    ptr, idx = _poisson_batches(rng, 150, 0.3, 12)
    runs = [_run(X, y, np.zeros((3, 40)), ptr, idx, clip=0.5, rho=0.99, kappa=0.1, noise_std=0.4,
                 lazy=True, seed=3, num_threads=2, parallel_min_rows=8, check_structure=check)
            for check in (True, False, structure_token(X))]
    for theta, draws in runs[1:]:
        assert np.array_equal(runs[0][0], theta) and runs[0][1] == draws


def test_noise_std_per_coordinate_closed_form(rng):
    """Rows never read (empty batches): Theta_T = decayed noise sum, variance
    (kappa s)^2 h(T) per coordinate.  Chi-square of sum of squares over 5 x 4000
    coordinates, two-sided level 1e-4 per mode (false-alarm rate 1e-4 each)."""
    d, K, T, rho, kappa, s = 4000, 5, 30, 0.9, 0.2, 2.0
    X, y = _problem(rng, 10, d, K, 0.001)
    ptr = np.zeros(T + 1, dtype=np.int64)
    idx = np.zeros(0, dtype=np.int64)
    var = (kappa * s) ** 2 * (1 - rho ** (2 * T)) / (1 - rho ** 2)
    for lazy in (True, False):
        theta, draws = _run(X, y, np.zeros((K, d)), ptr, idx, clip=1.0, rho=rho, kappa=kappa,
                            noise_std=s, lazy=lazy, seed=5)
        chi2 = float(np.sum(theta * theta) / var)
        assert 2 * min(stats.chi2.cdf(chi2, d * K), stats.chi2.sf(chi2, d * K)) > 1e-4
        assert draws == (d * K if lazy else T * d * K)


def test_lazy_and_eager_same_distribution(rng):
    """Softmax with clipping (not affine in the noise): two-sample KS tests, lazy vs eager.

    Three statistics of Theta_T (two coordinates and the Frobenius norm),
    1500 runs each, level 1e-4 per assertion for fresh seeds.
    """
    X, y = _problem(rng, 60, 8, 3, 0.3)
    ptr, idx = _poisson_batches(rng, 60, 0.1, 40)
    params = dict(clip=0.5, rho=0.95, kappa=1.0, noise_std=0.8)
    out = {lazy: np.array([_run(X, y, np.zeros((3, 8)), ptr, idx, lazy=lazy,
                                seed=(50000 if lazy else 90000) + r, **params)[0].ravel()
                           for r in range(1500)])
           for lazy in (True, False)}
    for stat in (lambda a: a[:, 0], lambda a: a[:, 13], lambda a: np.linalg.norm(a, axis=1)):
        assert stats.ks_2samp(stat(out[True]), stat(out[False])).pvalue > 1e-4


def _call(X, y, w, ptr, idx, **overrides):
    args = dict(residual_buffer=np.zeros(100), last_noised=np.zeros(X.shape[1], np.int32),
                clip=1.0, rho=0.9, kappa=0.1, noise_std=1.0, lazy_noise=True,
                bit_generator=np.random.PCG64(0), num_threads=1, parallel_min_rows=16,
                column_splits=None)
    args.update(overrides)
    sq = args.pop("sq_norms", row_squared_norms(X.data, X.indptr))
    return _multinomial.run_multinomial_sgd(
        X.data, X.indices, X.indptr, y, sq, w, ptr, idx, args["residual_buffer"],
        args["last_noised"], args["clip"], args["rho"], args["kappa"], args["noise_std"],
        args["lazy_noise"], args["bit_generator"], args["num_threads"],
        args["parallel_min_rows"], args["column_splits"])


@pytest.mark.parametrize("case, match", [
    ("label_high", "class index"), ("label_negative", "class index"), ("one_class", "K >= 2"),
    ("short_y", "y has length"), ("short_norms", "sq_norms"), ("short_buffer", "residual_buffer"),
    ("short_last", "last_noised"), ("bad_row", "batch_idx"), ("narrow_w", "column index"),
    ("rho", "rho"), ("kappa", "kappa"), ("nan_noise", "noise_std"), ("bitgen", "BitGenerator"),
    ("splits", "column_splits"), ("threads", "num_threads"),
])
def test_bad_arguments_raise_validation_error(rng, case, match):
    X, y = _problem(rng, 20, 6, 3, 0.5)
    w = np.zeros((6, 3))
    ptr = np.array([0, 3, 5], np.int64)
    idx = np.array([0, 1, 2, 3, 4], np.int64)
    kwargs = {}
    if case == "label_high":
        y = y.copy()
        y[7] = 3
    elif case == "label_negative":
        y = y.copy()
        y[0] = -1
    elif case == "one_class":
        w = np.zeros((6, 1))
    elif case == "short_y":
        y = y[:-1]
    elif case == "short_norms":
        kwargs["sq_norms"] = np.zeros(19)
    elif case == "short_buffer":
        kwargs["residual_buffer"] = np.zeros(8)     # needs 3 * 3
    elif case == "short_last":
        kwargs["last_noised"] = np.zeros(5, np.int32)
    elif case == "bad_row":
        idx = np.array([0, 1, 2, 3, 20], np.int64)
    elif case == "narrow_w":
        w = np.zeros((3, 3))
        kwargs["last_noised"] = np.zeros(3, np.int32)
    elif case == "rho":
        kwargs["rho"] = 1.5
    elif case == "kappa":
        kwargs["kappa"] = 0.0
    elif case == "nan_noise":
        kwargs["noise_std"] = float("nan")
    elif case == "bitgen":
        kwargs["bit_generator"] = None
    elif case == "splits":
        kwargs.update(num_threads=2, column_splits=np.array([0, 9, 6], np.int64))
    elif case == "threads":
        kwargs["num_threads"] = 5000
    with pytest.raises(ValidationError, match=match):
        _call(X, y, w, ptr, idx, **kwargs)


def test_wrong_layout_is_a_python_error_not_a_crash(rng):
    X, y = _problem(rng, 20, 6, 3, 0.5)
    ptr = np.array([0, 3], np.int64)
    idx = np.array([0, 1, 2], np.int64)
    with pytest.raises((ValueError, TypeError)):
        _call(X, y, np.zeros((3, 6)).T, ptr, idx)            # not C-contiguous
    with pytest.raises((ValueError, TypeError)):
        _call(X, y.astype(np.int32), np.zeros((6, 3)), ptr, idx)   # labels must be int64


# --------------------------------------------------------------------------
# hypothesis: small random problems (empty rows, one row or column, extreme
# magnitudes, both dtypes) against the reference; corrupted CSR refused
# --------------------------------------------------------------------------

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def _small_problem(draw):
    n, d, K = draw(st.integers(1, 7)), draw(st.integers(1, 6)), draw(st.integers(2, 5))
    mask = np.array(draw(st.lists(st.booleans(), min_size=n * d, max_size=n * d)), bool)
    values = np.array(draw(st.lists(st.floats(-3, 3, allow_subnormal=False), min_size=n * d,
                                    max_size=n * d)))
    scale = draw(st.sampled_from([1e-100, 1e-3, 1.0, 1e3, 1e100]))
    value_dtype = draw(st.sampled_from([np.float64, np.float32]))
    if value_dtype == np.float32:
        scale = min(max(scale, 1e-20), 1e20)
    X = sp.csr_matrix(np.where(mask, values, 0.0).reshape(n, d) * scale, dtype=value_dtype)
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    X.indices, X.indptr = X.indices.astype(index_dtype), X.indptr.astype(index_dtype)
    y = np.array(draw(st.lists(st.integers(0, K - 1), min_size=n, max_size=n)), np.int64)
    steps = draw(st.integers(0, 5))
    parts = [sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))) for _ in range(steps)]
    ptr = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    idx = np.array([j for p in parts for j in p], np.int64)
    return X, y, K, ptr, idx


@FUZZ
@given(problem=_small_problem(), lazy=st.booleans(), clip=st.sampled_from([0.3, np.inf]),
       seed=st.integers(0, 2**32 - 1))
def test_fuzz_kernel_matches_reference(problem, lazy, clip, seed):
    X, y, K, ptr, idx = problem
    params = dict(clip=clip, rho=0.9, kappa=0.5, noise_std=0.7)
    theta0 = np.zeros((K, X.shape[1]))
    with np.errstate(over="ignore", invalid="ignore"):
        theta, draws = _run(X, y, theta0, ptr, idx, lazy=lazy, seed=seed, num_threads=2,
                            parallel_min_rows=1, **params)
        ref, ref_draws = _reference(X, y, theta0, ptr, idx, lazy=lazy, seed=seed, **params)
    np.testing.assert_allclose(theta, ref, rtol=1e-8, atol=1e-10)
    assert draws == ref_draws


@FUZZ
@given(problem=_small_problem(), where=st.integers(0, 10**6),
       kind=st.sampled_from(["column_high", "column_negative", "repeat", "pointer"]))
def test_fuzz_corrupted_csr_is_refused(problem, where, kind):
    X, y, K, ptr, idx = problem
    indices, indptr = X.indices.copy(), X.indptr.copy()
    if kind == "pointer":
        if len(indptr) < 3:
            return
        k = 1 + where % (len(indptr) - 2)
        indptr[k] = indptr[-1] + 1
    else:
        if X.nnz == 0:
            return
        k = where % X.nnz
        if kind == "repeat":                    # an entry repeats its predecessor in its row
            row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            inner = np.flatnonzero(row_of[1:] == row_of[:-1]) + 1
            if inner.size == 0:
                return
            k = inner[where % inner.size]
            indices[k] = indices[k - 1]
        else:
            indices[k] = X.shape[1] + 3 if kind == "column_high" else -1
    w = np.zeros((X.shape[1], K))
    with pytest.raises(ValidationError):
        _multinomial.run_multinomial_sgd(
            X.data, indices, indptr, y, np.zeros(len(y)), w, ptr, idx,
            np.zeros(K * max(len(y), 1)), np.zeros(X.shape[1], np.int32), 1.0, 0.9, 0.5, 0.7,
            True, np.random.PCG64(0), 1, 16)


# --------------------------------------------------------------------------
# hostile calls (in a child process: a crash must fail the test, not the run).
# check_structure=False scans like True; only a structure token of these very
# arrays skips the scan; a NaN or negative squared norm would turn clipping off.
# --------------------------------------------------------------------------

_HOSTILE_CHILD = """
import json, os, sys
import numpy as np
import scipy.sparse as sp
from fastdp._kernels import _multinomial
from fastdp._kernels._scd import row_squared_norms
from fastdp._validation import structure_token
from fastdp.exceptions import ValidationError

rng = np.random.default_rng(0)
X = sp.random(40, 6, density=0.5, format="csr", random_state=rng)
X.sort_indices()
y = rng.integers(0, 3, size=40).astype(np.int64)
D, I, P = X.data, X.indices, X.indptr
TOKEN = structure_token(X)
row = int(np.flatnonzero(np.diff(P) >= 2)[0])
I_BIG = I.copy(); I_BIG[P[row + 1] - 1] = 10**8     # last entry of a row: far past w, still sorted
I_NEG = I.copy(); I_NEG[P[row]] = -(10**8)          # first entry of a row: before w, still sorted
I_UNSORTED = I.copy(); I_UNSORTED[P[row]], I_UNSORTED[P[row] + 1] = I[P[row] + 1], I[P[row]]
P_UP = P.copy(); P_UP[5] = P[-1] + 50
SQ = row_squared_norms(D, P)
SQ_NAN = SQ.copy(); SQ_NAN[3] = np.nan
SQ_NEG = SQ.copy(); SQ_NEG[3] = -1.0
ptr = np.array([0, 20, 40], np.int64)
idx = np.arange(40, dtype=np.int64)

def call(indices=I, indptr=P, sq=SQ, check=False, w=None):
    w = np.zeros((6, 3)) if w is None else w
    return _multinomial.run_multinomial_sgd(
        D, indices, indptr, y, sq, w, ptr, idx, np.zeros(3 * 20), np.zeros(w.shape[0], np.int32),
        1.0, 0.9, 0.5, 0.7, True, np.random.PCG64(0), 1, 16, check_structure=check)

results = {}
for name, expr in json.loads(sys.argv[1]).items():
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child: 0 = returned, 3 = ValidationError, 4 = another exception
        code = 0
        try:
            eval(expr)
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

_HOSTILE_MULTINOMIAL = {
    "unchecked_bad_column": "call(indices=I_BIG, check=False)",
    "unchecked_negative_column": "call(indices=I_NEG, check=False)",
    "unchecked_unsorted_row": "call(indices=I_UNSORTED, check=False)",
    "unchecked_bad_indptr": "call(indptr=P_UP, check=False)",
    "checked_bad_column": "call(indices=I_BIG, check=True)",
    "token_of_other_arrays": "call(indices=I_BIG, check=TOKEN)",
    "token_with_narrow_w": "call(check=TOKEN, w=np.zeros((2, 3)))",
    "nan_sq_norm": "call(sq=SQ_NAN, check=TOKEN)",
    "negative_sq_norm": "call(sq=SQ_NEG, check=TOKEN)",
}
_VALID_MULTINOMIAL = {
    "token": "call(check=TOKEN)",
    "unchecked": "call(check=False)",
    "checked": "call(check=True)",
}


@pytest.fixture(scope="module")
def hostile_outcomes():
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    calls = dict(_HOSTILE_MULTINOMIAL, **_VALID_MULTINOMIAL)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_HOSTILE_CHILD), json.dumps(calls)],
                         capture_output=True, text=True, env=env, cwd=str(root), timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(_HOSTILE_MULTINOMIAL))
def test_hostile_multinomial_call_raises_validation_error(hostile_outcomes, name):
    assert hostile_outcomes[name] == "raised", f"{name}: {hostile_outcomes[name]}"


@pytest.mark.parametrize("name", sorted(_VALID_MULTINOMIAL))
def test_valid_multinomial_call_runs(hostile_outcomes, name):
    assert hostile_outcomes[name] == "returned", f"{name}: {hostile_outcomes[name]}"
