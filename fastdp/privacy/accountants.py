"""Accountant interface, the labelled ε report, and the accountant registry.

Every accountant answers

* ``epsilon(event, delta)``: the *guaranteed* ε at ``delta`` for the release
  described by ``event`` (:mod:`fastdp.privacy.events`);
* ``delta(event, epsilon)``: the guaranteed δ at ``epsilon`` (where defined);
* ``report(event, delta)``: an :class:`EpsilonReport` that, for events that
  contain a :class:`~fastdp.privacy.events.ShuffledEvent`, also gives the
  ε *if Poisson sampling were assumed*, clearly labelled as not a guarantee.

Accountants are looked up by name with :func:`get_accountant`:
``"auto"`` (the smaller of the ``"pld_own"`` and ``"rdp"`` bounds; the default
of the estimators, the CLI, the engines and new ledgers), ``"rdp"`` (fastdp's
vectorised Rényi-DP accountant; the default of this function and of the
low-level ``compute_epsilon``/``calibrate*`` helpers), ``"pld_own"`` (fastdp's
own privacy-loss-distribution accountant), ``"pld"`` (privacy loss
distributions through ``dp_accounting``), ``"pure"`` (pure-DP composition) and
``"moments"`` (the seed-000 paper's moments accountant).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import importlib

from fastdp._validation import check_delta as _check_delta
from fastdp._validation import check_epsilon as _check_epsilon
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import Adjacency, DpEvent, check_guarantee

__all__ = ["Accountant", "EpsilonReport", "get_accountant", "register_accountant",
           "ACCOUNTANT_NAMES", "check_delta", "check_epsilon", "check_event"]


def check_delta(delta) -> float:
    """Validate an accountant's *query* δ ∈ [0, 1] (ε(δ) is defined on all of it).

    Privacy targets use (0, 1): :func:`fastdp._validation.check_delta`.
    """
    return _check_delta(delta, allow_zero=True, allow_one=True)


def check_epsilon(epsilon) -> float:
    """Validate an accountant's query ε ≥ 0 (``inf`` allowed) and return it as a float."""
    return _check_epsilon(epsilon, allow_zero=True, allow_inf=True)


def check_event(event) -> DpEvent:
    """``event`` if it is a DpEvent whose every part carries a guarantee.

    Raises ValidationError for a non-event and
    :class:`~fastdp.exceptions.PrivacyAnalysisError` for an event containing a
    :class:`~fastdp.privacy.events.NoGuaranteeEvent` (no accountant turns it
    into an epsilon).
    """
    if not isinstance(event, DpEvent):
        raise ValidationError(
            f"expected a fastdp.privacy.events.DpEvent, got {type(event).__name__}.")
    return check_guarantee(event)


@dataclasses.dataclass(frozen=True)
class EpsilonReport:
    """ε of a release, with the what-if number for shuffled sampling labelled.

    Attributes
    ----------
    epsilon_guaranteed : float
        The ε the accountant can prove (what ``epsilon()`` returns).
    epsilon_if_poisson_assumed : float or None
        For events containing a ShuffledEvent: the ε *if* the shuffled batches
        had been Poisson samples (rate batch/n, add/remove). NOT a guarantee.
        ``None`` when the event contains no shuffling.
    delta : float
    accountant : str
    adjacency : Adjacency or None
        Adjacency of ``epsilon_guaranteed``.
    """

    epsilon_guaranteed: float
    epsilon_if_poisson_assumed: float | None
    delta: float
    accountant: str
    adjacency: Adjacency | None

    @property
    def epsilon(self) -> float:
        """The guaranteed ε (never the Poisson what-if)."""
        return self.epsilon_guaranteed

    def __float__(self) -> float:
        return float(self.epsilon_guaranteed)

    def __str__(self) -> str:
        adj = self.adjacency.value if self.adjacency is not None else "any"
        text = (f"epsilon = {self.epsilon_guaranteed:.6g} at delta = {self.delta:g} "
                f"({self.accountant}, {adj} adjacency; guaranteed)")
        if self.epsilon_if_poisson_assumed is not None:
            text += (f"; epsilon = {self.epsilon_if_poisson_assumed:.6g} IF the shuffled "
                     "batches had been Poisson samples (add/remove) -- not a guarantee")
        return text


class Accountant(abc.ABC):
    """Base class: turn events into (ε, δ).

    Subclasses implement :meth:`_epsilon` and, where defined, :meth:`_delta`
    for a given *view* (``"guaranteed"`` or ``"poisson_assumed"``, see
    :data:`fastdp.privacy.events.VIEWS`). The public methods validate inputs
    and only ever return the guaranteed view, except :meth:`report`.
    """

    name: str = "accountant"

    @abc.abstractmethod
    def _epsilon(self, event: DpEvent, delta: float, view: str) -> float:
        """ε of ``event`` at ``delta`` in ``view``."""

    def _delta(self, event: DpEvent, epsilon: float, view: str) -> float:
        raise NotImplementedError(f"the {self.name} accountant does not compute delta.")

    def epsilon(self, event: DpEvent, delta: float) -> float:
        """Guaranteed ε of ``event`` at ``delta`` (``inf`` if not private)."""
        check_event(event)
        delta = check_delta(delta)
        with _arithmetic_range(self, event):
            return float(self._epsilon(event, delta, "guaranteed"))

    def delta(self, event: DpEvent, epsilon: float) -> float:
        """Guaranteed δ of ``event`` at ``epsilon`` (1 if not private)."""
        check_event(event)
        epsilon = check_epsilon(epsilon)
        with _arithmetic_range(self, event):
            return float(self._delta(event, epsilon, "guaranteed"))

    def report(self, event: DpEvent, delta: float) -> EpsilonReport:
        """Guaranteed ε and, for shuffled sampling, the labelled Poisson what-if."""
        check_event(event)
        delta = check_delta(delta)
        with _arithmetic_range(self, event):
            guaranteed = float(self._epsilon(event, delta, "guaranteed"))
            what_if = None
            if event.contains_shuffle:
                what_if = float(self._epsilon(event, delta, "poisson_assumed"))
        return EpsilonReport(guaranteed, what_if, delta, self.name, event.adjacency)


@contextlib.contextmanager
def _arithmetic_range(accountant, event):
    """Turn an accountant's float overflow or division by zero into one clear error
    (e.g. noise multipliers of 1e300 or 1e-300 raised raw OverflowError)."""
    try:
        yield
    except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
        raise ValidationError(
            f"the {getattr(accountant, 'name', 'accountant')} accountant cannot evaluate "
            f"{event!r}: its parameters are outside the range the analysis can evaluate in "
            f"floating point ({type(exc).__name__}: {exc}); use a noise parameter nearer 1."
        ) from exc


# name -> "module:Class"; classes are imported lazily so a missing optional
# accountant never breaks the others.
_REGISTRY = {
    "rdp": "fastdp.privacy.rdp:RdpAccountant",
    "pld": "fastdp.privacy.pld:PLDAccountant",
    "pld_own": "fastdp.privacy.pld_own:OwnPLDAccountant",
    "auto": "fastdp.privacy.auto:AutoAccountant",
    "pure": "fastdp.privacy.pure:PureDPAccountant",
    "moments": "fastdp.privacy.moments:MomentsAccountant",
}

ACCOUNTANT_NAMES = tuple(_REGISTRY)


def register_accountant(name: str, target: str) -> None:
    """Register ``"module:Class"`` under ``name`` (for extensions)."""
    if ":" not in target:
        raise ValidationError("target must look like 'package.module:ClassName'.")
    _REGISTRY[name] = target


def get_accountant(name="rdp", **kwargs):
    """Return an accountant instance by name, or pass an instance through.

    Parameters
    ----------
    name : str or accountant instance, default "rdp"
        One of ``"auto"``, ``"rdp"``, ``"pld_own"``, ``"pld"``, ``"pure"``,
        ``"moments"``; an object with
        an ``epsilon(event, delta)`` method is returned unchanged (then
        ``kwargs`` must be empty).
    **kwargs
        Passed to the accountant's constructor.
    """
    if not isinstance(name, str):
        if callable(getattr(name, "epsilon", None)):
            if kwargs:
                raise ValidationError("options can only be given with an accountant name.")
            return name
        raise ValidationError(
            f"accountant must be a name {sorted(_REGISTRY)} or an accountant, got {name!r}.")
    key = name.lower()
    if key not in _REGISTRY:
        raise ValidationError(
            f"unknown accountant {name!r}; choose one of {sorted(_REGISTRY)}.")
    module_name, class_name = _REGISTRY[key].split(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(
            f"the {name!r} accountant ({_REGISTRY[key]}) is not available: {exc}") from exc
    return cls(**kwargs)
