"""fastdp's privacy layer: events, accountants, calibration.

A solver describes what it released as an event (:mod:`fastdp.privacy.events`);
an accountant (:func:`fastdp.privacy.accountants.get_accountant`) turns events
into ε or δ; calibration searches the noise parameter so that ε stays at or
below a target.
"""

from fastdp.privacy.events import (  # noqa: F401
    Adjacency,
    ComposedEvent,
    DpEvent,
    ExponentialMechanismEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureEvent,
    SelfComposedEvent,
    ShuffledEvent,
    event_from_dict,
)
