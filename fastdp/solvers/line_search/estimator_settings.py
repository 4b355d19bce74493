"""Typed settings of the line-search estimator solvers (:mod:`.estimator`).

Each is a frozen :class:`~fastdp.solvers.settings.SolverSettings` whose extra
fields are the solver's ``solver_options``.  The estimators' ``alpha`` is the
L2 strength μ (the common field), so the Armijo constant α is the option
``armijo_alpha`` here; it becomes ``alpha`` only where the solver functions and
:class:`~fastdp.solvers.line_search.settings.BlsgdSettings` are called (and
so ``result.extra["settings"]["alpha"]`` is the Armijo α, as before).

Privacy: public hyper-parameters only.
"""

import dataclasses
import inspect

from fastdp.solvers.line_search.fixed_split import dp_blsgd_fixed
from fastdp.solvers.line_search.settings import BlsgdSettings
from fastdp.solvers.settings import SolverSettings

__all__ = ["FixedSplitSettings", "AdaptiveLineSearchSettings", "DpAgdSettings",
           "ADAPTIVE_EXCLUDED", "armijo_as_alpha"]

# the defaults of the fixed split are those of dp_blsgd_fixed (one definition)
_FIXED = {name: p.default for name, p in inspect.signature(dp_blsgd_fixed).parameters.items()}


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedSplitSettings(SolverSettings):
    """Settings of ``solver="dp_blsgd"`` (:func:`dp_blsgd_fixed`) for the estimators.

    ``alpha`` is μ, ``clip`` is C_grad (None: 3), ``noise_parameter`` the
    per-iteration noise multiplier σ; the other fields are the arguments of
    :func:`~fastdp.solvers.line_search.fixed_split.dp_blsgd_fixed` of the same
    name (defaults included), ``armijo_alpha`` being its ``alpha``.
    """

    c_obj: float = _FIXED["c_obj"]
    grad_share: float = _FIXED["grad_share"]
    eta0: float = _FIXED["eta0"]
    max_it: int = _FIXED["max_it"]
    armijo_alpha: float = _FIXED["alpha"]
    beta: float = _FIXED["beta"]
    tau: int = _FIXED["tau"]
    varsigma: float = _FIXED["varsigma"]
    eta0_cap: str = _FIXED["eta0_cap"]
    armijo_scale: str = _FIXED["armijo_scale"]
    svt_analysis: str = _FIXED["svt_analysis"]
    init: str = _FIXED["init"]
    init_scale: float = _FIXED["init_scale"]


#: Fields of BlsgdSettings that the estimators set themselves (or do not offer).
ADAPTIVE_EXCLUDED = frozenset({
    "sample_rate", "mu", "c_grad", "amplification", "check", "fixed_order", "batch_accounting",
    "budget_filter", "normalize", "alpha", "adaptive_clipping"})


def _adaptive_fields():
    fields = [(f.name, f.type, dataclasses.field(default=f.default))
              for f in dataclasses.fields(BlsgdSettings) if f.name not in ADAPTIVE_EXCLUDED]
    alpha = next(f for f in dataclasses.fields(BlsgdSettings) if f.name == "alpha")
    return fields + [("armijo_alpha", alpha.type, dataclasses.field(default=alpha.default))]


AdaptiveLineSearchSettings = dataclasses.make_dataclass(
    "AdaptiveLineSearchSettings", _adaptive_fields(), bases=(SolverSettings,), frozen=True,
    kw_only=True)
AdaptiveLineSearchSettings.__module__ = __name__
AdaptiveLineSearchSettings.__doc__ = """Settings of the adaptive line-search solvers
(``"dp_blsgd_adaptive"``, ``"dp_blsgd_ac"``, ``"dp_blgd"``) for the estimators.

``alpha`` is μ, ``clip`` is C_grad (None: 3), ``noise_parameter`` the zCDP
cap ρ; the other fields are those of
:class:`~fastdp.solvers.line_search.settings.BlsgdSettings` (same defaults)
except :data:`ADAPTIVE_EXCLUDED`, with ``armijo_alpha`` for its ``alpha``.
``epsilon_iter=None`` means: chosen from the cap (see the adapter).
"""


def armijo_as_alpha(settings):
    """The options of ``settings`` with ``armijo_alpha`` named ``alpha``: the keywords of
    :func:`dp_blsgd_fixed` / the fields of ``BlsgdSettings`` they stand for."""
    options = settings.options()
    options["alpha"] = options.pop("armijo_alpha")
    return options


@dataclasses.dataclass(frozen=True, kw_only=True)
class DpAgdSettings(SolverSettings):
    """Settings of ``solver="dpagd"`` (DP-AGD under a zCDP filter) for the estimators.

    ``alpha`` is μ, ``clip`` is C_grad (None: 3), ``noise_parameter`` the zCDP
    cap ρ; ``grad_share`` is the share of ρ_iter of the gradient release; the
    other fields are the loop settings of
    :func:`~fastdp.solvers.line_search.agd.dp_agd_core`.
    """

    c_obj: float = 1.0
    grad_share: float = 0.5
    n_candidates: int = 21
    step_max: float = 2.0
    gamma: float = 0.1
    step_update_period: int = 10
    step_update_factor: float = 1.1
    init: str = "zeros"
    init_scale: float = 0.01
    max_iter: int = None

    def loop_settings(self):
        """The options of the DP-AGD loop (all but ``grad_share``)."""
        options = self.options()
        del options["grad_share"]
        return options
