"""asv benchmarks of fastdp's privacy accounting and noise calibration.

Settings are the reference settings of ../shared/research/anchors-dp-libs.md
§2.1 (ε of a Poisson-subsampled Gaussian) and §2.3 (σ for a target ε).
Curve caches are cleared before every timed call, so each call does the full
computation.
"""

from fastdp.privacy import (
    GaussianEvent,
    PoissonSampledEvent,
    RdpAccountant,
    SelfComposedEvent,
    calibrate_noise_multiplier,
    compute_epsilon,
)

EPSILON_SETTINGS = {
    "A": (0.01, 4.0, 10_000, 1e-5),
    "B": (256 / 60000, 1.1, 14_063, 1e-5),
    "C": (0.01, 1.1, 10_000, 1e-5),
    "D": (0.01, 0.7, 1_000, 1e-5),
    "E": (1.0, 10.0, 100, 1e-5),
    "F": (1e-3, 0.8, 100_000, 1e-7),
}

CALIBRATION_SETTINGS = {
    "K1": (256 / 60000, 14_063, 1.0, 1e-5),
    "K2": (256 / 60000, 14_063, 8.0, 1e-5),
    "K3": (0.01, 10_000, 0.1, 1e-3),
    "K4": (1e-3, 100_000, 2.0, 1e-7),
}


class RdpEpsilon:
    """One RDP ε for (q, σ, T, δ)."""

    params = sorted(EPSILON_SETTINGS)
    param_names = ["setting"]

    def setup(self, setting):
        q, sigma, steps, delta = EPSILON_SETTINGS[setting]
        self.accountant = RdpAccountant()
        self.event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
        self.delta = delta
        self.accountant.epsilon(self.event, delta)     # warm module-level tables

    def time_epsilon(self, setting):
        self.accountant.clear_cache()
        self.accountant.epsilon(self.event, self.delta)

    def time_epsilon_cached(self, setting):
        self.accountant.epsilon(self.event, self.delta)

    def track_epsilon(self, setting):
        q, sigma, steps, delta = EPSILON_SETTINGS[setting]
        return compute_epsilon(sigma, q, steps, delta)


class RdpCalibration:
    """Smallest σ with ε ≤ target, relative tolerance 1e-6."""

    params = sorted(CALIBRATION_SETTINGS)
    param_names = ["setting"]

    def setup(self, setting):
        self.args = CALIBRATION_SETTINGS[setting]
        calibrate_noise_multiplier(*self._call_args(), accountant=RdpAccountant())

    def _call_args(self):
        q, steps, target, delta = self.args
        return target, delta, q, steps

    def time_calibrate_noise_multiplier(self, setting):
        calibrate_noise_multiplier(*self._call_args(), accountant=RdpAccountant())

    def track_sigma(self, setting):
        return float(calibrate_noise_multiplier(*self._call_args()))

    def track_evaluations(self, setting):
        return calibrate_noise_multiplier(*self._call_args(), accountant=RdpAccountant()).evaluations


class PldEpsilon:
    """One PLD ε (dp_accounting's PLD behind fastdp's accountant, grid 1e-4) for (q, σ, T, δ)."""

    params = ["B", "C", "D"]
    param_names = ["setting"]
    timeout = 300

    def setup(self, setting):
        from fastdp.privacy.pld import PLDAccountant

        q, sigma, steps, delta = EPSILON_SETTINGS[setting]
        self.accountant = PLDAccountant()
        self.event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
        self.delta = delta

    def time_epsilon(self, setting):
        self.accountant.epsilon(self.event, self.delta)

    def track_epsilon(self, setting):
        return self.accountant.epsilon(self.event, self.delta)


class PldCalibration:
    """σ for a target ε with the PLD accountant (relative tolerance 1e-3 in σ)."""

    params = ["K1", "K3"]
    param_names = ["setting"]
    timeout = 600
    repeat = 1
    number = 1

    def time_calibrate_noise_multiplier(self, setting):
        q, steps, target, delta = CALIBRATION_SETTINGS[setting]
        calibrate_noise_multiplier(target, delta, q, steps, accountant="pld", rtol=1e-3)
