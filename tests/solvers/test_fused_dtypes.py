"""float32 values and int32 indices reach the kernels as they are (issue 20, item 3).

Every solver that reads X through the compiled kernels is run on a CSR
matrix with float32 values and int32 indices, and on its exact float64/int64
copy (the float32-rounded values, widened).  Checked:

* **no copy**: the arrays the kernels receive are the caller's (``np.shares_memory``,
  the kernel entry points wrapped for the test), and a fit's traced
  allocations stay below the size of ``X.data`` (``tracemalloc``);
* **same numbers**: the kernels read every value as a double and accumulate
  in float64, so where the solver's state is float64 the two fits are
  bit-identical; DP-SCD keeps its dual state ``(alpha, v)`` in the dtype of
  the data (by design: memory O(n + d) of that dtype), so there the fits
  agree to float32 rounding of the state (tolerance stated at the test).
"""
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._kernels import _glm, _multinomial, _scd, _sgd
from fastdp.solvers import line_search, multinomial, perturbation, scd, sgd
from fastdp.solvers.accelerated import GLMProblem
from fastdp.solvers.accelerated import dp_gd

N, D = 600, 40

_ENTRY_POINTS = [(_glm, "margins"), (_glm, "clipped_gradient_sum"), (_glm, "weighted_row_sum"),
                 (_scd, "run_dual_scd"), (_sgd, "run_sgd"), (_multinomial, "run_multinomial_sgd")]


def _data():
    """CSR float32 / int32 with rows of norm <= 0.99 (inside the unit ball after rounding)."""
    rng = np.random.default_rng(0)
    X = sp.random(N, D, density=0.2, random_state=rng, format="csr")
    X.data = rng.normal(size=X.nnz)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(0.99 / np.maximum(norms, 1e-12)) @ X)
    X.sort_indices()
    X32 = sp.csr_matrix((X.data.astype(np.float32), X.indices.astype(np.int32),
                         X.indptr.astype(np.int32)), shape=X.shape)
    X64 = sp.csr_matrix((X32.data.astype(np.float64), X32.indices.astype(np.int64),
                         X32.indptr.astype(np.int64)), shape=X.shape)
    y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    return X32, X64, y


_X32, _X64, _Y = _data()
_CLASSES = (np.arange(N) % 3).astype(np.int64)

# name -> (fit(X) -> array of the released numbers, bit-identical across dtypes?)
SOLVERS = {
    "dpsgd": (lambda X: sgd.dpsgd(X, _Y, loss="logistic", lam=1e-3, epochs=2, batch_size=40,
                                  clip=1.0, noise_multiplier=0.8, random_state=1).coef, True),
    "sgd_hinge": (lambda X: sgd.sgd(X, _Y, loss="hinge", lam=1e-2, epochs=2, batch_size=20,
                                    random_state=2).coef, True),
    "multinomial": (lambda X: multinomial.dp_multinomial_sgd(
        X, _CLASSES, n_classes=3, lam=1e-3, epochs=2, batch_size=40, clip=1.0,
        noise_multiplier=0.8, random_state=3).coef, True),
    "objective_perturbation": (lambda X: perturbation.objective_perturbation(
        X, _Y, lam=0.05, epsilon=1.0, random_state=4).coef, True),
    "output_perturbation": (lambda X: perturbation.output_perturbation(
        X, _Y, lam=0.05, epsilon=1.0, random_state=5).coef, True),
    "dp_blsgd": (lambda X: line_search.dp_blsgd(X, _Y, epsilon=2.0, delta=1e-5,
                                                random_state=6).coef, True),
    "dp_agd": (lambda X: line_search.dp_agd(X, _Y, epsilon=2.0, delta=1e-5,
                                            random_state=7).coef, True),
    "dp_gd": (lambda X: dp_gd(GLMProblem(X, _Y, loss="logistic", lam=0.02, clip=1.0),
                              epsilon=1.0, n_iter=20, step_size=0.5, random_state=8).coef, True),
    "dual_dpscd": (lambda X: scd.dual_dpscd(X, _Y, loss="logistic", lam=1e-2, epochs=2,
                                            batch_size=30, clip=0.5, noise_multiplier=0.8,
                                            random_state=9).coef, False),
    "seq_dpscd": (lambda X: scd.seq_dpscd(X, _Y, loss="hinge", lam=1e-2, epochs=2,
                                          batch_size=10, clip=0.5, noise_multiplier=0.8,
                                          random_state=10).coef, False),
}


@pytest.fixture
def kernel_arrays(monkeypatch):
    """Record the (data, indices, indptr) every kernel entry point is called with."""
    seen = []
    for module, name in _ENTRY_POINTS:
        kernel = getattr(module, name)

        def wrapped(data, indices, indptr, *args, _kernel=kernel, _name=name, **kwargs):
            seen.append((_name, data, indices, indptr))
            return _kernel(data, indices, indptr, *args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)
    return seen


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_float32_int32_reach_the_kernels_without_a_copy(name, kernel_arrays):
    SOLVERS[name][0](_X32)
    assert kernel_arrays, "the solver called no kernel"
    for kernel, data, indices, indptr in kernel_arrays:
        assert data.dtype == np.float32 and indices.dtype == indptr.dtype == np.int32, kernel
        assert np.shares_memory(data, _X32.data), kernel
        assert np.shares_memory(indices, _X32.indices), kernel
        assert np.shares_memory(indptr, _X32.indptr), kernel


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_float32_int32_fit_equals_float64_fit_of_the_rounded_data(name):
    fit, bit_identical = SOLVERS[name]
    got, ref = np.asarray(fit(_X32)), np.asarray(fit(_X64))
    assert got.dtype == np.float64
    if bit_identical:
        assert np.array_equal(got, ref)
    else:
        # DP-SCD's state (alpha, v) is float32 here: each of the few hundred
        # updates rounds v to float32 (relative 6e-8); measured differences are
        # ~3e-7 of the largest coefficient, the bound leaves a factor ~300
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.max(np.abs(ref)))


def test_fit_allocates_less_than_the_data():
    """No hidden copy of X: a DP-SGD fit on 100k float32 entries traces less than
    ``X.data.nbytes`` of new memory at its peak (the validation's boolean masks are
    1 byte per entry; a float32 copy would be 4, a float64 one 8)."""
    rng = np.random.default_rng(1)
    X = sp.random(5000, 200, density=0.1, random_state=rng, format="csr", dtype=np.float32)
    X.data = (X.data / 20.0).astype(np.float32)
    y = np.where(rng.random(5000) < 0.5, -1.0, 1.0)
    sgd.dpsgd(X, y, loss="logistic", lam=1e-3, epochs=1, batch_size=100, clip=1.0,
              noise_multiplier=0.8, random_state=0)  # warm up (imports, numba)
    tracemalloc.start()
    try:
        sgd.dpsgd(X, y, loss="logistic", lam=1e-3, epochs=1, batch_size=100, clip=1.0,
                  noise_multiplier=0.8, random_state=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < X.data.nbytes, (peak, X.data.nbytes)
