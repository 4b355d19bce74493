"""Accounted private hyperparameter search.

:class:`DPHyperparameterSearch` tunes a fastdp estimator on private data and
charges the *whole* search -- every candidate trained and the selection of the
best one -- to the privacy accountant (and to a ledger). scikit-learn's
``GridSearchCV`` over DP estimators is **not** accounted: it releases every
candidate's validation score computed without noise and its cost is not
bounded by the per-fit ε.

Algorithm (Papernot & Steinke, ICLR 2022; Liu & Talwar, STOC 2019)
------------------------------------------------------------------
1. Split the rows by public randomness into a training part and a validation
   part (each row goes to validation with probability ``validation_fraction``,
   by default a rule of the public n: :func:`auto_validation_fraction`).
2. Draw the number of candidates K from a public distribution
   (``repetitions``), independently of the data.
3. K times: draw a setting uniformly from the public grid, fit the estimator
   on the training part with the per-candidate budget (``epsilon=ε_c``,
   ``delta``, calibrated by the estimator itself), count its correct
   validation predictions (classifiers; regressors: the sum of squared errors
   clipped to [0, 1]) and add Gaussian noise (sensitivity 1).
4. Release only the candidate with the best noisy score.

Privacy
-------
* Private: the rows ``(x_i, y_i)``; n and the feature count are public, and
  so is the set of class labels (as for the estimators).
* Adjacency: that of the candidate estimator (add/remove for the default
  Poisson sampler, replace-one for the fixed-size and shuffling samplers); the
  score's count changes by at most 1 under either.
* Parallel composition (``split_accounting="parallel"``, the default): a
  candidate costs the pointwise **maximum** of its fit's and its score's Rényi
  curves, not their sum (:class:`~fastdp.privacy.events.ParallelComposedEvent`).
  The argument: the coins c_i (validation or not) are i.i.d., drawn before
  anything else and independent of the data. Couple the coins of neighbouring
  datasets D ~ D': shared rows keep their coins; under add/remove the extra
  row has its own coin (the same law, independent of the others: nothing else
  moves); under replace-one the replaced slot keeps its coin. For every value
  of the coins, D and D' then differ in exactly one part, where the parts are
  neighbours under the same relation, and are identical in the other. If the
  differing row is in the training part, the fits differ (Rényi divergence of
  order α at most the fit's ε_fit(α)) and the score, given the fitted model,
  reads identical validation rows: by the chain rule the pair (model, score)
  diverges by at most ε_fit(α). If it is in the validation part, the fits
  have the same law and the score differs by at most ε_score(α) given any
  model. So conditionally on the coins one candidate is max(ε_fit, ε_score)
  -RDP, at every order, in both directions. The search runs every candidate
  on the **same** split; conditionally on the coins it is Papernot & Steinke's
  repetition of that base mechanism, so their theorem gives the conditional
  bound of the whole search from the max curve. The released output is the
  mixture over the coins of these conditional outputs, with weights that do
  not depend on the data (the same under D and D'), and the Rényi divergence
  is jointly quasi-convex, D_α(Σ w_j P_j ‖ Σ w_j Q_j) ≤ max_j D_α(P_j ‖ Q_j):
  the conditional bound holds for the search itself. The argument needs the
  per-row independence of the coins under add/remove (a split into parts of
  fixed sizes would move other rows when one is added); this search's split
  has it. The sizes of the two parts are treated as public, as the estimators
  treat n. :func:`candidate_event` builds the parallel event only when the fit
  and the score declare the same add/remove or replace-one adjacency, and
  composes them otherwise; ``split_accounting="composed"`` composes them
  always (sound whatever the split; the former accounting).
* Score noise (``score_share="auto"``, the default): the score's Gaussian is
  matched under the fits' curve (:func:`matched_score_sigma`: the largest ρ
  with α·ρ at or below the candidates' curve at every order), so under
  parallel composition the score costs nothing beyond its fit, and it is as
  precise as that allows.
* Accounted: the :class:`~fastdp.privacy.events.RepeatedSelectionEvent` of
  the search (:mod:`fastdp.privacy.tuning`: Papernot & Steinke Thm 2/6; Liu &
  Talwar for the geometric over pure candidates) over the candidates'
  parallel events, converted to ε at ``delta`` by the RDP accountant.
  ``epsilon_`` is that total; the per-candidate ``candidate_epsilon_`` is NOT
  the guarantee.
* Released: ``best_estimator_``, ``best_params_``, ``best_score_``. The number
  of candidates ``n_candidates_`` and anything about the losing candidates are
  diagnostics outside the guarantee (releasing K is not covered).
* Calibration: ε_c is the largest per-candidate budget (bisection) whose
  search total is at most ``epsilon``; the total is recomputed on the final
  event, so it never overshoots. Each candidate's event is planned *before*
  training by running the estimator's own ``fit`` on public placeholder data
  of the same shape with a ledger stand-in that captures the event the
  estimator reserves and stops the fit before anything is trained; after each
  real fit, the candidate's ``privacy_event_`` must equal the planned event.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.model_selection import ParameterGrid

from fastdp._validation import check_privacy_params, check_random_state, check_sparse_structure
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.events import (
    Adjacency,
    ComposedEvent,
    GaussianEvent,
    ParallelComposedEvent,
    RepeatedSelectionEvent,
)
from fastdp.privacy.ledger_entries import note_ledger_epsilon, settle_reservation
from fastdp.privacy.rdp import RdpAccountant
from fastdp.privacy.tuning import DISTRIBUTIONS, Repetitions

__all__ = ["DPHyperparameterSearch", "DEFAULT_PARAM_GRID", "RULE_STEP_FACTORS", "RULE_LOT_FACTOR",
           "rule_grid", "selection_standard_error", "SELECTION_ERROR_WARNING",
           "plan_candidate_event", "candidate_event", "matched_score_sigma",
           "auto_validation_fraction", "SPLIT_ACCOUNTING"]

#: The public grid used when ``param_grid=None`` and the estimator does not run
#: its default rule (a solver other than ``"auto"``, or ``solver_options`` set):
#: L2 regularisation and epochs, two parameters every fastdp estimator takes.
DEFAULT_PARAM_GRID = {"alpha": [1e-5, 1e-4, 1e-3, 1e-2], "epochs": [5, 10]}

MAX_GRID_SIZE = 1000
"""Most settings a search's ``param_grid`` may hold: every setting is planned
(a placeholder fit) at each step of the budget calibration, about a tenth of a
second each, so 1000 settings take minutes before anything trains."""

#: The default search around the default rule (``param_grid=None``, solver
#: ``"auto"``): the rule itself and its DP-SGD step times 3 and divided by 3,
#: each resolved at the candidates' own budget (docs/model-selection.md).
RULE_STEP_FACTORS = (1.0, 3.0, 1.0 / 3.0)
#: ... and a candidate with lots this many times larger and this many times fewer epochs
#: at the rule's total step (issue 32: the tuned grid's best point for small n).
RULE_LOT_FACTOR = 4

#: E[K] of the default search around the rule (3 settings; was 3 until the split was
#: accounted in parallel, docs/model-selection.md); a user grid keeps 10.
_RULE_EXPECTED_REPETITIONS = 2.0
_GRID_EXPECTED_REPETITIONS = 10.0


#: How a candidate's fit and score are accounted: ``"parallel"`` (the maximum of
#: their curves: they read the disjoint parts of a data-independent split) or
#: ``"composed"`` (their sum: sound whatever the split, looser).
SPLIT_ACCOUNTING = ("parallel", "composed")

#: ``validation_fraction="auto"``: 5 % of the rows, but at least this many
#: validation rows in expectation (at most 20 %); docs/model-selection.md,
#: "Spending the saving".
_AUTO_FRACTION = 0.05
_AUTO_MIN_VALIDATION_ROWS = 200
_AUTO_MAX_FRACTION = 0.2


def candidate_event(train, score, split_accounting="parallel"):
    """One candidate's event: its fit on the training part and its score on the validation part.

    The split is a coin per row, independent of the data and of everything
    else, and the fit reads only the training part and the score only the
    validation part (and the fitted model), so with ``"parallel"`` the
    candidate is the :class:`~fastdp.privacy.events.ParallelComposedEvent` of
    the two (its Rényi curve is the pointwise maximum of theirs). That
    argument (its docstring) holds for add/remove adjacency (the per-row coins
    are independent, so an added row brings its own coin) and for replace-one
    (the replaced slot keeps its coin); for any other relation, or when
    ``split_accounting="composed"``, the two events are composed (their sum,
    sound whatever the split).

    Parameters
    ----------
    train, score : DpEvent
        The fit's planned event and the score's Gaussian, under one adjacency.
    split_accounting : {"parallel", "composed"}

    Returns
    -------
    DpEvent
    """
    if split_accounting not in SPLIT_ACCOUNTING:
        raise ValidationError(
            f"split_accounting must be one of {SPLIT_ACCOUNTING}; got {split_accounting!r}.")
    adjacencies = {train.adjacency, score.adjacency}
    if (split_accounting == "parallel" and len(adjacencies) == 1
            and adjacencies <= {Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE}):
        return ParallelComposedEvent((train, score))
    return ComposedEvent((train, score))


def matched_score_sigma(trains, accountant=None):
    """The score's noise multiplier whose Gaussian curve lies under the fits' curve.

    The largest zCDP ρ whose curve α·ρ stays at or below the pointwise maximum
    of the planned fits' RDP curves at every order of the accountant's grid:
    ρ = min_α max_i ε_i(α)/α, σ = 1/√(2ρ). A candidate's cost is then the
    maximum of its fit's and its score's curves, which is the fit's curve at
    every order: under parallel composition the score is free at this σ, and
    a smaller σ would raise the cost. Only public quantities enter (the
    planned events, computed from the public shape and settings).

    Parameters
    ----------
    trains : sequence of DpEvent
        The candidates' planned training events.
    accountant : RdpAccountant, optional

    Returns
    -------
    float
    """
    accountant = RdpAccountant() if accountant is None else accountant
    curve = np.max([accountant.rdp_curve(t) for t in trains], axis=0)
    rho = float(np.min(curve / accountant.orders))
    if not (rho > 0.0 and math.isfinite(rho)):
        raise PrivacyAnalysisError(
            f"cannot match the score's noise to the candidates' curves (min RDP/order = {rho}).")
    return 1.0 / math.sqrt(2.0 * rho)


def auto_validation_fraction(n_samples):
    """``validation_fraction="auto"``: the share of rows that goes to the validation part.

    A rule of the public n only: 5 % of the rows, raised to 200 rows in
    expectation for small n (at most 20 %). Measured on the utility
    benchmark's sets (docs/model-selection.md), 5 % beat 10 % and 20 % at
    ε = 0.1 by 0.5–1.7 points and tied them within 0.3 at ε ≥ 1: under
    parallel composition the score is free but its noise and the sampling
    noise of a small validation part only blur the ranking of candidates that
    are close anyway, while every held-out row is lost to the fit. The floor
    of 200 rows (a standard error of at most 3.5 accuracy points) is a
    guard for small n, not measured (every benchmark set has n >= 6,500).

    Returns
    -------
    float
    """
    n = int(n_samples)
    if n < 1:
        raise ValidationError(f"n_samples must be >= 1; got {n_samples!r}.")
    return float(min(max(_AUTO_FRACTION, _AUTO_MIN_VALIDATION_ROWS / n), _AUTO_MAX_FRACTION))


def _runs_default_rule(estimator):
    """True when ``estimator`` trains with fastdp's default DP-SGD rule."""
    params = estimator.get_params(deep=False)
    return (params.get("solver") == "auto" and params.get("solver_options") is None
            and hasattr(estimator, "_loss"))


def rule_grid(estimator, n_samples, n_features, epsilon, n_classes=2):
    """The settings around the default rule for a candidate at ``epsilon``.

    Public quantities only: ``n_samples`` (rows of the training part), the
    candidate's ``epsilon``, the estimator's loss and its ``alpha``
    (``n_features``, d, is read by the rule's small-budget floor). The
    candidates spread along the directions where the rule was least certain
    on the corpus of issue 32 (docs/defaults.md, "Leave-one-dataset-out
    protocol"): the total step (the tuned grid's best point had 3 times or a
    third of the rule's), and, for a few hundred to a few thousand rows, fewer
    and larger lots:

    0. the rule itself (sets nothing: bit for bit the default fit at that budget);
    1. the DP-SGD step times 3 (:data:`RULE_STEP_FACTORS`);
    2. the step divided by 3;
    3. lots :data:`RULE_LOT_FACTOR` times larger (at most n/2) and that many times
       fewer epochs (at least 1), at the rule's total step ``H = eta C E n / L``
       (so ``eta`` grows by the lot factor times the epoch factor, kept below
       the loss's stability cap ``eta_max / C``, times K/2 for a multinomial fit).

    ``n_classes`` (the public label set's size) selects the multiclass rule
    of a multinomial fit (K >= 3 with the logistic loss).

    Returns
    -------
    list of dict
        One parameter dict per candidate, the rule first.
    """
    from fastdp.defaults import MAX_LEARNING_RATE, default_alpha, dpsgd_defaults

    multinomial = estimator._loss == "logistic" and int(n_classes) > 2
    loss = "multinomial" if multinomial else estimator._loss
    params = estimator.get_params(deep=False)
    width = int(n_features) + int(bool(params.get("fit_intercept", False)))  # as fit counts d
    rule = dpsgd_defaults(n_samples, epsilon, loss, int(n_classes), width)
    alpha = params.get("alpha", "auto")
    alpha = default_alpha(n_samples) if isinstance(alpha, str) else float(alpha)
    eta = min(rule["learning_rate"], 0.5 / alpha)   # as the estimator resolves it
    grid = [{} if f == 1.0 else {"solver_options": {"learning_rate": f * eta}}
            for f in RULE_STEP_FACTORS]
    n = int(n_samples)
    lot = max(1, min(RULE_LOT_FACTOR * rule["batch_size"], n // 2))
    epochs = max(1.0, float(round(rule["epochs"] / RULE_LOT_FACTOR)))
    if lot > rule["batch_size"] and math.isfinite(float(epsilon)):
        cap = MAX_LEARNING_RATE[loss] * (0.5 * int(n_classes) if multinomial else 1.0)
        big = eta * (lot / rule["batch_size"]) * (rule["epochs"] / epochs)
        grid.append({"batch_size": lot, "epochs": epochs,
                     "solver_options": {"learning_rate": min(big, cap / rule["clip"],
                                                             0.5 / alpha)}})
    return grid


#: Standard error of a candidate's noisy validation accuracy above which the
#: search warns that it cannot tell its candidates apart (see
#: :func:`selection_standard_error` and docs/model-selection.md).
SELECTION_ERROR_WARNING = 0.025


def selection_standard_error(n_validation, score_sigma):
    """Standard error of a candidate's noisy validation accuracy: a public bound.

    ``sqrt(1 / (4 m) + (sigma / m) ** 2)`` with ``m`` the validation rows and
    ``sigma`` the score's Gaussian noise on the count: the binomial sampling
    error of an accuracy measured on m rows (at most ``1 / (2 sqrt m)``, at
    accuracy 1/2) and the privacy noise, independent.  Two candidates whose
    accuracies differ by less than about twice this are ranked by chance; on
    the corpus of issue 32 the defaults are within 3 points of fastdp's own
    best tuned grid point at epsilon >= 1, so where this error is above
    :data:`SELECTION_ERROR_WARNING` (2.5 points, at m < 400 rows even without
    noise) the search cannot find what the defaults miss, and it pays for
    its candidates with a smaller per-candidate epsilon.  Only public
    quantities enter (the expected validation size and sigma).
    """
    m = float(n_validation)
    if m <= 0:
        return math.inf
    return math.sqrt(0.25 / m + (float(score_sigma) / m) ** 2)


class _EventCaptured(Exception):
    """Raised by :class:`_PlanningLedger` to stop a planning fit."""

    def __init__(self, event):
        super().__init__("planned event captured")
        self.event = event


class _PlanningLedger:
    """Ledger stand-in: captures the event a fit reserves, then stops the fit."""

    def reserve(self, event, label=""):
        raise _EventCaptured(event)

    charge = check = reserve


def _placeholder_data(n_samples, n_features, labels):
    """Public data of the given shape: one entry 0.5 per row (norm 0.5 <= 1)."""
    rows = np.arange(n_samples)
    X = sp.csr_matrix((np.full(n_samples, 0.5), (rows, rows % n_features)),
                      shape=(n_samples, n_features))
    if labels is None:
        y = np.zeros(n_samples)
    else:
        y = np.asarray(labels)[rows % len(labels)]
    return X, y


def plan_candidate_event(estimator, n_samples, n_features, labels=None):
    """The privacy event ``estimator.fit`` would run on ``n_samples`` rows.

    The estimator plans its event before training and reserves it on its
    ledger; this runs its ``fit`` on public placeholder data of the same shape
    with a ledger stand-in that captures the reserved event and stops the fit.
    No private data is read.

    Parameters
    ----------
    estimator : fastdp estimator
        Configured (its ``epsilon``, ``delta`` and hyperparameters set).
    n_samples, n_features : int
    labels : sequence, optional
        The public label set (classifiers), cycled over the rows.

    Returns
    -------
    DpEvent
    """
    planner = clone(estimator).set_params(ledger=_PlanningLedger())
    X, y = _placeholder_data(n_samples, n_features, labels)
    try:
        planner.fit(X, y)
    except _EventCaptured as captured:
        return captured.event
    raise PrivacyAnalysisError(
        f"{type(estimator).__name__}.fit did not reserve a privacy event on its ledger: "
        "its privacy cost cannot be planned before training.")


def _score_count(estimator, X, y, classifier):
    """Sensitivity-1 score: correct predictions, or minus the clipped squared errors."""
    pred = estimator.predict(X)
    if classifier:
        return float(np.count_nonzero(pred == y))
    return -float(np.minimum((np.asarray(y, float) - pred) ** 2, 1.0).sum())


class DPHyperparameterSearch(BaseEstimator):
    """Private hyperparameter search whose total privacy cost is accounted.

    Parameters
    ----------
    estimator : fastdp estimator
        E.g. :class:`fastdp.linear_model.DPLogisticRegression`. Its
        ``epsilon``, ``delta``, ``ledger`` and ``random_state`` are set by the
        search for every candidate.
    param_grid : dict or list of dict, optional
        Public grid (scikit-learn ``ParameterGrid`` format). Default (None):
        around the default rule when the estimator runs it (``solver="auto"``,
        no ``solver_options``): the rule, its step times 3 and divided by 3, and
        4 times larger lots with 4 times fewer epochs at the rule's total step
        (:func:`rule_grid`, at each candidate's budget); otherwise
        :data:`DEFAULT_PARAM_GRID`.  At most :data:`MAX_GRID_SIZE` settings,
        each naming parameters of ``estimator``.
    epsilon : float
        Total ε of the whole search (every candidate and the selection).
    delta : float
        Total δ of the whole search.
    repetitions : {"truncated_negative_binomial", "poisson", "geometric"}
        Law of the number of candidates K (see :mod:`fastdp.privacy.tuning`).
    expected_repetitions : float or "auto", default "auto"
        E[K]. Larger means a better search and a smaller per-candidate budget.
        ``"auto"``: 2 for the default search around the rule, 10 otherwise.
    eta : float, default -0.5
        η of the truncated negative binomial (0: logarithmic law; η in (−1, 0):
        most of the mass at K = 1 with a longer tail, at the same E[K]). The
        default −0.5 gives each candidate about 0.72 ε at E[K] = 3 where the
        logarithmic law gives 0.65 ε (Papernot & Steinke's Thm 2 overhead
        1.38x instead of 1.54x in ε), and measured as well or better on the
        utility benchmark's small sets (docs/model-selection.md).
    validation_fraction : float or "auto", default "auto"
        Probability that a row goes to the validation part. ``"auto"``:
        :func:`auto_validation_fraction` (5 %, at least 200 rows, at most 20 %).
    score_share : float or "auto", default "auto"
        The score's Gaussian noise. ``"auto"``: matched under the candidates'
        fit curves (:func:`matched_score_sigma`; with
        ``split_accounting="composed"``, the former share 0.25). A number in
        (0, 1) sets the noise multiplier to sqrt(2 log(1.25/δ)) / (score_share
        · ε_c). Whatever it is, the score's exact event is accounted.
    split_accounting : {"parallel", "composed"}, default "parallel"
        How a candidate's fit and score are accounted: the maximum of their
        curves (they read the disjoint parts of the split; see the module
        docstring) or their sum (the former accounting, sound whatever the
        split).
    rule_weight : float or None, default 0.5
        Around the default rule only: the probability that a run draws the
        rule itself (the other settings share the rest); None: uniform.
        A public choice; the accounting is the same (the maximum over the
        settings).
    ledger : fastdp.privacy.ledger.PrivacyLedger, optional
        Charged the whole search's event once, before anything is trained.
        A ledger held by ``estimator`` is charged the same way when the
        search has none (the candidates themselves are trained without it);
        two different ledgers are refused.
    random_state : None, int or numpy.random.Generator
        Drives the split, K, the settings, the candidates' seeds and the
        score noise.

    Attributes
    ----------
    best_estimator_ : estimator or None
        The selected candidate, fitted (None if K = 0, possible for Poisson).
    best_params_ : dict or None
    best_score_ : float or None
        Its noisy validation score (accuracy, or minus the mean clipped
        squared error), released.
    epsilon_, delta_ : float
        The guarantee of the whole search (RDP accountant on
        ``privacy_event_``), ``epsilon_ <= epsilon``.
    privacy_event_ : RepeatedSelectionEvent
    candidate_epsilon_, candidate_delta_ : float
        Per-candidate training target. NOT the guarantee.
    score_noise_multiplier_ : float
    validation_fraction_ : float
        The validation fraction used (``"auto"`` resolved).
    repetitions_ : fastdp.privacy.tuning.Repetitions
    n_candidates_ : int
        K drawn. A diagnostic outside the guarantee: do not publish it.
    """

    def __init__(self, estimator, param_grid=None, *, epsilon=1.0, delta=1e-5,
                 repetitions="truncated_negative_binomial", expected_repetitions="auto",
                 eta=-0.5, validation_fraction="auto", score_share="auto",
                 split_accounting="parallel", rule_weight=0.5, ledger=None,
                 random_state=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.repetitions = repetitions
        self.expected_repetitions = expected_repetitions
        self.eta = eta
        self.validation_fraction = validation_fraction
        self.score_share = score_share
        self.split_accounting = split_accounting
        self.rule_weight = rule_weight
        self.ledger = ledger
        self.random_state = random_state

    # ----------------------------------------------------------------- checks
    def _check_estimator(self):
        """The estimator: a fastdp estimator whose own ledger, if any, is the search's."""
        est = self.estimator
        if not (callable(getattr(est, "fit", None)) and callable(getattr(est, "get_params", None))
                and "ledger" in est.get_params(deep=False)):
            raise ValidationError(
                "estimator must be a fastdp estimator (e.g. DPLogisticRegression()); got "
                f"{type(est).__name__}.")
        own = est.get_params(deep=False)["ledger"]
        if own is not None and self.ledger is not None and own is not self.ledger:
            raise ValidationError(
                "the estimator holds a privacy ledger and the search another one: the search "
                "charges one ledger for the whole search; pass it as the search's ledger=.")
        return self.ledger if self.ledger is not None else own

    def _check_grid(self):
        """The grid as a list of settings: known parameter names, at most MAX_GRID_SIZE."""
        try:
            grid = ParameterGrid(DEFAULT_PARAM_GRID if self.param_grid is None
                                 else self.param_grid)
            size = len(grid)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"param_grid is not a valid grid: {exc}") from None
        if size > MAX_GRID_SIZE:
            raise ValidationError(
                f"param_grid has {size} settings, more than MAX_GRID_SIZE = {MAX_GRID_SIZE} "
                "(each is planned at every step of the budget calibration, and the budget is "
                "shared by all of them); search a coarser grid.")
        grid = list(grid)
        known = self.estimator.get_params(deep=True)
        for key in sorted({key for params in grid for key in params}):
            if key in ("epsilon", "delta", "ledger", "random_state"):
                raise ValidationError(f"param_grid must not set {key!r}: the search sets it.")
            if key not in known:
                raise ValidationError(
                    f"param_grid sets {key!r}, which is not a parameter of "
                    f"{type(self.estimator).__name__}.")
        return grid

    def _check(self):
        self._check_estimator()
        epsilon, delta = check_privacy_params(self.epsilon, self.delta)
        if self.repetitions not in DISTRIBUTIONS:
            raise ValidationError(
                f"repetitions must be one of {DISTRIBUTIONS}; got {self.repetitions!r}.")
        around_rule = self.param_grid is None and _runs_default_rule(self.estimator)
        mean = self.expected_repetitions
        if isinstance(mean, str) and mean == "auto":
            mean = _RULE_EXPECTED_REPETITIONS if around_rule else _GRID_EXPECTED_REPETITIONS
        reps = Repetitions.with_mean(self.repetitions, mean, eta=self.eta)
        for name in ("validation_fraction", "score_share"):
            value = getattr(self, name)
            if isinstance(value, str) and value == "auto":
                continue
            if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                    or not 0.0 < value < 1.0):
                raise ValidationError(f"{name} must be 'auto' or in (0, 1); got {value!r}.")
        w = self.rule_weight
        if w is not None and (isinstance(w, bool) or not isinstance(w, numbers.Real)
                              or not 0.0 < w < 1.0):
            raise ValidationError(f"rule_weight must be None or in (0, 1); got {w!r}.")
        if not (isinstance(self.split_accounting, str)
                and self.split_accounting in SPLIT_ACCOUNTING):
            raise ValidationError(f"split_accounting must be one of {SPLIT_ACCOUNTING}; "
                                  f"got {self.split_accounting!r}.")
        if around_rule:
            return epsilon, delta, reps, None
        grid = self._check_grid()
        if not grid:
            raise ValidationError("param_grid is empty.")
        return epsilon, delta, reps, grid

    # --------------------------------------------------------------- planning
    def _score_sigma(self, eps_c, delta, trains, accountant=None):
        """The score's noise multiplier (public: ε_c, δ and the planned fits)."""
        share = self.score_share
        if isinstance(share, str):        # "auto"
            if self.split_accounting == "parallel":
                return matched_score_sigma(trains, accountant)
            share = 0.25                  # composed: the former default
        return math.sqrt(2.0 * math.log(1.25 / delta)) / (share * eps_c)

    def _grid_at(self, grid, eps_c, shape, labels=None):
        """The public settings of the candidates at ``eps_c`` (``grid`` None: around the rule)."""
        K = 2 if labels is None else len(labels)
        return rule_grid(self.estimator, shape[0], shape[1], eps_c, K) if grid is None else grid

    def _plan(self, eps_c, delta, grid, reps, shape, labels, cache, accountant=None):
        """The search's event when every candidate is trained at (eps_c, delta)."""
        trains = []
        for i, params in enumerate(self._grid_at(grid, eps_c, shape, labels)):
            key = (i, eps_c)
            if key not in cache:
                est = clone(self.estimator).set_params(**params, epsilon=eps_c, delta=delta,
                                                       ledger=None)
                cache[key] = plan_candidate_event(est, shape[0], shape[1], labels)
            train = cache[key]
            if not train.is_private or train.adjacency is None:
                raise PrivacyAnalysisError(
                    f"candidate {params} is not private; a search over it has no guarantee.")
            trains.append(train)
        sigma = self._score_sigma(eps_c, delta, trains, accountant)
        events = [candidate_event(train, GaussianEvent(sigma, train.adjacency),
                                  self.split_accounting) for train in trains]
        unique = tuple(dict.fromkeys(events))
        return RepeatedSelectionEvent.of(unique, reps), sigma

    def _calibrate(self, epsilon, delta, grid, reps, shape, labels, cache):
        """Largest per-candidate ε_c (to a relative 5e-3) whose search total is <= epsilon.

        Illinois (modified regula falsi) on log total(ε_c) − log ε in log ε_c,
        on a bracket [lo, hi] with total(lo) <= epsilon < total(hi); only a
        feasible ε_c (total evaluated, <= epsilon) is ever returned. ``cache``
        maps (grid index, ε_c) to the candidate's planned training event.
        """
        accountant = RdpAccountant()

        def total(eps_c):
            event, sigma = self._plan(eps_c, delta, grid, reps, shape, labels, cache, accountant)
            eps = accountant.epsilon(event, delta)
            return math.log(eps / epsilon) if eps > 0 else -math.inf, (eps_c, eps, event, sigma)

        hi = epsilon
        try:
            f_hi, best = total(hi)
        except (ValidationError, PrivacyAnalysisError) as exc:
            raise ValidationError(f"cannot plan the candidates at epsilon={hi:g}: {exc}") from exc
        if f_hi <= 0:
            return best
        lo = hi
        while True:   # step down until feasible
            lo = lo * max(math.exp(-2.0 * f_hi), 1e-2)
            if lo < epsilon * 1e-4:
                raise ValidationError(
                    f"epsilon={epsilon:g} is too small for this search: even per-candidate "
                    f"epsilon {lo:.3g} is over budget. Raise epsilon, lower "
                    "expected_repetitions, or use a smaller grid of cheaper settings.")
            f_lo, best_lo = total(lo)
            if f_lo <= 0:
                break
            hi, f_hi = lo, f_lo
        best = best_lo
        a, fa, b, fb, side = math.log(lo), f_lo, math.log(hi), f_hi, 0
        while b - a > 5e-3 and fa < -1e-4:
            if math.isinf(fa):
                c = 0.5 * (a + b)
            else:
                c = b - fb * (b - a) / (fb - fa)
                c = min(max(c, a + 1e-4 * (b - a)), b - 1e-4 * (b - a))
            fc, result = total(math.exp(c))
            if fc <= 0:
                a, fa, best = c, fc, result
                if side == -1:
                    fb *= 0.5
                side = -1
            else:
                b, fb = c, fc
                if side == 1:
                    fa *= 0.5
                side = 1
        return best

    def _draw_setting(self, rng, size, grid_given):
        """Index of one run's setting, drawn by public randomness (uniform; around the rule,
        the rule itself with probability ``rule_weight`` when set)."""
        if grid_given or self.rule_weight is None or size == 1:
            return int(rng.integers(size))
        if rng.random() < self.rule_weight:
            return 0
        return 1 + int(rng.integers(size - 1))

    # -------------------------------------------------------------------- fit
    def fit(self, X, y):
        """Run the search; charge the ledger once with the whole search's event.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        epsilon, delta, reps, grid = self._check()
        grid_given = grid is not None
        rng = check_random_state(self.random_state)
        if sp.issparse(X):
            check_sparse_structure(X)  # before scipy converts it
            X = sp.csr_matrix(X)
        else:
            X = np.asarray(X)
        y = np.asarray(y)
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValidationError("X must be 2-D and y 1-D with one label per row of X.")
        n, d = X.shape
        classifier = is_classifier(self.estimator)
        labels = list(np.unique(y)) if classifier else None   # public label set
        fraction = self.validation_fraction
        if isinstance(fraction, str):                            # "auto": public n, ε, δ
            fraction = auto_validation_fraction(n)
        in_val = rng.random(n) < fraction                        # public coins
        n_val = int(in_val.sum())
        if n_val == 0 or n_val == n:
            raise ValidationError(
                f"the random split left an empty part (n={n}, validation_fraction="
                f"{fraction:g}); use more rows.")
        train_idx, val_idx = np.flatnonzero(~in_val), np.flatnonzero(in_val)
        cache = {}
        eps_c, total, event, sigma = self._calibrate(epsilon, delta, grid, reps,
                                                     (train_idx.size, d), labels, cache)
        # public: (n_train, d, eps_c, the label set)
        grid = self._grid_at(grid, eps_c, (train_idx.size, d), labels)
        error = selection_standard_error(fraction * n, sigma)      # public: n, fraction, sigma
        if error > SELECTION_ERROR_WARNING:
            warnings.warn(
                f"this search cannot tell its candidates apart: a candidate's noisy validation "
                f"accuracy on about {fraction * n:.0f} rows has a standard error of "
                f"{100 * error:.1f} points (sqrt(1/(4m) + (sigma/m)^2), sigma = {sigma:.3g}), "
                f"more than {100 * SELECTION_ERROR_WARNING:g}; each candidate trains at "
                f"epsilon {eps_c:.3g} of the total {epsilon:g}. The default fit at the whole "
                "epsilon is likely as good (docs/model-selection.md).", UserWarning,
                stacklevel=2)
        planned = {i: cache[(i, eps_c)] for i in range(len(grid))}
        reservation = None
        ledger = self._check_estimator()  # the search's ledger, or the estimator's
        if ledger is not None:
            note_ledger_epsilon(ledger, event, total, delta, "rdp", "search")
            reservation = ledger.reserve(event, label=type(self).__name__)
        k = reps.sample(rng)
        best = None
        # a KeyboardInterrupt cancels (nothing was released); any other failure keeps the charge
        with settle_reservation(reservation, "search"):
            X_tr, y_tr, X_val, y_val = X[train_idx], y[train_idx], X[val_idx], y[val_idx]
            for _ in range(k):
                i = self._draw_setting(rng, len(grid), grid_given)
                seed = int(rng.integers(2 ** 63 - 1))
                est = clone(self.estimator).set_params(**grid[i], epsilon=eps_c, delta=delta,
                                                       ledger=None, random_state=seed)
                est.fit(X_tr, y_tr)
                if getattr(est, "privacy_event_", None) != planned[i]:
                    raise RuntimeError(
                        "a candidate ran a different mechanism from the one accounted for.")
                noisy = _score_count(est, X_val, y_val, classifier) + sigma * rng.normal()
                score = noisy / n_val
                if best is None or score > best[0]:
                    best = (score, est, dict(grid[i]))
        if best is None:
            warnings.warn("the search drew K = 0 candidates (Poisson): nothing was selected "
                          "(the privacy cost is spent).", RuntimeWarning, stacklevel=2)
            best = (None, None, None)
        self.best_score_, self.best_estimator_, self.best_params_ = best
        self.epsilon_ = total
        self.delta_ = delta
        self.privacy_event_ = event
        self.candidate_epsilon_ = eps_c
        self.candidate_delta_ = delta
        self.score_noise_multiplier_ = sigma
        self.validation_fraction_ = fraction
        self.repetitions_ = reps
        self.n_candidates_ = k
        return self

    # ---------------------------------------------------------------- predict
    def _best(self):
        if getattr(self, "best_estimator_", None) is None:
            raise ValidationError("no selected estimator: call fit first (or K was 0).")
        return self.best_estimator_

    def predict(self, X):
        """Predictions of the selected estimator."""
        return self._best().predict(X)

    def decision_function(self, X):
        """Decision function of the selected estimator."""
        return self._best().decision_function(X)

    def score(self, X, y):
        """The selected estimator's ``score`` (not private: it reads ``y``)."""
        return self._best().score(X, y)
