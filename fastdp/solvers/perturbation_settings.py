"""Typed settings of output and objective perturbation for the estimators, and the typed part
of their result.

:class:`OutputPerturbationSettings` and :class:`ObjectivePerturbationSettings`
are the estimator's config plus the mechanisms' ``solver_options``; the
details classes are what :mod:`fastdp.solvers.perturbation` reports beyond
the common fields of :class:`~fastdp.solvers._result.SolverResult`.

Privacy: settings are public hyper-parameters; the details are public
functions of them (ε', Δ of objective perturbation follow from ε, n, λ).
"""

import dataclasses

from fastdp.solvers.settings import SolverSettings

__all__ = ["DEFAULT_TOL", "DEFAULT_MAX_ITER", "PerturbationSettings",
           "OutputPerturbationSettings", "ObjectivePerturbationSettings",
           "OutputPerturbationDetails", "ObjectivePerturbationDetails",
           "HuberObjectivePerturbationDetails"]

#: Default optimisation tolerance (gradient norm times n) of the minimiser.
DEFAULT_TOL = 1e-6
#: Default number of Newton iterations of the minimiser.
DEFAULT_MAX_ITER = 200


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerturbationSettings(SolverSettings):
    """Settings of objective perturbation (``solver="objective"``).

    The common fields are those of :class:`~fastdp.solvers.settings.SolverSettings`
    (``alpha`` is lambda, ``noise_parameter`` is ``1 / epsilon``); the
    batch, epoch, clip and sampler settings do not apply.

    Attributes
    ----------
    tol : float
        Optimisation tolerance of the minimiser.
    max_iter : int
        Newton iterations allowed.
    """

    tol: float = DEFAULT_TOL
    max_iter: int = DEFAULT_MAX_ITER


#: objective perturbation reads exactly the common perturbation settings
ObjectivePerturbationSettings = PerturbationSettings


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputPerturbationSettings(PerturbationSettings):
    """Settings of output perturbation (``solver="output"``).

    Attributes
    ----------
    mechanism : {"laplace", "gaussian"}
        The noise added to the minimiser (``noise_parameter`` is ``1 / epsilon``
        for Laplace, the noise multiplier sigma for Gaussian).
    """

    mechanism: str = "laplace"


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputPerturbationDetails:
    """What output perturbation reports beyond the common result fields.

    Attributes
    ----------
    mechanism : str
        ``"laplace"`` or ``"gaussian"``.
    tol : float
        Optimisation tolerance the sensitivity accounts for.
    """

    mechanism: str
    tol: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObjectivePerturbationDetails:
    """What objective perturbation reports beyond the common result fields.

    Attributes
    ----------
    epsilon_prime : float
        ε' of the noise density ``exp(-ε' ||b|| / 2)``.
    delta_reg : float
        Extra regulariser Δ.
    curvature : float
        c, the bound on the loss's second derivative.
    tol : float
        Optimisation tolerance.
    """

    epsilon_prime: float
    delta_reg: float
    curvature: float
    tol: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class HuberObjectivePerturbationDetails(ObjectivePerturbationDetails):
    """Objective perturbation with the Huber hinge loss: also its ``huber_h``."""

    huber_h: float
