"""Pure ε-DP accounting: basic and advanced composition, amplification by sampling.

This accountant serves the mechanisms analysed with pure differential privacy:
the Laplace mechanism (spec 002: DP heavy ball / Nesterov / MASG), the
exponential mechanism (spec 001), generic (ε, 0)-DP mechanisms and the Laplace
form of spec 003's line search.  Gaussian events are not pure and are refused.

Rules used (ε_i is the pure ε of one mechanism, all under one adjacency):

* **Laplace** with scale b relative to the L1 sensitivity: ε = 1/b.
* **Sampling without replacement** of a batch of m out of n records
  (replace-one adjacency; Balle, Barthe, Gaboardi 2018, Thm 9; spec 002
  eq. 3.3): ε' = log(1 + (m/n)(e^ε − 1)).
* **Poisson sampling** with rate q (add/remove adjacency; Li, Qardaji, Su
  2012): ε' = log(1 + q(e^ε − 1)).
* **Shuffling once per epoch**: no amplification (each record is in one batch
  per epoch, replace-one): ``epochs`` compositions of the inner event; see
  :class:`fastdp.privacy.events.ShuffledEvent`.
* **Basic composition** (Dwork–Roth Cor. 3.15; spec 002 Thm A.2): ε = Σ ε_i,
  δ = 0; for (ε_i, δ_i)-DP mechanisms (``ApproxDpEvent``) δ = Σ δ_i
  (Dwork–Roth Thm 3.16), and advanced composition adds Σ δ_i to its slack δ'.
* **Advanced composition** for a slack δ' > 0, (ε̃, δ')-DP with

  ``"kov"`` (default) — Kairouz, Oh, Viswanath (2015/2017), Thm 3.5 for
      heterogeneous mechanisms, the minimum of
      Σε_i,
      Σε_i·tanh(ε_i/2) + √(2Σε_i² · log(e + √(Σε_i²)/δ')),
      Σε_i·tanh(ε_i/2) + √(2Σε_i² · log(1/δ')).
      This is the correct evaluation spec 004 §3.5 asks for.
  ``"paper_004"`` — the form printed in seed 004's Lemma 4.3:
      √(2Σε_i² · log(e + √(Σε_i²)/δ')) + Σε_i².  A valid (looser) bound,
      because ε·tanh(ε/2) ≤ ε²/2; kept to reproduce that paper.
  ``"drv"`` — Dwork, Rothblum, Vadhan (2010), Thm III.3, with heterogeneous
      Azuma: √(2 log(1/δ') Σε_i²) + Σ ε_i(e^{ε_i} − 1).

All functions take the pure ε of mechanisms whose adjacency the caller has
fixed; the accountant checks adjacency on events.
"""

import math

from fastdp._validation import check_delta, check_epsilon, check_integer, check_real
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import Accountant

__all__ = [
    "PureDPAccountant",
    "amplify_without_replacement",
    "amplify_poisson",
    "basic_composition",
    "advanced_composition",
    "ADVANCED_FORMS",
]

#: Names of the advanced-composition bounds (see module docstring).
ADVANCED_FORMS = ("kov", "paper_004", "drv")
_COMPOSITIONS = ("basic", "advanced")


def amplify_without_replacement(epsilon, batch_size, n):
    """ε of an ε-DP mechanism run on a uniformly random batch of ``batch_size`` of ``n`` records.

    Balle, Barthe, Gaboardi (2018), Thm 9: log(1 + (m/n)(e^ε − 1)), computed
    with ``log1p``/``expm1`` so that tiny ε keep full relative accuracy.
    Adjacency: replace-one (datasets of the public size ``n``); the inner ε
    must also be stated for replace-one neighbours of the batch.
    """
    epsilon = check_epsilon(epsilon, allow_zero=True, allow_inf=True)
    n = check_integer("n", n, low=1, allow_integral_float=True)
    batch_size = check_integer("batch_size", batch_size, low=1, high=n, allow_integral_float=True)
    return _amplify(epsilon, batch_size / n)


def amplify_poisson(epsilon, sample_rate):
    """ε of an ε-DP mechanism run on a Poisson sample of rate ``sample_rate``.

    Li, Qardaji, Su (2012): log(1 + q(e^ε − 1)).  Adjacency: add/remove.
    """
    epsilon = check_epsilon(epsilon, allow_zero=True, allow_inf=True)
    return _amplify(epsilon, check_real("sample_rate", sample_rate, low=0.0, high=1.0))


def _amplify(epsilon, rate):
    if rate == 0.0:
        return 0.0
    if math.isinf(epsilon):
        return math.inf
    if epsilon > 700.0:  # e^ε overflows: log(q e^ε (1 + (1−q)/(q e^ε)))
        return epsilon + math.log(rate) + math.log1p((1.0 - rate) * math.exp(-epsilon) / rate)
    return math.log1p(rate * math.expm1(epsilon))


def _pairs(epsilons):
    """Normalise an iterable of ε or (ε, count) into a list of (ε, count)."""
    pairs = []
    for item in epsilons:
        if isinstance(item, tuple):
            eps, count = item
        else:
            eps, count = item, 1
        eps = check_epsilon(eps, allow_zero=True, allow_inf=True)
        count = check_integer("a composition count", count, low=0, allow_integral_float=True)
        if count:
            pairs.append((eps, count))
    return pairs


def basic_composition(epsilons):
    """Σ ε_i: the adaptive composition of pure ε_i-DP mechanisms is (Σε_i, 0)-DP.

    ``epsilons`` holds numbers or ``(epsilon, count)`` pairs.
    """
    return math.fsum(eps * count for eps, count in _pairs(epsilons))


def advanced_composition(epsilons, delta_prime, form="kov"):
    """ε̃ of the adaptive composition of pure ε_i-DP mechanisms at slack δ'.

    The composition is (ε̃, δ')-DP.  ``form`` selects the bound (module
    docstring); ``"kov"`` never exceeds basic composition.

    Parameters
    ----------
    epsilons : iterable of float or (float, int)
        Per-mechanism ε, optionally with repetition counts.
    delta_prime : float
        Slack δ' in (0, 1].
    form : {"kov", "paper_004", "drv"}
    """
    if form not in ADVANCED_FORMS:
        raise ValidationError(f"form must be one of {ADVANCED_FORMS}; got {form!r}")
    delta_prime = check_delta(delta_prime, name="delta_prime", allow_one=True)
    pairs = _pairs(epsilons)
    if any(math.isinf(eps) for eps, _ in pairs):
        return math.inf
    total = math.fsum(eps * c for eps, c in pairs)
    squares = math.fsum(eps * eps * c for eps, c in pairs)
    if squares == 0.0:
        return 0.0
    if form == "kov":
        drift = math.fsum(eps * math.tanh(eps / 2.0) * c for eps, c in pairs)
        tail_a = math.sqrt(2.0 * squares * math.log(math.e + math.sqrt(squares) / delta_prime))
        tail_b = math.sqrt(2.0 * squares * math.log(1.0 / delta_prime))
        return min(total, drift + tail_a, drift + tail_b)
    if form == "paper_004":
        return (math.sqrt(2.0 * squares * math.log(math.e + math.sqrt(squares) / delta_prime))
                + squares)
    drift = math.fsum(eps * math.expm1(eps) * c for eps, c in pairs)
    return math.sqrt(2.0 * math.log(1.0 / delta_prime) * squares) + drift


class PureDPAccountant(Accountant):
    """Accountant for pure ε-DP events (Laplace, exponential mechanism, ...).

    Parameters
    ----------
    composition : {"basic", "advanced"}, default "basic"
        ``"basic"`` sums the ε (δ = 0).  ``"advanced"`` applies
        :func:`advanced_composition` with slack δ', which turns a pure-DP
        composition into an (ε̃, δ')-DP one; it is never worse than basic with
        ``advanced_form="kov"``.
    delta_prime : float, optional
        Slack for advanced composition.  ``None`` (default) uses the whole
        δ passed to :meth:`epsilon`.  When given, :meth:`epsilon` requires
        ``delta >= delta_prime``.
    advanced_form : {"kov", "paper_004", "drv"}, default "kov"

    Notes
    -----
    Events handled: ``PureEvent``, ``ExponentialMechanismEvent``,
    ``LaplaceEvent`` (ε = 1/scale), the Laplace ``LineSearchEvent`` (its pure
    ε_BT), ``FixedSizeSampledEvent`` (amplification without replacement,
    replace-one), ``PoissonSampledEvent`` (Poisson amplification, add/remove),
    ``ShuffledEvent`` (its guaranteed view: no amplification; the
    ``"poisson_assumed"`` view is a what-if, not a guarantee),
    ``SelfComposedEvent``, ``ComposedEvent``, ``NonPrivateEvent`` (ε = ∞) and
    ``ApproxDpEvent`` (an (ε_i, δ_i)-DP mechanism: basic composition gives
    (Σε_i, Σδ_i); advanced composition gives (ε̃(δ'), δ' + Σδ_i), by Kairouz,
    Oh, Viswanath 2017, Thm 3.5 (whose δ, 1 − (1 − δ')Π(1 − δ_i), is at most
    δ' + Σδ_i) and Dwork, Rothblum, Vadhan 2010, Thm III.3; ``paper_004``'s
    form dominates the KOV one, so the same δ applies).  :meth:`epsilon`
    at a δ below Σδ_i raises :class:`~fastdp.exceptions.PrivacyAnalysisError`.
    Gaussian events (and the Gaussian line search) are not pure DP and raise
    :class:`~fastdp.exceptions.PrivacyAnalysisError`.
    """

    name = "pure"

    def __init__(self, composition="basic", delta_prime=None, advanced_form="kov"):
        if composition not in _COMPOSITIONS:
            raise ValidationError(
                f"composition must be one of {_COMPOSITIONS}; got {composition!r}")
        if advanced_form not in ADVANCED_FORMS:
            raise ValidationError(
                f"advanced_form must be one of {ADVANCED_FORMS}; got {advanced_form!r}")
        if delta_prime is not None:
            delta_prime = check_delta(delta_prime, name="delta_prime")
        self.composition = composition
        self.delta_prime = delta_prime
        self.advanced_form = advanced_form

    def __repr__(self):
        return (f"PureDPAccountant(composition={self.composition!r}, "
                f"delta_prime={self.delta_prime!r}, advanced_form={self.advanced_form!r})")

    # -- event analysis -------------------------------------------------------
    def epsilon_delta_terms(self, event, view="guaranteed"):
        """Per-mechanism guarantees of ``event`` as a list of ``(epsilon, delta, count)``.

        Pure mechanisms have δ = 0; :class:`~fastdp.privacy.events.ApproxDpEvent`
        contributes its (ε, δ).  Sampled events contribute their amplified
        (ε', γ·δ) (Balle, Barthe, Gaboardi 2018, Thms 8 and 9: the same ε rule
        as for pure DP, δ scaled by the sampling rate γ).  Raises
        :class:`PrivacyAnalysisError` for events without such an analysis.
        """
        if view not in ev.VIEWS:
            raise ValidationError(f"view must be one of {ev.VIEWS}; got {view!r}")
        if isinstance(event, ev.NonPrivateEvent):
            return [(math.inf, 0.0, 1)]
        if isinstance(event, ev.SelfComposedEvent):
            return [(eps, dlt, c * event.count)
                    for eps, dlt, c in self.epsilon_delta_terms(event.event, view)]
        if isinstance(event, ev.ComposedEvent):
            return [term for inner in event.events
                    for term in self.epsilon_delta_terms(inner, view)]
        if isinstance(event, ev.ParallelComposedEvent):
            # disjoint parts of a data-independent split: (max ε_i, max δ_i), one term
            parts = [self._single_guarantee(e, view) for e in event.events]
            return [(max(e for e, _ in parts), max(d for _, d in parts), 1)]
        if isinstance(event, ev.ShuffledEvent):
            return self.epsilon_delta_terms(event.view(view), view)
        if isinstance(event, ev.FixedSizeSampledEvent):
            inner_eps, inner_delta = self._single_guarantee(event.replace_one_event, view)
            rate = event.batch_size / event.n
            return [(_amplify(inner_eps, rate), rate * inner_delta, 1)]
        if isinstance(event, ev.PoissonSampledEvent):
            inner_eps, inner_delta = self._single_guarantee(event.event, view)
            return [(_amplify(inner_eps, event.sample_rate), event.sample_rate * inner_delta, 1)]
        if isinstance(event, ev.ApproxDpEvent):
            return [(event.epsilon, event.delta, 1)]
        if isinstance(event, ev.MechanismEvent):
            eps = event.pure_epsilon()
            if math.isinf(eps):
                raise PrivacyAnalysisError(
                    f"{type(event).__name__} is not a pure ε-DP mechanism "
                    f"({event!r}); account it with accountant='rdp' or 'pld'.")
            return [(eps, 0.0, 1)]
        raise PrivacyAnalysisError(
            f"the pure-DP accountant cannot analyse {type(event).__name__}")

    def pure_epsilons(self, event, view="guaranteed"):
        """Per-mechanism pure ε of ``event`` as a list of ``(epsilon, count)``.

        Sampled events contribute their amplified ε.  Raises
        :class:`PrivacyAnalysisError` for events without a pure-DP analysis,
        including approximate-DP events with δ > 0 (use
        :meth:`epsilon_delta_terms` for those).
        """
        terms = self.epsilon_delta_terms(event, view)
        if any(dlt > 0.0 for _, dlt, _ in terms):
            raise PrivacyAnalysisError(
                "the event contains (epsilon, delta)-DP mechanisms with delta > 0; they have "
                "no pure epsilon: use epsilon_delta_terms().")
        return [(eps, c) for eps, _, c in terms]

    def _single_guarantee(self, event, view):
        """(ε, δ) of a (composed) inner event by basic composition."""
        terms = self.epsilon_delta_terms(event, view)
        return (basic_composition([(eps, c) for eps, _, c in terms]),
                math.fsum(dlt * c for _, dlt, c in terms))

    # -- answers ----------------------------------------------------------------
    def _epsilon(self, event, delta, view):
        """ε such that ``event`` is (ε, delta)-DP.

        The events' own δ (Σ δ_i of approximate-DP members, see
        :func:`fastdp.privacy.events.event_delta`) is taken from ``delta``
        first; less raises :class:`PrivacyAnalysisError`.  Basic composition
        then ignores the rest of ``delta``.  Advanced composition uses slack
        δ' = ``delta_prime`` (needs ``delta >= delta_prime + Σδ_i``) or, if
        that is None, δ' = ``delta − Σδ_i``; with δ' = 0 it falls back to basic.
        """
        terms = self.epsilon_delta_terms(event, view)
        pairs = [(eps, c) for eps, _, c in terms]
        basic = basic_composition(pairs)
        if math.isinf(basic):
            return basic
        own = ev.check_event_delta(event, delta, view)
        if self.composition == "basic":
            return basic
        if self.delta_prime is not None and delta < self.delta_prime + own:
            extra = f" + the events' own delta {own:g}" if own else ""
            raise PrivacyAnalysisError(
                f"advanced composition with delta_prime={self.delta_prime:g} needs "
                f"delta >= delta_prime{extra}; got delta={delta:g}")
        slack = self.delta_prime if self.delta_prime is not None else delta - own
        if delta >= 1.0:
            return 0.0
        if slack <= 0.0:
            return basic
        return min(basic, advanced_composition(pairs, min(slack, 1.0), self.advanced_form))

    def _delta(self, event, epsilon, view):
        """Smallest δ this accountant can certify for ``event`` at ``epsilon``.

        The events' own δ (Σ δ_i, 0 for pure events) when ``epsilon`` is at
        least the basic-composition ε.  Otherwise 1.0 for basic composition
        (no bound below ε_basic), and for advanced composition Σ δ_i plus the
        smallest slack δ' whose ε̃(δ') <= ``epsilon``, found by bisection on
        log δ' and rounded up (1.0 if none).
        """
        terms = self.epsilon_delta_terms(event, view)
        pairs = [(eps, c) for eps, _, c in terms]
        own = ev.event_delta(event, view)
        basic = basic_composition(pairs)
        if epsilon >= basic:
            return min(own, 1.0)
        if self.composition == "basic":
            return 1.0
        return min(own + self._advanced_slack(pairs, epsilon), 1.0)

    def _advanced_slack(self, pairs, epsilon):
        """Smallest slack δ' with advanced-composition ε̃(δ') <= ``epsilon`` (1.0 if none)."""
        def eps_at(slack):
            return advanced_composition(pairs, slack, self.advanced_form)

        if eps_at(1.0) > epsilon:
            return 1.0
        low, high = 1e-300, 1.0
        if eps_at(low) <= epsilon:
            return low
        for _ in range(200):
            mid = math.sqrt(low * high)
            if eps_at(mid) <= epsilon:
                high = mid
            else:
                low = mid
            if high / low - 1.0 < 1e-12:
                break
        return high
