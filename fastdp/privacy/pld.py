"""Privacy-loss-distribution (PLD) accounting through ``dp_accounting``.

The PLD accountant composes the exact (pessimistically discretised) privacy
loss distributions of the released mechanisms and gives the tightest ε of
fastdp's accountants; it is slower than the RDP accountant.  The numbers are
``dp_accounting.pld.PLDAccountant``'s: a fastdp event is converted with
``event.to_dp_accounting()`` and composed into a ``dp_accounting`` PLD
accountant whose neighbouring relation is the event's adjacency
(add/remove → ``ADD_OR_REMOVE_ONE``, replace-one → ``REPLACE_ONE``).

The tree is composed here, with ``dp_accounting``'s public PLD constructors
and exactly the construction rules of its ``PLDAccountant`` (same functions,
same arguments, same order), so that the same discretisation gives the same
answer, except in two places where its accountant is wrong or too strict:

* **Repeated randomized response.** ``dp_accounting`` 0.6.0 composes
  ``SelfComposedDpEvent(RandomizedResponseDpEvent, k)`` only ONCE (its PLD
  accountant ignores the count for this event): 25 repetitions of a 0.1-DP
  release come out at ε = 0.101 instead of 2.10 at δ = 1e-6.  fastdp converts
  pure ε-DP events (``PureEvent``, ``ExponentialMechanismEvent``, the
  conservative Laplace line search) to randomized response, so here they are
  self-composed ``k`` times, as they must be.
* **Relations of unsampled mechanisms.** ``dp_accounting`` accepts Laplace
  events only under add/remove and randomized response only under
  replace-one.  For unsampled mechanisms the PLD does not depend on the
  relation (fastdp states their noise relative to the sensitivity under the
  event's own adjacency), so both are accepted under either adjacency.
  Randomized response at ε dominates every ε-DP pair whatever the relation.

Approximate-DP events (``ApproxDpEvent``, a mechanism known only to be
(ε, δ)-DP; dp_accounting 0.6.0 has no event for it) are composed as
``from_privacy_parameters(ε, δ)``, the dominating pair of (ε, δ)-DP (privacy
loss +∞ with probability δ).  ε at a target δ below the Σ δ_i the events state
themselves raises (the PLD would only give ε = ∞ there).

A :class:`~fastdp.privacy.events.ParallelComposedEvent` (mechanisms on the
disjoint parts of a data-independent split) is accepted at the top level
only: its ε(δ) and δ(ε) are the largest of its members' (for each value of
the split the pair differs in one part, and the hockey-stick divergence is
jointly convex over the split's mixture); inside a composition it is refused.

Not covered (raises :class:`~fastdp.exceptions.PrivacyAnalysisError`):
fixed-size sampling without replacement (no PLD in ``dp_accounting``; use the
RDP accountant) and the paper analysis of the line search (an RDP bound only).
"""

import math

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import Accountant

__all__ = ["PLDAccountant"]

_RECENT = 8  # answers an accountant keeps


def _relation(adjacency):
    import dp_accounting

    if adjacency is ev.Adjacency.REPLACE_ONE:
        return dp_accounting.NeighboringRelation.REPLACE_ONE
    return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


class _PldComposer:
    """Compose a ``dp_accounting`` event tree into one PLD.

    Mirrors ``dp_accounting.pld.PLDAccountant._maybe_compose`` for the events
    fastdp emits (Gaussians self-composed by shrinking σ by √count, everything
    else by ``self_compose``), with the two corrections in the module
    docstring.
    """

    def __init__(self, value_discretization_interval, neighboring_relation):
        from dp_accounting.pld import privacy_loss_distribution as pld_module

        self._pld = pld_module
        self.vdi = value_discretization_interval
        self.relation = neighboring_relation
        self.pld = pld_module.identity(value_discretization_interval=self.vdi)
        self.non_private = False

    def compose(self, event, count=1):
        import dp_accounting as dpa

        pld = self._pld
        if isinstance(event, dpa.NoOpDpEvent):
            return
        if isinstance(event, dpa.NonPrivateDpEvent):
            self.non_private = True
        elif isinstance(event, dpa.SelfComposedDpEvent):
            self.compose(event.event, event.count * count)
        elif isinstance(event, dpa.ComposedDpEvent):
            for inner in event.events:
                self.compose(inner, count)
        elif isinstance(event, dpa.GaussianDpEvent):
            # fastdp's GaussianEvent(sigma) has std sigma x (the sensitivity under
            # its own adjacency), so its privacy loss is the symmetric unit-
            # sensitivity Gaussian under either relation.  dp_accounting's PLD
            # would double the sensitivity for REPLACE_ONE (its RDP does not).
            self._add(pld.from_gaussian_mechanism(
                standard_deviation=event.noise_multiplier / math.sqrt(count),
                value_discretization_interval=self.vdi,
                neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE))
        elif isinstance(event, dpa.LaplaceDpEvent):
            self._add(pld.from_laplace_mechanism(
                parameter=event.noise_multiplier,
                value_discretization_interval=self.vdi).self_compose(count))
        elif isinstance(event, dpa.RandomizedResponseDpEvent):
            self._add(pld.from_randomized_response(
                noise_parameter=event.noise_parameter, num_buckets=event.num_buckets,
                value_discretization_interval=self.vdi,
                neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE,
            ).self_compose(count))
        elif isinstance(event, ev._epsilon_delta_dp_event_class()):
            # Dominating pair of (eps, delta)-DP, whatever the relation.
            from dp_accounting.pld import common

            self._add(pld.from_privacy_parameters(
                common.DifferentialPrivacyParameters(event.epsilon, event.delta),
                value_discretization_interval=self.vdi).self_compose(count))
        elif isinstance(event, dpa.PoissonSampledDpEvent):
            self._compose_poisson(event, count)
        else:
            raise PrivacyAnalysisError(
                f"the PLD accountant cannot compose {type(event).__name__} "
                "(dp_accounting has no PLD for it); use accountant='rdp'.")

    def _compose_poisson(self, event, count):
        import dp_accounting as dpa

        pld = self._pld
        inner, rate = event.event, event.sampling_probability
        if rate == 0:
            return
        if isinstance(inner, dpa.GaussianDpEvent):
            self._add(pld.from_gaussian_mechanism(
                standard_deviation=inner.noise_multiplier,
                value_discretization_interval=self.vdi,
                sampling_prob=rate,
                neighboring_relation=self.relation).self_compose(count))
        elif (isinstance(inner, dpa.LaplaceDpEvent)
              and self.relation is dpa.NeighboringRelation.ADD_OR_REMOVE_ONE):
            self._add(pld.from_laplace_mechanism(
                parameter=inner.noise_multiplier,
                value_discretization_interval=self.vdi,
                sampling_prob=rate).self_compose(count))
        else:
            raise PrivacyAnalysisError(
                "the PLD accountant covers Poisson sampling of a single Gaussian or "
                f"Laplace mechanism (add/remove); got {inner!r}. Use accountant='rdp'.")

    def _add(self, pld_object):
        self.pld = self.pld.compose(pld_object)

    def get_epsilon(self, delta):
        if self.non_private:
            return math.inf
        return self.pld.get_epsilon_for_delta(delta)

    def get_delta(self, epsilon):
        if self.non_private:
            return 1.0
        return self.pld.get_delta_for_epsilon(epsilon)


class PLDAccountant(Accountant):
    """Tight (ε, δ) accounting with privacy loss distributions (``dp_accounting``).

    What it analyses: any fastdp event that converts to a ``dp_accounting``
    event its PLD accountant supports — Gaussian and Laplace mechanisms,
    Poisson-sampled Gaussian and Laplace (add/remove), pure ε-DP and
    exponential-mechanism events (as binary randomized response, their
    dominating pair), approximate (ε, δ)-DP events (``from_privacy_parameters``),
    the conservative Laplace line search, the guaranteed view
    of shuffled sampling, and compositions of these.  The neighbouring relation
    is the event's adjacency.  ε is for the whole composed release at the
    requested δ; discretisation is pessimistic, so the ε is an upper bound.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        PLD grid step.  Coarser grids are faster but more pessimistic at many
        compositions and small ε (anchors-dp-libs §2.2: at q = 0.01,
        T = 1e4 a 1e-3 grid gives ε = 0.113 where 1e-5 gives 0.0811); keep it
        at most about 1/100 of the target ε.
    """

    name = "pld"

    def __init__(self, value_discretization_interval=1e-4):
        vdi = float(value_discretization_interval)
        if not (vdi > 0 and math.isfinite(vdi)):
            raise ValidationError(
                "value_discretization_interval must be a finite number > 0; "
                f"got {value_discretization_interval!r}")
        self.value_discretization_interval = vdi
        self._recent = {}  # (event, delta, view) -> epsilon of the last few calls

    def __repr__(self):
        return f"PLDAccountant(value_discretization_interval={self.value_discretization_interval!r})"

    def _converted(self, event, view):
        try:
            return event.to_dp_accounting(view=view)
        except PrivacyAnalysisError as exc:
            raise PrivacyAnalysisError(
                f"the PLD accountant cannot analyse this event: {exc}") from exc

    def _compose(self, event, view):
        """A composer holding the PLD of ``event`` in ``view``."""
        dp_event = self._converted(event, view)
        adjacency = event.adjacency
        if view == "poisson_assumed" and isinstance(event, ev.ShuffledEvent):
            adjacency = event.view(view).adjacency  # the what-if is add/remove
        composer = _PldComposer(self.value_discretization_interval, _relation(adjacency))
        composer.compose(dp_event)
        return composer

    def _epsilon(self, event, delta, view):
        if not event.is_private:
            return math.inf
        if isinstance(event, ev.ParallelComposedEvent):   # top level only: the maximum
            return max(self._epsilon(e, delta, view) for e in event.events)
        ev.check_event_delta(event, delta, view)
        if delta >= 1.0:
            return 0.0
        # one PLD can take seconds: the last few answers are kept (an estimator
        # asks for the calibrated event's epsilon again to check and report it)
        key = (event, delta, view)
        try:
            return self._recent[key]
        except (KeyError, TypeError):  # TypeError: an unhashable event
            pass
        epsilon = float(self._compose(event, view).get_epsilon(delta))
        try:
            if len(self._recent) >= _RECENT:
                self._recent.pop(next(iter(self._recent)), None)
            self._recent[key] = epsilon
        except (TypeError, RuntimeError, StopIteration):  # unhashable, or another thread
            pass
        return epsilon

    def _delta(self, event, epsilon, view):
        if not event.is_private:
            return 1.0
        if isinstance(event, ev.ParallelComposedEvent):
            return max(self._delta(e, epsilon, view) for e in event.events)
        return float(self._compose(event, view).get_delta(epsilon))
