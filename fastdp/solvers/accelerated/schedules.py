"""Step, momentum and stage schedules; error-bound coefficients; budget allocation.

Spec 002, Algorithms 3-5 and sections 4.5-4.7.  Everything here is a public
function of public parameters (step sizes, μ, L, d, n, ε, S1): nothing reads
the data, so nothing here costs privacy.

Iterations are numbered k = 1..T (spec B7): step k uses step size α_k,
momentum β_k and stage s_k and produces x_k.

Bound constants (spec 002, section 7, item B1) for the error bound

    a_{τ,t} = K_a α_t (1 + α_t L) Π_{i=t+1}^{τ} (1 − √(μ α_i)) 2^{e(τ, t)}
    a_{τ,0} = 2^{s_τ − s_0} Π_{i=1}^{τ} (1 − √(μ α_i))

====================  =====  =====================================================
name                  K_a    s_0
====================  =====  =====================================================
``"paper"``           1      s_1 (a_{τ,0} = 2^{s_τ − s_1} Π, eq. 4.8)
``"consistent"``      1      0 (Laplace variance 2b² and V(ξ_0) ≤ 2 E_0)
``"reference_code"``  1/2    0 (the authors' ``opt_noise_dist_NAG.m``)
====================  =====  =====================================================

The stage exponent is ``e(τ, t) = s_τ − s_t`` (``stage_counting="exact"``,
the default) or, to regenerate the authors' Fig. 2 exactly,
``"reference_fig2"``: the number of stage ends (last iterations of the stages
of the nominal schedule, except the final iteration) in (t, τ] (spec C11).
"""

import functools
import math

import numpy as np
from scipy.special import logsumexp

from fastdp._validation import check_real
from fastdp.exceptions import ValidationError

__all__ = [
    "BOUND_CONSTANTS",
    "STAGE_COUNTINGS",
    "ALLOCATIONS",
    "HORIZON_RULES",
    "nag_momentum",
    "polyak_heavy_ball_parameters",
    "masg_schedule",
    "log_bound_coefficients",
    "horizon_bounds",
    "choose_horizon",
    "prop42_allocation",
    "prop42_objective",
    "numerical_allocation",
    "allocation_objective",
]

BOUND_CONSTANTS = ("paper", "consistent", "reference_code")
ALLOCATIONS = ("uniform", "prop42", "numerical")


#: The schedules' parameters are finite reals > 0 unless a call says otherwise.
_real = functools.partial(check_real, low=0.0, low_open=True, allow_inf=False)


def nag_momentum(step_size, strong_convexity):
    """β = (1 − √(μα)) / (1 + √(μα)) (spec 002, Algorithm 3; used for HB in the experiments)."""
    root = math.sqrt(_real("strong_convexity", strong_convexity, low_open=False)
                     * _real("step_size", step_size))
    if root >= 1.0:
        raise ValidationError(f"need μ α < 1 for a momentum in [0, 1); got μ α = {root ** 2:g}")
    return (1.0 - root) / (1.0 + root)


def polyak_heavy_ball_parameters(strong_convexity, smoothness):
    """Classical heavy-ball (α, β) = (4/(√μ+√L)², ((√κ−1)/(√κ+1))²) (Polyak 1987)."""
    mu = _real("strong_convexity", strong_convexity)
    L = _real("smoothness", smoothness)
    kappa = L / mu
    return 4.0 / (math.sqrt(mu) + math.sqrt(L)) ** 2, ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2


def masg_schedule(n_iter, smoothness, strong_convexity, step_multiplier=1.0, n1=None,
                  n1_rounding="ceil", p=1):
    """Stage schedule of multistage accelerated NAG (spec 002, Algorithm 5, eq. 4.7).

    Stage 1 has length ``n1`` (default ``max(1, round(√κ ln κ))`` with
    ``n1_rounding`` "ceil" as in the authors' section-5 code, "floor" as in
    their Fig. 2 script) and step ``c/L``; stage k ≥ 2 has length
    ``2^k ⌈√κ ln 2^{p+2}⌉`` and step ``c/(4^k L)``; the last stage is cut at
    ``n_iter``.  β_k = (1 − √(μ α_k))/(1 + √(μ α_k)).  Momentum restarts
    (x_{k−2} := x_{k−1}) at the first step of every stage k ≥ 2.

    Returns
    -------
    dict with arrays ``step_sizes``, ``momenta``, ``stages`` (1-based),
    ``restarts`` (bool: first step of a stage ≥ 2), ``stage_ends`` (1-based
    iteration numbers of the last step of every stage, the last being
    ``n_iter``) and scalars ``n1``, ``C``, ``kappa``.
    """
    T = int(n_iter)
    if T < 1:
        raise ValidationError(f"n_iter must be >= 1; got {n_iter!r}")
    L = _real("smoothness", smoothness)
    mu = _real("strong_convexity", strong_convexity)
    c = _real("step_multiplier", step_multiplier)
    if c > 1.0:
        raise ValidationError(f"step_multiplier must be in (0, 1] (α ≤ 1/L); got {c!r}")
    if mu > L:
        raise ValidationError(f"strong_convexity ({mu}) must not exceed smoothness ({L})")
    kappa = L / mu
    if n1 is None:
        if n1_rounding not in ("ceil", "floor"):
            raise ValidationError(f"n1_rounding must be 'ceil' or 'floor'; got {n1_rounding!r}")
        raw = math.sqrt(kappa) * math.log(kappa)
        n1 = math.ceil(raw) if n1_rounding == "ceil" else math.floor(raw)
        n1 = max(1, n1)
    elif isinstance(n1, bool) or int(n1) != n1 or n1 < 1:
        raise ValidationError(f"n1 must be an int >= 1; got {n1!r}")
    n1 = int(n1)
    if int(p) != p or p < 1:
        raise ValidationError(f"p must be an int >= 1; got {p!r}")
    C = math.ceil(math.sqrt(kappa) * math.log(2.0 ** (int(p) + 2)))
    stages = np.empty(T, dtype=np.int64)
    stage_ends = []
    start, k, length = 0, 1, n1
    while start < T:
        stop = min(T, start + length)
        stages[start:stop] = k
        stage_ends.append(stop)
        start = stop
        k += 1
        length = 2 ** k * C
    step_sizes = c / (4.0 ** np.where(stages == 1, 0, stages) * L)
    roots = np.sqrt(mu * step_sizes)
    restarts = np.zeros(T, dtype=bool)
    restarts[1:] = stages[1:] != stages[:-1]
    return {
        "step_sizes": step_sizes,
        "momenta": (1.0 - roots) / (1.0 + roots),
        "stages": stages,
        "restarts": restarts,
        "stage_ends": np.asarray(stage_ends, dtype=np.int64),
        "n1": n1,
        "C": C,
        "kappa": kappa,
    }


STAGE_COUNTINGS = ("exact", "reference_fig2")


def _stage_exponents(stages, stage_ends, counting):
    """Per-iteration offsets o_t with e(τ, t) = o_τ' − o_t (see module docstring).

    Returns (o_t for t = 1..T, o'_τ for τ = 1..T): both are s for the exact
    counting; for ``"reference_fig2"`` o_t = #stage ends <= t (the final
    iteration T is not marked), so e(τ, t) counts stage ends in (t, τ]: the
    last iteration of a stage misses the factor 2 of its stage change.
    """
    if counting not in STAGE_COUNTINGS:
        raise ValidationError(f"stage_counting must be one of {STAGE_COUNTINGS}; got {counting!r}")
    if counting == "reference_fig2":
        T = stages.size
        marks = np.zeros(T, dtype=np.float64)
        ends = np.asarray(stage_ends, dtype=np.int64)
        marks[ends[ends < T] - 1] = 1.0
        counted = np.cumsum(marks)
        return counted, counted
    s = stages.astype(np.float64)
    return s, s


def log_bound_coefficients(step_sizes, stages, smoothness, strong_convexity,
                           constants="consistent", stage_ends=None, stage_counting="exact"):
    """log a_{T,t} (t = 1..T) and log a_{T,0} of the error bound (Thms 4.1 and 4.3).

    Parameters
    ----------
    step_sizes : array of shape (T,)
        α_t.
    stages : array of int of shape (T,) or None
        s_t (all 1 for DP-NAG).
    smoothness, strong_convexity : float
        L and μ.
    constants : {"paper", "consistent", "reference_code"}
        See the module docstring.
    stage_ends : array of int, optional
        Last iteration of each stage of the nominal schedule (for
        ``stage_counting="reference_fig2"``); default: where the stage
        changes, and T.
    stage_counting : {"exact", "reference_fig2"}

    Returns
    -------
    log_a : ndarray of shape (T,)
    log_a0 : float
    """
    logs = _coefficient_logs(step_sizes, stages, smoothness, strong_convexity, constants,
                             stage_ends, stage_counting)
    head, cum, off_t, off_tau, log_a0_all = logs
    T = head.size
    log_a = head + (cum[T - 1] - cum) + (off_tau[T - 1] - off_t) * math.log(2.0)
    return log_a, float(log_a0_all[T - 1])


def _coefficient_logs(step_sizes, stages, smoothness, strong_convexity, constants, stage_ends,
                      stage_counting="exact"):
    if constants not in BOUND_CONSTANTS:
        raise ValidationError(f"bound_constants must be one of {BOUND_CONSTANTS}; got {constants!r}")
    alphas = np.asarray(step_sizes, dtype=np.float64).ravel()
    T = alphas.size
    L = _real("smoothness", smoothness)
    mu = _real("strong_convexity", strong_convexity)
    if T == 0 or np.any(alphas <= 0) or np.any(alphas * L > 1.0 + 1e-12):
        raise ValidationError("step sizes must satisfy 0 < α_t <= 1/L (Theorems 4.1 and 4.3)")
    stages = np.ones(T, dtype=np.int64) if stages is None else np.asarray(stages, dtype=np.int64)
    if stage_ends is None:
        stage_ends = np.append(np.flatnonzero(stages[1:] != stages[:-1]) + 1, T)
    stage_ends = np.asarray(stage_ends, dtype=np.int64)
    stage_ends = stage_ends[stage_ends <= T]
    k_a = 0.5 if constants == "reference_code" else 1.0
    head = math.log(k_a) + np.log(alphas * (1.0 + alphas * L))
    cum = np.cumsum(np.log1p(-np.sqrt(mu * alphas)))  # P_τ = Σ_{i<=τ} log(1 − √(μ α_i))
    off_t, off_tau = _stage_exponents(stages, stage_ends, stage_counting)
    s0 = stages[0] if constants == "paper" else 0
    log_a0 = cum + (stages - s0) * math.log(2.0)
    return head, cum, off_t, off_tau, log_a0


HORIZON_RULES = ("paper", "subsampled")


def horizon_bounds(step_sizes, stages, smoothness, strong_convexity, n_features, sensitivity,
                   n, epsilon, initial_error=10.0, constants="consistent", stage_ends=None,
                   batch_size=None, horizon_rule="paper"):
    """Optimal-allocation error bound for every horizon τ = 1..T (Remark 4.1).

    ``horizon_rule="paper"`` (default; the paper's eq. 4.6 and the authors'
    code): ``bound(τ) = a_{τ,0} E_0 + d (S1/(n ε))² (Σ_{t<=τ} a_{τ,t}^{1/3})³``,
    in O(T) with cumulative log-sum-exps.  It uses n even for mini-batches
    and drops the subsampling term (spec A5).

    ``horizon_rule="subsampled"`` (an extension, spec A5) evaluates the bound
    (4.3) of the schedule that would actually run at each τ:

        bound(τ) = a_{τ,0} E_0 + Σ_{t<=τ} a_{τ,t} (d b_t(τ)² + σ_s²(m, n)/2)

    with ε_t(τ) = ε a_{τ,t}^{1/3} / Σ_{j<=τ} a_{τ,j}^{1/3} (Prop. 4.2),
    b_t(τ) = b(S1, ε_t(τ), n, m) the exact subsampled inverse of eq. 3.3
    and σ_s² = S1² (n − m) / (4 m (n − 1)) (eq. 3.13); O(T²).  For m = n it
    equals the paper rule.  ``batch_size`` (m, default n) is used only here.
    """
    head, cum, off_t, off_tau, log_a0 = _coefficient_logs(
        step_sizes, stages, smoothness, strong_convexity, constants, stage_ends)
    E0 = _real("initial_error", initial_error, low_open=False)
    eps = _real("epsilon", epsilon)
    S = _real("sensitivity", sensitivity)
    n = int(n)
    m = n if batch_size is None else int(batch_size)
    if not 1 <= m <= n:
        raise ValidationError(f"need 1 <= batch_size <= n; got {batch_size!r}, {n}")
    if horizon_rule not in HORIZON_RULES:
        raise ValidationError(f"horizon_rule must be one of {HORIZON_RULES}; got {horizon_rule!r}")
    ln2 = math.log(2.0)
    d = int(n_features)
    # log a_{τ,t} = (cum_τ + off'_τ ln 2) + 3 inner_t
    inner = (head - cum - off_t * ln2) / 3.0
    outer = cum + off_tau * ln2
    cum_lse = np.logaddexp.accumulate(inner)
    if horizon_rule == "paper" or m == n:
        noise = d * (S / (n * eps)) ** 2 * np.exp(outer + 3.0 * cum_lse)
        return np.exp(log_a0) * E0 + noise
    sigma_s2 = S * S * (n - m) / (4.0 * m * (n - 1))
    noise = np.empty(inner.size)
    for tau in range(inner.size):
        log_a = outer[tau] + 3.0 * inner[:tau + 1]
        budgets = eps * np.exp(inner[:tau + 1] - cum_lse[tau])
        scales = _scale_of_budget(budgets, S, n, m)
        noise[tau] = float(np.sum(np.exp(log_a) * (d * scales * scales + sigma_s2 / 2.0)))
    return np.exp(log_a0) * E0 + noise


def choose_horizon(step_sizes, stages, smoothness, strong_convexity, n_features, sensitivity,
                   n, epsilon, initial_error=10.0, constants="consistent", stage_ends=None,
                   batch_size=None, horizon_rule="paper"):
    """T' = first argmin over τ in 1..T of :func:`horizon_bounds` (Remark 4.1)."""
    bounds = horizon_bounds(step_sizes, stages, smoothness, strong_convexity, n_features,
                            sensitivity, n, epsilon, initial_error, constants, stage_ends,
                            batch_size, horizon_rule)
    return int(np.argmin(bounds)) + 1


def prop42_allocation(log_coefficients, epsilon):
    """Per-step budgets ε_t = ε a_t^{1/3} / Σ_j a_j^{1/3} (Prop. 4.2, eq. 4.5).

    The exact minimiser of Σ a_t b_t² subject to Σ ε_t = ε when m = n
    (b_t = S1/(n ε_t)); used for m < n too, with exact inversion of eq. 3.3
    (spec A4).  The returned budgets sum to ``epsilon`` up to rounding
    (relative 1e-15); callers account the scales actually used.
    """
    log_a = np.asarray(log_coefficients, dtype=np.float64).ravel()
    eps = _real("epsilon", epsilon)
    weights = np.exp(log_a / 3.0 - logsumexp(log_a / 3.0))
    return eps * weights


def prop42_objective(log_coefficients, sensitivity, n, epsilon):
    """Optimal value (S1/(n ε))² (Σ a_t^{1/3})³ of Σ a_t b_t² at m = n (eq. 4.6)."""
    log_a = np.asarray(log_coefficients, dtype=np.float64).ravel()
    return (float(sensitivity) / (int(n) * float(epsilon))) ** 2 * math.exp(
        3.0 * logsumexp(log_a / 3.0))


def allocation_objective(log_coefficients, scales):
    """Σ a_t b_t²: the noise part of the error bound (4.3) for scales b_t."""
    return float(np.sum(np.exp(np.asarray(log_coefficients, dtype=np.float64))
                        * np.asarray(scales, dtype=np.float64) ** 2))


def _scale_of_budget(e, S, n, m):
    """Vectorised b(S, e, n, m) = S/(m log(1 + (n/m) expm1(e)))."""
    if m == n:
        return S / (n * e)
    return S / (m * np.log1p((n / m) * np.expm1(e)))


def _marginal(e, S, n, m):
    """−d(b²)/de at budget e (positive, decreasing in e)."""
    b = _scale_of_budget(e, S, n, m)
    if m == n:
        return 2.0 * b * S / (n * e * e)
    r = n / m
    u = np.log1p(r * np.expm1(e))
    du = r * np.exp(e) / (1.0 + r * np.expm1(e))
    return 2.0 * b * (S / m) * du / (u * u)


def numerical_allocation(log_coefficients, sensitivity, n, batch_size, epsilon, rtol=1e-12):
    """Budgets ε_t minimising Σ a_t b(ε_t)² subject to Σ ε_t = ε (problem 4.4).

    b(e) is the exact subsampled inverse of eq. 3.3, so this is the optimum
    of (4.4) also for m < n (an extension, spec A4).  KKT:
    ``a_t (−d b²/de)(ε_t) = ν`` for one multiplier ν; each equation has a
    unique root (the left side decreases in ε_t), found by bisection in
    log ε_t, and ν is bisected (in log space) until Σ ε_t = ε.
    """
    a = np.exp(np.asarray(log_coefficients, dtype=np.float64).ravel())
    eps = _real("epsilon", epsilon)
    S = _real("sensitivity", sensitivity)
    n, m = int(n), int(batch_size)
    if not 1 <= m <= n:
        raise ValidationError(f"need 1 <= batch_size <= n; got {batch_size}, {n}")

    def budgets_for(log_nu):
        lo = np.full(a.size, math.log(eps) - 80.0)
        hi = np.full(a.size, math.log(eps))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            too_small = a * _marginal(np.exp(mid), S, n, m) > math.exp(log_nu)
            lo = np.where(too_small, mid, lo)
            hi = np.where(too_small, hi, mid)
            if np.max(hi - lo) < 1e-15:
                break
        return np.exp(0.5 * (lo + hi))

    # ν at which every ε_t <= ε, and at which the total is tiny
    log_hi = math.log(np.max(a * _marginal(np.full(a.size, eps / a.size), S, n, m))) + 50.0
    log_lo = math.log(np.min(a * _marginal(np.full(a.size, eps), S, n, m))) - 1.0
    for _ in range(300):
        mid = 0.5 * (log_lo + log_hi)
        if budgets_for(mid).sum() > eps:
            log_lo = mid
        else:
            log_hi = mid
        if log_hi - log_lo < rtol:
            break
    budgets = budgets_for(log_hi)
    return budgets * (eps / budgets.sum())
