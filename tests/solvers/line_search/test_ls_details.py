"""Typed details of the adaptive line-search runs and DP-AGD (issue 19 item 5).

``result.details`` is a frozen dataclass per run kind; ``result.extra`` is its
read-only view with the keys the free dict had, in the same order (the key
lists below are those of the dicts before the change); what depends on the
budget (a zCDP filter's report, DP-AGD's running budget) is an optional
sub-record whose keys appear only when it is there.  Numbers are checked
against closed forms (Bun & Steinke's ρ of (ε, δ)) and the run's own event.
"""

import dataclasses
import math

import pytest

from fastdp.linear_model import DPLogisticRegression
from fastdp.privacy.zcdp import zcdp_of
from fastdp.solvers import line_search as LS
from fastdp.solvers._result import FLATTEN, DetailsView

ADAPTIVE_KEYS = ["etas", "eta0_trace", "rho_grad_trace", "budget_bt_trace", "c_grad_trace",
                 "cheb", "n_gradient_calls", "n_line_searches", "n_refinements",
                 "epsilon_spent", "best_order", "epsilon_target", "delta", "is_guarantee",
                 "rho_grad", "budget_bt", "noise", "c_grad", "c_obj", "eta0", "theta_bar",
                 "settings", "remaining_budget"]
FILTER_KEYS = ["budget_filter", "rho_cap", "rho_consumed", "epsilon_cap", "consumed_event"]
AGD_KEYS = ["etas", "rho_grad", "n_refinements", "epsilon_nmax"]


def bun_steinke(epsilon, delta):
    """ρ solving ρ + 2 sqrt(ρ log(1/δ)) = ε (a quadratic in sqrt(ρ))."""
    log_inv = math.log(1.0 / delta)
    root = -math.sqrt(log_inv) + math.sqrt(log_inv + epsilon)
    return root * root


# ------------------------------------------------------------------ the view


@dataclasses.dataclass(frozen=True)
class _Part:
    b: float
    c: float


@dataclasses.dataclass(frozen=True)
class _Details:
    a: int
    part: object = dataclasses.field(default=None, metadata=FLATTEN)
    d: str = "last"


def test_view_flattens_an_optional_part_in_place():
    assert list(DetailsView(_Details(1))) == ["a", "d"]
    view = DetailsView(_Details(1, _Part(2.0, 3.0)))
    assert list(view.items()) == [("a", 1), ("b", 2.0), ("c", 3.0), ("d", "last")]
    assert len(view) == 4 and "b" in view and "part" not in view
    with pytest.raises(KeyError):
        view["part"]
    with pytest.raises(TypeError):
        view["a"] = 2   # read-only


def test_view_refuses_two_keys_of_one_name():
    @dataclasses.dataclass(frozen=True)
    class Clash:
        b: int
        part: object = dataclasses.field(default=None, metadata=FLATTEN)

    assert list(DetailsView(Clash(1))) == ["b"]
    with pytest.raises(ValueError, match="'b'"):
        DetailsView(Clash(1, _Part(2.0, 3.0)))


# ------------------------------------------------------------------ the runs


def test_adaptive_run_reports_typed_details(problem):
    X, y = problem
    res = LS.dp_blsgd(X, y, epsilon=0.5, delta=1e-6, random_state=2)
    assert isinstance(res.details, LS.AdaptiveDetails) and res.details.filter is None
    assert list(res.extra) == ADAPTIVE_KEYS
    assert sorted(res.diagnostics) == ["batch_sizes", "gradient_evaluations", "n_noise_draws",
                                       "objective_evaluations"]
    d = res.details
    assert res.extra["etas"] is d.etas and len(d.etas) == res.n_iter
    assert d.n_gradient_calls == res.n_iter + sum(d.cheb.values())   # CHEB draws one more
    assert len(res.diagnostics["batch_sizes"]) == res.n_iter
    assert 0 < d.epsilon_spent <= 0.5 and d.is_guarantee
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.epsilon_spent = 0.0
    with pytest.raises(AttributeError):
        res.extra.update(epsilon_spent=0.0)   # no free dict to edit any more


@pytest.mark.parametrize("fn", [LS.dp_blsgd, LS.dp_blgd])
def test_filtered_adaptive_run_adds_the_filter_report(problem, fn):
    X, y = problem
    res = fn(X, y, epsilon=0.5, delta=1e-6, budget_filter="zcdp", random_state=2)
    report = res.details.filter
    assert isinstance(report, LS.FilterReport)
    assert list(res.extra) == ADAPTIVE_KEYS + FILTER_KEYS
    assert res.extra["rho_consumed"] == report.rho_consumed
    assert zcdp_of(report.consumed_event) == pytest.approx(report.rho_consumed, rel=1e-12)
    assert 0 < report.rho_consumed <= report.rho_cap and report.budget_filter == "zcdp"


def test_dp_agd_reports_its_running_budget(problem):
    X, y = problem
    res = LS.dp_agd(X, y, epsilon=0.5, delta=1e-6, random_state=5)
    d = res.details
    assert isinstance(d, LS.AgdDetails) and d.filter is None
    assert list(res.extra) == AGD_KEYS + ["rho_total", "rho_left"]
    assert list(res.diagnostics) == ["n_noise_draws"]
    assert d.budget.rho_total == pytest.approx(bun_steinke(0.5, 1e-6), rel=1e-12)
    # what was spent is the zCDP cost of the calls the event composes
    spent = d.budget.rho_total - d.budget.rho_left
    assert 0 < spent <= d.budget.rho_total
    assert zcdp_of(res.event) == pytest.approx(spent, rel=1e-9)
    assert d.epsilon_nmax == pytest.approx(0.5 / (2.0 * 60))   # ε / (2 splits)
    assert len(d.etas) == res.n_iter


@pytest.mark.parametrize("solver, kind, keys", [
    ("dpagd", LS.AgdDetails, AGD_KEYS + FILTER_KEYS),
    ("dp_blsgd_adaptive", LS.AdaptiveDetails, ADAPTIVE_KEYS + FILTER_KEYS),
    ("dp_blgd", LS.AdaptiveDetails, ADAPTIVE_KEYS + FILTER_KEYS),
])
def test_estimator_runs_report_the_cap_they_ran_under(problem, solver, kind, keys):
    X, y = problem
    model = DPLogisticRegression(solver=solver, epsilon=1.0, random_state=0, epochs=3).fit(X, y)
    res = model.solver_result_
    assert isinstance(res.details, kind) and list(res.extra) == keys
    assert res.details.filter.rho_consumed <= res.details.filter.rho_cap
    assert res.extra["rho_cap"] == res.details.filter.rho_cap


def test_with_details_makes_a_new_result(problem):
    X, y = problem
    res = LS.dp_agd(X, y, epsilon=0.5, delta=1e-6, random_state=5, max_iter=3)
    other = res.with_details(budget=None)
    assert list(other.extra) == AGD_KEYS and list(res.extra) == AGD_KEYS + ["rho_total", "rho_left"]
    assert other.coef is res.coef and other.event == res.event
