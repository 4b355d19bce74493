"""The record of a spec-001 release: :class:`PiecewiseAffineResult`, built by :func:`finish`.

:func:`finish` adds the data-independent baselines (they cost no privacy)
and composes the event of ``n_runs`` independent releases.
"""

import dataclasses
from typing import Any, Optional

import numpy as np

from fastdp.privacy.events import SelfComposedEvent
from fastdp.solvers.piecewise_affine.iterations import data_independent_baselines

__all__ = ["PiecewiseAffineResult", "finish"]


@dataclasses.dataclass
class PiecewiseAffineResult:
    """What a spec-001 mechanism released, and how.

    Attributes
    ----------
    x : ndarray of shape (d,) or (n_runs, d)
        The released point(s); one row per independent run.
    method : str
        One of :data:`METHODS`.
    epsilon : float
        Total epsilon of everything in ``x`` (n_runs times the per-run
        epsilon); ``inf`` when the release carries no guarantee (the
        random-walk Metropolis and hit-and-run samplers of M_E, whose target
        epsilon is in ``params["target_epsilon"]``).
    event : DpEvent
        Privacy event of the release (accountants turn it into epsilon;
        a ``NoGuaranteeEvent`` they refuse).
    exact : bool
        False when the output only approximately follows the mechanism's
        distribution (finite Metropolis chains): then the guarantee is
        approximate DP, see ``privacy_note`` and ``delta``.
    delta : float or None
        Total delta of everything in ``x``: 0.0 for exact mechanisms, the
        public bound n_runs (1 + e^eps) TV for independence Metropolis, None
        when it is not quantified (random-walk Metropolis; see
        ``privacy_note``).
    privacy_note : str or None
    params : dict
        Every public setting that ran (including the paper switches).
    baselines : dict
        Data-independent outputs (cost no privacy): ``"center"`` (the starting
        point, B3) and ``"uniform_subgradient"`` (Algorithm 2 with epsilon -> 0,
        B4, same settings), each shaped like ``x``.
    diagnostics : dict
        Run details for tests and experiments. Keys ending in ``_nonprivate``
        (the Metropolis acceptance rate, which depends on the data; the norms
        of the noise, which together with the output locate the private
        quantity) must not be published.
    trajectory : ndarray or None
        All iterates of the subgradient method when ``output="trajectory"``.
    """

    x: np.ndarray
    method: str
    epsilon: float
    event: Any
    exact: bool = True
    delta: Optional[float] = 0.0
    privacy_note: Optional[str] = None
    params: dict = dataclasses.field(default_factory=dict)
    baselines: dict = dataclasses.field(default_factory=dict)
    diagnostics: dict = dataclasses.field(default_factory=dict)
    trajectory: Optional[np.ndarray] = None


def released_event(single_event, n_runs):
    return single_event if n_runs == 1 else SelfComposedEvent(single_event, n_runs)


def shape_output(X, single):
    return X[0] if single else X


def finish(problem, X, single, method, epsilon, event, rng, *, params, diagnostics=None,
            exact=True, note=None, delta=0.0):
    n = X.shape[0]
    base_rng = np.random.default_rng(rng.integers(0, 2**63))
    base = data_independent_baselines(problem, n, n_iter=params.get("n_iter", 100),
                                      step=params.get("steps", "constant"),
                                      project=params.get("project", True) or method != "subgradient",
                                      random_state=base_rng)
    baselines = {"center": shape_output(base["center"], single),
                 "uniform_subgradient": shape_output(
                     base["uniform_subgradient_last" if params.get("output") == "last"
                          else "uniform_subgradient_average"], single)}
    return PiecewiseAffineResult(
        x=shape_output(X, single), method=method, epsilon=epsilon * n,
        event=released_event(event, n), exact=exact, delta=None if delta is None else delta * n,
        privacy_note=note, params=params,
        baselines=baselines, diagnostics=diagnostics or {})
