"""The privacy plan of a fit: the calibrated noise and the event of the whole fit,
computed before anything runs, and the ledger reservation that charges it.

:class:`_PrivacyPlan` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`.  The estimator never
computes epsilon itself: the accountant does, from the planned event.
"""

from fastdp.exceptions import ValidationError
from fastdp.privacy.calibration import calibrate
from fastdp.privacy.events import NonPrivateEvent, SelfComposedEvent
from fastdp.privacy.ledger_entries import note_ledger_epsilon
from fastdp.solvers.registry import EstimatorSolver


def _overrides_noise_for_budget(solver):
    return type(solver).noise_for_budget is not EstimatorSolver.noise_for_budget


class _PrivacyPlan:
    """Noise, planned event and ledger reservation (a mixin of ``_DPLinearModel``)."""

    def _plan(self, solver, n_samples, config, private, delta, accountant, n_fits):
        """``(noise, event of one fit, event of the whole fit)``, before anything runs.

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
        if self.noise_multiplier is not None:
            noise = float(self.noise_multiplier)
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
        planned = accountant.epsilon(whole, delta)  # before anything runs (a given noise too)
        if isinstance(one_event, SelfComposedEvent) and one_event.count == 0:
            # no step runs: the fit could only fail later, after reserving
            raise ValidationError(
                "this fit's plan runs no private step: with these epochs, "
                "batch size and n no complete mini-batch step is made; increase epochs.")
        if self.noise_multiplier is None and planned > epsilon * (1.0 + 1e-9):
            raise ValidationError(
                f"could not fit {n_fits} one-vs-rest models within epsilon = {epsilon}; "
                "use solver='dpsgd' or a larger epsilon.")
        return noise, one_event, whole

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
