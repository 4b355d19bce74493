"""Rényi-DP of random-repetition selection ("run K ~ D times, output the best").

A base mechanism Q (e.g. "draw hyperparameters from a public grid, train a DP
model, score it privately") is run K times on the same data, with K drawn from
a public distribution D *independently of the data*; only the single run with
the best score is released (its output, including its noisy score). The
randomness of K is what keeps the cost of the selection small: a fixed number
of repetitions would cost (almost) as much as releasing all of them.

Distributions of K and the bounds used (λ > 1 is the Rényi order, ε(λ) the RDP
curve of Q, E[K] the mean of K):

* ``"truncated_negative_binomial"`` with η ∈ (−1, ∞) and γ ∈ (0, 1]:
  P[K = k] = (1−γ)^k / (γ^{−η} − 1) · Π_{ℓ=0}^{k−1} (ℓ+η)/(ℓ+1), k ≥ 1
  (η = 0 is the limit, the logarithmic distribution
  P[K = k] = (1−γ)^k / (k·log(1/γ)); η = 1 is the geometric distribution on
  {1, 2, ...}; γ = 1 means K = 1). Papernot & Steinke (ICLR 2022), Theorem 2:
  for every second order λ̂ ≥ 1 at which Q is (λ̂, ε̂)-RDP, the selection is
  (λ, ε')-RDP with

      ε' = ε(λ) + (1+η)·(1 − 1/λ̂)·ε̂ + (1+η)·log(1/γ)/λ̂ + log(E[K])/(λ−1),

  E[K] = η(1−γ) / (γ(1−γ^η)) (η ≠ 0), (1/γ − 1)/log(1/γ) (η = 0).
  The middle terms do not depend on λ; they are minimised once over λ̂ in the
  accountant's whole order grid together with λ̂ = 1. The λ̂ = 1 term,
  (1+η)·log(1/γ), is the limit λ̂ → 1⁺ of valid bounds (ε̂(λ̂) stays below the
  curve at the smallest grid order because Rényi divergences are
  non-decreasing in the order), hence valid itself.
* ``"poisson"`` with mean μ > 0 (K = 0 is possible; then nothing is released:
  the output is ⊥). Papernot & Steinke, Theorem 6: if Q is (ε̂, δ̂)-DP with
  e^{ε̂} ≤ 1 + 1/(λ−1), the selection is (λ, ε')-RDP with

      ε' = ε(λ) + μ·δ̂ + log(μ)/(λ−1).

  At each λ, fastdp takes ε̂ = log(λ/(λ−1)) (the largest allowed) and δ̂ the
  δ of Q's own RDP curve at ε̂ (the accountant's RDP → DP conversion). The
  formula can be negative for μ < 1: it bounds the part of the Rényi sum over
  real outputs, the ⊥ output adds its probability e^{−μ} (the same under both
  datasets). fastdp therefore reports log(e^{−μ} + e^{(λ−1)ε'})/(λ−1) ≥ ε',
  which is never negative and differs from ε' by at most e^{−μ−(λ−1)ε'}/(λ−1).
* ``"geometric"`` with γ ∈ (0, 1]: Liu & Talwar's random stopping (STOC
  2019): after every run, stop with probability γ and release the best so far;
  K is geometric on {1, 2, ...}, the η = 1 case above (whose RDP bound is
  used). If Q is ε-DP (pure), Liu & Talwar's random-stopping theorem (§3)
  gives 3ε-DP for the selection; fastdp then takes the smaller of the two RDP
  curves (the pure bound through the randomized-response curve at 3ε). Their approximate-DP
  variant ((ε, δ) candidates) is not implemented: fastdp's search accounts
  approximate candidates through their RDP curves instead.

Adjacency: any; the selection's guarantee holds under the adjacency of Q's
curve. What is released: only the best run (its score and output), never K
and never the other runs: releasing K or the losing runs is not covered.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fastdp._validation import check_real as _real
from fastdp.exceptions import ValidationError

__all__ = [
    "DISTRIBUTIONS",
    "Repetitions",
    "tnb_expected_repetitions",
    "rdp_truncated_negative_binomial",
    "rdp_poisson_repetitions",
    "deltas_from_rdp",
    "rdp_repeated_selection",
    "liu_talwar_pure_epsilon",
]

#: Names of the supported distributions of the number of repetitions K.
DISTRIBUTIONS = ("truncated_negative_binomial", "poisson", "geometric")


def _check_eta(eta):
    eta = _real("eta", eta)
    if not (eta > -1.0 and math.isfinite(eta)):
        raise ValidationError(f"eta must be a finite number > -1, got {eta}.")
    return eta


def _check_gamma(gamma):
    gamma = _real("gamma", gamma)
    if not (0.0 < gamma <= 1.0):
        raise ValidationError(f"gamma must be in (0, 1], got {gamma}.")
    return gamma


def _check_mu(mu):
    mu = _real("mu", mu)
    if not (mu > 0.0 and math.isfinite(mu)):
        raise ValidationError(f"mu must be a finite number > 0, got {mu}.")
    return mu


def _log_norm_ratio(eta, gamma):
    """(γ^{−η} − 1)/η, continuous at η = 0 (where it is log(1/γ))."""
    t = -math.log(gamma)
    if eta == 0.0:
        return t
    return math.expm1(eta * t) / eta


def tnb_expected_repetitions(eta: float, gamma: float) -> float:
    """E[K] of the truncated negative binomial distribution D_{η,γ}.

    η(1−γ)/(γ(1−γ^η)) for η ≠ 0, (1/γ − 1)/log(1/γ) for η = 0, 1 for γ = 1.
    """
    eta, gamma = _check_eta(eta), _check_gamma(gamma)
    if gamma == 1.0:
        return 1.0
    t = -math.log(gamma)
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / t
    return eta * (1.0 - gamma) / (gamma * -math.expm1(-eta * t))


@dataclasses.dataclass(frozen=True)
class Repetitions:
    """A public distribution of the number of repetitions K.

    Build with :meth:`truncated_negative_binomial`, :meth:`poisson`,
    :meth:`geometric` or :meth:`with_mean`.

    Parameters
    ----------
    distribution : {"truncated_negative_binomial", "poisson", "geometric"}
    eta : float, optional
        η ∈ (−1, ∞) of the truncated negative binomial.
    gamma : float, optional
        γ ∈ (0, 1] of the truncated negative binomial and of the geometric.
    mu : float, optional
        Mean μ > 0 of the Poisson distribution.
    """

    distribution: str
    eta: float | None = None
    gamma: float | None = None
    mu: float | None = None

    def __post_init__(self):
        if self.distribution not in DISTRIBUTIONS:
            raise ValidationError(
                f"distribution must be one of {DISTRIBUTIONS}, got {self.distribution!r}.")
        given = {k for k in ("eta", "gamma", "mu") if getattr(self, k) is not None}
        need = {"truncated_negative_binomial": {"eta", "gamma"}, "poisson": {"mu"},
                "geometric": {"gamma"}}[self.distribution]
        if given != need:
            raise ValidationError(
                f"the {self.distribution} distribution takes exactly {sorted(need)}; "
                f"got {sorted(given)}.")
        if self.eta is not None:
            object.__setattr__(self, "eta", _check_eta(self.eta))
        if self.gamma is not None:
            object.__setattr__(self, "gamma", _check_gamma(self.gamma))
        if self.mu is not None:
            object.__setattr__(self, "mu", _check_mu(self.mu))

    # -- constructors -------------------------------------------------------
    @classmethod
    def truncated_negative_binomial(cls, eta, gamma):
        """D_{η,γ} of Papernot & Steinke (η = 0: logarithmic; η = 1: geometric)."""
        return cls("truncated_negative_binomial", eta=eta, gamma=gamma)

    @classmethod
    def poisson(cls, mu):
        """Poisson(μ) (K = 0 possible: nothing is released)."""
        return cls("poisson", mu=mu)

    @classmethod
    def geometric(cls, gamma):
        """Liu & Talwar's random stopping: P[K = k] = γ(1−γ)^{k−1}, k ≥ 1."""
        return cls("geometric", gamma=gamma)

    @classmethod
    def with_mean(cls, distribution, mean, *, eta=0.0):
        """The distribution of the given family whose E[K] is ``mean``.

        ``mean`` ≥ 1 for the truncated negative binomial and the geometric
        (γ solved from E[K] by bisection on log γ for the former; γ = 1/mean
        for the latter), > 0 for the Poisson (μ = mean).
        """
        mean = _real("expected_repetitions", mean)
        if distribution == "poisson":
            return cls.poisson(mean)
        if not (mean >= 1.0 and math.isfinite(mean)):
            raise ValidationError(
                f"expected_repetitions must be a finite number >= 1, got {mean}.")
        if distribution == "geometric":
            return cls.geometric(1.0 / mean)
        if distribution != "truncated_negative_binomial":
            raise ValidationError(
                f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}.")
        eta = _check_eta(eta)
        if mean == 1.0:
            return cls.truncated_negative_binomial(eta, 1.0)
        # E[K] decreases in γ from +inf (γ -> 0) to 1 (γ = 1): bisect on log γ.
        lo, hi = -700.0, 0.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if tnb_expected_repetitions(eta, math.exp(mid)) > mean:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-13:
                break
        return cls.truncated_negative_binomial(eta, math.exp(hi))

    # -- moments, pmf, sampling ---------------------------------------------
    def mean(self) -> float:
        """E[K]."""
        if self.distribution == "poisson":
            return self.mu
        if self.distribution == "geometric":
            return 1.0 / self.gamma
        return tnb_expected_repetitions(self.eta, self.gamma)

    @property
    def _tnb_eta(self):
        return 1.0 if self.distribution == "geometric" else self.eta

    def pmf(self, k) -> np.ndarray:
        """P[K = k] for integer ``k`` (array-like)."""
        k = np.atleast_1d(np.asarray(k))
        out = np.zeros(k.shape, dtype=float)
        if self.distribution == "poisson":
            from scipy.special import gammaln

            ok = k >= 0
            kk = k[ok].astype(float)
            out[ok] = np.exp(-self.mu + kk * math.log(self.mu) - gammaln(kk + 1.0))
            return out
        eta, gamma = self._tnb_eta, self.gamma
        if gamma == 1.0:
            return (k == 1).astype(float)
        kmax = int(k.max()) if k.size else 0
        if kmax < 1:
            return out
        # p(1) = (1−γ)·η/(γ^{−η} − 1); p(k+1) = p(k)·(1−γ)(k+η)/(k+1)
        j = np.arange(1, kmax, dtype=float)
        log_ratio = math.log1p(-gamma) + np.log(np.abs(j + eta)) - np.log(j + 1.0)
        logp = math.log1p(-gamma) - math.log(_log_norm_ratio(eta, gamma)) + np.concatenate(
            ([0.0], np.cumsum(log_ratio)))
        ok = (k >= 1) & (k <= kmax)
        out[ok] = np.exp(logp[k[ok].astype(int) - 1])
        return out

    def sample(self, rng: np.random.Generator) -> int:
        """One draw of K with the numpy ``Generator`` ``rng``."""
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("rng must be a numpy.random.Generator.")
        if self.distribution == "poisson":
            return int(rng.poisson(self.mu))
        if self.distribution == "geometric":
            return int(rng.geometric(self.gamma))
        eta, gamma = self.eta, self.gamma
        if gamma == 1.0:
            return 1
        # inverse CDF with the pmf recursion (works for every η > −1)
        u = rng.random()
        k = 1
        p = (1.0 - gamma) / _log_norm_ratio(eta, gamma)
        cdf = p
        while cdf < u and p > 0.0:
            p *= (1.0 - gamma) * (k + eta) / (k + 1.0)
            k += 1
            cdf += p
        return k

    def to_dict(self) -> dict:
        return {"distribution": self.distribution, "eta": self.eta, "gamma": self.gamma,
                "mu": self.mu}


# ---------------------------------------------------------------------------
# RDP bounds
# ---------------------------------------------------------------------------
def _as_curve(orders, rdp, what):
    orders = np.atleast_1d(np.asarray(orders, dtype=float))
    rdp = np.atleast_1d(np.asarray(rdp, dtype=float))
    if orders.shape != rdp.shape or orders.ndim != 1:
        raise ValidationError(f"{what}: orders and RDP values must be 1-D of the same length.")
    if np.any(orders <= 1.0) or np.any(np.isnan(rdp)) or np.any(rdp < 0):
        raise ValidationError(f"{what}: orders must be > 1 and RDP values >= 0.")
    return orders, rdp


def _tnb_selection_term(eta, gamma, hat_orders, hat_rdp):
    """min over λ̂ ∈ {1} ∪ hat_orders of (1+η)[(1 − 1/λ̂)ε̂(λ̂) + log(1/γ)/λ̂]."""
    log_inv_gamma = -math.log(gamma)
    with np.errstate(invalid="ignore"):
        terms = (1.0 - 1.0 / hat_orders) * hat_rdp + log_inv_gamma / hat_orders
    terms = np.where(np.isnan(terms), np.inf, terms)
    best = min(log_inv_gamma, float(np.min(terms)) if terms.size else math.inf)
    return (1.0 + eta) * best


def rdp_truncated_negative_binomial(orders, base_rdp, eta, gamma, hat_orders=None,
                                    hat_rdp=None) -> np.ndarray:
    """Papernot & Steinke, Thm 2: RDP of best-of-K, K ~ D_{η,γ}.

    Parameters
    ----------
    orders, base_rdp : array-like
        Orders λ > 1 at which the bound is wanted and Q's RDP ε(λ) there.
    eta, gamma : float
        η ∈ (−1, ∞), γ ∈ (0, 1].
    hat_orders, hat_rdp : array-like, optional
        The grid of second orders λ̂ and Q's RDP there (default: ``orders``,
        ``base_rdp``). λ̂ = 1 is always included.

    Returns
    -------
    numpy.ndarray
        ε'(λ) at ``orders``.
    """
    eta, gamma = _check_eta(eta), _check_gamma(gamma)
    orders, base_rdp = _as_curve(orders, base_rdp, "base curve")
    if hat_orders is None:
        hat_orders, hat_rdp = orders, base_rdp
    hat_orders, hat_rdp = _as_curve(hat_orders, hat_rdp, "second-order curve")
    if gamma == 1.0:      # K = 1: the base mechanism itself
        return base_rdp.copy()
    extra = _tnb_selection_term(eta, gamma, hat_orders, hat_rdp)
    log_mean = math.log(tnb_expected_repetitions(eta, gamma))
    return base_rdp + extra + log_mean / (orders - 1.0)


def rdp_poisson_repetitions(orders, base_rdp, mu, hat_orders=None, hat_rdp=None,
                            conversion="improved") -> np.ndarray:
    """Papernot & Steinke, Thm 6, with the ⊥ output added: best-of-K, K ~ Poisson(μ).

    At each order λ: ε̂ = log(λ/(λ−1)), δ̂ = δ of Q's curve (``hat_orders``,
    ``hat_rdp``) at ε̂ by the RDP → DP ``conversion``,
    ε' = ε(λ) + μδ̂ + log(μ)/(λ−1), and the result is
    max(0, log(e^{−μ} + e^{(λ−1)ε'})/(λ−1)) (see the module docstring).
    """
    mu = _check_mu(mu)
    orders, base_rdp = _as_curve(orders, base_rdp, "base curve")
    if hat_orders is None:
        hat_orders, hat_rdp = orders, base_rdp
    hat_orders, hat_rdp = _as_curve(hat_orders, hat_rdp, "second-order curve")
    eps_hat = -np.log1p(-1.0 / orders)
    delta_hat = deltas_from_rdp(hat_orders, hat_rdp, eps_hat, conversion)
    with np.errstate(invalid="ignore", over="ignore"):
        eps_prime = base_rdp + mu * delta_hat + math.log(mu) / (orders - 1.0)
        total = np.logaddexp(-mu, (orders - 1.0) * eps_prime) / (orders - 1.0)
    total = np.where(np.isfinite(base_rdp), total, np.inf)
    return np.maximum(total, 0.0)


def deltas_from_rdp(orders, rdp, epsilons, conversion="improved") -> np.ndarray:
    """δ of an RDP curve at each of several ε, minimised over the orders.

    The minimum over the orders of :func:`fastdp.privacy.rdp.log_deltas_from_rdp`
    (the same conversion :func:`~fastdp.privacy.rdp.delta_from_rdp` uses), per ε.
    """
    from fastdp.privacy.rdp import log_deltas_from_rdp  # rdp imports this module

    if conversion not in ("improved", "classic"):
        raise ValidationError(f"conversion must be 'improved' or 'classic', got {conversion!r}.")
    best = np.min(log_deltas_from_rdp(orders, rdp, epsilons, conversion), axis=1)
    return np.minimum(np.exp(np.minimum(best, 0.0)), 1.0)


def liu_talwar_pure_epsilon(epsilon: float, gamma: float = 0.5) -> float:
    """Liu & Talwar (2019, §3): random stopping over ε-DP candidates is 3ε-DP.

    With γ = 1 (a single run) the selection is the base mechanism: ε.
    """
    epsilon, gamma = _real("epsilon", epsilon), _check_gamma(gamma)
    if epsilon < 0:
        raise ValidationError(f"epsilon must be >= 0, got {epsilon}.")
    return epsilon if gamma == 1.0 else 3.0 * epsilon


def rdp_repeated_selection(repetitions: Repetitions, orders, base_rdp, hat_orders=None,
                           hat_rdp=None, *, pure_epsilon=math.inf,
                           conversion="improved") -> np.ndarray:
    """RDP curve of best-of-K for the distribution ``repetitions``.

    Dispatches to :func:`rdp_truncated_negative_binomial` (η = 1 for the
    geometric), :func:`rdp_poisson_repetitions`, and for the geometric with a
    finite base ``pure_epsilon`` also takes the pointwise minimum with the RDP
    curve of a 3ε-DP mechanism (Liu & Talwar).
    """
    if not isinstance(repetitions, Repetitions):
        raise ValidationError("repetitions must be a fastdp.privacy.tuning.Repetitions.")
    if repetitions.distribution == "poisson":
        return rdp_poisson_repetitions(orders, base_rdp, repetitions.mu, hat_orders, hat_rdp,
                                       conversion)
    eta = repetitions._tnb_eta
    curve = rdp_truncated_negative_binomial(orders, base_rdp, eta, repetitions.gamma,
                                            hat_orders, hat_rdp)
    if repetitions.distribution == "geometric" and math.isfinite(pure_epsilon):
        from fastdp.privacy.rdp import rdp_pure

        pure = rdp_pure(liu_talwar_pure_epsilon(pure_epsilon, repetitions.gamma),
                        np.atleast_1d(np.asarray(orders, dtype=float)))
        curve = np.minimum(curve, pure)
    return curve
