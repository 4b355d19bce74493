"""Privacy of private distributed dual averaging: the paper's claim, its corrected
argument, and fastdp's accountant (spec 004 §3).

What is private: every record of every agent's shard. Adjacency: replace-one
(one record of one agent is replaced; shard sizes q are public). Sensitivity:
one per-sample subgradient, ``||g - g'|| <= 2 L`` for an L-Lipschitz loss.
Released: every message ``z_i + a_t (g_i + nu_i)`` of every active agent in
every round, hence (post-processing) every ``z`` and the output. Each run
reports three numbers side by side:

``epsilon_paper``
    The ε Theorem 1 of the paper claims for the σ used
    (``sigma^2 = 32 iota^2 L^2 T log(2/delta0) / (q^2 eps^2)`` solved for ε),
    with its preconditions. The proof is wrong (spec 004 §3.6: E1-E5); this
    number is NOT a guarantee.
``epsilon_kov`` / ``delta_kov``
    The same proof strategy evaluated correctly: per-round Gaussian
    mechanism, amplification by sampling at rate ``iota/q``, the full
    Kairouz-Oh-Viswanath advanced composition, and the honest δ. Sound only
    under the paper's hidden-activation model and, with
    ``gaussian="lemma_4_1"``, only while the per-round ε_t ≤ 1.
``epsilon`` (the default for calibration)
    fastdp's accountant (RDP by default) on the event the run really produced
    (:func:`dda_event`). With ``activation="public"`` (the default: messages
    reveal who was active, spec 004 E5) a record of agent i is exposed in the
    ``K_i`` rounds in which agent i was active, each time through a uniform
    sample of 1 of its q records: ``K = max_i K_i`` compositions of a
    sampled Gaussian with noise multiplier ``sigma / (2L)``. With
    ``activation="hidden"`` (the paper's model, an assumption fastdp does not
    make by default) every one of the T rounds samples each record with
    probability at most ``p_max / q``.
"""

import dataclasses
import math
import warnings

import numpy as np
from scipy import optimize, special

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import calibrate
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.events import (
    Adjacency,
    FixedSizeSampledEvent,
    GaussianEvent,
    NonPrivateEvent,
    SelfComposedEvent,
)
from fastdp.privacy.pure import advanced_composition

__all__ = [
    "PaperSigma",
    "sigma_paper",
    "epsilon_paper",
    "epsilon_paper_claim",
    "paper_min_rounds",
    "gaussian_epsilon",
    "epsilon_kov",
    "sigma_kov",
    "dda_event",
    "calibrate_sigma",
    "PrivacyReport",
    "privacy_report",
    "ACTIVATION_MODELS",
]

ACTIVATION_MODELS = ("public", "hidden")


def _pos(name, value, *, allow_zero=False, upper=None):
    value = float(value)
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok or (upper is not None and value > upper):
        rng = f"({'[' if allow_zero else '('}0, {upper if upper is not None else 'inf'}"
        raise ValidationError(f"{name} must lie in {rng}]; got {value!r}.")
    return value


# ---------------------------------------------------------------------------
# the paper's Theorem 1 (reproduction only)
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PaperSigma:
    """σ of the paper's Theorem 1 and whether its preconditions hold.

    Attributes
    ----------
    sigma : float
    preconditions_ok : bool
        ``0 < eps <= 1`` and ``T >= 5 q^2 eps^2 / (4 iota^2)``.
    min_rounds : float
        ``5 q^2 eps^2 / (4 iota^2)``.
    """

    sigma: float
    preconditions_ok: bool
    min_rounds: float

    def __float__(self):
        return self.sigma


def paper_min_rounds(epsilon, iota, q):
    """Theorem 1's precondition ``T >= 5 q^2 eps^2 / (4 iota^2)``."""
    return 5.0 * q * q * epsilon * epsilon / (4.0 * iota * iota)


def sigma_paper(epsilon, delta0, n_rounds, iota, q, lipschitz=1.0, warn=True):
    """The paper's noise level ``sqrt(32 iota^2 L^2 T ln(2/delta0) / (q^2 eps^2))``.

    For reproducing the paper's figures only: the claimed (ε, δ) guarantee
    does not follow (spec 004 §3.6). Warns when the preconditions fail.
    """
    eps = _pos("epsilon", epsilon)
    d0 = _pos("delta0", delta0, upper=1.0)
    T, iota, q, L = int(n_rounds), _pos("iota", iota, upper=1.0), int(q), _pos("lipschitz", lipschitz)
    sigma = math.sqrt(32.0 * iota ** 2 * L ** 2 * T * math.log(2.0 / d0) / (q * q * eps * eps))
    t_min = paper_min_rounds(eps, iota, q)
    ok = (0 < eps <= 1) and T >= t_min
    if warn and not ok:
        warnings.warn(
            f"Theorem 1's preconditions fail (eps = {eps}, T = {T} < {t_min:.3g} rounds needed): "
            "the paper's sigma gives no privacy guarantee for this run. fastdp's accountant "
            "reports the real epsilon.", stacklevel=2)
    return PaperSigma(sigma, ok, t_min)


def epsilon_paper(sigma, delta0, n_rounds, iota, q, lipschitz=1.0):
    """The ε Theorem 1 claims for noise ``sigma`` (the σ formula solved for ε). Not a guarantee."""
    if sigma <= 0:
        return math.inf
    return math.sqrt(32.0 * iota ** 2 * lipschitz ** 2 * n_rounds * math.log(2.0 / delta0)
                     / (q * q * sigma * sigma))


def epsilon_paper_claim(t, n_rounds, epsilon):
    """Remark 3.1(i): ε after ``t <= T`` rounds, ``sqrt(3t/(5T)) eps + t/(5T) eps^2`` (reporting only)."""
    r = t / n_rounds
    return math.sqrt(3.0 * r / 5.0) * epsilon + r / 5.0 * epsilon ** 2


# ---------------------------------------------------------------------------
# the corrected argument
# ---------------------------------------------------------------------------
def gaussian_epsilon(noise_std, sensitivity, delta, method="analytic"):
    """ε of the Gaussian mechanism at δ.

    ``"lemma_4_1"``: the paper's Lemma 4.1, ``sqrt(2 ln(2/delta)) Delta / sigma``
    (valid for ε ≤ 1 only). ``"analytic"``: the exact (tight) value of Balle
    and Wang (2018), valid for every ε: the smallest ε with
    ``Phi(D/2 - eps/D) - e^eps Phi(-D/2 - eps/D) <= delta``, ``D = Delta/sigma``.
    """
    if method == "lemma_4_1":
        return math.sqrt(2.0 * math.log(2.0 / delta)) * sensitivity / noise_std
    if method != "analytic":
        raise ValidationError(f"method must be 'analytic' or 'lemma_4_1'; got {method!r}.")
    D = sensitivity / noise_std

    def excess(eps):  # log-space: log(Phi(a) - e^eps Phi(b)) - log(delta)
        a, b = D / 2 - eps / D, -D / 2 - eps / D
        la, lb = special.log_ndtr(a), eps + special.log_ndtr(b)
        if lb >= la:
            return -math.inf
        return la + math.log1p(-math.exp(lb - la)) - math.log(delta)

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    return optimize.brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12)


def epsilon_kov(sigma, n_rounds, iota, q, lipschitz=1.0, delta0=0.01, delta_prime=None,
                gaussian="analytic", sampling_rate=None):
    """The paper's proof strategy evaluated correctly (spec 004 §3.5 item 3).

    Per round a Gaussian mechanism (ε_t at δ0, sensitivity 2L), amplified by
    sampling at rate ``iota/q`` to ``eps'_t = ln(1 + (iota/q)(e^eps_t - 1))``,
    ``delta_t = iota delta0 / q``; the full KOV bound (minimum of the three
    expressions) over T rounds at slack δ'; ``delta = 1 - (1-delta')(1-delta_t)^T``.

    Parameters
    ----------
    delta_prime : float, optional
        Default: the paper's choice ``sqrt(sum eps'_t^2)``.
    gaussian : {"analytic", "lemma_4_1"}
    sampling_rate : float, optional
        Overrides ``iota / q``.

    Returns
    -------
    epsilon, delta : float
    """
    if sigma <= 0:
        return math.inf, 1.0
    rate = iota / q if sampling_rate is None else float(sampling_rate)
    eps_t = gaussian_epsilon(sigma, 2.0 * lipschitz, delta0, gaussian)
    eps_amp = math.log1p(rate * math.expm1(eps_t)) if eps_t < 700 else eps_t + math.log(rate)
    if delta_prime is None:
        delta_prime = min(1.0, math.sqrt(n_rounds) * eps_amp)
    eps = advanced_composition([(eps_amp, int(n_rounds))], delta_prime, form="kov")
    delta = -math.expm1(math.log1p(-delta_prime) + n_rounds * math.log1p(-rate * delta0)) \
        if delta_prime < 1 else 1.0
    return eps, delta


def sigma_kov(epsilon, delta, n_rounds, iota, q, lipschitz=1.0, gaussian="analytic",
              sampling_rate=None):
    """Smallest σ whose :func:`epsilon_kov` is ≤ ``epsilon`` at total δ.

    δ is split as ``delta' = delta/2`` and ``delta0 = delta q / (2 iota T)``
    (spec 004 §3.5); bisection on log σ to a relative 1e-9.
    """
    eps, delta = _pos("epsilon", epsilon), _pos("delta", delta, upper=1.0)
    rate = iota / q if sampling_rate is None else float(sampling_rate)
    d_prime = delta / 2.0
    d0 = min(1.0, delta / (2.0 * rate * n_rounds))

    def f(s):
        return epsilon_kov(s, n_rounds, iota, q, lipschitz, d0, d_prime, gaussian, rate)[0]

    lo, hi = 1e-3, 1.0
    while f(hi) > eps:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise ValidationError("no noise level reaches this epsilon.")
    while f(lo) <= eps and lo > 1e-12:
        lo /= 2.0
    while hi / lo - 1.0 > 1e-9:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if f(mid) <= eps else (mid, hi)
    return hi


# ---------------------------------------------------------------------------
# fastdp's accountant
# ---------------------------------------------------------------------------
def _check_activation(activation):
    if activation not in ACTIVATION_MODELS:
        raise ValidationError(f"activation must be one of {ACTIVATION_MODELS}; got {activation!r}. "
                              "'public' (the default) is the sound model: messages reveal who "
                              "was active.")
    return activation


def dda_event(sigma, lipschitz, q, *, activation="public", max_active_rounds=None,
              n_rounds=None, n_samples=None, max_active_per_round=None):
    """The privacy event of one run of private distributed dual averaging.

    What is private: each record of each agent (replace-one adjacency, shard
    size q public). Sensitivity of one per-sample subgradient: 2L, so the
    Gaussian noise multiplier is ``sigma / (2 L)``. Released: all messages.

    Parameters
    ----------
    sigma : float
        Per-coordinate noise standard deviation (0: not private).
    lipschitz : float
    q : int
        Records per agent.
    activation : {"public", "hidden"}
        ``"public"``: ``max_active_rounds`` compositions of a Gaussian on a
        uniform sample of 1 of q records. ``"hidden"`` (the paper's model):
        ``n_rounds`` compositions of a Gaussian on ``max_active_per_round`` of
        ``n_samples`` records sampled without replacement (rate
        ``max_active_per_round / n_samples`` ≥ ``p_max / q``).
    """
    if sigma <= 0:
        return NonPrivateEvent()
    inner = GaussianEvent(sigma / (2.0 * lipschitz), Adjacency.REPLACE_ONE)
    if _check_activation(activation) == "public":
        if max_active_rounds is None:
            raise ValidationError("activation='public' needs max_active_rounds.")
        return SelfComposedEvent(FixedSizeSampledEvent(int(q), 1, inner), int(max_active_rounds))
    if n_rounds is None or n_samples is None or max_active_per_round is None:
        raise ValidationError("activation='hidden' needs n_rounds, n_samples and max_active_per_round.")
    return SelfComposedEvent(
        FixedSizeSampledEvent(int(n_samples), int(max_active_per_round), inner), int(n_rounds))


def calibrate_sigma(make_event, epsilon, delta, accountant="auto", initial_guess=1.0):
    """Smallest σ with ``accountant.epsilon(make_event(sigma), delta) <= epsilon``.

    ``make_event`` maps σ to the run's event (:func:`dda_event` with the
    schedule's activation counts). The result never overshoots the target.
    """
    return calibrate(make_event, epsilon, delta, accountant=accountant,
                     increasing_privacy=True, initial_guess=initial_guess)


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
    """The three ε of a run, side by side (see the module docstring).

    Attributes
    ----------
    epsilon : float
        fastdp's accountant on the event the run produced, at ``delta``.
    delta : float
    accountant : str
    activation : {"public", "hidden"}
    epsilon_paper : float
        The ε Theorem 1 claims for this σ (NOT a guarantee).
    paper_preconditions_ok : bool
    epsilon_kov, delta_kov : float
        The paper's argument evaluated correctly (hidden-activation model), at
        the run's δ split as ``delta' = delta/2``, ``delta0 = delta / (2 rate T)``.
    sigma : float
    noise_multiplier : float
        ``sigma / (2 L)``.
    event : DpEvent
    """

    epsilon: float
    delta: float
    accountant: str
    activation: str
    epsilon_paper: float
    paper_preconditions_ok: bool
    epsilon_kov: float
    delta_kov: float
    sigma: float
    noise_multiplier: float
    event: object

    def __str__(self):
        return (f"epsilon = {self.epsilon:.6g} at delta = {self.delta:g} ({self.accountant}, "
                f"activation {self.activation}; guaranteed) | corrected paper argument: "
                f"epsilon = {self.epsilon_kov:.6g} at delta = {self.delta_kov:.3g} | paper's "
                f"Theorem 1 claims epsilon = {self.epsilon_paper:.6g} (preconditions "
                f"{'hold' if self.paper_preconditions_ok else 'FAIL'}; not a guarantee)")


def privacy_report(sigma, *, lipschitz, q, n_rounds, iota, delta, delta0, activation_counts,
                   n_nodes, activation="public", accountant="auto", activation_probability=None,
                   kov_gaussian="analytic"):
    """Build the :class:`PrivacyReport` of a run.

    ``activation_counts`` are the per-agent numbers of active rounds of the
    schedule that ran; ``activation_probability`` the largest per-agent
    activation probability (default ``iota``; spec 004 E7).
    """
    counts = np.asarray(activation_counts)
    p_max = iota if activation_probability is None else float(activation_probability)
    per_round = int(math.ceil(p_max * n_nodes - 1e-9))
    event = dda_event(sigma, lipschitz, q, activation=activation,
                      max_active_rounds=int(counts.max()), n_rounds=n_rounds,
                      n_samples=n_nodes * q, max_active_per_round=per_round)
    acc = get_accountant(accountant) if isinstance(accountant, str) else accountant
    try:
        eps = acc.epsilon(event, delta)
    except PrivacyAnalysisError:  # pragma: no cover - accountants handle these events
        eps = math.inf
    if sigma > 0:
        eps_p = epsilon_paper(sigma, delta0, n_rounds, iota, q, lipschitz)
        ok = (0 < eps_p <= 1) and n_rounds >= paper_min_rounds(eps_p, iota, q)
        rate = per_round / (n_nodes * q)
        # the corrected argument at the run's total delta: delta' = delta/2, delta0 = delta/(2 rate T)
        eps_k, del_k = epsilon_kov(sigma, n_rounds, iota, q, lipschitz,
                                   min(1.0, delta / (2.0 * rate * n_rounds)), delta / 2.0,
                                   kov_gaussian, rate)
    else:
        eps_p, ok, eps_k, del_k = math.inf, False, math.inf, 1.0
    name = accountant if isinstance(accountant, str) else type(accountant).__name__
    return PrivacyReport(float(eps), float(delta), name, activation, float(eps_p), bool(ok),
                         float(eps_k), float(del_k), float(sigma),
                         float(sigma / (2 * lipschitz)), event)
