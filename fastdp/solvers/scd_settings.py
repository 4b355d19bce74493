"""Typed settings of the DP-SCD solvers for the estimators, and the typed part of their result.

:class:`DualScdSettings` (dual DP-SCD) and :class:`SeqScdSettings`
(seqDP-SCD) are the estimator's config plus the family's
``solver_options``; the details classes are what a run of
:mod:`fastdp.solvers.scd` reports beyond the common fields of
:class:`~fastdp.solvers._result.SolverResult`, one class per solver so that
each reports exactly its own keys.

Privacy: settings are public hyper-parameters; the details are public
functions of them (and of the data's value type).
"""

import dataclasses

from fastdp.solvers.settings import SolverSettings

__all__ = ["DEFAULT_BOX_EPS", "DualScdSettings", "SeqScdSettings", "ScdDetails", "DualScdDetails",
           "DpScdDetails", "SeqScdDetails"]

#: Default ``box_eps`` of the dual solvers (as :func:`fastdp.solvers.scd.dual_dpscd`).
DEFAULT_BOX_EPS = 1e-4


@dataclasses.dataclass(frozen=True, kw_only=True)
class DualScdSettings(SolverSettings):
    """Settings of a dual DP-SCD run (``solver="dpscd"``).

    The common fields are those of :class:`~fastdp.solvers.settings.SolverSettings`
    (``alpha`` is lambda, ``noise_parameter`` the noise multiplier sigma).

    Attributes
    ----------
    box_eps : float
        Margin kept inside the dual box (logistic loss).
    released : {"v", "alpha_and_v"}
        What the threat model releases (sets the sensitivity).
    """

    box_eps: float = DEFAULT_BOX_EPS
    released: str = "v"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeqScdSettings(SolverSettings):
    """Settings of a seqDP-SCD run (``solver="seq_dpscd"``).

    Attributes
    ----------
    box_eps : float
        As :class:`DualScdSettings`.
    sigma_prime : float
        Subproblem constant sigma'.
    seq_sensitivity : {"paper", "repo"}
        Which sensitivity bound of the sequential updates is used.
    """

    box_eps: float = DEFAULT_BOX_EPS
    sigma_prime: float = 1.0
    seq_sensitivity: str = "paper"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScdDetails:
    """What a coordinate-descent run reports beyond the common fields (primal DP-SCD).

    Attributes
    ----------
    sigma_prime : float
        Subproblem constant sigma' of the coordinate steps.
    """

    sigma_prime: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class DualScdDetails(ScdDetails):
    """What a dual SCD run reports (non-private SCD; the base of the dual DP runs).

    Attributes
    ----------
    box_eps : float
        Margin kept inside the dual box.
    dtype : str
        Value type of the rows and of the state (alpha, v).
    """

    box_eps: float
    dtype: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class DpScdDetails(DualScdDetails):
    """What a dual DP-SCD run reports.

    Attributes
    ----------
    released : str
        ``"v"`` or ``"alpha_and_v"``.
    """

    released: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeqScdDetails(DualScdDetails):
    """What a seqDP-SCD run reports.

    Attributes
    ----------
    seq_sensitivity : str
        ``"paper"`` or ``"repo"``.
    """

    seq_sensitivity: str
