"""fastdp's privacy layer: events, accountants, calibration.

A solver describes what it released as an event (:mod:`fastdp.privacy.events`);
an accountant (:func:`get_accountant`: ``"auto"`` -- the default of the
estimators, the CLI and new ledgers --, ``"rdp"`` -- the default of the helpers
below --, ``"pld_own"``, ``"pld"``, ``"pure"``, ``"moments"``) turns events into ε or δ; calibration searches the
noise parameter so that ε stays at or below a target, never above.

Convenience API (stable names)::

    compute_epsilon(noise_multiplier, sample_rate, steps, delta,
                    accountant="rdp", sampling="poisson")
    calibrate_noise_multiplier(target_epsilon, delta, sample_rate, steps,
                               accountant="rdp", sampling="poisson")
    calibrate(make_event, target_epsilon, delta, accountant="rdp", ...)
"""

from fastdp.privacy.accountants import (  # noqa: F401
    ACCOUNTANT_NAMES,
    Accountant,
    EpsilonReport,
    get_accountant,
)
from fastdp.privacy.calibration import (  # noqa: F401
    SAMPLING_SCHEMES,
    CalibrationResult,
    calibrate,
    calibrate_noise_multiplier,
    compute_epsilon,
    compute_epsilon_report,
    dp_sgd_event,
)
from fastdp.privacy.events import (  # noqa: F401
    Adjacency,
    ApproxDpEvent,
    ComposedEvent,
    DpEvent,
    ExponentialMechanismEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    ParallelComposedEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
    PureEvent,
    RepeatedSelectionEvent,
    SelfComposedEvent,
    ShuffledEvent,
    event_delta,
    event_from_dict,
)
from fastdp.privacy.rdp import RdpAccountant  # noqa: F401

__all__ = [
    "ACCOUNTANT_NAMES", "Accountant", "EpsilonReport", "get_accountant",
    "SAMPLING_SCHEMES", "CalibrationResult", "calibrate", "calibrate_noise_multiplier",
    "compute_epsilon", "compute_epsilon_report", "dp_sgd_event",
    "Adjacency", "ComposedEvent", "DpEvent", "ExponentialMechanismEvent",
    "FixedSizeSampledEvent", "GaussianEvent", "LaplaceEvent", "LineSearchEvent",
    "NonPrivateEvent", "PoissonSampledEvent", "PureEvent", "SelfComposedEvent",
    "ShuffledEvent", "event_from_dict", "RdpAccountant",
    "ApproxDpEvent", "PrivacyFilterEvent", "event_delta",
    "RepeatedSelectionEvent", "ParallelComposedEvent",
]
