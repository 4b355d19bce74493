"""Privacy events: what a fastdp mechanism released, in a form accountants read.

A solver never computes ε itself. It describes what it released as a tree of
events (e.g. "Poisson-sampled Gaussian with noise multiplier σ, composed T
times") and an accountant turns the tree into ε or δ. Events are immutable,
hashable values (frozen dataclasses), so accountants can cache per-event
results.

Noise parameters are always stated *relative to the sensitivity* of the
released query under the event's adjacency:

* ``GaussianEvent(noise_multiplier=σ)``: Gaussian noise with standard deviation
  σ·Δ₂, where Δ₂ is the L2 sensitivity of the query.
* ``LaplaceEvent(scale=b)``: Laplace noise with scale b·Δ₁ (``b`` is the scale
  *divided by* the L1 sensitivity Δ₁; the mechanism is 1/b-DP).

Adjacency
---------
Every event carries an :class:`Adjacency`. ``ADD_REMOVE`` (the default) means
that neighbouring datasets differ by adding or removing one record, and the
sensitivity behind the noise parameters is the add/remove sensitivity (for a sum
of per-example vectors clipped to L2 norm ``C`` that is ``C``). ``REPLACE_ONE``
means neighbouring datasets of the same public size ``n`` differ in one record,
and the sensitivity is the replace-one sensitivity (``2C`` for the clipped sum).

Because replacing a record is removing it and adding another, the replace-one
sensitivity of any query is at most twice its add/remove sensitivity, and an
ε-DP mechanism under add/remove is 2ε-DP under replace-one.
:meth:`DpEvent.to_replace_one` applies this conversion; the sampler events
that are analysed under replace-one (:class:`FixedSizeSampledEvent`,
:class:`ShuffledEvent`) apply it to an add/remove sub-event automatically.
The converse direction does not hold in general and is never done.

Refusals
--------
Events refuse combinations that no sound analysis covers, with
:class:`~fastdp.exceptions.PrivacyAnalysisError`:

* composing add/remove events with replace-one events (convert explicitly with
  :meth:`DpEvent.to_replace_one`);
* sampling a non-private event, or sampling an event that is already sampled
  or shuffled (nested sampling);
* Poisson sampling of replace-one events (the Poisson amplification analyses
  used here are for add/remove adjacency);
* converting a sampled add/remove event to replace-one;
* asking for ε at a δ below the δ that :class:`ApproxDpEvent` members state
  themselves (:func:`event_delta`), and RDP/moments accounting of
  :class:`ApproxDpEvent` (no Rényi curve);
* any accounting of a :class:`NoGuaranteeEvent` (a release whose privacy is
  not known, e.g. a finite Metropolis chain with an unquantified distance to
  its target): every accountant refuses to turn it into an ε, and a
  :class:`~fastdp.privacy.ledger.PrivacyLedger` records it only when asked
  to explicitly (``allow_no_guarantee=True``), reporting it as "no guarantee".

Bad parameter values (negative noise, a sampling rate outside [0, 1], ...)
raise :class:`~fastdp.exceptions.ValidationError`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import numbers
from typing import Any, Iterator

from fastdp._validation import check_integer, check_real
from fastdp.exceptions import PrivacyAnalysisError, ValidationError

__all__ = [
    "Adjacency",
    "DpEvent",
    "MechanismEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PureEvent",
    "ExponentialMechanismEvent",
    "ApproxDpEvent",
    "LineSearchEvent",
    "SampledEvent",
    "PoissonSampledEvent",
    "FixedSizeSampledEvent",
    "ShuffledEvent",
    "SelfComposedEvent",
    "ComposedEvent",
    "ParallelComposedEvent",
    "NonPrivateEvent",
    "NoGuaranteeEvent",
    "PrivacyFilterEvent",
    "RepeatedSelectionEvent",
    "event_from_dict",
    "event_delta",
    "check_event_delta",
    "no_guarantee_events",
    "guaranteed_part",
    "check_guarantee",
    "iter_events",
    "VIEWS",
]

#: Accounting views. ``"guaranteed"`` is the sound analysis. ``"poisson_assumed"``
#: replaces every :class:`ShuffledEvent` by the Poisson-sampled counterpart it would
#: have if the batches had been drawn by Poisson sampling: a labelled
#: what-if number, never a guarantee.
VIEWS = ("guaranteed", "poisson_assumed")


class Adjacency(str, enum.Enum):
    """Neighbouring relation under which an event's guarantee holds.

    ``ADD_REMOVE``: datasets differ by adding or removing one record
    (unbounded DP). ``REPLACE_ONE``: datasets of the same public size differ
    in one record (bounded DP).
    """

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"

    def to_dp_accounting(self):
        """The matching ``dp_accounting.NeighboringRelation``."""
        import dp_accounting

        if self is Adjacency.ADD_REMOVE:
            return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
        return dp_accounting.NeighboringRelation.REPLACE_ONE


def _as_adjacency(value) -> Adjacency:
    if isinstance(value, Adjacency):
        return value
    try:
        return Adjacency(str(value).lower())
    except ValueError:
        raise ValidationError(
            f"adjacency must be 'add_remove' or 'replace_one', got {value!r}."
        ) from None


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise ValidationError(f"view must be one of {VIEWS}, got {view!r}.")


def _positive_float(name: str, value, *, allow_zero: bool = False,
                    allow_inf: bool = False) -> float:
    return check_real(name, value, low=0.0, low_open=not allow_zero, allow_inf=allow_inf)


def _positive_int(name: str, value, *, minimum: int = 1) -> int:
    return check_integer(name, value, low=minimum, allow_integral_float=True)


def _set(obj, name, value) -> None:
    object.__setattr__(obj, name, value)


class DpEvent:
    """Base class of every fastdp privacy event.

    Subclasses are frozen dataclasses. Common interface:

    * :attr:`adjacency`: the neighbouring relation of the guarantee;
    * :attr:`is_private`: False if the tree contains a :class:`NonPrivateEvent`;
    * :attr:`contains_shuffle`: True if some sub-event is a :class:`ShuffledEvent`;
    * :attr:`is_sampled`: True if some sub-event is sampled or shuffled;
    * :meth:`to_dp_accounting`: the equivalent ``dp_accounting`` event;
    * :meth:`to_replace_one`: the same release analysed under replace-one;
    * :meth:`to_dict` / :func:`event_from_dict`: JSON-ready round trip.
    """

    kind: str = "event"

    # -- structure ---------------------------------------------------------
    @property
    def adjacency(self) -> Adjacency:
        raise NotImplementedError

    def children(self) -> tuple:
        """Direct sub-events (empty for mechanisms)."""
        return ()

    @property
    def is_private(self) -> bool:
        return all(child.is_private for child in self.children())

    @property
    def contains_shuffle(self) -> bool:
        return any(child.contains_shuffle for child in self.children())

    @property
    def is_sampled(self) -> bool:
        return any(child.is_sampled for child in self.children())

    # -- conversions -------------------------------------------------------
    def to_dp_accounting(self, *, rdp_equivalent: bool = False,
                         view: str = "guaranteed"):
        """Return the equivalent ``dp_accounting.DpEvent``.

        Parameters
        ----------
        rdp_equivalent : bool, default False
            Also accept a ``dp_accounting`` event that has the same Rényi-DP
            curve as this event but is not known to dominate its full privacy
            loss distribution (needed for :class:`LineSearchEvent`, whose
            analysis is RDP only). Only use the result with an RDP accountant.
        view : {"guaranteed", "poisson_assumed"}
            See :data:`VIEWS`.

        Raises
        ------
        PrivacyAnalysisError
            If ``dp_accounting`` has no equivalent event.
        """
        raise NotImplementedError

    def to_replace_one(self) -> "DpEvent":
        """This release analysed under replace-one adjacency.

        Add/remove noise parameters are converted with the rule
        Δ_replace ≤ 2·Δ_add/remove (σ and Laplace scales halve, pure ε
        doubles). Replace-one events are returned unchanged.

        Raises
        ------
        PrivacyAnalysisError
            For sampled add/remove events (their amplification analysis does
            not transfer).
        """
        raise NotImplementedError

    def to_dict(self) -> dict:
        """JSON-ready description; inverse of :func:`event_from_dict`."""
        out = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, DpEvent):
                value = value.to_dict()
            elif isinstance(value, tuple) and value and isinstance(value[0], DpEvent):
                value = [v.to_dict() for v in value]
            elif isinstance(value, Adjacency):
                value = value.value
            out[f.name] = value
        return out


def iter_events(event: DpEvent) -> Iterator[DpEvent]:
    """Yield ``event`` and all its sub-events, depth first."""
    yield event
    for child in event.children():
        yield from iter_events(child)


# ---------------------------------------------------------------------------
# Mechanisms (leaves)
# ---------------------------------------------------------------------------
class MechanismEvent(DpEvent):
    """A single noisy release on the whole dataset it is given.

    Subclasses have an ``adjacency`` field (default add/remove) stating which
    neighbouring relation the sensitivity behind the noise parameter refers to.
    """

    def pure_epsilon(self) -> float:
        """ε such that this mechanism is (ε, 0)-DP; ``inf`` if none is known."""
        return math.inf

    def _post_init_adjacency(self):
        _set(self, "adjacency", _as_adjacency(self.adjacency))


@dataclasses.dataclass(frozen=True)
class GaussianEvent(MechanismEvent):
    """Gaussian mechanism: query plus N(0, (σ·Δ₂)²) noise per coordinate.

    What is private: the records behind the query. Adjacency: ``adjacency``
    (default add/remove); Δ₂ is the L2 sensitivity under it. Released: one
    noisy vector. RDP: α / (2σ²) at every order α.

    Parameters
    ----------
    noise_multiplier : float
        σ = noise standard deviation / L2 sensitivity, > 0.
    adjacency : Adjacency or str, default "add_remove"
    """

    noise_multiplier: float
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "gaussian"


    def __post_init__(self):
        if isinstance(self.noise_multiplier, numbers.Real) and self.noise_multiplier == 0:
            raise ValidationError(
                "noise_multiplier must be > 0; a release without noise is not "
                "private: describe it with NonPrivateEvent()."
            )
        _set(self, "noise_multiplier",
             _positive_float("noise_multiplier", self.noise_multiplier))
        self._post_init_adjacency()

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        _check_view(view)
        return dp_accounting.GaussianDpEvent(self.noise_multiplier)

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        return GaussianEvent(self.noise_multiplier / 2.0, Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "noise_multiplier": self.noise_multiplier,
                "adjacency": self.adjacency.value}


@dataclasses.dataclass(frozen=True)
class LaplaceEvent(MechanismEvent):
    """Laplace mechanism: query plus Lap(0, b·Δ₁) noise per coordinate.

    What is private: the records behind the query. Adjacency: ``adjacency``
    (default add/remove); Δ₁ is the L1 sensitivity under it. Released: one
    noisy value or vector. Pure (1/b)-DP; its exact RDP curve is Mironov
    (2017), Prop. 6.

    Parameters
    ----------
    scale : float
        b = Laplace scale / L1 sensitivity, > 0.
    adjacency : Adjacency or str, default "add_remove"
    """

    scale: float
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "laplace"


    def __post_init__(self):
        _set(self, "scale", _positive_float("scale", self.scale))
        self._post_init_adjacency()

    def pure_epsilon(self):
        return 1.0 / self.scale

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        _check_view(view)
        return dp_accounting.LaplaceDpEvent(self.scale)

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        return LaplaceEvent(self.scale / 2.0, Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "scale": self.scale, "adjacency": self.adjacency.value}


def _randomized_response_event(epsilon: float):
    """dp_accounting event whose privacy loss dominates every ε-DP mechanism.

    Binary randomized response that keeps the true bit with probability
    e^ε/(1+e^ε) is the dominating pair of pure ε-DP (Kairouz, Oh, Viswanath
    2015), whatever the adjacency. dp_accounting only accepts it in accountants
    with a replace-one (or replace-special) neighbouring relation.
    """
    import dp_accounting

    return dp_accounting.RandomizedResponseDpEvent(
        noise_parameter=2.0 / (1.0 + math.exp(epsilon)), num_buckets=2)


@dataclasses.dataclass(frozen=True)
class PureEvent(MechanismEvent):
    """Any (ε, 0)-DP mechanism, analysed only through its ε.

    What is private: the records the mechanism reads. Adjacency: ``adjacency``
    (default add/remove). Released: whatever the mechanism outputs. Its RDP
    curve is that of binary randomized response at ε (the dominating pair of
    pure DP), at most min(ε, α·ε²/2).

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    adjacency : Adjacency or str, default "add_remove"
    """

    epsilon: float
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "pure"


    def __post_init__(self):
        _set(self, "epsilon", _positive_float("epsilon", self.epsilon, allow_zero=True))
        self._post_init_adjacency()

    def pure_epsilon(self):
        return self.epsilon

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        """Binary randomized response at ε (dominates any ε-DP mechanism).

        dp_accounting only processes it with a REPLACE_ONE accountant; the
        numbers are the same under add/remove because the dominating pair
        does not depend on the adjacency.
        """
        import dp_accounting

        _check_view(view)
        if self.epsilon == 0:
            return dp_accounting.NoOpDpEvent()
        return _randomized_response_event(self.epsilon)

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        return type(self)(2.0 * self.epsilon, Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "epsilon": self.epsilon, "adjacency": self.adjacency.value}


@dataclasses.dataclass(frozen=True)
class ExponentialMechanismEvent(PureEvent):
    """Exponential mechanism (spec 001): samples an output with probability
    proportional to exp(ε·u(D, r) / (2Δu)); pure ε-DP.

    What is private: the records behind the utility u. Adjacency:
    ``adjacency`` (default add/remove), Δu is the utility sensitivity under
    it. Released: one sample. Accounted as a pure ε-DP mechanism.
    """

    kind = "exponential_mechanism"



@functools.lru_cache(maxsize=None)
def _epsilon_delta_dp_event_class():
    """A ``dp_accounting.DpEvent`` subclass for an (ε, δ)-DP mechanism.

    dp_accounting 0.6.0 has no event for a mechanism known only through an
    (ε, δ) guarantee. This attrs class fills the gap: fastdp's PLD accountant
    composes it as ``from_privacy_parameters`` (the dominating pair of
    (ε, δ)-DP); dp_accounting's own accountants do not know it and refuse it
    (``supports`` is False), which is sound.
    """
    import attr
    import dp_accounting

    @attr.s(frozen=True, slots=True, auto_attribs=True)
    class EpsilonDeltaDpEvent(dp_accounting.DpEvent):
        """An (epsilon, delta)-DP mechanism (fastdp extension)."""

        epsilon: float
        delta: float

    EpsilonDeltaDpEvent.__module__ = __name__
    return EpsilonDeltaDpEvent


def epsilon_delta_dp_event(epsilon: float, delta: float):
    """The ``dp_accounting`` event of an (ε, δ)-DP mechanism; see
    :func:`_epsilon_delta_dp_event_class`."""
    return _epsilon_delta_dp_event_class()(float(epsilon), float(delta))


@dataclasses.dataclass(frozen=True)
class ApproxDpEvent(MechanismEvent):
    """Any (ε, δ)-DP mechanism, analysed only through its (ε, δ) guarantee.

    For example a finite Markov chain whose output law is within total
    variation TV of an ε-DP mechanism's for every data set: it is
    (ε, (1 + e^ε)·TV)-DP. What is private: the records the mechanism reads.
    Adjacency: ``adjacency`` (default add/remove). Released: whatever the
    mechanism outputs.

    Accounting (an (ε, δ) guarantee has no Rényi-DP curve):

    * pure-DP accountant: basic composition adds the ε and the δ; advanced
      composition adds Σ δ_i to its slack δ' (Kairouz, Oh, Viswanath 2017,
      Thm 3.5; Dwork, Rothblum, Vadhan 2010, Thm III.3); sampling amplifies to
      (log(1 + γ(e^ε − 1)), γ·δ) (Balle, Barthe, Gaboardi 2018);
    * PLD accountant: the dominating pair of (ε, δ)-DP
      (``from_privacy_parameters``: loss +∞ with probability δ);
    * RDP and moments accountants refuse it
      (:class:`~fastdp.exceptions.PrivacyAnalysisError`).

    An accountant asked for ε at a target δ_total raises unless
    δ_total ≥ :func:`event_delta` (the Σ δ_i the events state themselves).

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    delta : float
        δ in [0, 1).
    adjacency : Adjacency or str, default "add_remove"
    """

    epsilon: float
    delta: float
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "approx_dp"

    def __post_init__(self):
        _set(self, "epsilon", _positive_float("epsilon", self.epsilon, allow_zero=True))
        delta = _positive_float("delta", self.delta, allow_zero=True)
        if delta >= 1.0:
            raise ValidationError(
                f"delta must be in [0, 1), got {delta}; a release with delta >= 1 is not "
                "private: describe it with NonPrivateEvent().")
        _set(self, "delta", delta)
        self._post_init_adjacency()

    def pure_epsilon(self):
        return self.epsilon if self.delta == 0.0 else math.inf

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        """An (ε, δ) event only fastdp's PLD accountant composes (see
        :func:`epsilon_delta_dp_event`); refused with ``rdp_equivalent=True``
        when δ > 0 (an (ε, δ) guarantee has no RDP curve)."""
        _check_view(view)
        if rdp_equivalent and self.delta > 0.0:
            raise PrivacyAnalysisError(_APPROX_NO_RDP)
        if self.delta == 0.0:
            return PureEvent(self.epsilon, self.adjacency).to_dp_accounting(view=view)
        return epsilon_delta_dp_event(self.epsilon, self.delta)

    def to_replace_one(self):
        """Group privacy for the two add/remove steps of a replacement:
        (2ε, (1 + e^ε)·δ)-DP under replace-one."""
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        delta = min((1.0 + math.exp(min(self.epsilon, 700.0))) * self.delta, 1.0)
        if delta >= 1.0:
            raise PrivacyAnalysisError(
                f"the replace-one guarantee of {self!r} has delta >= 1 (group privacy "
                "gives (2 eps, (1 + e^eps) delta)); state the event under replace-one.")
        return ApproxDpEvent(2.0 * self.epsilon, delta, Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "epsilon": self.epsilon, "delta": self.delta,
                "adjacency": self.adjacency.value}


_APPROX_NO_RDP = (
    "an (epsilon, delta)-DP guarantee with delta > 0 has no Renyi-DP curve (the privacy "
    "loss may be infinite with probability delta): account ApproxDpEvent with "
    "accountant='pure' (basic or advanced composition) or accountant='pld'.")


_LINE_SEARCH_FORMS = ("laplace", "gaussian")
_LINE_SEARCH_ANALYSES = ("paper", "conservative")


@dataclasses.dataclass(frozen=True)
class LineSearchEvent(MechanismEvent):
    """One call of spec 003's noisy Armijo backtracking line search (NOISYBTLS).

    The call is an AboveThreshold (sparse vector) run with threshold 0 over
    the Armijo queries q(η_k), k = 0..max_it−1, each of L1/L2 sensitivity
    Δ_q = C_obj. What is private: the records of the batch the objective is
    evaluated on. Adjacency: ``adjacency`` (default add/remove, as in the
    paper). Released: only the index of the first accepted step (or failure).

    Forms and their RDP curves before subsampling (Rényi order a):

    * ``form="laplace"`` with budget ``epsilon_bt`` (threshold noise
      Lap(2Δ_q/ε_BT), query noise Lap(4Δ_q/ε_BT)); pure ε_BT-DP (Thm 1).

      - ``analysis="paper"`` (default): Theorem 2, eq. (4),
        ε(a) = (2/(a−1))·log[a/(2a−1)·e^{(a−1)ε_BT/2} + (a−1)/(2a−1)·e^{−aε_BT/2}],
        i.e. twice the Laplace RDP at ε_BT/2.
      - ``analysis="conservative"``: the rigorous pure ε_BT-DP bound,
        accounted as any ε_BT-DP mechanism (randomized-response curve,
        ≤ min(ε_BT, a·ε_BT²/2)).

    * ``form="gaussian"`` with budget ``rho_bt`` (threshold noise std
      Δ_q·sqrt(3/(2ρ)), query noise std Δ_q·sqrt(3/ρ)).

      - ``analysis="paper"``: Theorem 3, eq. (5), ε(a) = a·ρ_BT (the curve of a
        Gaussian with noise multiplier 1/sqrt(2ρ_BT)).
      - ``analysis="conservative"``: naive composition of the threshold and
        all ``max_it`` queries, a·ρ_BT·(1/3 + max_it/6); needs ``max_it``.

    The paper's Theorems 2/3 use a non-standard argument (spec 003 §4.6); no
    violation was found numerically. The conservative analyses are standard.

    Parameters
    ----------
    form : {"laplace", "gaussian"}
    epsilon_bt : float, optional
        Laplace budget ε_BT > 0 (required for ``form="laplace"``).
    rho_bt : float, optional
        Gaussian budget ρ_BT > 0 (required for ``form="gaussian"``).
    max_it : int, optional
        Number of candidate steps; required for the conservative Gaussian
        analysis, recorded otherwise.
    analysis : {"paper", "conservative"}, default "paper"
    adjacency : Adjacency or str, default "add_remove"
    """

    form: str
    epsilon_bt: float | None = None
    rho_bt: float | None = None
    max_it: int | None = None
    analysis: str = "paper"
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "line_search"


    def __post_init__(self):
        if self.form not in _LINE_SEARCH_FORMS:
            raise ValidationError(
                f"form must be one of {_LINE_SEARCH_FORMS}, got {self.form!r}.")
        if self.analysis not in _LINE_SEARCH_ANALYSES:
            raise ValidationError(
                f"analysis must be one of {_LINE_SEARCH_ANALYSES}, got {self.analysis!r}.")
        if self.form == "laplace":
            if self.epsilon_bt is None or self.rho_bt is not None:
                raise ValidationError(
                    "the Laplace line search takes epsilon_bt (and no rho_bt).")
            _set(self, "epsilon_bt", _positive_float("epsilon_bt", self.epsilon_bt))
        else:
            if self.rho_bt is None or self.epsilon_bt is not None:
                raise ValidationError(
                    "the Gaussian line search takes rho_bt (and no epsilon_bt).")
            _set(self, "rho_bt", _positive_float("rho_bt", self.rho_bt))
            if self.analysis == "conservative" and self.max_it is None:
                raise ValidationError(
                    "the conservative Gaussian line-search analysis composes every "
                    "query: pass max_it.")
        if self.max_it is not None:
            _set(self, "max_it", _positive_int("max_it", self.max_it))
        self._post_init_adjacency()

    @classmethod
    def laplace(cls, epsilon_bt, max_it=None, analysis="paper",
                adjacency=Adjacency.ADD_REMOVE):
        """Laplace NOISYBTLS with budget ε_BT."""
        return cls("laplace", epsilon_bt=epsilon_bt, max_it=max_it,
                   analysis=analysis, adjacency=adjacency)

    @classmethod
    def gaussian(cls, rho_bt, max_it=None, analysis="paper",
                 adjacency=Adjacency.ADD_REMOVE):
        """Gaussian NOISYBTLS with budget ρ_BT."""
        return cls("gaussian", rho_bt=rho_bt, max_it=max_it,
                   analysis=analysis, adjacency=adjacency)

    @property
    def threshold_noise(self) -> float:
        """Threshold noise relative to Δ_q: Laplace scale or Gaussian std."""
        if self.form == "laplace":
            return 2.0 / self.epsilon_bt
        return math.sqrt(3.0 / (2.0 * self.rho_bt))

    @property
    def query_noise(self) -> float:
        """Per-query noise relative to Δ_q: Laplace scale or Gaussian std."""
        if self.form == "laplace":
            return 4.0 / self.epsilon_bt
        return math.sqrt(3.0 / self.rho_bt)

    def gaussian_equivalent_noise_multiplier(self) -> float:
        """For the Gaussian form: σ of the Gaussian with the same RDP curve."""
        if self.form != "gaussian":
            raise PrivacyAnalysisError("only the Gaussian line search has a Gaussian RDP curve.")
        rho = self.rho_bt
        if self.analysis == "conservative":
            rho = rho * (1.0 / 3.0 + self.max_it / 6.0)
        return 1.0 / math.sqrt(2.0 * rho)

    def pure_epsilon(self):
        return self.epsilon_bt if self.form == "laplace" else math.inf

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        """dp_accounting event with the same RDP curve (``rdp_equivalent=True``).

        * Laplace/paper: two Laplace releases at ε_BT/2 each (eq. 4);
        * Laplace/conservative: randomized response at ε_BT (pure DP); this
          one dominates the full privacy loss and needs no flag;
        * Gaussian: a Gaussian with :meth:`gaussian_equivalent_noise_multiplier`.
        """
        import dp_accounting

        _check_view(view)
        if self.form == "laplace" and self.analysis == "conservative":
            return _randomized_response_event(self.epsilon_bt)
        if not rdp_equivalent:
            raise PrivacyAnalysisError(
                "the line search's paper analysis is an RDP bound only; no "
                "dp_accounting mechanism is known to dominate its privacy loss "
                "distribution. Use the RDP accountant, analysis='conservative' "
                "(Laplace form), or pass rdp_equivalent=True for RDP accounting.")
        if self.form == "laplace":
            return dp_accounting.SelfComposedDpEvent(
                dp_accounting.LaplaceDpEvent(2.0 / self.epsilon_bt), 2)
        return dp_accounting.GaussianDpEvent(self.gaussian_equivalent_noise_multiplier())

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        if self.form == "laplace":
            return LineSearchEvent("laplace", epsilon_bt=2.0 * self.epsilon_bt,
                                   max_it=self.max_it, analysis=self.analysis,
                                   adjacency=Adjacency.REPLACE_ONE)
        return LineSearchEvent("gaussian", rho_bt=4.0 * self.rho_bt, max_it=self.max_it,
                               analysis=self.analysis, adjacency=Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "form": self.form, "epsilon_bt": self.epsilon_bt,
                "rho_bt": self.rho_bt, "max_it": self.max_it, "analysis": self.analysis,
                "adjacency": self.adjacency.value}


@dataclasses.dataclass(frozen=True)
class NonPrivateEvent(DpEvent):
    """A release with no privacy guarantee (ε = ∞; accountants return inf).

    What is private: nothing. Adjacency: none (composable with events of
    either adjacency). Released: anything computed from the data. Cannot be
    sampled: subsampling does not make it private.
    """

    kind = "non_private"

    @property
    def adjacency(self):
        return None

    @property
    def is_private(self):
        return False

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        _check_view(view)
        return dp_accounting.NonPrivateDpEvent()

    def to_replace_one(self):
        return self

    def to_dict(self):
        return {"kind": self.kind}


_NO_GUARANTEE_SAMPLERS = ("metropolis", "hit_and_run")


@dataclasses.dataclass(frozen=True)
class NoGuaranteeEvent(MechanismEvent):
    """A release whose privacy is **not guaranteed**: an approximate sampler of an
    ε-DP mechanism whose distance to that mechanism is not quantified.

    Example: spec 001's exponential mechanism sampled by a random-walk
    Metropolis or hit-and-run chain run for a fixed number of steps.  If the
    chain's output law were within total variation TV of the target for every
    data set, the release would be (ε, (1 + e^ε)·TV)-DP; but no usable bound
    on TV is known, so no (ε, δ) follows and ``target_epsilon`` (the ε of the
    exact mechanism the sampler aims at) is *not* a guarantee.

    What is private: the records the mechanism reads.  Adjacency:
    ``adjacency`` (the one the target mechanism's ε refers to).  Released: the
    sampler's output.  Accounting: none -- every accountant refuses it
    (:class:`~fastdp.exceptions.PrivacyAnalysisError`), and a
    :class:`~fastdp.privacy.ledger.PrivacyLedger` records it only with
    ``allow_no_guarantee=True``, keeping it out of the ε it reports (which then
    covers only the releases with a guarantee, and says so).

    Parameters
    ----------
    target_epsilon : float
        ε of the exact mechanism the sampler approximates (≥ 0); NOT a guarantee.
    sampler : {"metropolis", "hit_and_run"}
        The approximate sampler that ran.
    adjacency : Adjacency or str, default "add_remove"
    """

    target_epsilon: float
    sampler: str
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "no_guarantee"

    def __post_init__(self):
        _set(self, "target_epsilon",
             _positive_float("target_epsilon", self.target_epsilon, allow_zero=True))
        if self.sampler not in _NO_GUARANTEE_SAMPLERS:
            raise ValidationError(
                f"sampler must be one of {_NO_GUARANTEE_SAMPLERS}, got {self.sampler!r}.")
        self._post_init_adjacency()

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        _check_view(view)
        raise PrivacyAnalysisError(_no_guarantee_message(self))

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        return NoGuaranteeEvent(2.0 * self.target_epsilon, self.sampler, Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "target_epsilon": self.target_epsilon,
                "sampler": self.sampler, "adjacency": self.adjacency.value}


def _no_guarantee_message(event):
    return (
        f"this release carries NO privacy guarantee ({event.sampler} sampler of an "
        f"epsilon = {event.target_epsilon:g} mechanism, its distance to that mechanism not "
        "quantified): no accountant turns it into an epsilon. Use a sampler with a guarantee "
        "(sampler='auto': exact 1-D, rejection, or independence Metropolis with its public "
        "delta bound).")


def no_guarantee_events(event: DpEvent) -> tuple:
    """The :class:`NoGuaranteeEvent` leaves of ``event`` (empty: every part has a guarantee)."""
    return tuple(e for e in iter_events(event) if isinstance(e, NoGuaranteeEvent))


def check_guarantee(event: DpEvent) -> DpEvent:
    """Return ``event``; raise if any part of it carries no guarantee.

    Raises
    ------
    PrivacyAnalysisError
        If ``event`` contains a :class:`NoGuaranteeEvent`.
    """
    missing = no_guarantee_events(event)
    if missing:
        raise PrivacyAnalysisError(_no_guarantee_message(missing[0]))
    return event


def guaranteed_part(event: DpEvent):
    """``event`` without its :class:`NoGuaranteeEvent` parts (None if nothing is left).

    Compositions keep their other members; a sampled or repeated release of a
    no-guarantee event is dropped whole.  For ledgers that were explicitly told
    to record releases without a guarantee: the ε of this part is all that can
    be computed, and it does not bound the privacy loss of the whole.
    """
    if not no_guarantee_events(event):
        return event
    if isinstance(event, ComposedEvent):
        kept = tuple(p for p in (guaranteed_part(e) for e in event.events) if p is not None)
        return ComposedEvent(kept) if kept else None
    return None


@dataclasses.dataclass(frozen=True)
class PrivacyFilterEvent(DpEvent):
    """A fully adaptive composition halted by a Rényi-DP privacy filter.

    The run adaptively chooses how many mechanisms to run and with which
    parameters (each choice may depend on every earlier output). A filter
    halts it *before* any mechanism whose cost would push the running sum of
    costs above the cap, so on every path the sum stays within the cap. By the
    RDP filter theorem (Feldman & Zrnic, NeurIPS 2021, Thm 3.1; Whitehouse,
    Ramdas, Rogers & Wu 2022 for the zCDP form), the whole transcript then
    satisfies the cap's Rényi-DP guarantee, exactly as a non-adaptive
    composition of that total cost would. The event describes the **cap**
    (what is promised before the run), not the amount the run consumed.

    Forms
    -----
    * ``rho`` (zCDP filter): every mechanism's cost is its zCDP parameter
      ρ_t (its RDP is at most α·ρ_t at every order α > 1) and the filter keeps
      Σ ρ_t ≤ ``rho``. Guarantee: ``rho``-zCDP, i.e. (α, α·rho)-RDP at every
      order α > 1 simultaneously (the filter theorem holds at each order,
      because the bound Σ α·ρ_t ≤ α·rho holds on every path), so the RDP →
      (ε, δ) conversion may pick the best order after the fact.
    * ``orders``/``caps`` (RDP filter at fixed orders): the filter keeps the
      sum of the mechanisms' RDP at each tracked order a_j within ``caps[j]``
      (it halts if *any* tracked order would overflow). Guarantee:
      (a_j, caps[j])-RDP at each tracked order; at an order α ≤ a_j the RDP is
      at most caps[j] (Rényi divergences are non-decreasing in the order);
      nothing is claimed above the largest tracked order.

    What is private: the records every halted mechanism reads. Adjacency:
    ``adjacency`` (default add/remove; each mechanism's cost must refer to
    it). Released: the whole transcript of the run.

    Parameters
    ----------
    rho : float, optional
        zCDP cap (> 0). Give either ``rho`` or ``orders`` and ``caps``.
    orders : tuple of float, optional
        Tracked Rényi orders (> 1), strictly increasing.
    caps : tuple of float, optional
        RDP cap (≥ 0) at each tracked order.
    adjacency : Adjacency or str, default "add_remove"
    """

    rho: float | None = None
    orders: tuple = ()
    caps: tuple = ()
    adjacency: Adjacency = Adjacency.ADD_REMOVE
    kind = "privacy_filter"

    def __post_init__(self):
        orders, caps = tuple(self.orders or ()), tuple(self.caps or ())
        if (self.rho is None) == (not orders):
            raise ValidationError(
                "a privacy filter takes either rho (zCDP cap) or orders and caps (RDP caps).")
        if self.rho is not None:
            _set(self, "rho", _positive_float("rho", self.rho))
        else:
            if len(orders) != len(caps):
                raise ValidationError("orders and caps must have the same length.")
            orders = tuple(_positive_float("order", a) for a in orders)
            caps = tuple(_positive_float("cap", c, allow_zero=True) for c in caps)
            if any(a <= 1.0 for a in orders) or any(b <= a for a, b in zip(orders, orders[1:])):
                raise ValidationError("orders must be > 1 and strictly increasing.")
        _set(self, "orders", orders)
        _set(self, "caps", caps)
        _set(self, "adjacency", _as_adjacency(self.adjacency))

    @classmethod
    def zcdp(cls, rho, adjacency=Adjacency.ADD_REMOVE):
        """zCDP filter with cap ``rho``."""
        return cls(rho=rho, adjacency=adjacency)

    @classmethod
    def rdp(cls, orders, caps, adjacency=Adjacency.ADD_REMOVE):
        """RDP filter with ``caps`` at the tracked ``orders``."""
        return cls(orders=tuple(orders), caps=tuple(caps), adjacency=adjacency)

    def rdp_bound(self, order: float) -> float:
        """The guaranteed RDP at ``order`` (inf where nothing is guaranteed)."""
        if self.rho is not None:
            return float(order) * self.rho
        for a, cap in zip(self.orders, self.caps):
            if order <= a:
                return cap
        return math.inf

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        """The zCDP form with ``rdp_equivalent=True``: a Gaussian with σ = 1/sqrt(2ρ)
        (the same RDP curve α·ρ). A filter's guarantee is RDP only: no
        ``dp_accounting`` event dominates its privacy loss distribution."""
        import dp_accounting

        _check_view(view)
        if self.rho is None or not rdp_equivalent:
            raise PrivacyAnalysisError(
                "a privacy filter's guarantee is Rényi-DP (Feldman & Zrnic 2021); no "
                "dp_accounting mechanism dominates its privacy loss distribution. Use the "
                "RDP accountant (accountant='rdp').")
        return dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * self.rho))

    def to_replace_one(self):
        """zCDP form: zCDP group privacy (Bun & Steinke 2016: k²ρ for groups of
        k records; replacing one record is removing one and adding one, k = 2)
        gives 4ρ-zCDP under replace-one. The fixed-order RDP form is refused."""
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        if self.rho is None:
            raise PrivacyAnalysisError(
                "a fixed-order RDP filter has no replace-one conversion; use the zCDP form.")
        return PrivacyFilterEvent(rho=4.0 * self.rho, adjacency=Adjacency.REPLACE_ONE)

    def to_dict(self):
        return {"kind": self.kind, "rho": self.rho, "orders": list(self.orders),
                "caps": list(self.caps), "adjacency": self.adjacency.value}


# ---------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------
def _common_adjacency(events) -> Adjacency | None:
    adjacencies = {e.adjacency for e in events if e.adjacency is not None}
    if len(adjacencies) > 1:
        raise PrivacyAnalysisError(
            "cannot compose add/remove events with replace-one events: their "
            "guarantees refer to different neighbouring relations. Convert the "
            "add/remove events with event.to_replace_one() (sensitivity at most "
            "doubles) and compose those.")
    return adjacencies.pop() if adjacencies else None


def _set_members(event, events, *, single_allowed=False, empty_message=None):
    """Check and store the member events of ``event``: ``events`` and their common adjacency.

    ``single_allowed``: a lone DpEvent stands for a tuple of one.
    ``empty_message``: refuse an empty tuple with this message (None: allowed).
    """
    events = (events,) if single_allowed and isinstance(events, DpEvent) else tuple(events)
    if empty_message is not None and not events:
        raise ValidationError(empty_message)
    for e in events:
        if not isinstance(e, DpEvent):
            raise ValidationError(f"events must be DpEvents, got {e!r}.")
    _set(event, "events", events)
    _set(event, "_adjacency", _common_adjacency(events))


class _MemberEvents:
    """Events built from member events (``events``, stored by :func:`_set_members`)."""

    @property
    def adjacency(self):
        return self._adjacency

    def children(self):
        return self.events


@dataclasses.dataclass(frozen=True)
class SelfComposedEvent(DpEvent):
    """``count`` adaptive repetitions of ``event`` (each on fresh randomness).

    What is private: the same records as ``event``. Adjacency: that of
    ``event``. Released: all ``count`` outputs (each repetition may depend on
    the earlier outputs).
    """

    event: DpEvent
    count: int
    kind = "self_composed"

    def __post_init__(self):
        if not isinstance(self.event, DpEvent):
            raise ValidationError(f"event must be a DpEvent, got {self.event!r}.")
        _set(self, "count", _positive_int("count", self.count, minimum=0))

    @property
    def adjacency(self):
        return self.event.adjacency

    def children(self):
        return (self.event,)

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        return dp_accounting.SelfComposedDpEvent(
            self.event.to_dp_accounting(rdp_equivalent=rdp_equivalent, view=view),
            self.count)

    def to_replace_one(self):
        return SelfComposedEvent(self.event.to_replace_one(), self.count)


@dataclasses.dataclass(frozen=True)
class ComposedEvent(_MemberEvents, DpEvent):
    """Adaptive composition of several events, each released.

    What is private: the records all members read (one dataset). Adjacency:
    the common adjacency of the members; mixing add/remove with replace-one
    members is refused. Released: every member's output. ``events`` is stored
    as a tuple.
    """

    events: tuple
    kind = "composed"

    def __post_init__(self):
        _set_members(self, self.events)

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        return dp_accounting.ComposedDpEvent([
            e.to_dp_accounting(rdp_equivalent=rdp_equivalent, view=view)
            for e in self.events])

    def to_replace_one(self):
        return ComposedEvent(tuple(e.to_replace_one() for e in self.events))


@dataclasses.dataclass(frozen=True)
class ParallelComposedEvent(_MemberEvents, DpEvent):
    """Mechanisms run on the disjoint parts of a random split of the records.

    The records are split into ``len(events)`` disjoint parts by coins that
    are **independent of the data** (and of every other randomness outside
    this event, including the coins of other events): each record draws its
    part independently of the other records from one public law (e.g. "the
    validation part with probability p"). Member ``i`` reads only part ``i``
    (and public quantities, and the outputs of the members before it: the
    members may be adaptive). The coins are never released.

    What is private: every record of the dataset. Adjacency: the common
    adjacency of the members (mixing add/remove with replace-one is
    refused, as for :class:`ComposedEvent`). Released: every member's output.

    Parallel composition (why the cost is the **maximum**, not the sum).
    Couple the coins of neighbouring datasets D ~ D': the records they share
    keep their coins; under add/remove the extra record has its own coin
    (drawn from the same law, independent of the others); under replace-one
    the replaced slot keeps its coin. Conditionally on the coins, D and D'
    differ in exactly one part, and there the two parts are neighbours under
    the same relation; every other part is identical. So the joint output of
    the (adaptive) members differs only in that member's conditional law, and
    its Rényi divergence of every order α is at most that member's
    ε_i(α) (the chain rule: the other members see identical inputs, given the
    outputs before them); hence at most max_i ε_i(α). The released output is
    the mixture over the coins with the **same** weights under D and D'
    (the coins do not depend on the data), and the Rényi divergence is jointly
    quasi-convex (D_α(Σ w_j P_j ‖ Σ w_j Q_j) ≤ max_j D_α(P_j ‖ Q_j)), so the
    event's RDP curve is the pointwise maximum of the members' curves. The
    same two steps give max_i ε_i for pure DP, (max ε_i, max δ_i) for
    (ε, δ)-DP members, and max ρ_i for zCDP. Every such bound holds for each
    fixed coin vector, so a mechanism that repeats the members with one split
    for all runs (the runs of a :class:`RepeatedSelectionEvent`) is covered
    too: the repetition bound holds conditionally on the coins, and mixing
    over the coins keeps it. Reusing the split in a mechanism *outside* this
    event is not covered (composing two parallel events assumes fresh coins
    for each).

    The argument needs the per-record independence of the coins under
    add/remove (a split into parts of fixed sizes moves other records when one
    is added); under replace-one any split of the slots independent of the
    data works. The parts' sizes are treated as public, as the estimators
    treat the number of rows.

    Accounting: RDP, zCDP and pure accountants (maximum, as above); the PLD
    accountant only for this event at the top level (ε(δ) and δ(ε) are the
    maxima of the members' -- the hockey-stick divergence is jointly convex),
    and refuses it inside a composition (the privacy loss distribution of the
    mixture is not implemented); the moments accountant refuses it.

    Parameters
    ----------
    events : tuple of DpEvent
        One event per part, at least one.
    """

    events: tuple
    kind = "parallel_composed"

    def __post_init__(self):
        _set_members(self, self.events, single_allowed=True,
                     empty_message="a parallel composition needs at least one event.")

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        _check_view(view)
        raise PrivacyAnalysisError(
            "a parallel composition (mechanisms on the disjoint parts of a random split) has no "
            "dp_accounting event: the privacy loss distribution of the mixture over the split "
            "is not implemented. Use accountant='rdp' (or 'pure' / zCDP), or ask the PLD "
            "accountant for this event alone (the maximum of its members' epsilons).")

    def to_replace_one(self):
        return ParallelComposedEvent(tuple(e.to_replace_one() for e in self.events))


# ---------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------
class SampledEvent(DpEvent):
    """Base of the events whose mechanism runs on a random subset of records."""

    @property
    def is_sampled(self):
        return True

    def children(self):
        return (self.event,)

    def _check_inner(self, what: str):
        if not isinstance(self.event, DpEvent):
            raise ValidationError(f"event must be a DpEvent, got {self.event!r}.")
        if not self.event.is_private:
            raise PrivacyAnalysisError(
                f"cannot {what} a non-private event: subsampling does not make "
                "a release with infinite privacy loss private.")
        if self.event.is_sampled:
            raise PrivacyAnalysisError(
                f"cannot {what} an event that is already sampled or shuffled: "
                "nested sampling has no analysis here. Describe the sampling "
                "that really ran once, at the outermost level.")


@dataclasses.dataclass(frozen=True)
class PoissonSampledEvent(SampledEvent):
    """``event`` run on a Poisson sample: each record joins independently with
    probability ``sample_rate``.

    What is private: every record of the full dataset. Adjacency: add/remove
    (the inner event must be add/remove). Released: the inner event's output
    on the sample (the sample itself stays secret). Amplification: exact
    sampled-Gaussian RDP (Mironov, Talwar, Zhang 2019) when the inner event is
    made of Gaussians, Zhu & Wang (2019) general upper bound otherwise.
    """

    sample_rate: float
    event: DpEvent
    kind = "poisson_sampled"

    def __post_init__(self):
        rate = _positive_float("sample_rate", self.sample_rate, allow_zero=True)
        if rate > 1:
            raise ValidationError(f"sample_rate must be in [0, 1], got {rate}.")
        _set(self, "sample_rate", rate)
        self._check_inner("Poisson-sample")
        if self.event.adjacency is not Adjacency.ADD_REMOVE:
            raise PrivacyAnalysisError(
                "Poisson sampling is analysed under add/remove adjacency; the "
                "inner event is replace-one. State the inner event's noise "
                "relative to its add/remove sensitivity.")

    @property
    def adjacency(self):
        return Adjacency.ADD_REMOVE

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        return dp_accounting.PoissonSampledDpEvent(
            self.sample_rate,
            self.event.to_dp_accounting(rdp_equivalent=rdp_equivalent, view=view))

    def to_replace_one(self):
        raise PrivacyAnalysisError(
            "a Poisson-sampled add/remove event cannot be converted to replace-one "
            "here; account it under add/remove.")


@dataclasses.dataclass(frozen=True)
class FixedSizeSampledEvent(SampledEvent):
    """``event`` run on a uniformly random subset of exactly ``batch_size`` of the
    ``n`` records (sampling without replacement).

    What is private: every record of the dataset, whose size ``n`` is public.
    Adjacency: replace-one. An add/remove inner event is converted with
    :meth:`DpEvent.to_replace_one` (noise relative to the replace-one
    sensitivity, at most twice the add/remove one: σ halves); see
    :attr:`replace_one_event`. Released: the inner event's output on the batch.
    Amplification: Wang, Balle, Kasiviswanathan (2019), Thm 27 for Gaussians,
    their general Thm 9 otherwise.
    """

    n: int
    batch_size: int
    event: DpEvent
    kind = "fixed_size_sampled"

    def __post_init__(self):
        _set(self, "n", _positive_int("n", self.n))
        _set(self, "batch_size", _positive_int("batch_size", self.batch_size))
        if self.batch_size > self.n:
            raise ValidationError(
                f"batch_size ({self.batch_size}) must not exceed n ({self.n}).")
        self._check_inner("sample")

    @property
    def sample_rate(self) -> float:
        return self.batch_size / self.n

    @property
    def replace_one_event(self) -> DpEvent:
        """The inner event under replace-one adjacency (what is accounted)."""
        return self.event.to_replace_one()

    @property
    def adjacency(self):
        return Adjacency.REPLACE_ONE

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        import dp_accounting

        return dp_accounting.SampledWithoutReplacementDpEvent(
            self.n, self.batch_size,
            self.replace_one_event.to_dp_accounting(rdp_equivalent=rdp_equivalent, view=view))

    def to_replace_one(self):
        return self


@dataclasses.dataclass(frozen=True)
class ShuffledEvent(SampledEvent):
    """``epochs`` passes over a dataset reshuffled every epoch and cut into
    consecutive batches of ``batch_size``; ``event`` runs once per batch.

    No tight analysis of this sampler is known. Accountants report two numbers:

    * **guaranteed** (the only one ``epsilon()`` returns): each record is in at
      most one batch per epoch, so under replace-one adjacency (same permutation
      for both datasets) an epoch changes one step only: ``epochs``-fold
      composition of the inner event, converted to replace-one
      (:attr:`replace_one_event`; an add/remove inner event has its σ halved).
      There is no amplification. (Under add/remove, inserting a record shifts
      every later batch, so the common "once per epoch, add/remove" statement
      has no proof for fixed-size batches; fastdp does not make it.)
    * **poisson_assumed**: the ε if the batches had been Poisson samples with
      rate ``batch_size / n``, composed ``epochs × steps_per_epoch`` times under
      add/remove. A what-if number for comparison, NOT a guarantee.

    What is private: every record; ``n`` is public. Released: every step's
    output.

    Parameters
    ----------
    n, batch_size : int
    event : DpEvent
        The per-step event (noise relative to the sensitivity under its own
        adjacency).
    epochs : int
    drop_last : bool, default False
        Whether a final partial batch is dropped (sets ``steps_per_epoch``).
    """

    n: int
    batch_size: int
    event: DpEvent
    epochs: int
    drop_last: bool = False
    kind = "shuffled"

    def __post_init__(self):
        _set(self, "n", _positive_int("n", self.n))
        _set(self, "batch_size", _positive_int("batch_size", self.batch_size))
        _set(self, "epochs", _positive_int("epochs", self.epochs, minimum=0))
        _set(self, "drop_last", bool(self.drop_last))
        if self.batch_size > self.n:
            raise ValidationError(
                f"batch_size ({self.batch_size}) must not exceed n ({self.n}).")
        self._check_inner("shuffle")

    @property
    def contains_shuffle(self):
        return True

    @property
    def sample_rate(self) -> float:
        return self.batch_size / self.n

    @property
    def steps_per_epoch(self) -> int:
        if self.drop_last:
            return self.n // self.batch_size
        return -(-self.n // self.batch_size)

    @property
    def adjacency(self):
        return Adjacency.REPLACE_ONE

    @property
    def replace_one_event(self) -> DpEvent:
        return self.event.to_replace_one()

    def guaranteed_event(self) -> DpEvent:
        """The sound analysis: ``epochs`` × inner event, replace-one."""
        return SelfComposedEvent(self.replace_one_event, self.epochs)

    def poisson_assumed_event(self) -> DpEvent:
        """What-if Poisson counterpart (add/remove; NOT a guarantee).

        A replace-one inner event is read with the same parameters under
        add/remove, which overstates the what-if ε; give an add/remove inner
        event to get the usual comparison number.
        """
        inner = self.event
        if inner.adjacency is Adjacency.REPLACE_ONE:
            inner = event_from_dict(_relabel(inner.to_dict(), Adjacency.ADD_REMOVE.value))
        return SelfComposedEvent(PoissonSampledEvent(self.sample_rate, inner),
                                 self.epochs * self.steps_per_epoch)

    def view(self, view: str) -> DpEvent:
        _check_view(view)
        return self.guaranteed_event() if view == "guaranteed" else self.poisson_assumed_event()

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        return self.view(view).to_dp_accounting(rdp_equivalent=rdp_equivalent, view=view)

    def to_replace_one(self):
        return self


@dataclasses.dataclass(frozen=True)
class RepeatedSelectionEvent(_MemberEvents, MechanismEvent):
    """Best of K runs of a private base mechanism, K drawn from a public law.

    The base mechanism Q draws one of ``events`` by public randomness (e.g. a
    hyperparameter setting drawn from a public grid), runs it and scores its
    output privately; Q is repeated K ~ ``distribution`` times on the same
    data (K independent of the data) and only the run with the best score is
    released. This is the private hyperparameter search of
    :mod:`fastdp.model_selection`.

    What is private: the records the candidates read. Adjacency: the common
    adjacency of ``events``. Released: the best run only (its output and
    score) -- never K, never the other runs.

    A candidate may be a :class:`ParallelComposedEvent` (the search's fit and
    score on the two parts of one split); the runs may share that split (its
    docstring: the bound holds for each value of the coins, and mixing keeps
    it).

    Accounting (:mod:`fastdp.privacy.tuning`): Q's Rényi curve is the pointwise
    maximum of the candidates' curves (a public mixture of mechanisms is at
    most as private as its least private member: the Rényi sum of a mixture
    with common weights is at most the largest member's). Then

    * RDP accountant: Papernot & Steinke (ICLR 2022) Thm 2 (truncated negative
      binomial, and the geometric as η = 1) or Thm 6 (Poisson), plus Liu &
      Talwar's 3ε for the geometric with pure-DP candidates;
    * pure accountant: the geometric with pure-DP candidates only: 3·max ε_i
      (Liu & Talwar 2019, random stopping);
    * PLD and moments accountants: refused (no privacy loss distribution or
      moment bound of the selection is implemented).

    Parameters
    ----------
    events : tuple of DpEvent
        The candidate mechanisms (one is drawn per run), non-empty.
    distribution : {"truncated_negative_binomial", "poisson", "geometric"}
    eta : float, optional
        η ∈ (−1, ∞), truncated negative binomial only.
    gamma : float, optional
        γ ∈ (0, 1], truncated negative binomial and geometric.
    mu : float, optional
        μ > 0, Poisson only.
    """

    events: tuple
    distribution: str
    eta: float | None = None
    gamma: float | None = None
    mu: float | None = None
    kind = "repeated_selection"

    def __post_init__(self):
        from fastdp.privacy.tuning import Repetitions

        _set_members(self, self.events, single_allowed=True,
                     empty_message="a repeated selection needs at least one candidate event.")
        reps = Repetitions(self.distribution, eta=self.eta, gamma=self.gamma, mu=self.mu)
        _set(self, "eta", reps.eta)
        _set(self, "gamma", reps.gamma)
        _set(self, "mu", reps.mu)

    @classmethod
    def of(cls, base, repetitions):
        """Build from a base event (or tuple of events) and a
        :class:`~fastdp.privacy.tuning.Repetitions`."""
        return cls(base, repetitions.distribution, eta=repetitions.eta,
                   gamma=repetitions.gamma, mu=repetitions.mu)

    @property
    def repetitions(self):
        """The :class:`~fastdp.privacy.tuning.Repetitions` of K."""
        from fastdp.privacy.tuning import Repetitions

        return Repetitions(self.distribution, eta=self.eta, gamma=self.gamma, mu=self.mu)

    def candidate_pure_epsilon(self) -> float:
        """max over the candidates of their pure ε (basic composition; inf if unknown)."""
        from fastdp.privacy.pure import PureDPAccountant, basic_composition

        worst = 0.0
        for e in self.events:
            try:
                eps = basic_composition(PureDPAccountant().pure_epsilons(e))
            except PrivacyAnalysisError:
                return math.inf
            worst = max(worst, eps)
        return worst

    def pure_epsilon(self):
        """Liu & Talwar's 3·max ε_i for the geometric over pure candidates; inf otherwise."""
        if self.distribution != "geometric":
            return math.inf
        eps = self.candidate_pure_epsilon()
        if math.isinf(eps):
            return math.inf
        return eps if self.gamma == 1.0 else 3.0 * eps

    def to_dp_accounting(self, *, rdp_equivalent=False, view="guaranteed"):
        _check_view(view)
        raise PrivacyAnalysisError(
            "a repeated selection (private hyperparameter search) has an RDP analysis only "
            "(Papernot & Steinke 2022; Liu & Talwar 2019): no dp_accounting event describes "
            "it. Use accountant='rdp' (or 'pure' for the geometric over pure-DP candidates).")

    def to_replace_one(self):
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self
        return RepeatedSelectionEvent(tuple(e.to_replace_one() for e in self.events),
                                      self.distribution, eta=self.eta, gamma=self.gamma,
                                      mu=self.mu)

    def to_dict(self):
        return {"kind": self.kind, "events": [e.to_dict() for e in self.events],
                "distribution": self.distribution, "eta": self.eta, "gamma": self.gamma,
                "mu": self.mu}


def _relabel(d: dict, adjacency: str) -> dict:
    """Copy of a to_dict() tree with every adjacency replaced."""
    out = {}
    for k, v in d.items():
        if k == "adjacency":
            out[k] = adjacency
        elif isinstance(v, dict):
            out[k] = _relabel(v, adjacency)
        elif isinstance(v, list):
            out[k] = [_relabel(x, adjacency) if isinstance(x, dict) else x for x in v]
        else:
            out[k] = v
    return out


def event_delta(event: DpEvent, view: str = "guaranteed") -> float:
    """Σ δ_i that the :class:`ApproxDpEvent` members of ``event`` state themselves.

    Compositions add (a ``SelfComposedEvent`` counts ``count`` times); a
    :class:`ParallelComposedEvent` takes the largest of its members';
    sampling at rate γ (Poisson rate q, or m/n without replacement, after the
    replace-one conversion) scales the inner δ by γ (Balle, Barthe, Gaboardi
    2018, Thms 8 and 9); a ``ShuffledEvent`` contributes its ``view``. Every
    other event states δ = 0. Any (ε, δ_total) answer for ``event`` needs
    δ_total ≥ this value.
    """
    _check_view(view)
    if isinstance(event, ApproxDpEvent):
        return event.delta
    if isinstance(event, SelfComposedEvent):
        return event.count * event_delta(event.event, view) if event.count else 0.0
    if isinstance(event, ComposedEvent):
        return math.fsum(event_delta(e, view) for e in event.events)
    if isinstance(event, ParallelComposedEvent):   # (max ε_i, max δ_i): see its docstring
        return max(event_delta(e, view) for e in event.events)
    if isinstance(event, ShuffledEvent):
        return event_delta(event.view(view), view)
    if isinstance(event, FixedSizeSampledEvent):
        return event.sample_rate * event_delta(event.replace_one_event, view)
    if isinstance(event, PoissonSampledEvent):
        return event.sample_rate * event_delta(event.event, view)
    return 0.0


def check_event_delta(event: DpEvent, delta: float, view: str = "guaranteed") -> float:
    """Return :func:`event_delta` of ``event``; raise if it exceeds ``delta``.

    Raises
    ------
    PrivacyAnalysisError
        If the events' own δ exceeds the target δ: no ε is available there.
    """
    own = event_delta(event, view)
    if own > delta:
        raise PrivacyAnalysisError(
            f"the release states delta = {own:.6g} itself (approximate-DP events), more "
            f"than the target delta = {delta:.6g}: no epsilon is available at that delta. "
            f"Ask for delta >= {own:.6g} (the events' delta plus the accountant's slack).")
    return own


_KINDS = {
    "gaussian": GaussianEvent,
    "laplace": LaplaceEvent,
    "pure": PureEvent,
    "exponential_mechanism": ExponentialMechanismEvent,
    "approx_dp": ApproxDpEvent,
    "line_search": LineSearchEvent,
    "non_private": NonPrivateEvent,
    "no_guarantee": NoGuaranteeEvent,
    "privacy_filter": PrivacyFilterEvent,
    "self_composed": SelfComposedEvent,
    "composed": ComposedEvent,
    "parallel_composed": ParallelComposedEvent,
    "poisson_sampled": PoissonSampledEvent,
    "fixed_size_sampled": FixedSizeSampledEvent,
    "shuffled": ShuffledEvent,
    "repeated_selection": RepeatedSelectionEvent,
}


def event_from_dict(data: dict) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_dict` output (validates again)."""
    if not isinstance(data, dict) or "kind" not in data:
        raise ValidationError(f"not an event description: {data!r}.")
    kind = data["kind"]
    if kind not in _KINDS:
        raise ValidationError(f"unknown event kind {kind!r}; known: {sorted(_KINDS)}.")
    cls = _KINDS[kind]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "kind":
            continue
        if isinstance(value, dict):
            value = event_from_dict(value)
        elif key == "events":
            value = tuple(event_from_dict(v) for v in value)
        kwargs[key] = value
    return cls(**kwargs)
