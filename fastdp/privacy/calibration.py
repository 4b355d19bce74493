"""Noise calibration and the convenience privacy API.

* :func:`compute_epsilon`: ε of noisy SGD-style training (Gaussian noise,
  ``steps`` steps, a given sampler).
* :func:`calibrate_noise_multiplier`: the smallest noise multiplier whose ε
  does not exceed a target, to a relative tolerance of 1e-6 in σ.
* :func:`calibrate`: the same search for any one-parameter family of events
  (Laplace scale, line-search budgets, ...).

The search is conservative by construction: it keeps a bracket [lo, hi] of
parameters whose ε has been *evaluated* on both sides of the target and only
ever returns the end whose evaluated ε is at or below the target. It brackets
by geometric expansion from a warm-start guess, then shrinks the bracket with
secant steps on log ε against log parameter (safeguarded by bisection) and
closes it with two evaluations straddling the converged root estimate, until
hi/lo − 1 ≤ ``rtol``. Typically 7-10 accountant calls.

One source of a sampler's event: :func:`dp_sgd_event` (and so
:func:`compute_epsilon`, :func:`calibrate_noise_multiplier` and the CLI's
``fastdp privacy`` commands) asks the sampler object of :mod:`fastdp.sampling`
that training runs for its event, so a plan and a run cannot disagree.

Changed in issue 19: ``sampling="shuffle"`` used to assume epoch-aligned lots
with a short last lot (``epochs = ceil(steps / ceil(n / batch))``), which is
not what :class:`~fastdp.sampling.ShuffleSampler` runs: its lots run on
across permutations, so ``steps`` lots touch ``ceil(steps·batch / n)``
permutations.  The planner now reports the ε of what runs (e.g. n = 10,
batch 3, 4 steps, σ = 1, δ = 1e-5: 16.5, was 10.7).  The spellings
``"fixed_size"`` (now ``"fixed"``) and ``"none"`` are deprecated.

With the PLD accountant one call can take seconds to minutes (its grid of
privacy-loss values grows as the noise shrinks), so its search is bounded
before it starts: targets above :data:`PLD_MAX_EPSILON` are refused; the
root is first placed with the (cheap, never tighter) RDP accountant; then at
most :data:`PLD_MAX_EVALUATIONS` PLD calls refine it to a relative width of
at least :data:`PLD_RTOL`, and the feasible end of the bracket found so far
(evaluated: ε ≤ target) is returned.
"""

from __future__ import annotations

import fractions
import functools
import math
import warnings
from typing import Callable

from fastdp import sampling as _sampling   # samplers sit beside this layer (DESIGN.md)
from fastdp._validation import check_integer, check_real
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.accountants import EpsilonReport, check_delta, get_accountant
from fastdp.privacy.events import DpEvent, GaussianEvent, SelfComposedEvent

__all__ = [
    "SAMPLING_SCHEMES",
    "CalibrationResult",
    "calibrate",
    "calibrate_noise_multiplier",
    "compute_epsilon",
    "compute_epsilon_report",
    "dp_sgd_event",
]

#: The samplers the planning helpers know: :data:`fastdp.sampling.SAMPLER_NAMES`
#: (spelled out because this module loads while :mod:`fastdp.sampling` may
#: still be loading; tests/privacy/test_calibration_sampling.py checks they agree).
SAMPLING_SCHEMES = ("poisson", "fixed", "shuffle")

_DEFAULT_RTOL = 1e-6
_MAX_EVALUATIONS = 200

PLD_MAX_EPSILON = 100.0
"""Largest target ε the PLD accountant calibrates (beyond, one PLD evaluation takes
minutes and the tightness it buys is irrelevant): use ``accountant="rdp"``."""
PLD_MAX_EVALUATIONS = 8
"""Most PLD evaluations of one calibration (after the RDP placement)."""
PLD_RTOL = 1e-4
"""Smallest relative tolerance of a PLD search: below, the parameter is finer than
the PLD grid's own pessimism (1e-4 in σ moves ε by about 1e-4 relative)."""
_PLD_FIRST_STEP = math.log(1.1)   # PLD's root is a few % below RDP's
_MAX_EXPANSIONS = 60
_MAX_LOG_RANGE = math.log(1e12)   # default search: initial guess × 1e±12


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------
#: Calibration's parameters are finite reals; steps a whole number >= 0 (``3.0`` accepted).
_real = functools.partial(check_real, allow_inf=False)
_steps = functools.partial(check_integer, "steps", low=0, allow_integral_float=True)


def _dataset_and_batch(sample_rate: float, dataset_size) -> tuple[int, int]:
    """(n, batch) with batch/n == sample_rate, for the samplers that need sizes."""
    if dataset_size is not None:
        n = check_integer("dataset_size", dataset_size, low=1)
        batch = round(sample_rate * n)
        if batch < 1 or abs(batch / n - sample_rate) > 1e-9 * sample_rate:
            raise ValidationError(
                f"sample_rate={sample_rate} is not batch/dataset_size for an integer batch "
                f"with dataset_size={n}.")
        return n, batch
    frac = fractions.Fraction(sample_rate).limit_denominator(10 ** 9)
    if frac.numerator < 1 or abs(float(frac) - sample_rate) > 1e-12 * sample_rate:
        raise ValidationError(
            f"cannot write sample_rate={sample_rate} as batch/n; pass dataset_size=n.")
    return frac.denominator, frac.numerator


def _planning_sampler(sampling, q: float, dataset_size):
    """(sampler, n) for ``sampling`` at rate q; ``(None, None)`` for the deprecated "none".

    The samplers are those of :mod:`fastdp.sampling` that training runs: a
    name gives ``PoissonSampler(q)``, ``FixedSizeSampler(batch)`` or
    ``ShuffleSampler(batch)`` with ``batch / n = q``; a
    :class:`~fastdp.sampling.Sampler` object is used as it is (its rate at n
    must be q).
    """
    if isinstance(sampling, _sampling.Sampler):
        if isinstance(sampling, _sampling.PoissonSampler) and dataset_size is None:
            n = None
        else:
            n, _ = _dataset_and_batch(q, dataset_size)
        if abs(sampling.sample_rate(n) - q) > 1e-12 * q:
            raise ValidationError(f"sample_rate={q} is not the rate {sampling.sample_rate(n)} "
                                  f"of {sampling!r} at n={n}.")
        return sampling, n
    if not isinstance(sampling, str):
        raise ValidationError(f"sampling must be one of {SAMPLING_SCHEMES} or a "
                              f"fastdp.sampling.Sampler; got {sampling!r}.")
    name = _sampling.canonical_sampler_name(sampling)
    if name == "none":
        warnings.warn("sampling='none' is deprecated; it accounts every step as a release on "
                      "the whole dataset, which is sampling='poisson' with sample_rate=1.",
                      DeprecationWarning, stacklevel=4)
        return None, None
    if name not in SAMPLING_SCHEMES:
        raise ValidationError(f"sampling must be one of {SAMPLING_SCHEMES}, got {sampling!r}.")
    if name == "poisson":
        return _sampling.PoissonSampler(q), dataset_size
    n, batch = _dataset_and_batch(q, dataset_size)
    return _sampling.get_sampler(name, batch), n


def dp_sgd_event(noise_multiplier, sample_rate, steps, sampling="poisson", *,
                 noise_multiplier_adjacency="add_remove", dataset_size=None) -> DpEvent:
    """The event of ``steps`` noisy-gradient steps with Gaussian noise.

    Each step adds Gaussian noise with standard deviation σ·Δ₂ to a query on
    the batch (e.g. a sum of per-example gradients clipped to norm C). The
    event is the one the sampler of :mod:`fastdp.sampling` that training
    runs emits (``sampler.event(n, steps, GaussianEvent(σ))``), so planning
    and training account the same thing.

    Parameters
    ----------
    noise_multiplier : float
        σ = noise std / L2 sensitivity, where the sensitivity is measured under
        ``noise_multiplier_adjacency`` (for a clipped sum: ``C`` under
        add/remove, ``2C`` under replace-one).
    sample_rate : float
        q = expected batch / n in (0, 1].
    steps : int
    sampling : {"poisson", "fixed", "shuffle"} or fastdp.sampling.Sampler
        * ``"poisson"``: each record joins each batch independently with
          probability q; add/remove adjacency; amplification by subsampling.
        * ``"fixed"``: batches of exactly q·n records drawn without
          replacement; replace-one adjacency (σ under add/remove is halved).
        * ``"shuffle"``: a fresh permutation per pass, cut into consecutive
          lots of q·n that run on across permutations, as
          :class:`~fastdp.sampling.ShuffleSampler` draws them; no
          amplification (see :class:`~fastdp.privacy.events.ShuffledEvent`):
          the lots touch ``ceil(steps·q)`` permutations.
        * deprecated: ``"fixed_size"`` (= ``"fixed"``) and ``"none"`` (no
          amplification whatever the batches: every step accounted as a full
          Gaussian release, ``sample_rate`` ignored).
    noise_multiplier_adjacency : {"add_remove", "replace_one"}
    dataset_size : int, optional
        n, for ``"fixed"``/``"shuffle"`` (derived from ``sample_rate`` as a
        fraction if omitted).

    Notes
    -----
    Changed in issue 19: ``"shuffle"`` is now the event of the shuffle
    sampler that runs (its lots straddle permutations); it used to assume
    epoch-aligned lots with a short last lot and reported a smaller ε.
    """
    q = _real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    steps = _steps(steps)
    gaussian = GaussianEvent(noise_multiplier, noise_multiplier_adjacency)
    sampler, n = _planning_sampler(sampling, q, dataset_size)
    if sampler is None:
        return SelfComposedEvent(gaussian, steps)
    return sampler.event(n, steps, gaussian)


# ---------------------------------------------------------------------------
# ε of DP-SGD-style training
# ---------------------------------------------------------------------------
_SHARED = {}


def _accountant(accountant):
    """Shared default instances (accountants are stateless apart from caches, which a
    calibration and the ε check after it share)."""
    if isinstance(accountant, str) and accountant.lower() in ("rdp", "pld_own", "auto"):
        key = accountant.lower()
        if key not in _SHARED:
            _SHARED[key] = get_accountant(key)
        return _SHARED[key]
    return get_accountant(accountant)


def compute_epsilon(noise_multiplier, sample_rate, steps, delta, accountant="rdp",
                    sampling="poisson", *, noise_multiplier_adjacency="add_remove",
                    dataset_size=None) -> float:
    """Guaranteed ε of ``steps`` Gaussian noisy steps at ``delta``.

    What is private: every record of the training set. Adjacency: add/remove
    for ``"poisson"``, replace-one for ``"fixed"``/``"shuffle"``.
    Released: every step's noisy output (all iterates). See
    :func:`dp_sgd_event` for the parameters. For ``"shuffle"`` this is the
    guaranteed number (no amplification); :func:`compute_epsilon_report`
    also gives the labelled Poisson what-if.

    Returns
    -------
    float
        ε (``inf`` if not private at this δ).
    """
    event = dp_sgd_event(noise_multiplier, sample_rate, steps, sampling,
                         noise_multiplier_adjacency=noise_multiplier_adjacency,
                         dataset_size=dataset_size)
    return _accountant(accountant).epsilon(event, check_delta(delta))


def compute_epsilon_report(noise_multiplier, sample_rate, steps, delta, accountant="rdp",
                           sampling="poisson", *, noise_multiplier_adjacency="add_remove",
                           dataset_size=None) -> EpsilonReport:
    """Like :func:`compute_epsilon` but returns an
    :class:`~fastdp.privacy.accountants.EpsilonReport` (guaranteed ε and, for
    ``sampling="shuffle"``, the ε if Poisson sampling were assumed)."""
    event = dp_sgd_event(noise_multiplier, sample_rate, steps, sampling,
                         noise_multiplier_adjacency=noise_multiplier_adjacency,
                         dataset_size=dataset_size)
    return _accountant(accountant).report(event, check_delta(delta))


# ---------------------------------------------------------------------------
# Generic calibration
# ---------------------------------------------------------------------------
class CalibrationResult(float):
    """The calibrated parameter (a float) with the search record attached.

    Attributes
    ----------
    epsilon : float
        ε at the returned parameter (≤ target).
    infeasible_bound : float
        The closest evaluated parameter on the other side (ε > target).
    evaluations : int
        Number of accountant calls.
    """

    def __new__(cls, value, epsilon, infeasible_bound, evaluations):
        obj = super().__new__(cls, value)
        obj.epsilon = epsilon
        obj.infeasible_bound = infeasible_bound
        obj.evaluations = evaluations
        return obj

    def __repr__(self):
        return (f"CalibrationResult({float(self)!r}, epsilon={self.epsilon!r}, "
                f"evaluations={self.evaluations})")


def calibrate(make_event: Callable[[float], DpEvent], target_epsilon, delta,
              accountant="rdp", lower=None, upper=None, increasing_privacy=True,
              *, rtol=_DEFAULT_RTOL, initial_guess=1.0) -> CalibrationResult:
    """Extremal parameter of a one-parameter event family within an ε budget.

    With ``increasing_privacy=True`` (ε falls as the parameter grows: noise
    multipliers, Laplace scales) the result is the smallest parameter x with
    ε(make_event(x)) ≤ target; with ``False`` (ε grows with the parameter:
    per-call budgets such as ε_BT or ρ_BT) the largest. Parameters are > 0.

    The returned x has been evaluated and satisfies ε ≤ target; the evaluated
    neighbour on the other side (``result.infeasible_bound``) has ε > target
    and differs from x by a factor of at most 1 + ``rtol``. (If ``lower``
    is feasible for ``increasing_privacy=True`` it is returned as is, and
    likewise ``upper`` otherwise.)

    Parameters
    ----------
    make_event : callable float -> DpEvent
    target_epsilon : float
        > 0.
    delta : float
        In [0, 1].
    accountant : str or accountant instance, default "rdp"
    lower, upper : float, optional
        Search range; found by geometric expansion from ``initial_guess``
        when omitted.
    increasing_privacy : bool, default True
    rtol : float, default 1e-6
        Relative tolerance in the parameter.
    initial_guess : float, default 1.0

    Raises
    ------
    ValidationError
        If no parameter in range meets the target.
    """
    if not callable(make_event):
        raise ValidationError("make_event must be a callable taking the parameter value.")
    target = _real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = check_delta(delta)
    rtol = _real("rtol", rtol, low=0.0, low_open=True)
    acc = _accountant(accountant)
    evaluations = 0
    sign = 1.0 if increasing_privacy else -1.0
    if getattr(acc, "name", None) == "pld":
        return _calibrate_pld(make_event, target, delta, acc, sign, rtol, lower, upper,
                              initial_guess)
    if getattr(acc, "name", None) in ("pld_own", "auto"):
        return _calibrate_tight(make_event, target, delta, acc, sign, rtol, lower, upper,
                                initial_guess)

    def gap(u: float) -> float:
        """log ε − log target at parameter e^u (> 0: over budget)."""
        nonlocal evaluations
        evaluations += 1
        if evaluations > _MAX_EVALUATIONS:
            raise ValidationError("calibration did not converge; check that ε is monotone "
                                  "in the parameter.")
        eps = acc.epsilon(make_event(param(u)), delta)
        if eps <= 0:
            return -math.inf
        return math.log(eps) - math.log(target) if math.isfinite(eps) else math.inf

    if lower is not None:
        lower = _real("lower", lower, low=0.0, low_open=True)
    if upper is not None:
        upper = _real("upper", upper, low=0.0, low_open=True)
    log_lo = None if lower is None else math.log(lower)
    log_hi = None if upper is None else math.log(upper)

    def param(u: float) -> float:
        """Parameter value at log-parameter u (the user's bounds exactly)."""
        if u == log_lo:
            return lower
        if u == log_hi:
            return upper
        return math.exp(u)
    if log_lo is not None and log_hi is not None and log_lo >= log_hi:
        raise ValidationError(f"lower ({lower}) must be < upper ({upper}).")

    # Work with v = sign·u so that ε always decreases in v; a bracket is
    # (v_bad, g_bad) with gap > 0 and (v_ok, g_ok) with gap <= 0, v_bad < v_ok.
    v_min = None if (log_lo if sign > 0 else log_hi) is None else sign * (log_lo if sign > 0 else log_hi)
    v_max = None if (log_hi if sign > 0 else log_lo) is None else sign * (log_hi if sign > 0 else log_lo)
    G = lambda v: gap(sign * v)  # noqa: E731

    if v_min is not None and v_max is not None:
        v_bad, g_bad = v_min, G(v_min)
        if g_bad <= 0:
            return CalibrationResult(param(sign * v_bad), _eps_of(g_bad, target),
                                     param(sign * v_bad), evaluations)
        v_ok, g_ok = v_max, G(v_max)
        if g_ok > 0:
            raise ValidationError(
                f"even the {'upper' if sign > 0 else 'lower'} end of the range has "
                f"epsilon above the target {target}; widen the range.")
    else:
        start = math.log(_real("initial_guess", initial_guess, low=0.0, low_open=True)) * sign
        if v_min is not None:
            start = max(start, v_min)
        if v_max is not None:
            start = min(start, v_max)
        if v_min is None:
            v_min = start - _MAX_LOG_RANGE
        if v_max is None:
            v_max = start + _MAX_LOG_RANGE
        g0 = G(start)
        step = math.log(2.0)
        if g0 > 0:
            v_bad, g_bad = start, g0
            v_ok = None
            for _ in range(_MAX_EXPANSIONS):
                v = v_bad + step
                if v_max is not None and v >= v_max:
                    v = v_max
                g = G(v)
                if g <= 0:
                    v_ok, g_ok = v, g
                    break
                if v == v_max:
                    break
                v_bad, g_bad = v, g
                step *= 2.0
            if v_ok is None:
                raise ValidationError(
                    f"no parameter within the search range reaches epsilon <= {target} "
                    f"at delta = {delta}; the target may be unreachable.")
        else:
            v_ok, g_ok = start, g0
            v_bad = None
            for _ in range(_MAX_EXPANSIONS):
                v = v_ok - step
                if v_min is not None and v <= v_min:
                    v = v_min
                g = G(v)
                if g > 0:
                    v_bad, g_bad = v, g
                    break
                v_ok, g_ok = v, g
                if v == v_min:
                    break
                step *= 2.0
            if v_bad is None:
                # every parameter down to the limit meets the target
                return CalibrationResult(param(sign * v_ok), _eps_of(g_ok, target),
                                         param(sign * v_ok), evaluations)

    v_ok, g_ok, v_bad, g_bad = _shrink_bracket(G, v_ok, g_ok, v_bad, g_bad, math.log1p(rtol))
    return CalibrationResult(param(sign * v_ok), _eps_of(g_ok, target),
                             param(sign * v_bad), evaluations)


class _OutOfEvaluations(Exception):
    """The PLD calibration used its evaluations (internal)."""


def _search_bounds(lower, upper, initial_guess):
    """The PLD searches' ``(lower, upper, initial_guess)``, checked: positive, lower < upper."""
    if lower is not None:
        lower = _real("lower", lower, low=0.0, low_open=True)
    if upper is not None:
        upper = _real("upper", upper, low=0.0, low_open=True)
        if lower is not None and lower >= upper:
            raise ValidationError(f"lower ({lower}) must be < upper ({upper}).")
    return lower, upper, _real("initial_guess", initial_guess, low=0.0, low_open=True)


def _calibrate_pld(make_event, target, delta, acc, sign, rtol, lower, upper, initial_guess):
    """:func:`calibrate` with the PLD accountant, in bounded work (module docstring).

    The RDP accountant's root (RDP is an upper bound on the same privacy loss,
    so its parameter is feasible or nearly so under PLD) is the starting
    point; the bracket is found by steps of 10% (doubling), then shrunk as in
    :func:`calibrate`, with at most :data:`PLD_MAX_EVALUATIONS` PLD calls.
    Only an evaluated parameter with PLD ε ≤ target is returned.
    """
    if target > PLD_MAX_EPSILON:
        raise ValidationError(
            f"the PLD accountant calibrates targets up to epsilon = {PLD_MAX_EPSILON:g} (got "
            f"{target:g}): beyond, one PLD evaluation takes minutes (its grid grows as the "
            "noise shrinks) and buys nothing; use accountant='rdp'.")
    lower, upper, guess = _search_bounds(lower, upper, initial_guess)
    try:  # cheap placement; events RDP cannot analyse start from the guess
        guess = float(calibrate(make_event, target, delta, accountant="rdp", lower=lower,
                                upper=upper, increasing_privacy=sign > 0, rtol=1e-3,
                                initial_guess=guess))
    except (ValidationError, PrivacyAnalysisError):
        pass
    log_lo = -math.inf if lower is None else math.log(lower)
    log_hi = math.inf if upper is None else math.log(upper)
    v_min, v_max = sorted((sign * log_lo, sign * log_hi))
    state = {"evaluations": 0, "ok": None, "bad": None}  # closest evaluated ends (v, g)

    def param(v):
        u = sign * v
        return lower if u == log_lo else upper if u == log_hi else math.exp(u)

    def G(v):
        """log ε − log target at v (ε decreasing in v); records the bracket ends."""
        if state["evaluations"] >= PLD_MAX_EVALUATIONS:
            raise _OutOfEvaluations
        state["evaluations"] += 1
        eps = acc.epsilon(make_event(param(v)), delta)
        g = -math.inf if eps <= 0 else (
            math.log(eps) - math.log(target) if math.isfinite(eps) else math.inf)
        if g <= 0 and (state["ok"] is None or v < state["ok"][0]):
            state["ok"] = (v, g)
        if g > 0 and (state["bad"] is None or v > state["bad"][0]):
            state["bad"] = (v, g)
        return g

    try:
        v = min(max(sign * math.log(guess), v_min), v_max)
        g = G(v)
        step, direction = _PLD_FIRST_STEP, (-1.0 if g <= 0 else 1.0)
        while state["ok"] is None or state["bad"] is None:
            following = min(max(v + direction * step, v_min), v_max)
            if following == v:
                break  # the end of the range: no bracket on this side
            v = following
            G(v)
            step *= 2.0
        if state["ok"] is not None and state["bad"] is not None:
            _shrink_bracket(G, *state["ok"], *state["bad"], math.log1p(max(rtol, PLD_RTOL)))
    except _OutOfEvaluations:
        pass
    if state["ok"] is None:
        raise ValidationError(
            f"no parameter reached epsilon <= {target} at delta = {delta} under the PLD "
            f"accountant within {PLD_MAX_EVALUATIONS} evaluations (the target may be "
            "unreachable); use accountant='rdp'.")
    v_ok, g_ok = state["ok"]
    bad = param(state["bad"][0]) if state["bad"] is not None else param(v_ok)
    return CalibrationResult(param(v_ok), _eps_of(g_ok, target), bad, state["evaluations"])


AUTO_PLD_MAX_EPSILON = 50.0
"""Above this target ``"auto"`` calibrates with RDP alone (the PLD's grid of losses
would be huge, and the release is barely private anyway)."""
OWN_PLD_RTOL = 5e-4
"""Smallest relative tolerance of a search with fastdp's own PLD accountant (as
:data:`PLD_RTOL`: finer than the grid's own pessimism, about 5e-4 in ε, buys nothing)."""
_OWN_PLD_MAX_EVALUATIONS = 40


def _calibrate_tight(make_event, target, delta, acc, sign, rtol, lower, upper, initial_guess):
    """:func:`calibrate` with ``"pld_own"`` or ``"auto"``: RDP places, a coarse PLD brackets,
    the accountant's own PLD closes.

    * ``"auto"``: the smallest parameter whose *smaller* of the two ε (RDP, own
      PLD) is at most the target is the smaller of the two accountants' own
      answers (each ε decreases in the parameter), so both searches run and the
      smaller parameter is returned; events the PLD refuses are calibrated with
      RDP alone.
    * ``"pld_own"``: the RDP root (an upper bound on the same loss, so its
      parameter is feasible or nearly so) starts a secant search under the
      same PLD on a 4x coarser grid (fast; its ε is an upper bound too); its
      root and slope start the final secant search with the accountant
      itself, whose evaluated feasible end is returned.
    """
    from fastdp.privacy.pld_own import OwnPLDAccountant

    lower, upper, guess = _search_bounds(lower, upper, initial_guess)
    pld = acc.pld if acc.name == "auto" else acc
    rdp_result, rdp_error = None, None
    try:
        rdp_result = calibrate(make_event, target, delta, accountant=acc.rdp if acc.name == "auto"
                               else "rdp", lower=lower, upper=upper,
                               increasing_privacy=sign > 0,
                               rtol=rtol, initial_guess=guess)
        guess = float(rdp_result)
    except (ValidationError, PrivacyAnalysisError) as exc:
        rdp_error = exc
    if acc.name == "auto" and target > AUTO_PLD_MAX_EPSILON and rdp_result is not None:
        return rdp_result        # (see AUTO_PLD_MAX_EPSILON)
    if acc.name != "auto" and target > PLD_MAX_EPSILON:
        raise ValidationError(
            f"the own PLD accountant calibrates targets up to epsilon = {PLD_MAX_EPSILON:g} "
            f"(got {target:g}): beyond, its grid of losses is huge and the tightness it buys "
            "is irrelevant; use accountant='auto' or 'rdp'.")
    if not isinstance(pld, OwnPLDAccountant) or not pld.supports(make_event(guess)):
        if acc.name == "auto" and rdp_result is not None:
            return rdp_result
        if rdp_error is not None and acc.name == "auto":
            raise rdp_error
        pld.epsilon(make_event(guess), delta)   # raises the PLD's refusal by name
    try:
        pld_result = _own_pld_search(make_event, target, delta, pld, sign, rtol, lower, upper,
                                     guess)
    except (ValidationError, PrivacyAnalysisError):
        if acc.name == "auto" and rdp_result is not None:
            return rdp_result
        raise
    if acc.name == "auto" and rdp_result is not None:
        # the smaller parameter in the direction of less noise
        if sign * math.log(float(rdp_result)) <= sign * math.log(float(pld_result)):
            return rdp_result
    return pld_result


def _own_pld_search(make_event, target, delta, pld, sign, rtol, lower, upper, guess):
    """Coarse-then-fine secant search of :func:`_calibrate_tight` under one own-PLD accountant."""
    log_lo = -math.inf if lower is None else math.log(lower)
    log_hi = math.inf if upper is None else math.log(upper)
    v_min, v_max = sorted((sign * log_lo, sign * log_hi))
    evaluations = [0]

    def param(v):
        u = sign * v
        return lower if u == log_lo else upper if u == log_hi else math.exp(u)

    def gap_of(accountant):
        def G(v):
            evaluations[0] += 1
            if evaluations[0] > _OWN_PLD_MAX_EVALUATIONS:
                raise ValidationError("calibration did not converge; check that epsilon is "
                                      "monotone in the parameter.")
            eps = accountant.epsilon(make_event(param(v)), delta)
            if eps <= 0:
                return -math.inf
            return math.log(eps) - math.log(target) if math.isfinite(eps) else math.inf
        return G

    v0 = min(max(sign * math.log(guess), v_min), v_max)
    slope = _rdp_slope(make_event, delta, param, v0)
    coarse = gap_of(pld.coarser(4.0))
    ok, bad, slope = _secant_close(coarse, v0, slope, math.log1p(2e-2), v_min, v_max)
    tol = math.log1p(max(rtol, OWN_PLD_RTOL))
    if ok is not None and math.isfinite(ok[1]):
        # the fine grid's root, predicted: connect-the-dots errors scale like h², so from
        # the 4x and 2x coarser grids at the coarse root, ε_1 ≈ ε_2 − (ε_4 − ε_2)/4
        v0, g4 = ok
        g2 = gap_of(pld.coarser(2.0))(v0)
        e4, e2 = math.exp(g4), math.exp(g2) if math.isfinite(g2) else math.exp(g4)
        e1 = e2 - (e4 - e2) / 4.0
        predicted = v0 - (math.log(e1) if e1 > 0 else g2) / slope
        v0 = min(max(predicted - 0.4 * tol, v_min), v_max)
    ok, bad, _ = _secant_close(gap_of(pld), v0, slope, tol, v_min, v_max)
    if ok is None:
        raise ValidationError(
            f"no parameter within the search range reaches epsilon <= {target} at delta = "
            f"{delta} under the {pld.name} accountant; the target may be unreachable.")
    bad_param = param(ok[0]) if bad is None else param(bad[0])
    return CalibrationResult(param(ok[0]), _eps_of(ok[1], target), bad_param, evaluations[0])


def _rdp_slope(make_event, delta, param, v0):
    """d log ε / dv of the RDP ε at v0 (a guess of the PLD's; −1.5 if RDP cannot say)."""
    rdp = _accountant("rdp")
    try:
        e0 = rdp.epsilon(make_event(param(v0)), delta)
        e1 = rdp.epsilon(make_event(param(v0 + 0.02)), delta)
        slope = (math.log(e1) - math.log(e0)) / 0.02
    except (ValidationError, PrivacyAnalysisError, ValueError, ZeroDivisionError):
        return -1.5
    return slope if math.isfinite(slope) and slope < -1e-3 else -1.5


def _secant_close(G, v0, slope, tol, v_min, v_max):
    """Evaluated ends ``ok`` (G ≤ 0) and ``bad`` (G > 0) at most ``tol`` apart around the
    root of the decreasing G, by secant steps on G that aim ``tol``/2 past the predicted
    root (so that each step can close the bracket), bisection once bracketed and stalled.

    Returns (ok, bad, slope); ``bad`` is None when every parameter up to the end of the
    range is feasible, ``ok`` None when none is.
    """
    ok = bad = None
    points = []

    def record(v):
        nonlocal ok, bad
        g = G(v)
        points.append((v, g))
        if g <= 0 and (ok is None or v < ok[0]):
            ok = (v, g)
        if g > 0 and (bad is None or v > bad[0]):
            bad = (v, g)

    record(v0)
    for step in range(_MAX_EXPANSIONS):
        if ok is not None and bad is not None and ok[0] - bad[0] <= tol:
            break
        if len(points) >= 2:
            (va, ga), (vb, gb) = points[-2], points[-1]
            if math.isfinite(ga) and math.isfinite(gb) and ga != gb and va != vb:
                secant = (gb - ga) / (vb - va)
                if secant < 0:
                    slope = secant
        v, g = points[-1]
        if math.isfinite(g):
            root = v - g / slope
        else:
            root = v + (1.0 if g > 0 else -1.0)
        aim = root + (0.4 * tol if g > 0 else -0.4 * tol)    # across the root from v
        if ok is not None and bad is not None:
            # move the end farther from the root estimate to 0.4·tol past it
            aim = root + (0.4 * tol if ok[0] - root > root - bad[0] else -0.4 * tol)
            if not bad[0] < aim < ok[0] or step >= 8:
                aim = 0.5 * (bad[0] + ok[0])
        elif g > 0:
            aim = max(aim, v + 0.5 * tol)
        else:
            aim = min(aim, v - 0.5 * tol)
        aim = min(max(aim, v_min), v_max)
        if aim == v:
            break     # the end of the range
        record(aim)
    return ok, bad, slope


def _eps_of(g: float, target: float) -> float:
    return target * math.exp(g) if g > -math.inf else 0.0


def _shrink_bracket(G, v_ok, g_ok, v_bad, g_bad, tol):
    """Shrink a bracket of a decreasing function G to width ``tol``.

    Invariant: v_bad < v_ok, G(v_bad) > 0 >= G(v_ok); every bracket end has
    been evaluated. Steps: secant through the two most recent evaluations
    (superlinear on the nearly linear log ε vs log σ), bisection when the
    secant leaves the bracket or progress stalls, and, once the secant step is
    below the tolerance, two evaluations straddling the root estimate that
    close the bracket from both sides.
    """
    v1, g1, v2, g2 = v_bad, g_bad, v_ok, g_ok      # the two most recent points
    stalled_width, stalled_steps = v_ok - v_bad, 0

    def update(v, g):
        nonlocal v_ok, g_ok, v_bad, g_bad, v1, g1, v2, g2
        if g > 0:
            v_bad, g_bad = v, g
        else:
            v_ok, g_ok = v, g
        v1, g1, v2, g2 = v2, g2, v, g

    while v_ok - v_bad > tol:
        mid = 0.5 * (v_bad + v_ok)
        if math.isfinite(g1) and math.isfinite(g2) and g1 != g2:
            root = v2 - g2 * (v2 - v1) / (g2 - g1)
        else:
            root = mid
        if not v_bad < root < v_ok or stalled_steps >= 3:
            root, stalled_steps = mid, 0
            update(root, G(root))
        elif abs(root - v2) < 0.5 * tol:
            lo, hi = root - 0.05 * tol, root + 0.05 * tol
            if lo > v_bad:
                update(lo, G(lo))
            if hi < v_ok and v_ok - v_bad > tol:
                update(hi, G(hi))
        else:
            update(root, G(root))
        if v_ok - v_bad < 0.5 * stalled_width:
            stalled_width, stalled_steps = v_ok - v_bad, 0
        else:
            stalled_steps += 1
    return v_ok, g_ok, v_bad, g_bad


# ---------------------------------------------------------------------------
# Noise multiplier
# ---------------------------------------------------------------------------
def calibrate_noise_multiplier(target_epsilon, delta, sample_rate, steps, accountant="rdp",
                               sampling="poisson", *, noise_multiplier_adjacency="add_remove",
                               dataset_size=None, rtol=_DEFAULT_RTOL) -> CalibrationResult:
    """Smallest noise multiplier σ whose ε does not exceed ``target_epsilon``.

    The event is :func:`dp_sgd_event` (``steps`` Gaussian steps with the given
    sampling); see :func:`compute_epsilon` for the privacy meaning. The
    result σ satisfies ε(σ) ≤ target and ε(σ/(1 + rtol)) > target (it is
    within a relative ``rtol`` of the exact smallest σ, never below it).
    For ``sampling="shuffle"`` the guaranteed ε is used, never the Poisson
    what-if.

    Returns
    -------
    CalibrationResult
        A float subclass carrying ``epsilon`` and ``evaluations``.
    """
    q = _real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    steps = _steps(steps)
    if steps == 0:
        raise ValidationError("steps must be >= 1 to calibrate noise (0 steps release nothing).")
    # warm start: the Gaussian-approximation guess σ ≈ q·sqrt(T·log(1/δ))/ε,
    # clipped to a sensible range (only affects speed)
    d = check_delta(delta)
    if d == 0:
        raise ValidationError("Gaussian noise cannot give delta = 0; choose delta > 0.")
    guess = 1.0
    if 0 < d < 1 and _real("target_epsilon", target_epsilon, low=0.0, low_open=True) > 0:
        eff_q = 1.0 if isinstance(sampling, str) and sampling.lower() == "none" else q
        guess = eff_q * math.sqrt(steps * 2.0 * math.log(1.0 / d)) / float(target_epsilon)
        guess = min(max(guess, 0.3), 1e4)

    def make(sigma):
        return dp_sgd_event(sigma, q, steps, sampling,
                            noise_multiplier_adjacency=noise_multiplier_adjacency,
                            dataset_size=dataset_size)

    return calibrate(make, target_epsilon, delta, accountant=accountant,
                     increasing_privacy=True, rtol=rtol, initial_guess=guess)
