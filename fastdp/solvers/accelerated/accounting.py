"""Noise conventions and utility bounds of the accelerated solvers (spec 002).

The privacy accounting of these solvers (the ε of a step, the scale of a
budget, the event of a schedule) lives in the privacy layer,
:mod:`fastdp.privacy.laplace_schedule`; it is re-exported here for old imports.
What stays here is about the noise the solvers *draw* and its effect on
utility, not about privacy.

Noise conventions (spec 002, section 7, item A1)
------------------------------------------------
``"paper"`` (default) draws Laplace of scale ``b`` (variance 2b²), which is
what the ε-DP proof needs.  ``"reference_code"`` draws scale ``b/√2``
(variance b²), as the authors' MATLAB ``laprnd`` did in the published figures;
its realized ε is larger than the nominal one and the event records the scale
that was really drawn, so an accountant never reports the nominal ε for it.
"""

import math

import numpy as np

from fastdp._validation import check_positive
from fastdp.exceptions import ValidationError
from fastdp.privacy.laplace_schedule import (  # noqa: F401  (re-exported)
    _sizes,
    b_for_eps,
    eps0_uniform,
    eps_step,
    laplace_schedule_event,
    total_epsilon,
    uniform_scales,
)

__all__ = [
    "NOISE_CONVENTIONS",
    "eps_step",
    "b_for_eps",
    "eps0_uniform",
    "uniform_scales",
    "total_epsilon",
    "drawn_scales",
    "laplace_schedule_event",
    "subsampling_variance_bound",
    "noise_second_moment",
]

#: Laplace parameter conventions: ``"paper"`` draws scale b, ``"reference_code"`` b/√2.
NOISE_CONVENTIONS = ("paper", "reference_code")


def drawn_scales(scales, noise_convention):
    """Laplace scales actually drawn for nominal scales b under ``noise_convention``."""
    if noise_convention not in NOISE_CONVENTIONS:
        raise ValidationError(
            f"noise_convention must be one of {NOISE_CONVENTIONS}; got {noise_convention!r}")
    scales = np.asarray(scales, dtype=np.float64)
    return scales / math.sqrt(2.0) if noise_convention == "reference_code" else scales.copy()


def subsampling_variance_bound(sensitivity, n, batch_size):
    """σ_s²(m, n) = (S1²/4)(1/m)(n − m)/(n − 1): bound on E‖v_t‖² (Prop 3.3, eq. 3.13)."""
    sensitivity = check_positive("sensitivity", sensitivity)
    n, m = _sizes(n, batch_size)
    if m == n:
        return 0.0
    return sensitivity ** 2 / 4.0 / m * (n - m) / (n - 1)


def noise_second_moment(scale, n_features, sensitivity, n, batch_size):
    """E‖w_t‖² ≤ 2 d b² + σ_s²(m, n): what the proofs need (spec 002, section 7, A3)."""
    return (2.0 * int(n_features) * float(scale) ** 2
            + subsampling_variance_bound(sensitivity, n, batch_size))
