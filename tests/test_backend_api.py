"""The functional backend of docs/api.md, called exactly as an outside library would.

Only public import paths and keyword arguments documented in docs/api.md are
used.  Each call is checked against an independent reference where one exists
(numpy/scipy for kernels, scikit-learn/closed forms for the non-private
limits, the accountants for the events).
"""
import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(2024)
    n, d = 400, 6
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.standard_normal(d)
    y_reg = X @ w + 0.05 * rng.standard_normal(n)
    y_cls = np.where(X @ w > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y_reg, y_cls, w


def _check_result(result, *, private):
    """The SolverResult contract: model, event, history."""
    from fastdp.privacy import DpEvent, NonPrivateEvent

    assert isinstance(result.coef, np.ndarray) and result.coef.dtype == np.float64
    assert np.all(np.isfinite(result.coef))
    assert isinstance(result.event, DpEvent)
    assert isinstance(result.event, NonPrivateEvent) != private


# ---------------------------------------------------------------------------
# solvers on (X, y, loss, privacy parameters, random_state)
# ---------------------------------------------------------------------------
def test_scd_family(data):
    from fastdp.privacy import compute_epsilon
    from fastdp.solvers.scd import dual_dpscd, primal_dpscd, scd, seq_dpscd

    X, y_reg, y_cls, _ = data
    n, lam = X.shape[0], 1e-2
    # non-private SDCA reaches the closed-form ridge optimum
    res = scd(X, y_reg, loss="squared", lam=lam, epochs=40, batch_size=1, random_state=0)
    _check_result(res, private=False)
    A = (X.T @ X).toarray() + lam * n * np.eye(X.shape[1])
    np.testing.assert_allclose(res.coef, np.linalg.solve(A, X.T @ y_reg), atol=1e-7)

    res = dual_dpscd(X, y_cls, loss="logistic", lam=lam, epochs=2, batch_size=20, clip=0.5,
                     noise_multiplier=2.0, sampler="poisson", random_state=1,
                     record_history=True)
    _check_result(res, private=True)
    assert [h["epoch"] for h in res.history] == [1, 2]
    # the event is exactly T Poisson-sampled Gaussian steps at q = L / n
    assert res.n_iter == 2 * n // 20
    from fastdp.privacy import get_accountant

    assert get_accountant("rdp").epsilon(res.event, 1e-5) == pytest.approx(
        compute_epsilon(2.0, 20 / n, res.n_iter, 1e-5), rel=1e-12)
    again = dual_dpscd(X, y_cls, loss="logistic", lam=lam, epochs=2, batch_size=20, clip=0.5,
                       noise_multiplier=2.0, sampler="poisson", random_state=1)
    np.testing.assert_array_equal(again.coef, res.coef)         # same seed, same bits

    res = seq_dpscd(X, y_cls, loss="hinge", lam=lam, epochs=1, batch_size=10, clip=0.1,
                    noise_multiplier=1.0, sampler="fixed", random_state=2)
    _check_result(res, private=True)
    Xf = sp.csr_matrix(X.toarray() / np.linalg.norm(X.toarray(), axis=0))   # column-normalised
    res = primal_dpscd(Xf, y_reg, loss="squared", lam=lam, epochs=1, batch_size=2, clip=0.1,
                       noise_multiplier=1.0, random_state=3)
    _check_result(res, private=True)


def test_sgd_family(data):
    from fastdp.solvers.sgd import dpsgd, sgd

    X, y_reg, y_cls, _ = data
    n, lam = X.shape[0], 1e-2
    res = sgd(X, y_reg, loss="squared", lam=lam, epochs=400, batch_size=n, learning_rate=1.0,
              random_state=0)
    _check_result(res, private=False)
    A = (X.T @ X).toarray() / n + lam * np.eye(X.shape[1])
    np.testing.assert_allclose(res.coef, np.linalg.solve(A, X.T @ y_reg / n), atol=1e-6)
    res = dpsgd(X, y_cls, loss="logistic", lam=lam, epochs=2, batch_size=40, clip=1.0,
                noise_multiplier=1.5, learning_rate=0.5, random_state=1, record_history=True)
    _check_result(res, private=True)
    assert len(res.history) == 2 and res.noise_std == pytest.approx(1.5)


def test_perturbation_family(data):
    from sklearn.linear_model import LogisticRegression

    from fastdp.solvers.perturbation import (
        objective_perturbation,
        output_perturbation,
        output_sensitivity,
        solve_erm,
    )

    X, _, y_cls, _ = data
    n, lam = X.shape[0], 1e-2
    theta, info = solve_erm(X, y_cls, lam, loss="logistic")
    ref = LogisticRegression(C=1 / (lam * n), fit_intercept=False, tol=1e-12).fit(X, y_cls)
    assert info["converged"]
    np.testing.assert_allclose(theta, ref.coef_.ravel(), atol=1e-5)
    res = output_perturbation(X, y_cls, lam=lam, epsilon=1.0, loss="logistic", random_state=0)
    _check_result(res, private=True)
    res = output_perturbation(X, y_cls, lam=lam, noise_multiplier=1.0, mechanism="gaussian",
                              loss="logistic", random_state=0)
    _check_result(res, private=True)
    assert res.noise_std == pytest.approx(output_sensitivity(n, lam))   # sigma * 2 / (n lam)
    res = objective_perturbation(X, y_cls, lam=lam, epsilon=1.0, loss="logistic", random_state=0)
    _check_result(res, private=True)


def test_accelerated_family(data):
    from fastdp.solvers.accelerated import GLMProblem, dp_gd, dp_heavy_ball, dp_masg, dp_nesterov

    X, _, y_cls, _ = data
    problem = GLMProblem(X, y_cls, loss="logistic", lam=0.1, row_l1_bound=math.sqrt(6))
    L = problem.smoothness()
    for run, kwargs in ((dp_gd, dict(step_size=1 / L)),
                        (dp_heavy_ball, dict(step_size=1 / L, strong_convexity=0.1)),
                        (dp_nesterov, dict(step_size=1 / L, strong_convexity=0.1)),
                        (dp_masg, dict(smoothness=L, strong_convexity=0.1))):
        res = run(problem, epsilon=1.0, n_iter=20, random_state=0, **kwargs)
        _check_result(res, private=True)
        from fastdp.privacy import get_accountant

        assert get_accountant("pure").epsilon(res.event, 0.0) <= 1.0 * (1 + 1e-9)


def test_line_search_family(data):
    from fastdp.privacy import get_accountant
    from fastdp.solvers.line_search import dp_agd, dp_blgd, dp_blsgd, dp_blsgd_fixed

    X, _, y_cls, _ = data
    for run in (dp_blsgd, dp_blgd, dp_agd):
        res = run(X, y_cls, epsilon=1.0, delta=1e-5, loss="logistic", random_state=0)
        _check_result(res, private=True)
        assert get_accountant("rdp").epsilon(res.event, 1e-5) <= 1.0 * (1 + 1e-6)
    res = dp_blsgd_fixed(X, y_cls, noise_multiplier=2.0, n_iter=10, batch_size=40,
                         loss="logistic", random_state=0)
    _check_result(res, private=True)


def test_piecewise_affine_and_distributed(data):
    from fastdp.distributed import private_dual_averaging
    from fastdp.solvers.piecewise_affine import Box, PiecewiseAffineProblem, dp_minimize

    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((20, 3)), rng.standard_normal(20)
    problem = PiecewiseAffineProblem(A, b, 1.0, Box(-np.ones(3), np.ones(3)))
    out = dp_minimize(problem, 1.0, method="subgradient", random_state=0)
    assert out.x.shape == (3,) and np.all(np.abs(out.x) <= 1 + 1e-12)
    assert out.epsilon == pytest.approx(1.0)

    X, _, y_cls, _ = data
    res = private_dual_averaging(X, y_cls, n_nodes=4, epsilon=1.0, delta=1e-5, epochs=1.0,
                                 random_state=0)
    assert res.coef.shape == (X.shape[1],) and np.all(np.isfinite(res.coef))
    assert res.privacy is not None and res.event is not None


def test_data_parallel_backend(data, tmp_path):
    """fit_distributed on a Source (user-assembled or from a LIBSVM file) equals the
    single-machine fit with the block-keyed sampler: bit for bit with one shard."""
    from sklearn.datasets import dump_svmlight_file

    from fastdp.datasets import load_libsvm
    from fastdp.distributed.data_parallel import (
        ArrayRows, LibsvmRows, LocalWorkers, RayWorkers, Source, array_source, fit_distributed,
        libsvm_source,
    )
    from fastdp.linear_model import DPLogisticRegression
    from fastdp.sampling_blocks import BlockPoissonSampler, default_shard_count

    X, _, y_cls, _ = data

    def est(solver):
        return DPLogisticRegression(epsilon=1.0, batch_size=40, epochs=2, random_state=0,
                                    solver=solver,
                                    sampler=BlockPoissonSampler(batch_size=40, block_size=64))

    single = est("dpscd").fit(X, y_cls)
    source = Source(ArrayRows(X, y_cls), X.shape[0], block_size=64, n_features=X.shape[1],
                    n_shards=default_shard_count(X.shape[0], 64))   # the keyed fit's shards
    fit = fit_distributed(source, est("dpscd"), engine=LocalWorkers(1))
    assert np.array_equal(fit.coef_, single.coef_) and fit.epsilon_ == single.epsilon_
    four = fit_distributed(array_source(X, y_cls, n_shards=4, block_size=64), est("dpscd"),
                           engine=LocalWorkers(2))
    np.testing.assert_allclose(four.coef_, single.coef_, rtol=0,
                               atol=1e-12 * np.abs(single.coef_).max())

    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y_cls, str(path), zero_based=False)
    Xf, yf = load_libsvm(str(path))
    rows, labels = LibsvmRows(str(path))(10, 20)     # column indices as written (one-based)
    assert np.array_equal(rows.indices - 1, Xf[10:20].indices)
    assert np.array_equal(rows.data, Xf[10:20].data) and np.array_equal(labels, yf[10:20])
    sgd = fit_distributed(libsvm_source(path, block_size=64), est("dpsgd"))
    assert np.array_equal(sgd.coef_, est("dpsgd").fit(Xf, yf).coef_)
    assert repr(RayWorkers(n_workers=2)).startswith("RayWorkers(")


# ---------------------------------------------------------------------------
# accounting convenience API
# ---------------------------------------------------------------------------
def test_accounting_convenience_functions():
    from dp_accounting import dp_event as dpe
    from dp_accounting.rdp import RdpAccountant

    from fastdp.privacy import (
        calibrate,
        calibrate_noise_multiplier,
        compute_epsilon,
        compute_epsilon_report,
        dp_sgd_event,
        event_from_dict,
        get_accountant,
    )
    from fastdp.privacy.ledger import PrivacyLedger

    eps = compute_epsilon(1.1, 256 / 60000, 14062, 1e-5)
    # independent reference: dp_accounting's RDP accountant on the same event
    ref = RdpAccountant()
    ref.compose(dpe.PoissonSampledDpEvent(256 / 60000, dpe.GaussianDpEvent(1.1)), 14062)
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=0.02)
    assert eps <= ref.get_epsilon(1e-5) * (1 + 1e-9)
    event = dp_sgd_event(1.1, 256 / 60000, 14062)
    assert event_from_dict(event.to_dict()) == event
    assert get_accountant("rdp").epsilon(event, 1e-5) == eps
    report = compute_epsilon_report(1.1, 256 / 60000, 14062, 1e-5)
    assert report.epsilon == eps and report.epsilon_if_poisson_assumed is None
    sigma = calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000)
    assert compute_epsilon(float(sigma), 0.01, 1000, 1e-5) <= 1.0
    assert compute_epsilon(float(sigma) * (1 - 1e-4), 0.01, 1000, 1e-5) > 1.0
    scale = calibrate(lambda b: dp_sgd_event(b, 1.0, 1, "none"), 2.0, 1e-5)
    assert get_accountant("rdp").epsilon(dp_sgd_event(float(scale), 1.0, 1, "none"), 1e-5) <= 2.0
    ledger = PrivacyLedger(epsilon=2.0, delta=1e-5)    # default accountant: "auto"
    ledger.charge(dp_sgd_event(float(sigma), 0.01, 1000), label="outside library")
    assert ledger.spent() == pytest.approx(compute_epsilon(float(sigma), 0.01, 1000, 1e-5,
                                                           accountant="auto"))


# ---------------------------------------------------------------------------
# kernel entry points and their array contracts
# ---------------------------------------------------------------------------
def test_glm_kernels_match_numpy(data):
    from fastdp._kernels import _glm

    X, y_reg, y_cls, w = data
    theta = np.ascontiguousarray(w)
    rows = np.array([0, 5, 5, 17], dtype=np.int64)            # repeats count twice
    out = np.empty(rows.size)
    _glm.margins(X.data, X.indices, X.indptr, rows, theta, out)
    np.testing.assert_allclose(out, X[rows] @ theta, rtol=1e-14)
    grad = np.zeros(X.shape[1])
    _glm.gradient_sum(X.data, X.indices, X.indptr, y_reg, rows, theta, _glm.LOSS_SQUARED, grad)
    Xr = X[rows].toarray()
    np.testing.assert_allclose(grad, Xr.T @ (Xr @ theta - y_reg[rows]), rtol=1e-12)
    clipped = np.zeros(X.shape[1])
    _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y_cls, rows, theta,
                              _glm.LOSS_LOGISTIC, 0.1, clipped)
    per_row = (-y_cls[rows] / (1 + np.exp(y_cls[rows] * (Xr @ theta))))[:, None] * Xr
    norms = np.linalg.norm(per_row, axis=1, keepdims=True)
    np.testing.assert_allclose(clipped, (per_row / np.maximum(1, norms / 0.1)).sum(axis=0),
                               rtol=1e-12)
    acc = np.zeros(X.shape[1])
    weights = np.array([1.0, -2.0, 0.5, 3.0])
    _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, weights, acc)
    np.testing.assert_allclose(acc, Xr.T @ weights, rtol=1e-13)
    # the contract: float64 model vectors; a float32 theta is refused, not converted
    with pytest.raises((TypeError, ValueError)):
        _glm.margins(X.data, X.indices, X.indptr, rows, theta.astype(np.float32), out)


def test_scd_and_line_search_kernels():
    from fastdp._kernels import _line_search, _scd

    X = sp.random(30, 8, density=0.4, random_state=1, format="csr")
    norms = _scd.row_squared_norms(X.data, X.indptr)
    np.testing.assert_allclose(norms, np.asarray(X.multiply(X).sum(axis=1)).ravel(), rtol=1e-14)
    queries = np.array([-1.0, 0.2, 0.9, 2.0])
    assert _line_search.first_above(queries, 0.5, np.zeros(4)) == 2
    assert _line_search.first_above(queries, 5.0, np.zeros(4)) == -1


def test_libsvm_loader_is_the_parser_entry_point(tmp_path):
    from sklearn.datasets import load_svmlight_file

    from fastdp.datasets import load_libsvm

    path = tmp_path / "x.svm"
    path.write_text("1 1:0.5 3:1e-3\n-1 2:2.25 # comment\n1 qid:3 1:-7\n")
    X, y = load_libsvm(path)
    Xs, ys = load_svmlight_file(str(path))
    assert (X != Xs).nnz == 0 and np.array_equal(y, ys)


def test_large_data_entry_points(tmp_path):
    from fastdp.datasets import convert_libsvm, iter_libsvm_chunks, load_libsvm, open_binary

    path = tmp_path / "x.svm"
    path.write_text("1 1:0.5 3:1e-3\n-1 2:2.25\n1 1:-7\n")
    X, y = load_libsvm(path, dtype=np.float32, index_dtype=np.int64)
    assert X.dtype == np.float32 and X.indices.dtype == np.int64
    chunks = list(iter_libsvm_chunks(path, chunk_rows=2, zero_based=False, n_features=3))
    assert [c[0].shape for c in chunks] == [(2, 3), (1, 3)]
    header = convert_libsvm(path, tmp_path / "x.fdp")
    Xb, yb = open_binary(tmp_path / "x.fdp")
    assert header["shape"] == [3, 3] and (Xb != load_libsvm(path)[0]).nnz == 0
    assert np.array_equal(yb, y)


def test_every_documented_function_is_tested_here():
    """docs/api.md lists the stable functions; each must appear in this file."""
    text = API_DOC.read_text()
    documented = set(re.findall(r"^#### `([a-zA-Z_][a-zA-Z0-9_.]*)\(", text, flags=re.M))
    assert len(documented) >= 25
    source = Path(__file__).read_text()
    missing = sorted(name for name in documented if name.rsplit(".", 1)[-1] not in source)
    assert not missing, f"documented in docs/api.md but not exercised: {missing}"


def test_save_model_and_load_model_with_a_key(tmp_path):
    from fastdp.exceptions import ValidationError
    from fastdp.linear_model import DPLogisticRegression
    from fastdp.persistence import load_model, save_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(int)
    model = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    save_model(model, tmp_path / "m", key=b"secret")
    loaded = load_model(tmp_path / "m", key=b"secret")
    assert loaded.authenticated_ and loaded.epsilon_ == model.epsilon_
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(ValidationError):
        load_model(tmp_path / "m", key=b"another")
