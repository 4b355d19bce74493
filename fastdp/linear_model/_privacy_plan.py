"""The privacy plan of a fit: the calibrated noise and the event of the whole fit,
computed before anything runs, and the ledger reservation that charges it.

:class:`_PrivacyPlan` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`.  The estimator never
computes epsilon itself: the accountant does, from the planned event.
"""

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.calibration import calibrate
from fastdp.privacy.events import ComposedEvent, NonPrivateEvent, SelfComposedEvent
from fastdp.privacy.ledger_entries import note_ledger_epsilon
from fastdp.solvers.registry import EstimatorSolver


def _in_adjacency_of(prefix, event):
    """``prefix`` as an event of ``event``'s adjacency: unchanged when they compose, else
    ``prefix.to_replace_one()`` (a replace-one training event: fixed-size or shuffled lots;
    the add/remove sensitivity at most doubles)."""
    try:
        ComposedEvent((prefix, event))
        return prefix
    except PrivacyAnalysisError:
        return prefix.to_replace_one()


def _overrides_noise_for_budget(solver):
    return type(solver).noise_for_budget is not EstimatorSolver.noise_for_budget


class _PrivacyPlan:
    """Noise, planned event and ledger reservation (a mixin of ``_DPLinearModel``)."""

    def _plan(self, solver, n_samples, config, private, delta, accountant, n_fits, prefix=None):
        """``(noise, event of one fit, event of the whole fit)``, before anything runs.

        ``prefix`` (one fit only): the event of a release made before training
        from the same data (DPRidge's private target scale); the whole fit is
        ``ComposedEvent((prefix, event))`` and the noise is calibrated for it
        (solvers with a closed-form budget rule get what the prefix leaves,
        ``epsilon - epsilon(prefix)``, and the composition is checked).

        K one-vs-rest fits each read every example: the whole fit is their
        composition ``SelfComposedEvent(event, K)``, and the noise is
        calibrated for that composition (solvers with a closed-form budget
        rule get ``epsilon / K, delta / K`` each, basic composition, and the
        accountant's epsilon of the composition is what is reported).
        """
        if not private:
            if n_fits > 1:
                return 0.0, NonPrivateEvent(), NonPrivateEvent()
            return 0.0, NonPrivateEvent(), NonPrivateEvent()
        epsilon = float(self.epsilon)
        if prefix is not None:   # in the training event's adjacency (replace-one: doubled)
            prefix = _in_adjacency_of(prefix, solver.event(n_samples, config, 1.0))
        if self.noise_multiplier is not None:
            noise = float(self.noise_multiplier)
        elif prefix is not None:
            noise = self._noise_after(prefix, solver, n_samples, config, epsilon, delta,
                                      accountant)
        elif n_fits == 1:
            noise = solver.noise_for_budget(n_samples, config, epsilon, delta, accountant)
        elif _overrides_noise_for_budget(solver):
            noise = solver.noise_for_budget(n_samples, config, epsilon / n_fits, delta / n_fits,
                                            accountant)
        else:
            noise = float(calibrate(
                lambda s: SelfComposedEvent(solver.event(n_samples, config, s), n_fits),
                epsilon, delta, accountant=accountant))
        one_event = solver.event(n_samples, config, noise)
        whole = one_event if n_fits == 1 else SelfComposedEvent(one_event, n_fits)
        if prefix is not None:
            whole = ComposedEvent((prefix, whole))
        planned = accountant.epsilon(whole, delta)  # before anything runs (a given noise too)
        if isinstance(one_event, SelfComposedEvent) and one_event.count == 0:
            # no step runs: the fit could only fail later, after reserving
            raise ValidationError(
                "this fit's plan runs no private step: with these epochs, "
                "batch size and n no complete mini-batch step is made; increase epochs.")
        if self.noise_multiplier is None and planned > epsilon * (1.0 + 1e-9):
            raise ValidationError(
                f"could not fit {n_fits} one-vs-rest models within epsilon = {epsilon}; "
                "use solver='dpsgd' or a larger epsilon." if prefix is None else
                f"could not fit the model and the targets' scale within epsilon = {epsilon}; "
                "pass a public target_bound or use a larger epsilon.")
        return noise, one_event, whole

    @staticmethod
    def _noise_after(prefix, solver, n_samples, config, epsilon, delta, accountant):
        """The training noise of a fit whose event is ``ComposedEvent((prefix, event))``.

        Calibrated on the composition itself for solvers that calibrate a noise
        parameter; a closed-form budget rule gets ``epsilon - epsilon(prefix)``
        (``prefix``: pure members, basic composition), lowered by 5 % steps until the
        accountant's epsilon of the composition is within ``epsilon`` (``_plan`` checks).
        """
        if not _overrides_noise_for_budget(solver):
            return float(calibrate(
                lambda s: ComposedEvent((prefix, solver.event(n_samples, config, s))),
                epsilon, delta, accountant=accountant))
        budget = epsilon - sum(member.pure_epsilon() for member in prefix.events)
        for _ in range(20):
            noise = solver.noise_for_budget(n_samples, config, budget, delta, accountant)
            whole = ComposedEvent((prefix, solver.event(n_samples, config, noise)))
            if accountant.epsilon(whole, delta) <= epsilon:
                break
            budget *= 0.95
        return noise

    def _reserve(self, planned_event, delta, accountant):
        """Reserve ``planned_event`` on the attached ledger (None without one).

        Called before training: a fit over budget raises here and releases
        nothing.  When the ledger's accountant or δ counts the event as more ε
        than the fit reports (``epsilon_``: the fit's accountant at its δ), a
        :class:`~fastdp.privacy.ledger_entries.LedgerAccountingWarning` gives both.
        """
        if self.ledger is None:
            return None
        if hasattr(self.ledger, "epsilon_of_event"):  # a PrivacyLedger (not a planning stand-in)
            note_ledger_epsilon(self.ledger, planned_event,
                                accountant.epsilon(planned_event, delta), delta,
                                getattr(accountant, "name", self.accountant), "fit")
        return self.ledger.reserve(planned_event, label=type(self).__name__)
