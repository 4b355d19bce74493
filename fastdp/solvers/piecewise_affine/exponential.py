"""M_E: the exponential mechanism on the polytope P, with its samplers (spec 001 §4.3).

``sampler="auto"`` picks an exact sampler (pure ε-DP); independence
Metropolis has a public δ bound; the paper's random-walk Metropolis and
hit-and-run run only when named, and their output carries no guarantee
(``NoGuaranteeEvent``).
"""

import math

import numpy as np

from fastdp._validation import check_delta, check_epsilon, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import ApproxDpEvent, ExponentialMechanismEvent, NoGuaranteeEvent
from fastdp.solvers.piecewise_affine.checks import (
    check_choice,
    check_n_runs,
    check_problem,
    start_points,
)
from fastdp.solvers.piecewise_affine.result import finish
from fastdp.solvers.piecewise_affine.samplers import (
    exact_1d_sample,
    hit_and_run_sample,
    independence_sample,
    independence_steps,
    independence_tv_bound,
    metropolis_sample,
    rejection_sample,
    rejection_upper_bound,
)

__all__ = ["exponential_mechanism"]

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
_SAMPLERS = ("metropolis", "hit_and_run", "independence", "rejection", "exact1d", "auto")
_PROPOSAL_SCALES = ("paper_cov", "std")


def _proposal_std(problem, eta, proposal_scale):
    c = problem.size()
    if isinstance(proposal_scale, str):
        check_choice("proposal_scale", proposal_scale, _PROPOSAL_SCALES)
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
    problem = check_problem(problem)
    epsilon = check_epsilon(epsilon)
    check_choice("sampler", sampler, _SAMPLERS)
    n, single = check_n_runs(n_runs)
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
        x0 = start_points(problem, init, n, rng)
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
        x0 = start_points(problem, init, n, rng)
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
        x0 = start_points(problem, init, n, rng)
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
    result = finish(problem, X, single, "exponential", epsilon, event, rng,
                     params=params, diagnostics=diagnostics, exact=exact, note=note, delta=delta)
    if isinstance(event, NoGuaranteeEvent):
        result.epsilon = math.inf  # never report an epsilon nothing guarantees
    return result
