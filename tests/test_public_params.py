"""A mistake in a public parameter costs no privacy (issue 18, item 4).

Every registered solver checks every public setting it reads
(``EstimatorSolver.check_params``) before the estimator calibrates noise or
reserves anything on a ledger.  For every (solver, bad public parameter) case
the fit must raise one clear :class:`~fastdp.exceptions.ValidationError` and
leave a file ledger byte-for-byte unchanged (same spent epsilon, same
records).  Before the fix, 16 of the issue's 18 cases were charged: the
checks ran inside ``solver.run``, after the reservation.
"""

import pathlib
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.privacy.events import GaussianEvent
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.solvers.registry import DOCUMENTED_SOLVER_NAMES, get_estimator_solver

#: A ``solver_options`` value each option must refuse (with the companion
#: settings under which the option is read).
BAD_OPTIONS = {
    "box_eps": {"box_eps": -0.1}, "released": {"released": "both"},
    "sigma_prime": {"sigma_prime": 0.0}, "seq_sensitivity": {"seq_sensitivity": "tight"},
    "learning_rate": {"learning_rate": -1.0}, "reg": {"reg": "l2"},
    "mechanism": {"mechanism": "gauss"}, "tol": {"tol": -1.0}, "max_iter": {"max_iter": -1},
    "n_iter": {"n_iter": 10**12}, "step_size": {"step_size": -1.0},
    "step_multiplier": {"step_multiplier": 0.0}, "momentum": {"momentum": "fast"},
    "smoothness": {"smoothness": 0.0}, "allocation": {"allocation": "optimal"},
    "alter_horizon": {"allocation": "prop42", "alter_horizon": "yes"},
    "initial_error": {"allocation": "prop42", "initial_error": -1.0},
    "bound_constants": {"allocation": "prop42", "bound_constants": "tight"},
    "noise_convention": {"noise_convention": "fast"}, "row_l1_bound": {"row_l1_bound": -1.0},
    "form": {"form": "fast"}, "n1": {"n1": 0}, "n1_rounding": {"n1_rounding": "round"},
    "p": {"p": 0}, "horizon_rule": {"allocation": "prop42", "horizon_rule": "fast"},
    "c_obj": {"c_obj": -1.0}, "grad_share": {"grad_share": 2.0}, "eta0": {"eta0": 0.0},
    "max_it": {"max_it": 10**12}, "armijo_alpha": {"armijo_alpha": 1.5}, "beta": {"beta": 1.0},
    "tau": {"tau": 0}, "varsigma": {"varsigma": 0.0}, "eta0_cap": {"eta0_cap": "never"},
    "armijo_scale": {"armijo_scale": "sum"}, "svt_analysis": {"svt_analysis": "loose"},
    "init": {"init": "ones"}, "init_scale": {"init_scale": -1.0},
    "epsilon_iter": {"epsilon_iter": -1.0}, "epsilon_bt": {"epsilon_bt": 0.0},
    "rho_grad": {"rho_grad": -1.0}, "rho_bt": {"rho_bt": 0.0}, "noise": {"noise": "cauchy"},
    "xi": {"xi": -1.0}, "phi_max": {"phi_max": 0.5}, "phi_min": {"phi_min": 1.5},
    "psi": {"psi": 1.0}, "budget_rule": {"budget_rule": "always"}, "zeta": {"zeta": 1.0},
    "stop_when_ls_unaffordable": {"stop_when_ls_unaffordable": "yes"},
    "n_candidates": {"n_candidates": 1}, "step_max": {"step_max": 0.0}, "gamma": {"gamma": 0.0},
    "step_update_period": {"step_update_period": 0},
    "step_update_factor": {"step_update_factor": 0.0},
}

#: Options a solver accepts but never reads when run by an estimator (so no
#: value is a mistake): the accelerated options are shared by the four
#: methods; ``n_features`` comes from the data's schema.
IGNORED = {
    "dp_gd_laplace": {"allocation", "alter_horizon", "initial_error", "bound_constants",
                      "n_features", "n1_rounding", "horizon_rule"},
    "dp_heavy_ball": {"allocation", "alter_horizon", "initial_error", "bound_constants",
                      "n_features", "n1_rounding", "horizon_rule"},
    "dp_nesterov": {"n_features", "n1_rounding"},
    "dp_masg": {"n_features"},
}

#: Estimator parameters (not ``solver_options``) each solver must refuse.
BAD_ESTIMATOR_PARAMS = {
    "clip": {"clip": -1.0},
    "clip_nan": {"clip": float("nan")},
    "clip_list": {"clip": [1.0]},
    "num_threads": {"num_threads": 0},
    "num_threads_str": {"num_threads": "fixed"},
    "num_threads_huge": {"num_threads": 10**12},
}
#: Solvers that read the estimator's ``sampler`` (the others ignore it).
SAMPLER_SOLVERS = ("dpscd", "seq_dpscd", "dpsgd", "dp_blsgd", "dp_blsgd_adaptive",
                   "dp_blsgd_ac", "dp_blgd", "dp_gd_laplace", "dp_heavy_ball", "dp_nesterov",
                   "dp_masg")
PRIVATE_SOLVERS = tuple(n for n in DOCUMENTED_SOLVER_NAMES if n not in ("auto", "sgd", "exact"))
_ACCELERATED = ("dp_gd_laplace", "dp_heavy_ball", "dp_nesterov", "dp_masg")


def _data(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] > 0, 1, 0)


def _estimator_for(name):
    solver = get_estimator_solver(name)
    return DPLogisticRegression if "logistic" in solver.losses else DPRidge


def _assert_refused_for_free(make_estimator, X, y, tmp_path, match=None):
    """The fit raises ValidationError and the file ledger is unchanged."""
    path = pathlib.Path(tempfile.mkdtemp(dir=tmp_path)) / "ledger.json"
    ledger = PrivacyLedger(50.0, 1e-3, path=str(path))
    ledger.charge(GaussianEvent(5.0), "an earlier fit")
    before_bytes = path.read_bytes()
    before_spent = PrivacyLedger.load(str(path)).spent()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError, match=match):
            make_estimator(ledger).fit(X, y)
    assert path.read_bytes() == before_bytes
    reloaded = PrivacyLedger.load(str(path))
    assert reloaded.spent() == before_spent
    assert len(reloaded.entries) == 1 and not reloaded.pending()


def _option_cases():
    cases = []
    for name in PRIVATE_SOLVERS:
        for key in get_estimator_solver(name).options:
            if key in IGNORED.get(name, ()):
                continue
            cases.append(pytest.param(name, BAD_OPTIONS[key], id=f"{name}-{key}"))
    return cases


def test_every_option_of_every_solver_has_a_bad_value_case():
    """A new option must come with a case here (or be listed as ignored)."""
    for name in PRIVATE_SOLVERS:
        for key in get_estimator_solver(name).options:
            assert key in BAD_OPTIONS or key in IGNORED.get(name, ()), (name, key)


@pytest.mark.parametrize("name, options", _option_cases())
def test_bad_solver_option_is_refused_before_the_ledger(name, options, tmp_path):
    X, y = _data()
    extra = {"sampler": "fixed"} if name in _ACCELERATED else {}
    _assert_refused_for_free(
        lambda ledger: _estimator_for(name)(solver=name, solver_options=options, epochs=2,
                                            ledger=ledger, random_state=0, **extra),
        X, y, tmp_path)


@pytest.mark.parametrize("name", PRIVATE_SOLVERS)
@pytest.mark.parametrize("case", sorted(BAD_ESTIMATOR_PARAMS))
def test_bad_estimator_parameter_is_refused_before_the_ledger(name, case, tmp_path):
    X, y = _data()
    _assert_refused_for_free(
        lambda ledger: _estimator_for(name)(solver=name, epochs=2, ledger=ledger,
                                            random_state=0, **BAD_ESTIMATOR_PARAMS[case]),
        X, y, tmp_path)


@pytest.mark.parametrize("name", SAMPLER_SOLVERS)
def test_unknown_sampler_is_refused_before_the_ledger(name, tmp_path):
    X, y = _data()
    _assert_refused_for_free(
        lambda ledger: _estimator_for(name)(solver=name, sampler="bogus", batch_size=10,
                                            epochs=2, ledger=ledger),
        X, y, tmp_path, match="(?i)sampler")


@pytest.mark.parametrize("make, match", [
    # the issue's cases
    (lambda led: DPLogisticRegression(solver="dpagd", solver_options={"grad_share": 2},
                                      ledger=led), "grad_share"),
    (lambda led: DPLogisticRegression(solver="dp_blsgd_adaptive", sampler="fixed", ledger=led),
     "Poisson"),
    (lambda led: DPLogisticRegression(solver="output", solver_options={"tol": -1}, ledger=led),
     "tol"),
    (lambda led: DPRidge(solver="dpscd", solver_options={"box_eps": -0.1}, ledger=led),
     "box_eps"),
    # samplers a solver cannot use, settings that depend on other settings
    (lambda led: DPLogisticRegression(solver="seq_dpscd", sampler="poisson", ledger=led),
     "fixed-size"),
    (lambda led: DPLogisticRegression(solver="dp_blgd", sampler="shuffle", ledger=led),
     "Poisson"),
    (lambda led: DPLogisticRegression(solver="dp_nesterov", sampler="poisson", batch_size=10,
                                      ledger=led), "fixed"),
    (lambda led: DPLogisticRegression(solver="dpsgd", alpha=1.0,
                                      solver_options={"learning_rate": 2.0}, ledger=led),
     "overshoots"),
    (lambda led: DPLogisticRegression(solver="dp_nesterov", solver_options={"form": "smoothing"},
                                      sampler="fixed", ledger=led), "smoothing"),
    (lambda led: DPRidge(solver="dp_gd_laplace", clip=None, sampler="fixed", ledger=led),
     "bounded gradient"),
    (lambda led: DPLinearSVC(solver="dpscd", solver_options={"box_eps": 0.5}, ledger=led),
     "box_eps"),
    # the number of steps or candidates is public and bounded before anything runs
    (lambda led: DPLogisticRegression(solver="dp_gd_laplace", sampler="fixed",
                                      solver_options={"n_iter": 10**8}, ledger=led), "steps"),
    (lambda led: DPLogisticRegression(solver="dpagd", solver_options={"n_candidates": 10**12},
                                      ledger=led), "n_candidates"),
])
def test_issue_cases_cost_nothing(make, match, tmp_path):
    X, y = _data()
    _assert_refused_for_free(make, X, y, tmp_path, match=match)


def test_multinomial_settings_are_checked_before_the_ledger(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(90, 4))
    y = np.arange(90) % 3
    _assert_refused_for_free(
        lambda led: DPLogisticRegression(solver="dpsgd", solver_options={"learning_rate": -1},
                                         ledger=led), X, y, tmp_path, match="learning_rate")
    _assert_refused_for_free(
        lambda led: DPLogisticRegression(solver="dpsgd", clip=-1.0, ledger=led),
        X, y, tmp_path, match="clip")


def test_valid_settings_are_still_charged(tmp_path):
    """Control: the checks refuse mistakes only; a valid fit is charged once."""
    X, y = _data()
    path = tmp_path / "ledger.json"
    ledger = PrivacyLedger(50.0, 1e-3, path=str(path))
    for name in ("dpscd", "dpagd", "dpsgd", "dp_blsgd_adaptive"):  # add/remove: one ledger
        _estimator_for(name)(solver=name, epochs=2, ledger=ledger, random_state=0).fit(X, y)
    assert len(PrivacyLedger.load(str(path)).entries) == 4


NEVER_ENDING = [("dp_blsgd_adaptive", {"epsilon_bt": 1e30}), ("dp_blgd", {"rho_grad": 1e-30}),
                ("dpagd", {"grad_share": 1e-12})]


def test_filter_settings_that_would_never_end_are_refused_quickly(tmp_path):
    """A tiny per-call budget next to the filter's cap used to loop for ever after
    the charge (epsilon_bt=1e30: the line search never affordable, ~1e60 free
    gradient-only iterations).  Now refused before the ledger; run in a child
    process (one for the three cases) so that a regression fails instead of
    hanging the suite."""
    ledger_path = str(tmp_path / "ledger.json")
    code = textwrap.dedent(f"""
        import numpy as np, warnings
        warnings.simplefilter("ignore")
        from fastdp.exceptions import ValidationError
        from fastdp.linear_model import DPLogisticRegression
        from fastdp.privacy.ledger import PrivacyLedger
        rng = np.random.default_rng(0)
        X = rng.normal(size=(60, 4)); y = np.where(X[:, 0] > 0, 1, 0)
        ledger = PrivacyLedger(50.0, 1e-3, path={ledger_path!r})
        for name, options in {NEVER_ENDING!r}:
            try:
                DPLogisticRegression(solver=name, solver_options=options, epochs=2,
                                     ledger=ledger).fit(X, y)
            except ValidationError as exc:
                print("refused:", name, exc)
        print("entries:", len(PrivacyLedger.load({ledger_path!r}).entries))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for name, _ in NEVER_ENDING:
        assert f"refused: {name} " in done.stdout, done.stdout
    assert done.stdout.count("private calls") == len(NEVER_ENDING)
    assert "entries: 0" in done.stdout
