"""The private centre and scale of regression targets, paid inside the fit's epsilon.

:class:`DPRidge` trains on ``y' = (y - m) / S`` and releases
``S coef`` and ``S intercept + m``: the noise of every solver is calibrated to
a row bound and (DP-SGD, DP-SCD) a clip, never to the targets' scale, so on
raw targets (house prices ~ 1e5) the clipped updates cannot move the model
far enough and the predictions sit near 0 (cal_housing: R^2 = -3.15 at
epsilon = 1).  ``m`` and ``S`` come from three exponential mechanisms run
before training (a user's public ``target_bound`` replaces them at no cost).

Mechanism
---------
Each statistic is a private quantile q: a cell ``(c_(j-1), c_j]`` of a public
grid chosen by the exponential mechanism with utility ``u_j = -dist(q n,
[#{v <= c_(j-1)}, #{v <= c_j}])`` (0 for the cell that holds the quantile;
sampled exactly with the Gumbel-max trick), released as its upper edge:

1. bound ``B = 2^(k + 1)``: ``2^k`` the median of ``|y|`` over the magnitudes
   ``2^k``, ``k = -32 .. 32`` (``|median(y)| <= median(|y|)``, so ``[-B, B]``
   holds the median of y up to the mechanism's rank error);
2. centre ``m``: the median of ``y`` over 4097 equally spaced points of
   ``[-B, B]``;
3. scale ``S = 2 * 2^k``: ``2^k`` the cell of the median of ``|y - m|`` (the
   median absolute deviation, MAD) over the magnitudes, so S is 2 to 4 MADs
   (1.35 to 2.7 standard deviations of a normal sample).  The targets are not
   clipped: a larger scaled target keeps more of the per-example gradients at
   the clip, where the signal-to-noise ratio is best (a Huber-like fit), a
   smaller one loses signal against the same noise.  The factor was chosen
   leave-one-dataset-out among 1, 2 and 4 on abalone, cpusmall, cal_housing and
   bodyfat (sum of the median R^2 at epsilon = 0.1, 1, 8): 2 won with abalone,
   cal_housing or bodyfat left out, 1 with cpusmall left out (factor 4:
   abalone at epsilon = 0.1 -0.06, factor 2: 0.21; cpusmall 0.71 and 0.66).

Cells, not points: every cell away from the data has a utility near
``-q n`` or ``-(1 - q) n``, which the budget below makes far less likely than
the quantile's cell (points rather than cells could not tell 2^-47 from 64
when every target of cpusmall lies in (64, 128]; a 0.95 quantile of points
left the cells above the data at ``-0.05 n``, a rank error the rule accepted,
and picked ``2^63`` on cal_housing).

* Private: the targets (and through them the examples).  Adjacency:
  add/remove one example.  Sensitivity of each utility: adding or removing
  one example changes each count by 0 or 1 and ``q n`` by q, so the
  distance moves by at most 1 (n need not be public for this bound).
* Each step is ``ExponentialMechanismEvent(epsilon_i)`` (pure epsilon_i-DP);
  the three compose with the training event in one ``ComposedEvent``, which
  the noise of the training is calibrated against, so the reported
  ``epsilon_`` covers them.
* Released: ``m`` and ``S`` (as the fitted ``target_centre_`` and
  ``target_scale_``, and inside ``coef_`` and ``intercept_``).

The floor (public: n and epsilon)
---------------------------------
A private model is not worth releasing when even the targets' centre and
scale cannot be estimated to their rank accuracy with the whole budget
(``constant_only``: the three ``epsilon_i`` below sum to more than epsilon,
``n epsilon`` below about 205), or when ``n epsilon < 20 d`` (d features with
the intercept column; the noise of a private linear model grows as
``d / (n epsilon)``: with DP-SGD on the scaled targets, median of 3 seeds, pyrim
at n epsilon / d = 5.9 and 15.7 scored R^2 -1.2 and -1.3, abalone at 28.5 0.21,
cpusmall on 189 rows at 43.6 0.66, bodyfat at 100 0.70; every threshold in
(15.7, 28.5) separates them, and 20 still does with any one set left out).
There ``DPRidge`` releases the constant predictor ``m`` (``coef_ = 0``), the three steps sharing all of epsilon, and
warns; no training run spends budget.  With a public ``target_bound`` the same
rule releases :func:`bounded_mean`, a Laplace mean of the clipped targets
(a private fit at n epsilon = 200 on scikit-learn's check data scored R^2
-1.6 to 0.58 over 5 seeds, the mean about 0).  Above it the fit trains on the scaled
targets, and the model starts at ``m`` (``theta = 0`` predicts ``m``), so a
noise-dominated run stays near the constant.

Budget rule (public: n and epsilon)
-----------------------------------
The exponential mechanism's output has rank error at most
``2 ln(G / beta) / epsilon_i`` with probability ``1 - beta`` (G candidates).
Asking for a rank error of ``tau_i n`` (beta = 0.05, tau = 0.25: the median within
the quartiles) gives

    epsilon_i = 2 ln(G_i / beta) / (tau_i n)      (G = 65, 4097, 65)

about ``205 / n`` in all; the three take at most half of the fit's epsilon
(scaled down together above that, with a warning: the rank error is then
larger than ``tau n``).
"""

import math
import warnings

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import ComposedEvent, ExponentialMechanismEvent, LaplaceEvent

__all__ = ["MAGNITUDES", "CENTRE_GRID_SIZE", "QUANTILES", "SCALE_FACTOR", "RANK_FRACTIONS",
           "FAILURE", "target_budget", "constant_only", "MIN_SIGNAL_PER_FEATURE", "target_event",
           "private_target_scale", "public_target_scale", "TargetScale",
           "bounded_mean", "bounded_mean_event", "warn_if_coarse"]

#: exponents k of the public magnitude grid 2^k (bound and scale)
MAGNITUDES = np.arange(-32, 33)
#: points of the public grid of the centre in [-B, B]
CENTRE_GRID_SIZE = 4097
#: the quantiles of the three steps: medians of |y| (bound), y (centre), |y - m| (scale)
QUANTILES = (0.5, 0.5, 0.5)
#: S is this many times the private MAD cell's upper edge 2^k
SCALE_FACTOR = 2.0
#: tau_i: the rank error the budget rule asks of each step, as a fraction of n
RANK_FRACTIONS = (0.25, 0.25, 0.25)
#: beta: the probability that the rank error exceeds it
FAILURE = 0.05
#: the largest share of the fit's epsilon the three statistics may take
MAX_SHARE = 0.5


class TargetScale:
    """The map of the targets: ``y' = (y - centre) / scale``, clipped to [-1, 1] for a
    public bound (the private estimate is not a bound: the solvers' clip bounds every
    update whatever the targets, and clipping cpusmall's long lower tail at 4 MADs
    cost R^2 0.81 -> 0.49 at epsilon = 8).

    Attributes
    ----------
    centre, scale : float
    event : DpEvent or None
        The event that released them (None for a public bound).
    clip : bool
        Clip ``y'`` to [-1, 1] (a public bound).
    """

    def __init__(self, centre, scale, event=None, clip=False):
        self.centre = float(centre)
        self.scale = float(scale)
        self.event = event
        self.clip = bool(clip)

    def apply(self, y):
        """The training targets ``(y - centre) / scale`` (clipped to [-1, 1] if ``clip``)."""
        scaled = (np.asarray(y, dtype=np.float64) - self.centre) / self.scale
        return np.clip(scaled, -1.0, 1.0) if self.clip else scaled


def _wanted_budget(n_samples):
    """``epsilon_i = 2 ln(G_i / beta) / (tau_i n)`` of the three steps."""
    sizes = (MAGNITUDES.size, CENTRE_GRID_SIZE, MAGNITUDES.size)
    return [2.0 * math.log(g / FAILURE) / (tau * float(n_samples))
            for g, tau in zip(sizes, RANK_FRACTIONS)]


#: the floor's least n epsilon per feature (d counting the intercept column)
MIN_SIGNAL_PER_FEATURE = 20.0


def constant_only(n_samples, epsilon, n_features=1):
    """The floor rule: True when the three steps at their rank accuracy need more than
    the whole ``epsilon`` (``n epsilon`` below about 205), or when ``n epsilon < 20 d``
    (``d``: the features, intercept column included); the fit then releases the private
    centre alone (a constant predictor), with all of epsilon spent on it."""
    return (sum(_wanted_budget(n_samples)) > float(epsilon)
            or float(n_samples) * float(epsilon) < MIN_SIGNAL_PER_FEATURE * float(n_features))


def target_budget(n_samples, epsilon, share=MAX_SHARE):
    """``(epsilon_1, epsilon_2, epsilon_3)`` of the bound, centre and scale, and whether capped.

    ``epsilon_i = 2 ln(G_i / beta) / (tau_i n)``, scaled down together when their
    sum is above ``share * epsilon`` (``MAX_SHARE`` next to a training run, 1 for
    the constant predictor).  Public quantities only (n, epsilon).
    """
    wanted = _wanted_budget(n_samples)
    cap = float(share) * float(epsilon)
    total = sum(wanted)
    if total <= cap:
        return tuple(wanted), False
    return tuple(e * cap / total for e in wanted), True


def _private_quantile(values, edges, quantile, epsilon, rng):
    """Exponential mechanism over the cells ``(edges[j - 1], edges[j]]``: the upper edge of
    a cell drawn with probability ``exp(epsilon u_j / 2)`` (Gumbel-max trick), with
    ``u_j = -dist(quantile n, [#{v <= edges[j - 1]}, #{v <= edges[j]}])`` (0 for the cell
    holding the quantile; ``edges[-1]`` is -inf).  Sensitivity 1 (module docstring)."""
    counts = np.searchsorted(np.sort(values), edges, side="right").astype(np.float64)
    below = np.concatenate(([0.0], counts[:-1]))
    target = quantile * values.size
    utility = -np.maximum(0.0, np.maximum(below - target, target - counts))
    scores = 0.5 * epsilon * utility + rng.gumbel(size=edges.size)
    return float(edges[int(np.argmax(scores))])


def private_target_scale(y, epsilon, rng, share=MAX_SHARE):
    """The private centre and scale of ``y`` (see the module docstring).

    Parameters
    ----------
    y : ndarray of shape (n,)
        The private targets (finite).
    epsilon : float
        The fit's target epsilon (the rule :func:`target_budget` takes its share).
    rng : numpy.random.Generator
        The stream of the three draws.
    share : float, default MAX_SHARE
        The largest share of epsilon the three steps may take.

    Returns
    -------
    TargetScale
    """
    y = np.asarray(y, dtype=np.float64)
    (e_bound, e_centre, e_scale), _ = target_budget(y.size, epsilon, share)
    magnitudes = np.ldexp(1.0, MAGNITUDES)
    bound = 2.0 * _private_quantile(np.abs(y), magnitudes, QUANTILES[0], e_bound, rng)
    grid = np.linspace(-bound, bound, CENTRE_GRID_SIZE)
    centre = _private_quantile(y, grid, QUANTILES[1], e_centre, rng)
    scale = SCALE_FACTOR * _private_quantile(np.abs(y - centre), magnitudes, QUANTILES[2],
                                             e_scale, rng)
    return TargetScale(centre, scale, target_event(y.size, epsilon, share))


def target_event(n_samples, epsilon, share=MAX_SHARE):
    """The event of :func:`private_target_scale` (known before anything is drawn)."""
    budget, _ = target_budget(n_samples, epsilon, share)
    return ComposedEvent(tuple(ExponentialMechanismEvent(e) for e in budget))


def public_target_scale(target_bound):
    """The map of a public bound ``(low, high)``: centre ``(low + high) / 2``, scale
    ``(high - low) / 2``; no privacy cost (the bound is public)."""
    try:
        low, high = (float(v) for v in target_bound)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"target_bound must be None or a pair (low, high) of finite numbers; got "
            f"{target_bound!r}.") from exc
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValidationError(
            f"target_bound must be a pair (low, high) of finite numbers with low < high; got "
            f"{target_bound!r}.")
    return TargetScale(0.5 * (low + high), 0.5 * (high - low), clip=True)


def bounded_mean(y, target_scale, epsilon, rng):
    """The floor's constant under a public bound: a Laplace mean of the clipped targets.

    ``m = c + (sum_i (clip(y_i, low, high) - c) + Lap(S / epsilon)) / n``, clipped to
    the bound.  Private: the targets; adjacency add/remove with n public (as every
    fastdp estimator treats it); sensitivity of the sum ``S = (high - low) / 2``;
    released: m.  Returns ``(m, LaplaceEvent(1 / epsilon))`` (pure epsilon-DP).
    """
    c, S = target_scale.centre, target_scale.scale
    centred = np.clip(np.asarray(y, dtype=np.float64), c - S, c + S) - c
    noisy = (centred.sum() + rng.laplace(0.0, S / float(epsilon))) / centred.size
    return float(c + np.clip(noisy, -S, S)), bounded_mean_event(epsilon)


def bounded_mean_event(epsilon):
    """The event of :func:`bounded_mean`: ``LaplaceEvent(1 / epsilon)``."""
    return LaplaceEvent(1.0 / float(epsilon))


def warn_if_coarse(n_samples, epsilon, share=MAX_SHARE, stacklevel=4):
    """Warn, before anything is drawn, when the budget rule had to cap the statistics'
    share (n epsilon too small for the rank error ``tau n``), or when the floor rule
    releases a constant predictor."""
    if share >= 1.0:
        warnings.warn(
            f"with n = {n_samples} examples at epsilon = {epsilon:g} a private linear model "
            "would be noisier than a constant: DPRidge releases the private median of the "
            "targets (coef_ = 0, the floor rule of fastdp.linear_model._target_scale)"
            + (", itself coarse at this n epsilon" if target_budget(n_samples, epsilon,
                                                                    share)[1] else "")
            + "; pass a public target_bound=(low, high) to train a model.",
            UserWarning, stacklevel=stacklevel)
    elif target_budget(n_samples, epsilon, share)[1]:
        warnings.warn(
            f"with n = {n_samples} examples at epsilon = {epsilon:g} the private estimate of "
            "the targets' centre and scale is coarse (it gets half the budget and still "
            "misses its rank accuracy); pass a public target_bound=(low, high) if you know "
            "one.", UserWarning, stacklevel=stacklevel)
