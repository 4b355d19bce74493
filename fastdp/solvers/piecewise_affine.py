"""Differentially private minimisation of piecewise affine objectives (spec 001).

Han, Topcu, Pappas (2014): minimise f(x; b) = max_i (a_i . x + b_i) over a
public bounded polytope P when only the offsets b are private.

Privacy model (all mechanisms)
------------------------------
* **Private**: the offsets b (for the structured problems, the responses y).
* **Public**: the slopes a_i, P, m, d, epsilon, ``b_max`` and every setting
  (step sizes, starting points, proposal scales, iteration counts).
* **Adjacency** (eq. 4): b ~ b' iff max_i |b_i - b'_i| <= b_max; all offsets
  may move at once. Any record-level relation under which neighbouring data
  sets satisfy this bound inherits the guarantees; the event label
  (``problem.adjacency``) names that record-level relation.
* **Sensitivities**: the score -f(x; b) has sensitivity exactly b_max
  (Lemma 18); the piece score a_i . x + b_i of Algorithm 1 has sensitivity
  b_max; b has L2 sensitivity sqrt(m) b_max; any minimiser in P has L2
  sensitivity at most diam(P).

Mechanisms (each pure epsilon-DP per released output)
------------------------------------------------------
* :func:`offset_perturbation` (M_P): b + vector-Laplace noise, then the LP.
* :func:`solution_perturbation` (M_S): x_opt + vector-Laplace noise.
* :func:`exponential_mechanism` (M_E): a sample of pi(x) ∝ exp(-eps f(x)/(2 b_max))
  on P (``sampler="auto"``: an exact sampler, pure eps-DP; independence
  Metropolis with a public delta bound on request; the paper's random-walk
  Metropolis and hit-and-run only when asked for by name, and then recorded
  as a ``NoGuaranteeEvent``: their distance to the mechanism is not
  quantified, so they carry no privacy guarantee).
* :func:`private_subgradient` (Algorithm 1) and :func:`dp_subgradient`
  (Algorithm 2, the DP subgradient method).
* :func:`dp_minimize`: one entry point for all of them.

Every result carries the privacy event of what it released, data-independent
baseline outputs (the centre of P and the subgradient method with epsilon -> 0,
which cost no privacy), and says which of the paper's conventions ran.
Where the paper is wrong (spec 001, section 6) the correct version is the
default and a named switch reproduces the paper: ``paper_sign`` (E1),
``paper_sqrt_d`` (E2), ``project`` (E3), ``output`` (E4).
"""

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from fastdp._validation import check_delta, check_epsilon, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import (
    ApproxDpEvent,
    ExponentialMechanismEvent,
    LaplaceEvent,
    NoGuaranteeEvent,
    PureEvent,
    SelfComposedEvent,
)
from fastdp.solvers import _pa_bounds as bounds
from fastdp.solvers._pa_adapters import (
    chebyshev_regression_problem,
    lad_regression_problem,
    minimax_lp_problem,
    quantile_regression_problem,
    resource_allocation_problem,
    resource_allocation_utility,
)
from fastdp.solvers._pa_constraints import Box, Polytope
from fastdp.solvers._pa_problem import PiecewiseAffineProblem, SumOfPinballProblem
from fastdp.solvers._pa_samplers import (
    exact_1d_sample,
    hit_and_run_sample,
    importance_estimates,
    independence_sample,
    independence_steps,
    independence_tv_bound,
    metropolis_sample,
    rejection_sample,
    rejection_upper_bound,
    vector_laplace,
)

__all__ = [
    "Box",
    "Polytope",
    "PiecewiseAffineProblem",
    "SumOfPinballProblem",
    "PiecewiseAffineResult",
    "offset_perturbation",
    "solution_perturbation",
    "exponential_mechanism",
    "private_subgradient",
    "dp_subgradient",
    "subgradient_method",
    "data_independent_baselines",
    "dp_minimize",
    "evaluate",
    "importance_estimates",
    "METHODS",
    "bounds",
    "chebyshev_regression_problem",
    "quantile_regression_problem",
    "lad_regression_problem",
    "minimax_lp_problem",
    "resource_allocation_problem",
    "resource_allocation_utility",
]

METHODS = ("offset_perturbation", "solution_perturbation", "exponential", "subgradient")
_METHOD_ALIASES = {"data_perturbation": "offset_perturbation", "M_P": "offset_perturbation",
                   "M_S": "solution_perturbation", "M_E": "exponential",
                   "exponential_mechanism": "exponential", "dp_subgradient": "subgradient"}
_MCMC_NOTE = (
    "NO PRIVACY GUARANTEE. "
    "Metropolis with a finite number of steps samples only approximately from the "
    "exponential mechanism's density: the output is (epsilon, (1 + e^epsilon) TV)-DP, where "
    "TV bounds the chain's total-variation distance to its target for every data set. For "
    "the random-walk chain TV is not quantified (delta is None): the spec gives no way to "
    "bound it, the bounds known for random-walk Metropolis on a polytope (conductance) are "
    "astronomically loose, and convergence diagnostics read the private data and certify "
    "nothing for all adjacent data sets. The event is NoGuaranteeEvent (accountants refuse it; "
    "a ledger records it only with allow_no_guarantee=True) and result.epsilon is inf. "
    "Use sampler='auto' (exact samplers, pure epsilon-DP) or 'independence' (a public delta "
    "bound).")
_INDEPENDENCE_NOTE = (
    "Independence Metropolis ({n_steps} steps per run, Uniform(P) proposals): the law of each "
    "output is within total variation {tv:.3g} of the exponential mechanism for every data set "
    "(public bound (1 - 1/W)^T, W = exp(beta G R)), so each run is (epsilon, (1 + e^epsilon) TV)-"
    "DP; result.delta is the total over runs. The event is ApproxDpEvent(epsilon, delta): compose "
    "it with the pure or PLD accountant (the RDP accountant refuses an (epsilon, delta) event).")


@dataclasses.dataclass
class PiecewiseAffineResult:
    """What a spec-001 mechanism released, and how.

    Attributes
    ----------
    x : ndarray of shape (d,) or (n_runs, d)
        The released point(s); one row per independent run.
    method : str
        One of :data:`METHODS`.
    epsilon : float
        Total epsilon of everything in ``x`` (n_runs times the per-run
        epsilon); ``inf`` when the release carries no guarantee (the
        random-walk Metropolis and hit-and-run samplers of M_E, whose target
        epsilon is in ``params["target_epsilon"]``).
    event : DpEvent
        Privacy event of the release (accountants turn it into epsilon;
        a ``NoGuaranteeEvent`` they refuse).
    exact : bool
        False when the output only approximately follows the mechanism's
        distribution (finite Metropolis chains): then the guarantee is
        approximate DP, see ``privacy_note`` and ``delta``.
    delta : float or None
        Total delta of everything in ``x``: 0.0 for exact mechanisms, the
        public bound n_runs (1 + e^eps) TV for independence Metropolis, None
        when it is not quantified (random-walk Metropolis; see
        ``privacy_note``).
    privacy_note : str or None
    params : dict
        Every public setting that ran (including the paper switches).
    baselines : dict
        Data-independent outputs (cost no privacy): ``"center"`` (the starting
        point, B3) and ``"uniform_subgradient"`` (Algorithm 2 with epsilon -> 0,
        B4, same settings), each shaped like ``x``.
    diagnostics : dict
        Run details for tests and experiments. Keys ending in ``_nonprivate``
        (the Metropolis acceptance rate, which depends on the data; the norms
        of the noise, which together with the output locate the private
        quantity) must not be published.
    trajectory : ndarray or None
        All iterates of the subgradient method when ``output="trajectory"``.
    """

    x: np.ndarray
    method: str
    epsilon: float
    event: Any
    exact: bool = True
    delta: Optional[float] = 0.0
    privacy_note: Optional[str] = None
    params: dict = dataclasses.field(default_factory=dict)
    baselines: dict = dataclasses.field(default_factory=dict)
    diagnostics: dict = dataclasses.field(default_factory=dict)
    trajectory: Optional[np.ndarray] = None


# --------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------
def _check_problem(problem):
    if not isinstance(problem, (PiecewiseAffineProblem, SumOfPinballProblem)):
        raise ValidationError(
            "problem must be a PiecewiseAffineProblem or SumOfPinballProblem; got "
            f"{type(problem).__name__}.")
    return problem




def _check_n_runs(n_runs):
    if n_runs is None:
        return 1, True
    if isinstance(n_runs, bool) or int(n_runs) != n_runs or n_runs < 1:
        raise ValidationError(f"n_runs must be a positive integer or None; got {n_runs!r}.")
    return int(n_runs), False


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValidationError(f"{name} must be one of {choices}; got {value!r}.")
    return value


def _released_event(single_event, n_runs):
    return single_event if n_runs == 1 else SelfComposedEvent(single_event, n_runs)


def _shape_output(X, single):
    return X[0] if single else X


def _start_points(problem, init, n_runs, rng):
    """Data-independent starting points (n_runs, d); never derived from b."""
    cons = problem.constraints
    d = problem.n_features
    if isinstance(init, str):
        if init == "center":
            return np.tile(cons.center(), (n_runs, 1))
        if init == "uniform":
            return cons.sample_uniform(rng, n_runs)
        raise ValidationError(
            f"init must be 'center', 'uniform' or an array of public starting points; got {init!r}. "
            "Starting points must not depend on the private offsets.")
    x0 = np.array(init, dtype=np.float64)
    if x0.ndim == 1:
        x0 = np.tile(x0, (n_runs, 1))
    if x0.shape != (n_runs, d):
        raise ValidationError(f"init must have shape ({d},) or ({n_runs}, {d}); got {x0.shape}.")
    if not np.all(np.isfinite(x0)) or not np.all(cons.contains(x0)):
        raise ValidationError("every starting point must lie inside the constraint set P.")
    return x0


# --------------------------------------------------------------------------
# M_P
# --------------------------------------------------------------------------
def offset_perturbation(problem, epsilon, *, noise="vector_laplace", adjacency="linf",
                        n_runs=None, random_state=None):
    """M_P: Laplace noise on the private offsets, then the LP (Theorem 16).

    Private: b. Adjacency (``adjacency``):

    * ``"linf"`` (default, the paper's eq. 4): ||b - b'||_inf <= b_max, every
      offset may move at once. Sensitivity of b: sqrt(m) b_max in L2, m b_max
      in L1.
    * ``"single"`` (spec 001, A11; **not** the paper's relation): adjacent
      offset vectors differ in at most **one** entry, by at most b_max (e.g.
      one record feeds exactly one offset). Sensitivity of b: b_max in L2
      and in L1, so the noise is sqrt(m) (vector) or m (i.i.d.) times
      smaller. Only valid when the application's neighbouring data sets
      really change a single offset; under eq. 4 this noise is **not**
      epsilon-DP. It only changes M_P: the other mechanisms keep eq. 4.

    Noise: ``noise="vector_laplace"`` (the paper's choice), density
    ∝ exp(-eps ||w||_2 / Delta_2); or ``noise="iid_laplace"``, independent
    Lap(Delta_1 / eps) per offset. Released: argmin_{x in P} max_i
    (a_i . x + b_i + w_i), an epsilon-DP post-processing of the noisy offsets
    (always in P). Event: ``PureEvent(eps)`` (vector Laplace) or
    ``LaplaceEvent(1/eps)`` (i.i.d.), composed ``n_runs`` times.

    Only for explicit pieces (:class:`PiecewiseAffineProblem`).
    """
    problem = _check_problem(problem)
    if not isinstance(problem, PiecewiseAffineProblem):
        raise ValidationError(
            "offset perturbation needs explicit pieces; this problem has 2^n implicit pieces. "
            "Use method='exponential', 'subgradient' or 'solution_perturbation'.")
    epsilon = check_epsilon(epsilon)
    _check_choice("noise", noise, ("vector_laplace", "iid_laplace"))
    _check_choice("adjacency", adjacency, ("linf", "single"))
    n, single = _check_n_runs(n_runs)
    rng = check_random_state(random_state)
    m = problem.n_pieces
    l2_sensitivity, l1_sensitivity = problem.b_max, problem.b_max
    if adjacency == "linf":
        l2_sensitivity, l1_sensitivity = math.sqrt(m) * problem.b_max, m * problem.b_max
    if noise == "vector_laplace":
        W = vector_laplace(rng, m, epsilon / l2_sensitivity, n)
        event = PureEvent(epsilon, problem.adjacency)
    else:
        W = rng.laplace(scale=l1_sensitivity / epsilon, size=(n, m))
        event = LaplaceEvent(1.0 / epsilon, problem.adjacency)
    X = np.vstack([problem.with_offsets(problem.b + w).solve()[0] for w in W])
    return _finish(problem, X, single, "offset_perturbation", epsilon, event, rng,
                   params={"noise": noise, "adjacency": adjacency,
                           "l2_sensitivity": l2_sensitivity, "l1_sensitivity": l1_sensitivity},
                   diagnostics={"noise_norm_nonprivate": np.linalg.norm(W, axis=1),
                                "noise_sup_norm_nonprivate": np.abs(W).max(axis=1)})


# --------------------------------------------------------------------------
# M_S
# --------------------------------------------------------------------------
def solution_perturbation(problem, epsilon, *, sensitivity=None, paper_sqrt_d=False,
                          project=False, n_runs=None, random_state=None):
    """M_S: the exact minimiser plus vector-Laplace noise (section 4.2, Theorem 17).

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Sensitivity: any
    minimiser lies in P, so ||x_opt(b) - x_opt(b')||_2 <= Delta with Delta =
    ``sensitivity`` (default: the public diameter bound of P, whatever b_max).
    Noise density ∝ exp(-eps ||w||_2 / Delta), which is epsilon-DP.
    ``paper_sqrt_d=True`` uses the paper's exp(-eps ||w||_2 / (sqrt(d) Delta))
    (erratum E2: also epsilon-DP, sqrt(d) times noisier). Released:
    x_opt + w in R^d, or its projection onto P when ``project=True``
    (post-processing; the paper does not project, erratum E3). Event:
    ``PureEvent(eps)``, composed ``n_runs`` times.
    """
    problem = _check_problem(problem)
    epsilon = check_epsilon(epsilon)
    n, single = _check_n_runs(n_runs)
    rng = check_random_state(random_state)
    d = problem.n_features
    if sensitivity is None:
        sensitivity = problem.diameter()
    else:
        sensitivity = float(sensitivity)
        if not (math.isfinite(sensitivity) and sensitivity >= problem.diameter() * (1 - 1e-12)):
            raise ValidationError(
                f"sensitivity must be a public bound >= the diameter bound of P "
                f"({problem.diameter():.6g}); got {sensitivity!r}.")
    scale = sensitivity * (math.sqrt(d) if paper_sqrt_d else 1.0)
    W = vector_laplace(rng, d, epsilon / scale, n)
    x_opt = problem.solve()[0]
    raw = x_opt + W
    X = problem.constraints.project(raw) if project else raw
    return _finish(problem, X, single, "solution_perturbation", epsilon,
                   PureEvent(epsilon, problem.adjacency), rng,
                   params={"sensitivity": sensitivity, "paper_sqrt_d": bool(paper_sqrt_d),
                           "project": bool(project)},
                   diagnostics={"noise_norm_nonprivate": np.linalg.norm(W, axis=1)})


# --------------------------------------------------------------------------
# M_E
# --------------------------------------------------------------------------
_SAMPLERS = ("metropolis", "hit_and_run", "independence", "rejection", "exact1d", "auto")
_PROPOSAL_SCALES = ("paper_cov", "std")


def _proposal_std(problem, eta, proposal_scale):
    c = problem.size()
    if isinstance(proposal_scale, str):
        _check_choice("proposal_scale", proposal_scale, _PROPOSAL_SCALES)
        return math.sqrt(eta * c) if proposal_scale == "paper_cov" else eta * c
    std = np.asarray(proposal_scale, dtype=np.float64)
    if not np.all(np.isfinite(std)) or np.any(std <= 0):
        raise ValidationError("a numeric proposal_scale is the proposal std; it must be finite and > 0.")
    return std


def exponential_mechanism(problem, epsilon, *, sampler="auto", n_steps=5000, eta=0.1,
                          proposal_scale="paper_cov", init="center", n_runs=None,
                          max_expected_proposals=1e6, target_delta=1e-10, random_state=None):
    """M_E: the exponential mechanism with score -f (Theorem 19).

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Score sensitivity: b_max
    exactly (Lemma 18). Released: one draw per run from
    pi(x) ∝ exp(-eps f(x; b) / (2 b_max)) on P (Lebesgue base measure). Event:
    ``ExponentialMechanismEvent(eps)``, composed ``n_runs`` times; with
    ``sampler="independence"``, ``ApproxDpEvent(eps, (1 + e^eps) TV)`` (the finite
    chain's δ, also in ``result.delta``; compose it with the pure or PLD accountant);
    with ``"metropolis"`` or ``"hit_and_run"``, ``NoGuaranteeEvent(eps, sampler)``:
    no guarantee.

    Samplers
    --------
    ``"auto"`` (default): ``"exact1d"`` for d = 1, else ``"rejection"`` when
    its public bound W = exp(beta G R) on the expected proposals per draw is at
    most ``max_expected_proposals``; otherwise no sampler with a guarantee is
    affordable and a ValidationError says what to do (decided from public
    numbers only). ``"metropolis"`` (the paper's, by name only): one
    random-walk Metropolis chain
    per run, ``n_steps`` steps (5000), Gaussian proposal with covariance
    eta c I (``proposal_scale="paper_cov"``, std sqrt(eta c), c = the size of P)
    or std eta c (``"std"``) or a given std; chains start at a
    data-independent point (``init``: "center", "uniform" or public points).
    **No privacy guarantee**: the output is only approximately the mechanism's
    and the distance is not quantified (``result.delta`` is None,
    ``result.epsilon`` is inf, the event a ``NoGuaranteeEvent`` that accountants
    refuse; ``privacy_note`` says why). ``"hit_and_run"`` (spec 001 section 2.3.4,
    an extension, not in the paper): ``n_steps`` hit-and-run steps per run
    from ``init`` (uniform direction, exact draw from pi on the chord); mixes
    far better than the random walk, same status (no guarantee);
    explicit pieces only. ``"independence"``: Metropolis chains with
    Uniform(P) proposals started at ``init``, run for the smallest number of
    steps T with (1 + e^eps) (1 - 1/W)^T <= ``target_delta`` (W = exp(beta G R),
    public); each run is then (eps, target_delta)-DP whatever the data
    (``result.delta`` = n_runs times the achieved per-run delta), and the
    running time does not depend on the data. Allowed when W <=
    ``max_expected_proposals``; ``n_steps``, ``eta`` and ``proposal_scale``
    are not used. ``"rejection"``: exact,
    uniform proposals accepted with probability exp(-beta (f - f_opt)); allowed
    when the public bound exp(beta G R) on the expected proposals per draw is at
    most ``max_expected_proposals``; its running time depends on the data.
    ``"exact1d"``: exact inverse-CDF sampler for d = 1.
    """
    problem = _check_problem(problem)
    epsilon = check_epsilon(epsilon)
    _check_choice("sampler", sampler, _SAMPLERS)
    n, single = _check_n_runs(n_runs)
    rng = check_random_state(random_state)
    beta = epsilon / (2.0 * problem.b_max)
    rejection_bound = rejection_upper_bound(problem, beta)
    if sampler == "auto":
        if problem.n_features == 1:
            sampler = "exact1d"
        elif rejection_bound <= max_expected_proposals:
            sampler = "rejection"
        else:
            raise ValidationError(
                f"no sampler with a privacy guarantee is affordable here: the public bound "
                f"W = exp(beta G R) = {rejection_bound:.3g} on the expected proposals per exact "
                f"draw (and on independence Metropolis' weights) exceeds max_expected_proposals "
                f"= {max_expected_proposals:g}. Raise max_expected_proposals, lower the "
                "diameter of P, or pass sampler='metropolis' / 'hit_and_run' explicitly (their "
                "output carries NO privacy guarantee).")
    params = {"sampler": sampler, "beta": beta, "target_epsilon": epsilon}
    diagnostics = {}
    if sampler == "metropolis":
        n_steps = int(n_steps)
        if n_steps < 1:
            raise ValidationError(f"n_steps must be >= 1; got {n_steps}.")
        std = _proposal_std(problem, float(eta), proposal_scale)
        x0 = _start_points(problem, init, n, rng)
        X, acceptance = metropolis_sample(problem, beta, x0, n_steps, std, rng)
        params.update(n_steps=n_steps, eta=float(eta), proposal_std=std,
                      proposal_scale=proposal_scale if isinstance(proposal_scale, str) else "given",
                      init=init if isinstance(init, str) else "given")
        diagnostics["acceptance_rate_nonprivate"] = acceptance
        exact, note, delta = False, _MCMC_NOTE, None
    elif sampler == "hit_and_run":
        n_steps = int(n_steps)
        if n_steps < 1:
            raise ValidationError(f"n_steps must be >= 1; got {n_steps}.")
        x0 = _start_points(problem, init, n, rng)
        X = hit_and_run_sample(problem, beta, x0, n_steps, rng)
        params.update(n_steps=n_steps, init=init if isinstance(init, str) else "given")
        exact, note, delta = False, _MCMC_NOTE.replace("random-walk chain", "random-walk and "
                                                       "hit-and-run chains"), None
    elif sampler == "independence":
        target_delta = check_delta(target_delta, name="target_delta")
        if rejection_bound > max_expected_proposals:
            raise ValidationError(
                f"the public bound W = exp(beta G R) = {rejection_bound:.3g} on the importance "
                f"weights exceeds max_expected_proposals = {max_expected_proposals:g}: independence "
                f"Metropolis would need about W ln(1/target_delta) steps per run; use "
                "sampler='metropolis' or raise max_expected_proposals.")
        steps = independence_steps(rejection_bound, target_delta / (1.0 + math.exp(epsilon)))
        tv = independence_tv_bound(rejection_bound, steps)
        x0 = _start_points(problem, init, n, rng)
        X, acceptance = independence_sample(problem, beta, x0, steps, rng)
        params.update(n_steps=steps, weight_bound=rejection_bound, tv_bound=tv,
                      init=init if isinstance(init, str) else "given")
        diagnostics["acceptance_rate_nonprivate"] = acceptance
        delta = (1.0 + math.exp(epsilon)) * tv
        exact, note = False, _INDEPENDENCE_NOTE.format(n_steps=steps, tv=tv)
    elif sampler == "rejection":
        if rejection_bound > max_expected_proposals:
            raise ValidationError(
                f"the public bound exp(beta G R) = {rejection_bound:.3g} on the expected number of "
                f"proposals per exact draw exceeds max_expected_proposals = {max_expected_proposals:g}; "
                "use sampler='metropolis' or raise max_expected_proposals.")
        X, proposals = rejection_sample(problem, beta, n, rng)
        diagnostics["proposals_nonprivate"] = proposals
        exact, note, delta = True, ("Exact sampler: pure epsilon-DP output; the running time "
                                    "depends on the private data."), 0.0
    else:
        X = exact_1d_sample(problem, beta, n, rng)
        exact, note, delta = True, None, 0.0
    if sampler in ("metropolis", "hit_and_run"):
        event = NoGuaranteeEvent(epsilon, sampler, problem.adjacency)
    elif sampler == "independence":
        event = ApproxDpEvent(epsilon, delta, problem.adjacency)
    else:
        event = ExponentialMechanismEvent(epsilon, problem.adjacency)
    result = _finish(problem, X, single, "exponential", epsilon, event, rng,
                     params=params, diagnostics=diagnostics, exact=exact, note=note, delta=delta)
    if isinstance(event, NoGuaranteeEvent):
        result.epsilon = math.inf  # never report an epsilon nothing guarantees
    return result


# --------------------------------------------------------------------------
# Algorithms 1 and 2
# --------------------------------------------------------------------------
def private_subgradient(problem, x, epsilon, *, paper_sign=False, random_state=None):
    """Algorithm 1: an epsilon-DP approximate subgradient of f at a public point x.

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Score: u_i = a_i . x + b_i,
    sensitivity b_max. Released: the index i* (and slope a_{i*}) drawn with
    P(i* = i) ∝ exp(+eps u_i / (2 b_max)) (finite exponential mechanism).
    ``paper_sign=True`` uses the paper's printed exp(-...) (erratum E1: it
    favours the minimising piece; still epsilon-DP, useless as a subgradient).
    Event: ``ExponentialMechanismEvent(eps)``.

    Returns
    -------
    slope : ndarray (d,)
    index : int or ndarray
        The piece (for :class:`SumOfPinballProblem`: the choices s in {tau, tau-1}^n).
    event : ExponentialMechanismEvent
    """
    problem = _check_problem(problem)
    epsilon = check_epsilon(epsilon)
    rng = check_random_state(random_state)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n_features,) or not np.all(np.isfinite(x)):
        raise ValidationError(f"x must be a finite vector of length {problem.n_features}.")
    slopes, idx = problem.select_subgradients(x[None, :], epsilon / (2.0 * problem.b_max), rng,
                                              sign=-1.0 if paper_sign else 1.0)
    return slopes[0], idx[0], ExponentialMechanismEvent(epsilon, problem.adjacency)


_STEP_RULES = ("constant", "inverse", "inverse_sqrt")
_OUTPUTS = ("average", "last", "trajectory")


def _step_sizes(problem, n_iter, step):
    R, G = problem.diameter(), problem.lipschitz
    i = np.arange(1, n_iter + 1, dtype=np.float64)
    if isinstance(step, str):
        _check_choice("step", step, _STEP_RULES)
        if step == "constant":
            return np.full(n_iter, R / (G * math.sqrt(n_iter)))
        if step == "inverse":
            return (R / G) / i
        return (R / G) / np.sqrt(i)
    if callable(step):
        steps = np.array([float(step(int(k))) for k in i], dtype=np.float64)
    else:
        steps = np.array(step, dtype=np.float64)
    if steps.shape != (n_iter,) or not np.all(np.isfinite(steps)) or np.any(steps <= 0):
        raise ValidationError(
            f"step must be one of {_STEP_RULES}, a callable i -> alpha_i or {n_iter} positive numbers; "
            "step sizes must be public (not computed from b).")
    return steps


def subgradient_method(problem, *, beta, n_iter, steps, x1, project, rng, sign=1.0,
                       keep_trajectory=False):
    """Batched (stochastic) subgradient iterations, one row per run.

    ``beta`` is the selection temperature: finite for Algorithm 2 (beta' =
    eps / (2 k b_max)), ``inf`` for the regular subgradient method (B2, not
    private), 0 for uniform selection (B4, data-independent). Returns the
    last iterate, the step-weighted average of x^(1..k), the best f-value
    (non-private diagnostic) and optionally the trajectory (n, k+1, d).
    """
    X = np.array(x1, dtype=np.float64, copy=True)
    cons = problem.constraints
    avg = np.zeros_like(X)
    traj = np.empty((X.shape[0], n_iter + 1, X.shape[1])) if keep_trajectory else None
    for t in range(n_iter):
        if traj is not None:
            traj[:, t] = X
        avg += steps[t] * X
        g, _ = problem.select_subgradients(X, beta, rng, sign=sign)
        X = X - steps[t] * g
        if project:
            X = cons.project(X)
    if traj is not None:
        traj[:, n_iter] = X
    return X, avg / steps.sum(), traj


def dp_subgradient(problem, epsilon, *, n_iter=100, step="constant", x1="center", project=True,
                   output="average", paper_sign=False, n_runs=None, random_state=None):
    """Algorithm 2: the epsilon-DP subgradient method.

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Each of the ``n_iter`` = k
    iterations runs Algorithm 1 at the current (public) iterate with budget
    eps/k: P(i) ∝ exp(+(eps/k)(a_i . x + b_i)/(2 b_max)) (score sensitivity
    b_max), then steps x <- x - alpha_i a_{i*} and, by default, projects onto
    P (post-processing; erratum E3, ``project=False`` for the paper's literal
    iteration). Step sizes (``step``: "constant" R/(G sqrt(k)), "inverse"
    (R/G)/i, "inverse_sqrt" (R/G)/sqrt(i), a callable or an array) and
    x^(1) are public. Released (``output``): "average" (default; the
    step-weighted average of x^(1..k), covered by Theorem 24 [D4]), "last"
    (x^(k+1), the paper's output) or "trajectory" (all iterates). The best
    iterate is never returned: choosing it reads b (erratum E4). Event:
    ``SelfComposedEvent(ExponentialMechanismEvent(eps/k), k)``, composed
    ``n_runs`` times. ``paper_sign=True`` reproduces erratum E1.
    """
    problem = _check_problem(problem)
    epsilon = check_epsilon(epsilon)
    _check_choice("output", output, _OUTPUTS)
    n, single = _check_n_runs(n_runs)
    if isinstance(n_iter, bool) or int(n_iter) != n_iter or n_iter < 1:
        raise ValidationError(f"n_iter must be a positive integer; got {n_iter!r}.")
    n_iter = int(n_iter)
    rng = check_random_state(random_state)
    steps = _step_sizes(problem, n_iter, step)
    start = _start_points(problem, x1, n, rng)
    beta = (epsilon / n_iter) / (2.0 * problem.b_max)
    last, avg, traj = subgradient_method(problem, beta=beta, n_iter=n_iter, steps=steps, x1=start,
                                         project=project, rng=rng,
                                         sign=-1.0 if paper_sign else 1.0,
                                         keep_trajectory=output == "trajectory")
    X = {"average": avg, "last": last, "trajectory": last}[output]
    per_step = ExponentialMechanismEvent(epsilon / n_iter, problem.adjacency)
    result = _finish(problem, X, single, "subgradient", epsilon,
                     SelfComposedEvent(per_step, n_iter), rng,
                     params={"n_iter": n_iter, "steps": steps, "project": bool(project),
                             "output": output, "paper_sign": bool(paper_sign), "beta": beta,
                             "x1": x1 if isinstance(x1, str) else "given"})
    if traj is not None:
        result.trajectory = traj[0] if single else traj
    return result


# --------------------------------------------------------------------------
# baselines and the entry point
# --------------------------------------------------------------------------
def data_independent_baselines(problem, n_runs=1, *, n_iter=100, step="constant", project=True,
                               random_state=None):
    """Outputs that do not read b (0-DP): the centre of P (B3) and Algorithm 2
    with epsilon -> 0, i.e. uniform piece selection (B4).

    Returns a dict of arrays of shape (n_runs, d): ``center``,
    ``uniform_subgradient_last``, ``uniform_subgradient_average``.
    For :class:`SumOfPinballProblem` uniform selection picks each s_j uniformly.
    """
    problem = _check_problem(problem)
    rng = check_random_state(random_state)
    steps = _step_sizes(problem, int(n_iter), step)
    start = np.tile(problem.center(), (n_runs, 1))
    last, avg, _ = subgradient_method(problem, beta=0.0, n_iter=int(n_iter), steps=steps,
                                      x1=start, project=project, rng=rng)
    return {"center": start, "uniform_subgradient_last": last,
            "uniform_subgradient_average": avg}


def _finish(problem, X, single, method, epsilon, event, rng, *, params, diagnostics=None,
            exact=True, note=None, delta=0.0):
    n = X.shape[0]
    base_rng = np.random.default_rng(rng.integers(0, 2**63))
    base = data_independent_baselines(problem, n, n_iter=params.get("n_iter", 100),
                                      step=params.get("steps", "constant"),
                                      project=params.get("project", True) or method != "subgradient",
                                      random_state=base_rng)
    baselines = {"center": _shape_output(base["center"], single),
                 "uniform_subgradient": _shape_output(
                     base["uniform_subgradient_last" if params.get("output") == "last"
                          else "uniform_subgradient_average"], single)}
    return PiecewiseAffineResult(
        x=_shape_output(X, single), method=method, epsilon=epsilon * n,
        event=_released_event(event, n), exact=exact, delta=None if delta is None else delta * n,
        privacy_note=note, params=params,
        baselines=baselines, diagnostics=diagnostics or {})


_DISPATCH = {
    "offset_perturbation": offset_perturbation,
    "solution_perturbation": solution_perturbation,
    "exponential": exponential_mechanism,
    "subgradient": dp_subgradient,
}


def dp_minimize(problem, epsilon, method="subgradient", *, random_state=None, **options):
    """Minimise a piecewise affine objective with epsilon-DP in the offsets.

    Parameters
    ----------
    problem : PiecewiseAffineProblem or SumOfPinballProblem
        Public slopes and constraint set, private offsets, adjacency radius b_max.
    epsilon : float
        Pure epsilon of one released output.
    method : {"subgradient", "exponential", "solution_perturbation", "offset_perturbation"}
        Algorithm 2, M_E, M_S or M_P ("M_P", "M_S", "M_E" are accepted aliases).
    random_state : None, int, SeedSequence or Generator
    **options
        Passed to the mechanism (see :func:`dp_subgradient`,
        :func:`exponential_mechanism`, :func:`solution_perturbation`,
        :func:`offset_perturbation`), e.g. ``n_runs`` for independent repetitions.

    Returns
    -------
    PiecewiseAffineResult
        What is private, the adjacency and what was released are those of the
        chosen mechanism; ``result.event`` describes the release.
    """
    method = _METHOD_ALIASES.get(method, method)
    _check_choice("method", method, METHODS)
    return _DISPATCH[method](problem, epsilon, random_state=random_state, **options)


def evaluate(problem, result):
    """Objective gaps f(x) - f_opt of a result and its baselines (**non-private**).

    Reads b: for experiments and tests, never for publication.
    """
    f_opt = problem.solve()[1]
    out = {"f_opt": f_opt, "gap": problem.value(result.x) - f_opt}
    for name, X in result.baselines.items():
        out[f"gap_{name}"] = problem.value(X) - f_opt
    return out
