"""NOISYBTLS: the private Armijo backtracking line search of spec 003 (Algorithm 1).

The search is the AboveThreshold sparse-vector technique with threshold 0
applied to the Armijo queries

    q(η_k) = S(w) − S(w − η_k g) − slope·η_k − curvature·η_k²,   η_k = η0·β^k,

where ``S(v) = Σ_{i∈B} min(loss(x_i·v, y_i), C_obj)`` is the sum of clipped
per-example losses on the batch B and ``slope``/``curvature`` are public given
the (already released) gradient ``g``:

* ``armijo_scale="mean"`` (default, spec 003 §8 A2): the mean-form Armijo
  condition ``F_B(w − ηg) ≤ F_B(w) − αη‖g‖²`` of the regularised objective,
  multiplied by the public normaliser ``m`` (= q·n, the expected batch size):
  ``slope = α·m·‖g‖² − m·μ·(w·g)``, ``curvature = m·μ·‖g‖²/2``;
* ``armijo_scale="paper_literal"``: ``q = S(w) − α·η·‖g‖² − S(w − ηg)``
  (slope ``α‖g‖²``, no regulariser term), as printed in the paper.

Privacy
-------
* Private: the records of the batch the objective is evaluated on.
* Adjacency: add/remove one record (spec 003 §1.2).
* Sensitivity: every query changes by at most ``C_obj`` when one record is
  added or removed (both clipped losses of that record lie in [0, C_obj] and
  the public terms do not depend on it), so Δ_q = C_obj (L1 and L2).
* Noise: Laplace form with budget ε_BT: threshold Lap(2·C_obj/ε_BT), each
  query Lap(4·C_obj/ε_BT); Gaussian form with budget ρ_BT: threshold
  N(0, C_obj²·3/(2ρ_BT)), each query N(0, C_obj²·3/ρ_BT). The scales are read
  from the :class:`~fastdp.privacy.events.LineSearchEvent` that describes the
  call, so what is drawn is what is accounted.
* Released: only the index of the first accepted candidate (or failure);
  the step size follows from it and the public η0, β.
* One call is one ``LineSearchEvent`` (privacy paid once per search, however
  many candidates are examined). Subsampling amplification is the caller's
  business (the batch sampler).

The batched kernel (:mod:`fastdp._kernels._line_search`) evaluates all
candidates in one sweep over the batch margins with pre-drawn noise; the
released index has the same law as the sequential loop of Algorithm 1.
"""

from dataclasses import dataclass

import numpy as np

from fastdp._kernels import _line_search as _kernel
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import LineSearchEvent

__all__ = [
    "ARMIJO_SCALES",
    "LineSearchOutcome",
    "armijo_coefficients",
    "candidate_steps",
    "clipped_loss_sums",
    "draw_svt_noise",
    "line_search_event",
    "noisy_backtracking",
]

ARMIJO_SCALES = ("mean", "paper_literal")


@dataclass(frozen=True)
class LineSearchOutcome:
    """Result of one NOISYBTLS call.

    Attributes
    ----------
    index : int
        Index k of the accepted candidate η0·β^k, or −1 on failure (private
        output of the search).
    eta : float
        Accepted step (0.0 on failure, or the fallback step when asked).
    n_examined : int
        Candidates the sequential Algorithm 1 would have examined
        (``index + 1``, or ``max_it`` on failure). Objective evaluations of
        the call are ``n_examined + 1`` (one for f(w)).
    """

    index: int
    eta: float
    n_examined: int

    @property
    def accepted(self):
        return self.index >= 0


def candidate_steps(eta0, beta, max_it):
    """The candidate steps η0·β^k, k = 0..max_it−1, as a float64 array."""
    if not (np.isfinite(eta0) and eta0 > 0):
        raise ValidationError(f"eta0 must be a finite number > 0; got {eta0!r}.")
    if not (0.0 < beta < 1.0):
        raise ValidationError(f"beta must lie in (0, 1); got {beta!r}.")
    if int(max_it) != max_it or max_it < 1:
        raise ValidationError(f"max_it must be an integer >= 1; got {max_it!r}.")
    return float(eta0) * float(beta) ** np.arange(int(max_it), dtype=np.float64)


def armijo_coefficients(w, g, *, alpha, normalizer, mu, armijo_scale="mean"):
    """Public terms ``(slope, curvature)`` of the Armijo query (module docstring).

    Parameters
    ----------
    w, g : ndarray
        Current point and released (noisy) search direction.
    alpha : float
        Armijo constant in (0, 1).
    normalizer : float
        The public m the gradient was divided by (mean form only).
    mu : float
        L2 regularisation strength of ``(μ/2)‖w‖²`` (mean form only).
    armijo_scale : {"mean", "paper_literal"}
    """
    gg = float(np.dot(g, g))
    if armijo_scale == "mean":
        m = float(normalizer)
        return alpha * m * gg - m * mu * float(np.dot(w, g)), 0.5 * m * mu * gg
    if armijo_scale == "paper_literal":
        return alpha * gg, 0.0
    raise ValidationError(f"armijo_scale must be one of {ARMIJO_SCALES}; got {armijo_scale!r}.")


def line_search_event(form, budget, max_it, analysis="paper"):
    """The :class:`LineSearchEvent` of one call (budget ε_BT or ρ_BT)."""
    if form == "laplace":
        return LineSearchEvent.laplace(budget, max_it=max_it, analysis=analysis)
    if form == "gaussian":
        return LineSearchEvent.gaussian(budget, max_it=max_it, analysis=analysis)
    raise ValidationError(f"noise must be 'laplace' or 'gaussian'; got {form!r}.")


def draw_svt_noise(event, c_obj, n_candidates, rng):
    """Threshold noise λ and per-candidate noise ν_1..ν_K of one call.

    λ is drawn first, then the K query noises, from ``rng``; scales are the
    event's :attr:`~LineSearchEvent.threshold_noise` and
    :attr:`~LineSearchEvent.query_noise` times ``c_obj`` (= Δ_q).
    """
    t_scale = event.threshold_noise * c_obj
    q_scale = event.query_noise * c_obj
    if event.form == "laplace":
        lam = rng.laplace(0.0, t_scale)
        nu = rng.laplace(0.0, q_scale, size=n_candidates)
    else:
        lam = rng.normal(0.0, t_scale)
        nu = rng.normal(0.0, q_scale, size=n_candidates)
    return float(lam), np.asarray(nu, dtype=np.float64)


def clipped_loss_sums(z, u, y, etas, loss_code, c_obj):
    """The K + 1 clipped loss sums of a search: at ``w`` and at every ``w − etas[k]·g``.

    ``z``, ``u``: the batch margins ``x_i·w``, ``x_i·g`` (arrays), or the
    margin handles of a data-parallel batch oracle
    (:mod:`fastdp.distributed.data_parallel.line_search`), whose sums are
    computed where the rows are and added in shard order.
    """
    if hasattr(z, "clipped_loss_sums"):
        return z.clipped_loss_sums(u, etas, loss_code, c_obj)
    sums = np.empty(etas.shape[0] + 1)
    _kernel.clipped_loss_sums(z, u, y, etas, loss_code, float(c_obj), sums)
    return sums


def noisy_backtracking(z, u, y, *, loss_code, c_obj, etas, slope, curvature, event, rng,
                       fallback_step=0.0, noise_free=False):
    """One NOISYBTLS call over precomputed batch margins (see module docstring).

    Parameters
    ----------
    z, u : float64 arrays (b,)
        ``x_i·w`` and ``x_i·g`` for the batch rows.
    y : float64 array (b,)
    loss_code : int
        Kernel loss code (:data:`fastdp._kernels._line_search.LOSS_CODES`).
    c_obj : float
        Objective clipping threshold = sensitivity Δ_q of the queries.
    etas : float64 array (K,)
        Candidate steps (:func:`candidate_steps`).
    slope, curvature : float
        Public terms (:func:`armijo_coefficients`).
    event : LineSearchEvent
        What this call releases; sets the noise scales.
    rng : numpy.random.Generator
        Noise stream (λ then ν_1..ν_K are drawn, even if the search stops
        early; the released index has the law of the sequential loop).
    fallback_step : float, default 0.0
        Step returned when no candidate is accepted: 0 (convex mode) or
        β^K·η0 (NN mode, spec 003 §3.8). It is public (a function of η0, β, K).
    noise_free : bool
        **Test hook, not private**: draw no noise (λ = ν = 0), giving the
        classic Armijo backtracking. Never use it for a release.

    Returns
    -------
    LineSearchOutcome
    """
    n_cand = etas.shape[0]
    if noise_free:
        lam, nu = 0.0, np.zeros(n_cand)
    else:
        lam, nu = draw_svt_noise(event, c_obj, n_cand, rng)
    # the fused kernel's three steps; the sums may come from a data-parallel oracle
    sums = clipped_loss_sums(z, u, y, etas, loss_code, c_obj)
    queries = np.empty(n_cand)
    _kernel.armijo_queries(sums, etas, float(slope), float(curvature), queries)
    index = int(_kernel.first_above(queries, lam, nu))
    if index >= 0:
        return LineSearchOutcome(index, float(etas[index]), index + 1)
    return LineSearchOutcome(-1, float(fallback_step), n_cand)
