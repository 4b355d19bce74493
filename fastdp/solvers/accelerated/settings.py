"""Typed settings of the accelerated solvers for the estimators, and the typed part of their result.

:class:`AcceleratedSettings` is the estimator's config (``alpha`` = μ, the
batch size, epochs, clip, ...) plus the family's ``solver_options``;
:class:`AcceleratedDetails` is what a run reports beyond the common fields of
:class:`~fastdp.solvers._result.SolverResult` (its schedule, the Laplace
scales drawn and their per-step ε).
"""

import dataclasses
from typing import Any, Optional

import numpy as np

from fastdp.solvers.settings import SolverSettings

__all__ = ["AcceleratedSettings", "AcceleratedDetails"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AcceleratedSettings(SolverSettings):
    """Settings of an accelerated run for the estimators (spec 002).

    The common fields are those of :class:`~fastdp.solvers.settings.SolverSettings`
    (``alpha`` is the strong convexity μ of the objective, ``noise_parameter``
    the pure-DP budget ``schedule_epsilon`` of the Laplace schedule); the
    others are the ``solver_options`` of the accelerated solvers.

    Attributes
    ----------
    n_iter : int or None
        T (default ``floor(epochs n / batch_size)``).
    step_size : float or None
        α (default ``step_multiplier / L``).
    step_multiplier : float
        c: the step ``c / L``, and MASG's stage multiplier.
    momentum : float or None
        β (default from μ and α, spec B5).
    smoothness : float or None
        L (default the public bound ``c_loss + alpha``).
    allocation : {"uniform", "prop42", "numerical"}
    alter_horizon : bool or None
        Choose T' <= T (default: on for non-uniform allocations).
    initial_error : float
        E_0 of the horizon rule.
    bound_constants : str or None
    noise_convention : {"paper", "reference_code"}
    row_l1_bound : float or None
        Public bound R on every row's L1 norm (default √d).
    form : {"momentum", "smoothing"}
    n1, n1_rounding, p
        MASG's first stage and stage count parameter.
    horizon_rule : {"paper", "subsampled"}
    """

    n_iter: Optional[int] = None
    step_size: Optional[float] = None
    step_multiplier: float = 1.0
    momentum: Optional[float] = None
    smoothness: Optional[float] = None
    allocation: str = "uniform"
    alter_horizon: Optional[bool] = None
    initial_error: float = 10.0
    bound_constants: Optional[str] = None
    noise_convention: str = "paper"
    row_l1_bound: Optional[float] = None
    form: str = "momentum"
    n1: Optional[int] = None
    n1_rounding: str = "ceil"
    p: int = 1
    horizon_rule: str = "paper"


@dataclasses.dataclass(frozen=True)
class AcceleratedDetails:
    """What an accelerated run reports beyond the common result fields.

    Attributes
    ----------
    nominal_n_iter, horizon : int
        T requested and T' run.
    noise_convention, allocation : str
    bound_constants : str or None
    laplace_scales : ndarray of shape (T',)
        Laplace scales drawn (problem units).
    nominal_scales : ndarray of shape (T',)
        b_k of the analysis for the problem's S1.
    step_epsilons : ndarray of shape (T',)
        ε of each step (what it costs); ``epsilon_pure`` is their sum.
    epsilon_pure : float
    step_sizes, momenta : ndarray of shape (T',)
    form : str
    horizon_rule : str or None
        The rule that chose T' (None when T' = T by fiat).
    stages, n1, C, stage_ends
        MASG's stage schedule (None for the other algorithms).
    iterates : ndarray of shape (T', d) or None
        x_1..x_T' when recorded.
    """

    nominal_n_iter: int
    horizon: int
    noise_convention: str
    allocation: str
    bound_constants: Optional[str]
    laplace_scales: np.ndarray
    nominal_scales: np.ndarray
    step_epsilons: np.ndarray
    epsilon_pure: float
    step_sizes: np.ndarray
    momenta: np.ndarray
    form: str
    horizon_rule: Optional[str] = None
    stages: Optional[np.ndarray] = None
    n1: Optional[int] = None
    C: Any = None
    stage_ends: Any = None
    iterates: Optional[np.ndarray] = None
