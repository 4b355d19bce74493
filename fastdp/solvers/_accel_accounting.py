"""Pure ε-DP accounting of the Laplace-perturbed gradients of spec 002.

Every accelerated solver of :mod:`fastdp.solvers.accelerated` releases, at
each iteration k, one noisy (mini-batch) gradient ``g_k + η_k`` with i.i.d.
Laplace coordinates.  This module holds the closed forms of spec 002,
section 3, and builds the privacy event of a run.

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

from fastdp.exceptions import ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.pure import amplify_without_replacement

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


def _positive(name, value, allow_inf=False):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number > 0; got {value!r}") from None
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        raise ValidationError(f"{name} must be a {'' if allow_inf else 'finite '}number > 0; "
                              f"got {value!r}")
    return value


def _sizes(n, batch_size):
    if (isinstance(n, bool) or isinstance(batch_size, bool) or int(n) != n
            or int(batch_size) != batch_size or not 1 <= batch_size <= n):
        raise ValidationError(
            f"need integers 1 <= batch_size <= n; got batch_size={batch_size!r}, n={n!r}")
    return int(n), int(batch_size)


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
    sensitivity = _positive("sensitivity", sensitivity)
    scale = _positive("scale", scale, allow_inf=True)
    n, m = _sizes(n, batch_size)
    if m == n:
        return sensitivity / (scale * n)
    return amplify_without_replacement(sensitivity / (scale * m), m, n)


def b_for_eps(sensitivity, epsilon, n, batch_size):
    """Laplace scale whose step costs exactly ``epsilon`` (inverse of :func:`eps_step`).

    ``S1 / (m log(1 + (n/m)(e^ε − 1)))``, with ``log1p``/``expm1``;
    ``S1/(n ε)`` when ``m = n``.  ``epsilon = inf`` gives 0 (no noise).
    """
    sensitivity = _positive("sensitivity", sensitivity)
    epsilon = _positive("epsilon", epsilon, allow_inf=True)
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
    epsilon = _positive("epsilon", epsilon, allow_inf=True)
    n, m = _sizes(n, batch_size)
    return _inverse_amplification(epsilon / int(n_iter), n / m)


def uniform_scales(sensitivity, epsilon, n_iter, n, batch_size):
    """Laplace scales ``b = S1/(m ε0)`` of Prop. 3.1: every step costs ``ε/T``."""
    b = b_for_eps(sensitivity, _positive("epsilon", epsilon, allow_inf=True) / int(n_iter),
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


def drawn_scales(scales, noise_convention):
    """Laplace scales actually drawn for nominal scales b under ``noise_convention``."""
    if noise_convention not in NOISE_CONVENTIONS:
        raise ValidationError(
            f"noise_convention must be one of {NOISE_CONVENTIONS}; got {noise_convention!r}")
    scales = np.asarray(scales, dtype=np.float64)
    return scales / math.sqrt(2.0) if noise_convention == "reference_code" else scales.copy()


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
    sensitivity = _positive("sensitivity", sensitivity)
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


def subsampling_variance_bound(sensitivity, n, batch_size):
    """σ_s²(m, n) = (S1²/4)(1/m)(n − m)/(n − 1): bound on E‖v_t‖² (Prop 3.3, eq. 3.13)."""
    sensitivity = _positive("sensitivity", sensitivity)
    n, m = _sizes(n, batch_size)
    if m == n:
        return 0.0
    return sensitivity ** 2 / 4.0 / m * (n - m) / (n - 1)


def noise_second_moment(scale, n_features, sensitivity, n, batch_size):
    """E‖w_t‖² ≤ 2 d b² + σ_s²(m, n): what the proofs need (spec 002, section 7, A3)."""
    return (2.0 * int(n_features) * float(scale) ** 2
            + subsampling_variance_bound(sensitivity, n, batch_size))
