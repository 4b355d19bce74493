"""The ``"auto"`` accountant: the tightest sound bound of fastdp's accountants (issue 31).

Both fastdp's own PLD accountant (:mod:`fastdp.privacy.pld_own`) and the RDP
accountant (:mod:`fastdp.privacy.rdp`) give *upper bounds* on the same privacy
loss, so the smaller of the two is an upper bound too.  ``"auto"`` computes
both where both analyse the event and reports the smaller ε (or δ); where
one refuses the event (the PLD for fixed-size sampling, repeated selection,
privacy filters, the paper analysis of the line search; RDP for approximate
(ε, δ)-DP events), it reports the other's.  Its reports name the one used:
``"auto (pld_own)"`` or ``"auto (rdp)"``.

A composition whose members the PLD analyses only in part (e.g. a ledger holding
DP-SGD fits and a hyperparameter search, which has an RDP analysis only) gets a
third bound: ε_PLD(the members it analyses, δ_A) + ε_RDP(the others, δ − δ_A)
(basic composition of an (ε_A, δ_A) and an (ε_B, δ_B) guarantee, both sound for
adaptive composition), the best of δ_A ∈ {0.1, 0.5, 0.9}·δ; it is reported as
``"auto (pld_own+rdp)"`` when it is the smallest.

Calibration (:func:`fastdp.privacy.calibrate`) with ``"auto"`` returns the
smallest parameter whose smaller ε is within the target: the smaller of the
two accountants' own calibrated parameters.
"""

from __future__ import annotations

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import Accountant, EpsilonReport, check_delta, check_event
from fastdp.privacy.pld_own import OwnPLDAccountant
from fastdp.privacy.rdp import RdpAccountant

__all__ = ["AutoAccountant"]

_DELTA_SHARES = (0.1, 0.5, 0.9)   # the PLD part's share of δ in the split bound
PLD_MAX_EPSILON = 50.0
"""Above this RDP ε, ``"auto"`` reports RDP's ε without computing the PLD."""


class AutoAccountant(Accountant):
    """The smaller of the own-PLD and RDP bounds, for every event either analyses.

    Parameters
    ----------
    **pld_options
        Options of :class:`~fastdp.privacy.pld_own.OwnPLDAccountant`
        (``value_discretization_interval``, ``tail_mass``,
        ``relative_grid_step``).
    """

    name = "auto"

    def __init__(self, **pld_options):
        self.pld = OwnPLDAccountant(**pld_options)
        self.rdp = RdpAccountant()

    def __repr__(self):
        return f"AutoAccountant(pld={self.pld!r})"

    def _both(self, method, event, value, view):
        """{name: answer} of the accountants that analyse ``event`` (raises if none does).

        The PLD is skipped where RDP's ε is above :data:`PLD_MAX_EPSILON` (its grid of
        losses would be huge and the release is barely private anyway)."""
        answers, errors = {}, []
        for part in (self.rdp, self.pld):   # RDP first: its range errors are the clearer
            if (part is self.pld and method == "_epsilon"
                    and answers.get("rdp", 0.0) > PLD_MAX_EPSILON):
                continue
            try:
                answers[part.name] = float(getattr(part, method)(event, value, view))
            except PrivacyAnalysisError as exc:
                errors.append(f"{part.name}: {exc}")
            except ValidationError as exc:    # e.g. parameters outside the PLD's range
                if not answers:
                    raise
                errors.append(f"{part.name}: {exc}")
        if not answers:
            raise PrivacyAnalysisError(
                "no accountant of 'auto' analyses this event: " + "; ".join(errors))
        return answers

    @staticmethod
    def _smallest(answers):
        name = min(answers, key=lambda k: (answers[k], k != "pld_own"))
        return name, answers[name]

    def _epsilon(self, event, delta, view):
        return self._smallest(self._epsilons(event, delta, view))[1]

    def _epsilons(self, event, delta, view):
        """{name: ε} of every bound that applies, the split bound included (class docstring)."""
        answers = self._both("_epsilon", event, delta, view)
        if "pld_own" not in answers and isinstance(event, ev.ComposedEvent):
            split = self._split_epsilon(event, delta, view)
            if split is not None:
                answers["pld_own+rdp"] = split
        return answers

    def _split_epsilon(self, event, delta, view):
        """ε_PLD(members the PLD analyses, δ_A) + ε_RDP(the others, δ − δ_A), the best of a
        few splits δ_A (None if the PLD analyses no member)."""
        with_pld, without = [], []
        for member in event.events:
            (with_pld if self.pld.supports(member, view) else without).append(member)
        if not with_pld or not without:
            return None
        part_a, part_b = ev.ComposedEvent(tuple(with_pld)), ev.ComposedEvent(tuple(without))
        best = None
        for share in _DELTA_SHARES:
            try:
                total = (self.pld._epsilon(part_a, share * delta, view)
                         + self.rdp._epsilon(part_b, (1.0 - share) * delta, view))
            except PrivacyAnalysisError:
                continue
            best = total if best is None else min(best, total)
        return best

    def _delta(self, event, epsilon, view):
        return self._smallest(self._both("_delta", event, epsilon, view))[1]

    def used(self, event, delta) -> str:
        """The bound ``epsilon(event, delta)`` reports: ``"pld_own"``, ``"rdp"`` or
        ``"pld_own+rdp"`` (the split bound; the PLD when two give the same ε)."""
        check_event(event)
        return self._smallest(self._epsilons(event, check_delta(delta), "guaranteed"))[0]

    def report(self, event, delta) -> EpsilonReport:
        """As :meth:`Accountant.report`, with ``accountant`` = ``"auto (pld_own)"`` or
        ``"auto (rdp)"`` (the one whose guaranteed ε is reported)."""
        check_event(event)
        delta = check_delta(delta)
        name, guaranteed = self._smallest(self._epsilons(event, delta, "guaranteed"))
        what_if = None
        if event.contains_shuffle:
            what_if = self._smallest(self._epsilons(event, delta, "poisson_assumed"))[1]
        return EpsilonReport(float(guaranteed), None if what_if is None else float(what_if),
                             delta, f"auto ({name})", event.adjacency)

