"""Empirical privacy auditing: a statistical lower bound on ε from real runs.

An audit does not trust the analysis.  It trains the mechanism many times on
two *neighbouring* datasets, one with and one without a crafted **canary**
example (under the adjacency the mechanism claims: the canary is added for
add/remove, it replaces another example for replace-one), reduces each
released output to one number (a distinguishing statistic, e.g. the model's
weight on a feature only the canary uses) and thresholds it.  The test's
false-positive rate (FPR: "canary present" said on the dataset without it)
and false-negative rate (FNR) bound ε from below, because every
(ε, δ)-DP mechanism satisfies, for every test (Kairouz, Oh, Viswanath 2015;
Jagielski, Ullman, Oprea 2020; Nasr et al. 2021)::

    FPR + e^ε FNR >= 1 - δ     and     FNR + e^ε FPR >= 1 - δ,

    so  ε >= max( log((1 - δ - FPR) / FNR),  log((1 - δ - FNR) / FPR) ).

The rates are replaced by their one-sided Clopper-Pearson upper confidence
bounds, each at level ``(1 - confidence) / 2``, so the reported bound
``epsilon_lower`` is below the true ε of the mechanism with probability at
least ``confidence`` (union bound over the two rates).  The threshold is
chosen on a separate *selection* part of the trials and the bound is computed
on the rest, so choosing the best threshold does not bias the bound.

What an audit shows
-------------------
* ``epsilon_lower <= epsilon_claimed``: consistent with the claim (not a
  proof of privacy: a weak canary or statistic gives a low bound).
* ``epsilon_lower > epsilon_claimed``: at the stated confidence the
  mechanism is **not** as private as claimed.

``epsilon_claimed`` is computed from the mechanism's own privacy event by the
tightest of fastdp's accountants that can analyse it (:func:`claimed_epsilon`),
at the audit's δ.  An event guarantees a whole privacy profile ε(δ), so any δ
is a valid place to check it; audits with a few thousand trials only have
power at moderate δ (e.g. 0.1), where the FPR and FNR they can measure live.
See ``docs/auditing.md`` for the audits of every fastdp mechanism.

Public functions
----------------
``clopper_pearson``, ``epsilon_from_rates``, ``epsilon_lower_bound``,
``select_threshold``, ``audit_scores``, ``claimed_epsilon``,
``neighbouring_datasets``, ``isolated_canary``, ``run_audit``,
``solver_release``; the result type :class:`AuditResult`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import scipy.sparse as sp

from fastdp._validation import (
    check_delta,
    check_in_open_interval,
    check_integer,
    check_sparse_structure,
)
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev

__all__ = [
    "AuditResult",
    "clopper_pearson",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "select_threshold",
    "audit_scores",
    "claimed_epsilon",
    "neighbouring_datasets",
    "isolated_canary",
    "run_audit",
    "solver_release",
]


# ----------------------------------------------------------------------------
# argument checks
# ----------------------------------------------------------------------------
#: A confidence level, in (0, 1) (e.g. 0.95).
_check_confidence = functools.partial(check_in_open_interval, "confidence", low=0.0, high=1.0)
#: A count of trials: an integer in [0, upper].
_check_count = functools.partial(check_integer, low=0)


def _check_scores(name, scores):
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size < 2:
        raise ValidationError(f"{name} must be a 1-D array of at least 2 scores; got shape "
                              f"{scores.shape}.")
    if not np.all(np.isfinite(scores)):
        raise ValidationError(f"{name} contains NaN or infinite scores; the statistic must be "
                              "finite (check the mechanism's output).")
    return scores


# ----------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------
def clopper_pearson(successes, trials, confidence=0.95, *, side="two-sided"):
    """Clopper-Pearson (exact binomial) confidence bound(s) for a proportion.

    Parameters
    ----------
    successes, trials : int or array of int
        Observed count k and number of trials n (0 <= k <= n, n >= 1).
    confidence : float, default 0.95
        Coverage of the interval (two-sided) or of the one-sided bound.
    side : {"two-sided", "upper", "lower"}
        ``"two-sided"`` returns ``(lower, upper)`` with ``(1 - confidence)/2``
        in each tail; ``"upper"``/``"lower"`` return the one-sided bound with
        all of ``1 - confidence`` in one tail.

    Returns
    -------
    float or tuple of float (arrays for array input)
        ``upper = Beta^{-1}(1 - a; k + 1, n - k)`` (1 when k = n),
        ``lower = Beta^{-1}(a; k, n - k + 1)`` (0 when k = 0).
    """
    from scipy.stats import beta

    confidence = _check_confidence(confidence)
    k = np.asarray(successes)
    n = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise ValidationError("successes and trials must be integers.")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValidationError("need 0 <= successes <= trials and trials >= 1.")
    k = k.astype(np.float64)
    n = n.astype(np.float64)
    tail = 1.0 - confidence
    if side == "two-sided":
        tail = tail / 2.0
    elif side not in ("upper", "lower"):
        raise ValidationError(f"side must be 'two-sided', 'upper' or 'lower'; got {side!r}.")
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = np.where(k >= n, 1.0, beta.ppf(1.0 - tail, k + 1.0, np.maximum(n - k, 1.0)))
        lower = np.where(k <= 0, 0.0, beta.ppf(tail, np.maximum(k, 1.0), n - k + 1.0))
    upper, lower = (float(upper), float(lower)) if upper.ndim == 0 else (upper, lower)
    if side == "upper":
        return upper
    if side == "lower":
        return lower
    return lower, upper


def epsilon_from_rates(fpr, fnr, delta=0.0):
    """Largest ε that a test with these error rates proves (no sampling error).

    ``max(log((1 - δ - FPR) / FNR), log((1 - δ - FNR) / FPR), 0)``; a zero
    rate with a positive numerator gives ``inf``.  Works on arrays.
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    fnr = np.asarray(fnr, dtype=np.float64)
    delta = check_delta(delta, allow_zero=True)   # δ = 0 audits a pure-DP claim
    if np.any((fpr < 0) | (fpr > 1) | (fnr < 0) | (fnr > 1)):
        raise ValidationError("error rates must lie in [0, 1].")
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
        second = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
    first = np.where(np.isnan(first), -np.inf, first)
    second = np.where(np.isnan(second), -np.inf, second)
    value = np.maximum(np.maximum(first, second), 0.0)
    return float(value) if value.ndim == 0 else value


def epsilon_lower_bound(false_positives, negatives, false_negatives, positives, delta=0.0,
                        confidence=0.95):
    """ε lower bound, valid with probability >= ``confidence``, from a test's error counts.

    Parameters
    ----------
    false_positives, negatives : int
        Trials on the dataset *without* the canary, and how many of them the
        test wrongly called "canary present".
    false_negatives, positives : int
        Trials *with* the canary, and how many the test missed.
    delta : float
        δ at which the bound on ε is stated.
    confidence : float, default 0.95
        Each rate is replaced by its one-sided Clopper-Pearson upper bound at
        level ``(1 - confidence) / 2``; both hold together with probability
        at least ``confidence``, and then so does the bound.

    Returns
    -------
    float
        ``epsilon_from_rates(FPR_upper, FNR_upper, delta)`` (>= 0).
    """
    negatives = _check_count("negatives", negatives)
    positives = _check_count("positives", positives)
    if negatives < 1 or positives < 1:
        raise ValidationError("need at least one trial with and one without the canary.")
    fp = _check_count("false_positives", false_positives, high=negatives)
    fn = _check_count("false_negatives", false_negatives, high=positives)
    level = 1.0 - (1.0 - _check_confidence(confidence)) / 2.0
    fpr_upper = clopper_pearson(fp, negatives, level, side="upper")
    fnr_upper = clopper_pearson(fn, positives, level, side="upper")
    return epsilon_from_rates(fpr_upper, fnr_upper, delta)


def _error_counts(without, with_, thresholds):
    """Counts of the test "canary present iff score > t" for every t (sorted inputs)."""
    false_positives = without.size - np.searchsorted(without, thresholds, side="right")
    false_negatives = np.searchsorted(with_, thresholds, side="right")
    return false_positives, false_negatives


def _candidate_thresholds(without, with_, max_candidates):
    pooled = np.unique(np.concatenate([without, with_]))
    middles = 0.5 * (pooled[1:] + pooled[:-1]) if pooled.size > 1 else pooled
    candidates = np.concatenate([[pooled[0] - 1.0], middles, [pooled[-1]]])
    if candidates.size > max_candidates:
        picks = np.unique(np.linspace(0, candidates.size - 1, max_candidates).round().astype(int))
        candidates = candidates[picks]
    return candidates


def select_threshold(scores_without, scores_with, delta=0.0, confidence=0.95, *,
                     max_candidates=2000):
    """The threshold test with the best ε lower bound on these scores.

    Tries "canary present iff score > t" and "iff score < t" for thresholds
    between the observed scores.  Used on the *selection* trials only; the
    bound it reports on the same trials is optimistically biased.

    Returns
    -------
    (threshold, direction, epsilon_lower) : (float, int, float)
        ``direction`` is +1 (present iff score > t) or -1 (iff score < t).
    """
    without = np.sort(_check_scores("scores_without", scores_without))
    with_ = np.sort(_check_scores("scores_with", scores_with))
    best = (math.nan, 1, -1.0)
    level = 1.0 - (1.0 - _check_confidence(confidence)) / 2.0
    for direction in (1, -1):
        a, b = (without, with_) if direction == 1 else (np.sort(-without), np.sort(-with_))
        thresholds = _candidate_thresholds(a, b, max_candidates)
        fp, fn = _error_counts(a, b, thresholds)
        fpr_upper = clopper_pearson(fp, np.full_like(fp, a.size), level, side="upper")
        fnr_upper = clopper_pearson(fn, np.full_like(fn, b.size), level, side="upper")
        bounds = epsilon_from_rates(fpr_upper, fnr_upper, delta)
        k = int(np.argmax(bounds))
        if bounds[k] > best[2]:
            best = (float(direction * thresholds[k]), direction, float(bounds[k]))
    return best


# ----------------------------------------------------------------------------
# the result
# ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on the mechanism's ε at ``delta``, valid with probability
        at least ``confidence``.
    epsilon_claimed : float or None
        ε the mechanism claims at ``delta`` (from its event), if known.
    delta, confidence : float
    threshold : float
    direction : int
        +1: the test says "canary present" when the score exceeds
        ``threshold``; -1: when it is below.
    false_positives, negatives, false_negatives, positives : int
        Error counts of the test on the evaluation trials.
    n_selection : int
        Trials per side used to choose the threshold (not in the counts).
    """

    epsilon_lower: float
    epsilon_claimed: float | None
    delta: float
    confidence: float
    threshold: float
    direction: int
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    n_selection: int

    @property
    def fpr(self):
        """Observed false-positive rate on the evaluation trials."""
        return self.false_positives / self.negatives

    @property
    def fnr(self):
        """Observed false-negative rate on the evaluation trials."""
        return self.false_negatives / self.positives

    @property
    def violation(self):
        """True when the bound exceeds the claim: the claim is refuted at ``confidence``."""
        return self.epsilon_claimed is not None and self.epsilon_lower > self.epsilon_claimed

    def __str__(self):
        claim = ("no claim" if self.epsilon_claimed is None
                 else f"claimed {self.epsilon_claimed:.4g}")
        verdict = "VIOLATION" if self.violation else "consistent"
        return (f"empirical epsilon >= {self.epsilon_lower:.4g} ({claim}) at delta={self.delta:g}, "
                f"confidence {self.confidence:g}: {verdict}; FPR {self.false_positives}/"
                f"{self.negatives}, FNR {self.false_negatives}/{self.positives}")


def audit_scores(scores_without, scores_with, *, delta=0.0, confidence=0.95,
                 selection_fraction=0.5, threshold=None, direction=1, claimed_epsilon=None,
                 max_candidates=2000):
    """Audit from precomputed statistics of independent runs.

    Parameters
    ----------
    scores_without, scores_with : array-like of float
        The statistic of each run on the dataset without / with the canary
        (independent runs, any order).
    delta, confidence : float
        See :func:`epsilon_lower_bound`.
    selection_fraction : float, default 0.5
        Share of each side's runs (the first ones) used to choose the
        threshold; the rest give the bound.  Ignored when ``threshold`` is
        given (then all runs give the bound).
    threshold : float or None
        A threshold fixed in advance (with ``direction``).
    direction : {+1, -1}
        Only with ``threshold``: +1 means "canary present iff score > t".
    claimed_epsilon : float or None
        Stored in the result, to compare with.

    Returns
    -------
    AuditResult
    """
    without = _check_scores("scores_without", scores_without)
    with_ = _check_scores("scores_with", scores_with)
    delta = check_delta(delta, allow_zero=True)   # δ = 0 audits a pure-DP claim
    confidence = _check_confidence(confidence)
    if threshold is None:
        fraction = float(selection_fraction)
        if not 0.0 < fraction < 1.0:
            raise ValidationError(f"selection_fraction must lie in (0, 1); got {selection_fraction!r}.")
        k0 = int(round(fraction * without.size))
        k1 = int(round(fraction * with_.size))
        if min(k0, k1) < 1 or k0 >= without.size or k1 >= with_.size:
            raise ValidationError("too few runs to split into selection and evaluation parts.")
        threshold, direction, _ = select_threshold(without[:k0], with_[:k1], delta, confidence,
                                                   max_candidates=max_candidates)
        without, with_, n_selection = without[k0:], with_[k1:], k0
    else:
        threshold = float(threshold)
        if direction not in (1, -1) or not math.isfinite(threshold):
            raise ValidationError("threshold must be finite and direction +1 or -1.")
        n_selection = 0
    a, b = (without, with_) if direction == 1 else (-without, -with_)
    t = threshold * direction
    false_positives = int(np.count_nonzero(a > t))
    false_negatives = int(np.count_nonzero(b <= t))
    lower = epsilon_lower_bound(false_positives, a.size, false_negatives, b.size, delta,
                                confidence)
    return AuditResult(
        epsilon_lower=float(lower),
        epsilon_claimed=None if claimed_epsilon is None else float(claimed_epsilon),
        delta=delta, confidence=confidence, threshold=float(threshold), direction=int(direction),
        false_positives=false_positives, negatives=int(a.size),
        false_negatives=false_negatives, positives=int(b.size), n_selection=int(n_selection))


# ----------------------------------------------------------------------------
# the claim
# ----------------------------------------------------------------------------
def _strip_trivial_sampling(event):
    """The same mechanism without samplers that take every example (q = 1)."""
    if isinstance(event, ev.PoissonSampledEvent) and event.sample_rate == 1.0:
        return _strip_trivial_sampling(event.event)
    if isinstance(event, ev.FixedSizeSampledEvent) and event.batch_size == event.n:
        return _strip_trivial_sampling(event.event).to_replace_one()
    if isinstance(event, ev.SelfComposedEvent):
        return ev.SelfComposedEvent(_strip_trivial_sampling(event.event), event.count)
    if isinstance(event, ev.ComposedEvent):
        return ev.ComposedEvent(tuple(_strip_trivial_sampling(e) for e in event.events))
    return event


_RELATION_FREE = (ev.GaussianEvent, ev.LaplaceEvent, ev.PureEvent)


def _relabelled_add_remove(event):
    """Unsampled Gaussian/Laplace/pure trees relabelled add/remove, else None.

    An unsampled mechanism's noise is stated relative to the sensitivity under
    its own adjacency, so its privacy profile does not depend on the relation;
    relabelling lets the PLD accountant analyse replace-one trees exactly.
    """
    if isinstance(event, ev.SelfComposedEvent):
        inner = _relabelled_add_remove(event.event)
        return None if inner is None else ev.SelfComposedEvent(inner, event.count)
    if isinstance(event, ev.ComposedEvent):
        parts = [_relabelled_add_remove(e) for e in event.events]
        return None if any(p is None for p in parts) else ev.ComposedEvent(tuple(parts))
    if type(event) in _RELATION_FREE:
        return dataclasses.replace(event, adjacency=ev.Adjacency.ADD_REMOVE)
    return None


def claimed_epsilon(event, delta, accountants=None):
    """ε that ``event`` guarantees at ``delta``: the smallest of fastdp's accountants.

    Every accountant returns a sound upper bound on the ε of the event, so the
    smallest is the strongest claim fastdp makes, and the one an audit should
    try to refute.  Samplers with rate 1 are removed first (the same
    mechanism), and unsampled Gaussian/Laplace trees are analysed under
    add/remove (their profile does not depend on the relation).

    Parameters
    ----------
    event : DpEvent
    delta : float
    accountants : sequence of accountant names or instances, optional
        Default: dp-accounting's PLD (value discretisation 1e-3; pessimistic, so a
        slightly larger claim), fastdp's own PLD, RDP, and pure composition.

    Returns
    -------
    float
        ``inf`` for a non-private event.

    Raises
    ------
    PrivacyAnalysisError
        When no accountant can analyse the event.
    """
    from fastdp.privacy.accountants import get_accountant

    if not isinstance(event, ev.DpEvent):
        raise ValidationError(f"event must be a fastdp DpEvent; got {type(event).__name__}.")
    delta = check_delta(delta, allow_zero=True)   # δ = 0 audits a pure-DP claim
    if not event.is_private:
        return math.inf
    simplified = _strip_trivial_sampling(event)
    candidates = [simplified]
    relabelled = _relabelled_add_remove(simplified)
    if relabelled is not None:
        candidates.append(relabelled)
    if accountants is None:
        accountants = [get_accountant("pld", value_discretization_interval=1e-3),
                       get_accountant("pld_own"), get_accountant("rdp"), get_accountant("pure")]
    else:
        accountants = [get_accountant(a) for a in accountants]
    values, errors = [], []
    for accountant in accountants:
        for candidate in candidates:
            try:
                values.append(float(accountant.epsilon(candidate, delta)))
            except (PrivacyAnalysisError, ValidationError, NotImplementedError) as exc:
                errors.append(f"{getattr(accountant, 'name', accountant)}: {exc}")
    if not values:
        raise PrivacyAnalysisError(f"no accountant could analyse {event!r}: {'; '.join(errors)}")
    return min(values)


# ----------------------------------------------------------------------------
# canaries and neighbouring datasets
# ----------------------------------------------------------------------------
def _rows(X):
    check_sparse_structure(X)  # before scipy converts it
    return sp.csr_matrix(X) if sp.issparse(X) else np.atleast_2d(np.asarray(X, dtype=np.float64))


def _stack(X, row):
    check_sparse_structure(X)
    check_sparse_structure(row)
    if sp.issparse(X):
        return sp.vstack([sp.csr_matrix(X), sp.csr_matrix(row)], format="csr")
    return np.vstack([X, row])


def neighbouring_datasets(X, y, canary_x, canary_y, adjacency, *, replaced_x=None,
                          replaced_y=None):
    """The two datasets of an audit, neighbours under ``adjacency``.

    * ``"add_remove"``: ``D0 = (X, y)`` and ``D1 = D0 + canary`` (appended).
    * ``"replace_one"``: both have ``len(y) + 1`` rows; the last row is
      ``(replaced_x, replaced_y)`` in ``D0`` and the canary in ``D1``.

    Returns
    -------
    ((X0, y0), (X1, y1))
        Sparse input stays sparse (CSR); dense becomes float64 arrays.
    """
    adjacency = ev._as_adjacency(adjacency)
    X = _rows(X)
    y = np.asarray(y)
    canary_x = _rows(canary_x)
    if canary_x.shape != (1, X.shape[1]):
        raise ValidationError(f"canary_x must be one row of {X.shape[1]} features; got shape "
                              f"{canary_x.shape}.")
    if y.shape != (X.shape[0],):
        raise ValidationError(f"y must have shape ({X.shape[0]},); got {y.shape}.")
    with_canary = (_stack(X, canary_x), np.append(y, canary_y))
    if adjacency is ev.Adjacency.ADD_REMOVE:
        if replaced_x is not None or replaced_y is not None:
            raise ValidationError("replaced_x/replaced_y only go with replace-one adjacency.")
        return (X, y.copy()), with_canary
    if replaced_x is None or replaced_y is None:
        raise ValidationError("replace-one adjacency needs replaced_x and replaced_y (the "
                              "example the canary replaces).")
    replaced_x = _rows(replaced_x)
    if replaced_x.shape != canary_x.shape:
        raise ValidationError("replaced_x must have the canary's shape.")
    return (_stack(X, replaced_x), np.append(y, replaced_y)), with_canary


def isolated_canary(X, *, value=1.0):
    """Append a feature column that only the canary uses; return ``(X', canary_x, index)``.

    The canary is ``value`` times the unit vector of the new feature (L2 norm
    ``|value|``, so ``value <= 1`` keeps fastdp's row-norm requirement).
    Every other example is 0 there, so the released model's weight on that
    feature is the natural distinguishing statistic.
    """
    X = _rows(X)
    n, m = X.shape
    if sp.issparse(X):
        X_new = sp.hstack([X, sp.csr_matrix((n, 1))], format="csr")
        canary = sp.csr_matrix(([float(value)], ([0], [m])), shape=(1, m + 1))
    else:
        X_new = np.hstack([X, np.zeros((n, 1))])
        canary = np.zeros((1, m + 1))
        canary[0, m] = float(value)
    return X_new, canary, m


# ----------------------------------------------------------------------------
# running an audit
# ----------------------------------------------------------------------------
def run_audit(release, n_trials, *, statistic=None, claimed_event=None, claimed=None,
              delta=0.0, confidence=0.95, selection_fraction=0.5, random_state=None):
    """Run a mechanism ``2 n_trials`` times and audit its outputs.

    Parameters
    ----------
    release : callable ``(with_canary: bool, rng: numpy.random.Generator) -> output``
        Runs the mechanism once on the dataset with or without the canary,
        with all its randomness drawn from ``rng`` (independent per run).
    n_trials : int
        Runs per dataset (>= 4).
    statistic : callable ``output -> float``, optional
        Distinguishing statistic; default ``float(output)``.
    claimed_event : DpEvent, optional
        The event the mechanism claims; ``epsilon_claimed`` is
        :func:`claimed_epsilon` of it at ``delta``.
    claimed : float, optional
        Alternatively, the claimed ε directly.
    delta, confidence, selection_fraction
        See :func:`audit_scores`.
    random_state : int, Generator or None
        Seeds the independent streams of all runs.

    Returns
    -------
    AuditResult
    """
    from fastdp._validation import check_random_state

    n_trials = check_integer("n_trials", n_trials, low=4)
    if claimed_event is not None and claimed is not None:
        raise ValidationError("give claimed_event or claimed, not both.")
    statistic = (lambda out: float(out)) if statistic is None else statistic
    streams = check_random_state(random_state).spawn(2 * int(n_trials))
    scores = np.empty((2, int(n_trials)))
    for t in range(int(n_trials)):
        for side in (0, 1):
            scores[side, t] = statistic(release(bool(side), streams[2 * t + side]))
    if claimed_event is not None:
        claimed = claimed_epsilon(claimed_event, delta)
    return audit_scores(scores[0], scores[1], delta=delta, confidence=confidence,
                        selection_fraction=selection_fraction, claimed_epsilon=claimed)


def solver_release(solver, datasets, *, loss, config, noise, output="coef"):
    """A ``release`` for :func:`run_audit` that runs an estimator solver.

    Parameters
    ----------
    solver : EstimatorSolver
        The solver object to audit, e.g.
        ``fastdp.solvers.registry.get_estimator_solver("dpsgd")``.  The
        privacy layer does not import the solvers (imports only go downward,
        DESIGN.md): the caller hands the audit what it runs.
    datasets : ((X0, y0), (X1, y1))
        From :func:`neighbouring_datasets`.
    loss : str
        Canonical loss name (``"squared"``, ``"logistic"``, ``"hinge"``).
    config : dict
        The solver config (see :mod:`fastdp.solvers.registry`).
    noise : float
        The noise parameter the runs use.  (An audit of a *broken* variant
        passes a noise other than the one its claimed event was built for.)
    output : str or callable, default "coef"
        Attribute of the solver result to release, or a function of it.

    Returns
    -------
    callable ``(with_canary, rng) -> output``
    """
    if isinstance(solver, str) or not callable(getattr(solver, "run", None)):
        raise ValidationError(
            f"solver must be an estimator solver object (with a run method), e.g. "
            f"fastdp.solvers.registry.get_estimator_solver('dpsgd'); got {solver!r}.")
    runner = solver
    (X0, y0), (X1, y1) = datasets

    def release(with_canary, rng):
        X, y = (X1, y1) if with_canary else (X0, y0)
        result = runner.run(X, y, loss=loss, noise=noise, config=dict(config), random_state=rng)
        return output(result) if callable(output) else getattr(result, output)

    return release
