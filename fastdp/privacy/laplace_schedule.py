"""Closed-form pure ε-DP accounting of Laplace-perturbed batch-mean gradients (spec 002).

The accelerated solvers of :mod:`fastdp.solvers.accelerated` release, at each
iteration k, one noisy (mini-batch) gradient ``g_k + η_k`` with i.i.d. Laplace
coordinates of scale ``b_k``.  This module holds the closed forms of spec 002,
section 3 (the ε of one step, the scale that costs a given ε, the uniform
split of a budget) and builds the privacy event of a schedule; the solvers ask
it and never compute ε themselves.

Privacy model (spec 002, section 1.2)
-------------------------------------
* Private: the records ``y_1..y_n`` (rows and labels).  ``n`` is public.
* Adjacency: replace-one record (Hamming distance 1, same ``n``).
* Sensitivity: ``S1`` bounds ``||∇f(x; y) − ∇f(x; y')||_1`` over records and
  x (Assumption 3.2), so the mean over a batch of ``m`` records has
  replace-one L1 sensitivity ``S1 / m``.
* Released: every noisy gradient, hence every iterate ``x_1..x_T``.
* Per step: a Laplace mechanism of scale ``b`` on the batch mean is
  ``ε0 = S1 / (b m)``-DP for the batch; sampling the batch of ``m`` of ``n``
  records without replacement (Balle, Barthe, Gaboardi 2018, Thm 9) makes it
  ``ε_step = log(1 + (m/n)(e^{ε0} − 1))``-DP for the dataset (eq. 3.3).
* The run: basic composition, ``ε = Σ_k ε_step(b_k)`` (Thm A.2), δ = 0.

The pure-DP accountant (:class:`~fastdp.privacy.pure.PureDPAccountant`) gives
the same ε for :func:`laplace_schedule_event` (to rounding), and
:class:`~fastdp.privacy.filters.PureDpBudget` is the filter form.
"""

import math

import numpy as np

from fastdp._validation import check_integer, check_positive
from fastdp.exceptions import ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.pure import amplify_without_replacement

__all__ = [
    "eps_step",
    "step_epsilons",
    "b_for_eps",
    "eps0_uniform",
    "uniform_scales",
    "total_epsilon",
    "laplace_schedule_event",
]


def _sizes(n, batch_size):
    """(n, m) as ints with 1 <= m <= n (integral floats accepted)."""
    n = check_integer("n", n, low=1, allow_integral_float=True)
    return n, check_integer("batch_size", batch_size, low=1, high=n, allow_integral_float=True)


def eps_step(sensitivity, scale, n, batch_size):
    """ε of one Laplace-perturbed batch-mean gradient (spec 002, eq. 3.3).

    ``log(1 + (m/n)(exp(S1/(b m)) − 1))``; equals ``S1/(b n)`` when ``m = n``.

    Parameters
    ----------
    sensitivity : float
        S1, replace-one L1 sensitivity of one record's gradient.
    scale : float
        Laplace scale b actually drawn (``inf`` costs nothing).
    n, batch_size : int
        Dataset size n and batch size m (batches drawn without replacement).

    Notes
    -----
    Private: the n records; adjacency replace-one; sensitivity of the batch
    mean S1/m; released: one noisy gradient.
    """
    sensitivity = check_positive("sensitivity", sensitivity)
    scale = check_positive("scale", scale, allow_inf=True)
    n, m = _sizes(n, batch_size)
    if m == n:
        return sensitivity / (scale * n)
    return amplify_without_replacement(sensitivity / (scale * m), m, n)


def step_epsilons(scales, sensitivity, n, batch_size):
    """ε_step of every step of a schedule with Laplace scales ``scales`` (an array).

    Their basic composition (:func:`fastdp.privacy.pure.basic_composition`)
    is the pure ε of the run.
    """
    return np.array([eps_step(sensitivity, b, n, batch_size)
                     for b in np.asarray(scales, dtype=np.float64).ravel()])


def b_for_eps(sensitivity, epsilon, n, batch_size):
    """Laplace scale whose step costs exactly ``epsilon`` (inverse of :func:`eps_step`).

    ``S1 / (m log(1 + (n/m)(e^ε − 1)))``, with ``log1p``/``expm1``;
    ``S1/(n ε)`` when ``m = n``.  ``epsilon = inf`` gives 0 (no noise).
    """
    sensitivity = check_positive("sensitivity", sensitivity)
    epsilon = check_positive("epsilon", epsilon, allow_inf=True)
    n, m = _sizes(n, batch_size)
    if math.isinf(epsilon):
        return 0.0
    if m == n:
        return sensitivity / (n * epsilon)
    return sensitivity / (m * _inverse_amplification(epsilon, n / m))


def _inverse_amplification(epsilon, ratio):
    """ε0 with log(1 + (1/ratio)(e^{ε0} − 1)) = ε, i.e. log(1 + ratio (e^ε − 1))."""
    if epsilon > 700.0:
        return epsilon + math.log(ratio) + math.log1p((1.0 - 1.0 / ratio) * math.exp(-epsilon))
    return math.log1p(ratio * math.expm1(epsilon))


def eps0_uniform(epsilon, n_iter, n, batch_size):
    """Batch-level ε0 of each of ``n_iter`` equal steps spending ``epsilon`` (eq. 3.5)."""
    epsilon = check_positive("epsilon", epsilon, allow_inf=True)
    n, m = _sizes(n, batch_size)
    return _inverse_amplification(epsilon / int(n_iter), n / m)


def uniform_scales(sensitivity, epsilon, n_iter, n, batch_size):
    """Laplace scales ``b = S1/(m ε0)`` of Prop. 3.1: every step costs ``ε/T``."""
    b = b_for_eps(sensitivity, check_positive("epsilon", epsilon, allow_inf=True) / int(n_iter),
                  n, batch_size)
    return np.full(int(n_iter), b)


def total_epsilon(scales, sensitivity, n, batch_size):
    """Σ_k ε_step(S1, b_k, n, m): the pure ε of a run with Laplace scales ``scales``.

    The scales are those actually drawn (basic composition, δ = 0).  A zero
    scale means no noise and gives ``inf``.
    """
    scales = np.asarray(scales, dtype=np.float64).ravel()
    if np.any(scales == 0.0):
        return math.inf
    values, counts = np.unique(scales, return_counts=True)
    return math.fsum(eps_step(sensitivity, b, n, batch_size) * c for b, c in zip(values, counts))


def _step_event(scale, sensitivity, n, m):
    base = ev.LaplaceEvent(scale * m / sensitivity, ev.Adjacency.REPLACE_ONE)
    return base if m == n else ev.FixedSizeSampledEvent(n, m, base)


def laplace_schedule_event(scales, sensitivity, n, batch_size):
    """Privacy event of a run drawing Laplace noise of the given (actual) scales.

    Step k is ``LaplaceEvent(b_k m / S1, replace-one)`` (the scale relative to
    the batch-mean sensitivity S1/m), wrapped in ``FixedSizeSampledEvent(n, m)``
    when ``m < n``.  Runs of equal scales become one ``SelfComposedEvent``; a
    run with several distinct scales is their ``ComposedEvent`` in step order.
    All-zero scales (no noise) give ``NonPrivateEvent``.

    The pure accountant (``fastdp.privacy.pure.PureDPAccountant``) then
    computes exactly :func:`total_epsilon`.
    """
    scales = np.asarray(scales, dtype=np.float64).ravel()
    sensitivity = check_positive("sensitivity", sensitivity)
    n, m = _sizes(n, batch_size)
    if scales.size == 0:
        raise ValidationError("a run needs at least one step")
    if np.all(scales == 0.0):
        return ev.NonPrivateEvent()
    if np.any(scales <= 0.0) or not np.all(np.isfinite(scales)):
        raise ValidationError("Laplace scales must all be finite and > 0 (or all 0: not private)")
    groups = []
    start = 0
    for k in range(1, scales.size + 1):
        if k == scales.size or scales[k] != scales[start]:
            step = _step_event(float(scales[start]), sensitivity, n, m)
            groups.append(ev.SelfComposedEvent(step, k - start))
            start = k
    return groups[0] if len(groups) == 1 else ev.ComposedEvent(tuple(groups))
