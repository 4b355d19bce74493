"""Tests for fastdp.losses against closed forms, scikit-learn and brute force.

References used here are independent of the code under test:
* closed-form ridge solution and scikit-learn ``Ridge``, ``LogisticRegression``
  and ``LinearSVC`` with the parameter mapping of spec 000, section 1.5;
* the per-loss formulas of the spec, re-typed in this file (``_loss``,
  ``_dual_term``) rather than imported;
* finite differences, numerical suprema and ``scipy.optimize.minimize_scalar``.
"""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.svm import LinearSVC

from fastdp.exceptions import ValidationError
from fastdp.losses import (
    HingeLoss,
    LogisticLoss,
    SquaredLoss,
    dual_objective,
    duality_gap,
    gap_public,
    get_loss,
    primal_from_dual,
    primal_objective,
)

LOSS_NAMES = ["squared", "logistic", "hinge"]
N, M, LAM = 80, 6, 0.05

finite = st.floats(-30, 30, allow_nan=False, allow_infinity=False)
labels_pm = st.sampled_from([-1.0, 1.0])


# ---------------------------------------------------------------------------
# independent re-statements of the spec's table (section 1.5)
# ---------------------------------------------------------------------------


def _loss(name, z, y):
    if name == "squared":
        return 0.5 * (z - y) ** 2
    if name == "logistic":
        return math.log1p(math.exp(-y * z)) if -y * z < 30 else -y * z
    return max(0.0, 1.0 - y * z)


def _dual_term(name, a, y):
    """loss*(-a) written from the table of spec 000, section 1.5."""
    if name == "squared":
        return 0.5 * a * a - a * y
    p = a * y
    if p < 0 or p > 1:
        return math.inf
    if name == "hinge":
        return -p
    return sum(t * math.log(t) for t in (p, 1 - p) if t > 0)


# ---------------------------------------------------------------------------
# data and a plain exact SDCA used as a second reference
# ---------------------------------------------------------------------------


def _make_data(seed=0, n=N, m=M):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.normal(size=m)
    y_reg = X @ w + 0.1 * rng.normal(size=n)
    y_bin = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y_reg, y_bin


@pytest.fixture(scope="module")
def data():
    return _make_data()


def _labels(name, data):
    X, y_reg, y_bin = data
    return X, (y_reg if name == "squared" else y_bin)


def _sdca(loss, X, y, lam, box_eps=0.0, max_epochs=3000, gap_tol=1e-14):
    """Sequential SDCA (L = 1, no noise) built on ``dual_coordinate_step``."""
    n = X.shape[0]
    alpha = np.zeros(n)
    if loss.name != "squared":
        alpha = loss.project_dual(alpha, y, box_eps)
    v = X.T @ alpha
    sq_norms = np.einsum("ij,ij->i", X, X)
    for _ in range(max_epochs):
        for j in range(n):
            m_j = X[j] @ v / (lam * n)
            zeta = float(loss.dual_coordinate_step(alpha[j], y[j], m_j, sq_norms[j] / (lam * n), box_eps))
            new = float(loss.project_dual(alpha[j], y[j], box_eps)) + zeta
            v += (new - alpha[j]) * X[j]
            alpha[j] = new
        if duality_gap(alpha, X, y, loss, lam) < gap_tol:
            break
    return alpha


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# ---------------------------------------------------------------------------
# optima against scikit-learn (spec 000 section 1.5 mapping)
# ---------------------------------------------------------------------------


def test_ridge_optimum_matches_closed_form_and_sklearn(data):
    X, y, _ = data
    n = X.shape[0]
    theta_closed = np.linalg.solve(X.T @ X + LAM * n * np.eye(X.shape[1]), X.T @ y)
    ridge = Ridge(alpha=LAM * n, fit_intercept=False, solver="cholesky").fit(X, y)
    assert _rel(ridge.coef_, theta_closed) < 1e-10

    loss = SquaredLoss()
    alpha_star = loss.optimal_dual(X @ theta_closed, y)
    np.testing.assert_allclose(alpha_star, y - X @ theta_closed)  # the residual
    assert _rel(primal_from_dual(alpha_star, X, LAM), theta_closed) < 1e-10
    assert abs(duality_gap(alpha_star, X, y, loss, LAM)) < 1e-13
    p_star = primal_objective(theta_closed, X, y, loss, LAM)
    assert p_star == pytest.approx(-dual_objective(alpha_star, X, y, loss, LAM), rel=1e-12)
    # sklearn's objective ||y - Xw||^2 + alpha ||w||^2 is 2 N P(w)
    sk_obj = np.sum((y - X @ theta_closed) ** 2) + LAM * n * theta_closed @ theta_closed
    assert sk_obj == pytest.approx(2 * n * p_star, rel=1e-12)

    alpha_sdca = _sdca(loss, X, y, LAM)
    assert _rel(primal_from_dual(alpha_sdca, X, LAM), theta_closed) < 1e-6
    assert _rel(alpha_sdca, alpha_star) < 1e-6


def test_logistic_optimum_matches_sklearn_and_lbfgs(data):
    X, _, y = data
    n = X.shape[0]
    loss = LogisticLoss()
    clf = LogisticRegression(C=1.0 / (LAM * n), fit_intercept=False, tol=1e-12, max_iter=10_000)
    theta_sk = clf.fit(X, y).coef_.ravel()

    def objective(theta):
        z = X @ theta
        value = np.mean(np.logaddexp(0, -y * z)) + 0.5 * LAM * theta @ theta
        grad = X.T @ (-y / (1 + np.exp(y * z))) / n + LAM * theta
        return value, grad

    theta_lbfgs = minimize(objective, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
                           options={"gtol": 1e-13, "ftol": 1e-15, "maxiter": 10_000}).x
    assert _rel(theta_lbfgs, theta_sk) < 1e-6

    alpha_star = loss.optimal_dual(X @ theta_sk, y)
    np.testing.assert_allclose(alpha_star, y / (1 + np.exp(y * (X @ theta_sk))), rtol=1e-12)
    assert np.all((alpha_star * y > 0) & (alpha_star * y < 1))
    assert _rel(primal_from_dual(alpha_star, X, LAM), theta_sk) < 1e-6
    assert 0 <= duality_gap(alpha_star, X, y, loss, LAM) < 1e-12

    # SDCA with the spec's one-Newton-step update converges to the same optimum
    alpha_sdca = _sdca(loss, X, y, LAM, box_eps=1e-4)
    assert _rel(primal_from_dual(alpha_sdca, X, LAM), theta_sk) < 1e-6
    assert primal_objective(theta_sk, X, y, loss, LAM) == pytest.approx(
        -dual_objective(alpha_sdca, X, y, loss, LAM), rel=1e-10)


def test_hinge_optimum_matches_linear_svc(data):
    X, _, y = data
    n = X.shape[0]
    loss = HingeLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConvergenceWarning would invalidate the reference
        svc = LinearSVC(C=1.0 / (LAM * n), loss="hinge", dual=True, fit_intercept=False,
                        tol=1e-10, max_iter=100_000, random_state=0).fit(X, y)
    theta_sk = svc.coef_.ravel()

    alpha = _sdca(loss, X, y, LAM, box_eps=0.0)
    assert duality_gap(alpha, X, y, loss, LAM) < 1e-12
    assert np.all((alpha * y >= 0) & (alpha * y <= 1))
    theta = primal_from_dual(alpha, X, LAM)
    assert _rel(theta, theta_sk) < 1e-6
    # the sklearn optimum closes the gap against our dual optimum
    p_sk = primal_objective(theta_sk, X, y, loss, LAM)
    assert -1e-14 <= p_sk + dual_objective(alpha, X, y, loss, LAM) < 1e-10
    # KKT: alpha y = 1 inside the margin, 0 outside
    margins = y * (X @ theta)
    np.testing.assert_allclose((alpha * y)[margins < 1 - 1e-6], 1.0)
    np.testing.assert_allclose((alpha * y)[margins > 1 + 1e-6], 0.0, atol=1e-12)


def test_hinge_box_eps_leaves_small_gap_floor(data):
    X, _, y = data
    alpha = _sdca(HingeLoss(), X, y, LAM, box_eps=1e-4, max_epochs=200)
    gap = duality_gap(alpha, X, y, "hinge", LAM)
    assert 0 < gap < 1e-3  # the projection keeps alpha*y away from 0 and 1


# ---------------------------------------------------------------------------
# pointwise identities
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOSS_NAMES)
@settings(max_examples=200, deadline=None)
@given(z=finite, y_pm=labels_pm, y_real=finite)
def test_value_matches_spec_formula(name, z, y_pm, y_real):
    y = y_real if name == "squared" else y_pm
    assert float(get_loss(name).value(z, y)) == pytest.approx(_loss(name, z, y), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("name", LOSS_NAMES)
@settings(max_examples=200, deadline=None)
@given(z=st.floats(-20, 20), y_pm=labels_pm, y_real=st.floats(-5, 5))
def test_derivatives_match_finite_differences(name, z, y_pm, y_real):
    y = y_real if name == "squared" else y_pm
    loss = get_loss(name)
    h = 1e-5
    if name == "hinge" and abs(1 - y * z) < 10 * h:
        return  # kink
    fd = (_loss(name, z + h, y) - _loss(name, z - h, y)) / (2 * h)
    assert float(loss.derivative(z, y)) == pytest.approx(fd, rel=1e-6, abs=1e-8)
    if name != "hinge":
        fd2 = (float(loss.derivative(z + h, y)) - float(loss.derivative(z - h, y))) / (2 * h)
        assert float(loss.second_derivative(z, y)) == pytest.approx(fd2, rel=1e-5, abs=1e-8)


def test_hinge_has_no_second_derivative():
    with pytest.raises(NotImplementedError):
        HingeLoss().second_derivative(0.0, 1.0)


@pytest.mark.parametrize("name", LOSS_NAMES)
@settings(max_examples=60, deadline=None)
@given(p=st.floats(0.01, 0.99), y_pm=labels_pm, y_real=st.floats(-3, 3), u_real=st.floats(-3, 3))
def test_conjugate_is_numerical_supremum(name, p, y_pm, y_real, u_real):
    """loss*(u) = sup_z (u z - loss(z)), checked by 1-D maximisation."""
    loss = get_loss(name)
    if name == "squared":
        y, u = y_real, u_real
    else:
        y, u = y_pm, -p * y_pm  # interior of the domain: -u*y = p in (0, 1)
    if name == "hinge":
        # piecewise linear: the supremum is attained at the kink z = y
        numeric = max(u * z - _loss(name, z, y) for z in (y, y - 50, y + 50))
    else:
        res = minimize_scalar(lambda z: -(u * z - _loss(name, z, y)), bracket=(-1, 1),
                              options={"xtol": 1e-12})
        numeric = -res.fun
    assert float(loss.conjugate(u, y)) == pytest.approx(numeric, abs=1e-9)


@pytest.mark.parametrize("name", LOSS_NAMES)
@settings(max_examples=300, deadline=None)
@given(z=finite, a=st.floats(-2, 2), y_pm=labels_pm, y_real=finite)
def test_fenchel_young(name, z, a, y_pm, y_real):
    """loss(z) + loss*(u) >= u z, with equality at u = loss'(z)."""
    y = y_real if name == "squared" else y_pm
    loss = get_loss(name)
    u = -a
    lhs = float(loss.value(z, y)) + float(loss.conjugate(u, y))
    assert lhs >= u * z - 1e-9 * (1 + abs(u * z))
    u_star = float(loss.derivative(z, y))
    lhs_star = float(loss.value(z, y)) + float(loss.conjugate(u_star, y))
    assert lhs_star == pytest.approx(u_star * z, abs=1e-9 * (1 + abs(u_star * z)))
    # dual_term is the conjugate at -alpha, as tabulated in the spec
    assert float(loss.dual_term(a, y)) == pytest.approx(_dual_term(name, a, y), abs=1e-12)
    assert float(loss.optimal_dual(z, y)) == -u_star


def test_logistic_dual_term_edges_and_domain():
    loss = LogisticLoss()
    np.testing.assert_array_equal(loss.dual_term([0.0, 1.0, -1.0, 0.0], [1, 1, -1, -1]), 0.0)
    assert np.all(np.isinf(loss.dual_term([-1e-12, 1 + 1e-12, 0.5], [1, 1, -1])))
    assert np.all(np.isinf(HingeLoss().dual_term([-1e-12, 1 + 1e-12], [1, 1])))


def test_logistic_is_numerically_stable():
    loss = LogisticLoss()
    z = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    y = np.ones_like(z)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        value = loss.value(z, y)
        d1 = loss.derivative(z, y)
        d2 = loss.second_derivative(z, y)
    np.testing.assert_allclose(value, [1000.0, 40.0, math.log(2), math.exp(-40), 0.0], rtol=1e-12, atol=0)
    np.testing.assert_allclose(d1, [-1.0, -1.0, -0.5, -math.exp(-40), 0.0], rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(d2)) and d2[2] == 0.25
    assert LogisticLoss.smoothness == 0.25 and LogisticLoss().mu == 4.0


def test_constants_and_names():
    assert SquaredLoss().smoothness == 1.0 and SquaredLoss().mu == 1.0
    assert math.isinf(HingeLoss().smoothness) and HingeLoss().mu == 0.0
    for alias, cls in [("squared", SquaredLoss), ("ridge", SquaredLoss), ("Ridge", SquaredLoss),
                       ("logistic", LogisticLoss), ("log", LogisticLoss), ("hinge", HingeLoss)]:
        loss = get_loss(alias)
        assert isinstance(loss, cls) and get_loss(loss) is loss
    assert get_loss("log").name == "logistic" and get_loss("ridge").name == "squared"
    with pytest.raises(ValidationError, match="squared"):
        get_loss("huber")


# ---------------------------------------------------------------------------
# dual coordinate step (spec 000 section 2.1) against brute force
# ---------------------------------------------------------------------------

step_args = dict(alpha=st.floats(-3, 3), y=labels_pm, m=st.floats(-5, 5), s=st.floats(1e-3, 50))


def _subproblem(name, zeta, alpha, y, m, s):
    return _dual_term(name, alpha + zeta, y) + m * zeta + 0.5 * s * zeta * zeta


@settings(max_examples=200, deadline=None)
@given(y_real=st.floats(-5, 5), **step_args)
def test_ridge_step_is_exact_minimiser(alpha, y, m, s, y_real):
    zeta = float(SquaredLoss().dual_coordinate_step(alpha, y_real, m, s))
    res = minimize_scalar(lambda t: _subproblem("squared", t, alpha, y_real, m, s),
                          bracket=(-1, 1), options={"xtol": 1e-12})
    f = lambda t: _subproblem("squared", t, alpha, y_real, m, s)  # noqa: E731
    # Brent locates a minimiser only to ~sqrt(machine eps); the value must be no worse
    assert zeta == pytest.approx(res.x, rel=1e-6, abs=1e-7)
    assert f(zeta) <= f(res.x) + 1e-13 * (1 + abs(f(res.x)))
    assert zeta == pytest.approx((y_real - m - alpha) / (1 + s), rel=1e-14)


@pytest.mark.parametrize("box_eps", [0.0, 1e-4, 0.05])
@settings(max_examples=200, deadline=None)
@given(**step_args)
def test_hinge_step_is_exact_box_minimiser(box_eps, alpha, y, m, s):
    loss = HingeLoss()
    zeta = float(loss.dual_coordinate_step(alpha, y, m, s, box_eps=box_eps))
    a_t = y * min(max(alpha * y, box_eps), 1 - box_eps)
    assert float(loss.project_dual(alpha, y, box_eps)) == a_t
    # feasible zeta keep p = (a_t + zeta) y in [box_eps, 1 - box_eps]
    lo, hi = sorted([y * box_eps - a_t, y * (1 - box_eps) - a_t])
    res = minimize_scalar(lambda t: _subproblem("hinge", t, a_t, y, m, s), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-12})
    candidates = [res.x, lo, hi]
    best = min(_subproblem("hinge", t, a_t, y, m, s) for t in candidates)
    assert lo - 1e-15 <= zeta <= hi + 1e-15
    assert _subproblem("hinge", zeta, a_t, y, m, s) <= best + 1e-10


@settings(max_examples=300, deadline=None)
@given(**step_args)
def test_logistic_step_is_one_projected_newton_step(alpha, y, m, s):
    loss = LogisticLoss()
    b = 1e-4
    zeta = float(loss.dual_coordinate_step(alpha, y, m, s, box_eps=b))
    a_t = y * min(max(alpha * y, b), 1 - b)
    p = a_t * y
    # Newton step of the subproblem at zeta = 0, derivatives by finite differences
    h = 1e-7 * min(p, 1 - p)
    f = lambda t: _subproblem("logistic", t, a_t, y, m, s)  # noqa: E731
    g_fd = (f(h) - f(-h)) / (2 * h)
    g = y * math.log(p / (1 - p)) + m
    assert g_fd == pytest.approx(g, rel=1e-5, abs=1e-5)
    hess = 1 / (p * (1 - p)) + s
    new_p = min(max(p - y * g / hess, b), 1 - b)
    assert zeta == pytest.approx(y * new_p - a_t, rel=1e-12, abs=1e-15)
    # the projected Newton step does not increase the subproblem
    assert f(zeta) <= f(0.0) + 1e-12 * (1 + abs(f(0.0)))


@settings(max_examples=50, deadline=None)
@given(**step_args)
def test_iterated_logistic_step_converges_to_argmin(alpha, y, m, s):
    loss = LogisticLoss()
    b = 1e-9
    a = float(loss.project_dual(alpha, y, b))
    start = a
    for _ in range(200):
        a += float(loss.dual_coordinate_step(a, y, m + s * (a - start), s, box_eps=b))
    lo, hi = sorted([y * b - start, y * (1 - b) - start])
    res = minimize_scalar(lambda t: _subproblem("logistic", t, start, y, m, s), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-12})
    f = lambda t: _subproblem("logistic", t, start, y, m, s)  # noqa: E731
    assert f(a - start) <= f(res.x) + 1e-9


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_step_is_vectorised(name):
    rng = np.random.default_rng(3)
    loss = get_loss(name)
    alpha, m = rng.normal(size=50), rng.normal(size=50)
    y = rng.choice([-1.0, 1.0], size=50)
    s = rng.uniform(0.01, 5, size=50)
    vec = loss.dual_coordinate_step(alpha, y, m, s, box_eps=1e-3)
    one = [float(loss.dual_coordinate_step(a, b, c, d, box_eps=1e-3)) for a, b, c, d in zip(alpha, y, m, s)]
    assert vec.shape == (50,)
    np.testing.assert_array_equal(vec, one)


def test_box_eps_validation_and_zero_norm_example():
    with pytest.raises(ValidationError, match="box_eps"):
        LogisticLoss().dual_coordinate_step(0.0, 1.0, 0.0, 1.0, box_eps=0.0)
    with pytest.raises(ValidationError, match="box_eps"):
        HingeLoss().dual_coordinate_step(0.0, 1.0, 0.0, 1.0, box_eps=0.5)
    # an all-zero example (s = 0, m = 0): the hinge subproblem is linear, go to the upper edge
    zeta = HingeLoss().dual_coordinate_step(np.array([0.0, 0.0]), np.array([1.0, -1.0]), 0.0, 0.0, box_eps=0.0)
    np.testing.assert_array_equal(zeta, [1.0, -1.0])
    assert np.isfinite(LogisticLoss().dual_coordinate_step(0.3, 1.0, 0.0, 0.0))


# ---------------------------------------------------------------------------
# objectives
# ---------------------------------------------------------------------------


def _random_feasible_alpha(name, y, rng):
    if name == "squared":
        return rng.normal(size=y.shape)
    return y * rng.uniform(0, 1, size=y.shape)


@pytest.mark.parametrize("name", LOSS_NAMES)
@pytest.mark.parametrize("seed", range(5))
def test_gap_nonnegative_and_equals_primal_plus_dual(name, seed, data):
    X, y = _labels(name, data)
    rng = np.random.default_rng(seed)
    alpha = _random_feasible_alpha(name, y, rng)
    gap = duality_gap(alpha, X, y, name, LAM)
    theta = primal_from_dual(alpha, X, LAM)
    p = primal_objective(theta, X, y, name, LAM)
    d = dual_objective(alpha, X, y, name, LAM)
    assert gap >= 0
    assert gap == pytest.approx(p + d, rel=1e-10, abs=1e-12)
    assert gap_public(alpha, X.T @ alpha, X, y, name, LAM) == pytest.approx(gap, rel=1e-10, abs=1e-12)
    # independent re-computation of both objectives
    n = X.shape[0]
    p_ref = np.mean([_loss(name, zi, yi) for zi, yi in zip(X @ theta, y)]) + LAM / 2 * theta @ theta
    d_ref = (np.mean([_dual_term(name, a, yi) for a, yi in zip(alpha, y)])
             + np.sum((X.T @ alpha) ** 2) / (2 * LAM * n * n))
    assert p == pytest.approx(p_ref, rel=1e-12)
    assert d == pytest.approx(d_ref, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_sparse_and_dense_agree(name, data):
    X, y = _labels(name, data)
    Xs = sp.csr_matrix(X)
    rng = np.random.default_rng(1)
    alpha = _random_feasible_alpha(name, y, rng)
    theta = rng.normal(size=X.shape[1])
    v = rng.normal(size=X.shape[1])
    for fn, args in [(primal_objective, (theta,)), (dual_objective, (alpha,)), (duality_gap, (alpha,))]:
        assert fn(*args, Xs, y, name, LAM) == pytest.approx(fn(*args, X, y, name, LAM), rel=1e-12)
    assert gap_public(alpha, v, Xs, y, name, LAM) == pytest.approx(gap_public(alpha, v, X, y, name, LAM), rel=1e-12)
    np.testing.assert_allclose(primal_from_dual(alpha, Xs, LAM), primal_from_dual(alpha, X, LAM), rtol=1e-12)


def test_infeasible_dual_gives_inf_and_shapes_are_checked(data):
    X, _, y = data
    alpha = y * 1.5
    assert math.isinf(dual_objective(alpha, X, y, "hinge", LAM))
    assert math.isinf(duality_gap(alpha, X, y, "logistic", LAM))
    with pytest.raises(ValidationError, match="alpha"):
        duality_gap(alpha[:-1], X, y, "hinge", LAM)
    with pytest.raises(ValidationError, match="theta"):
        primal_objective(np.zeros(X.shape[1] + 1), X, y, "hinge", LAM)
    with pytest.raises(ValidationError, match="y"):
        primal_objective(np.zeros(X.shape[1]), X, y[:-1], "hinge", LAM)
