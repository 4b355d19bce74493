"""numba kernels of the batched noisy backtracking line search (spec 003, §3.1).

This module holds compiled inner loops only: no I/O, no privacy decisions and
no random draws. The caller (:mod:`fastdp.solvers.line_search.search`) computes the
margins of the batch once per iteration (``z_i = x_i·w`` and ``u_i = x_i·g``,
one pass over the rows of the batch), draws the sparse-vector noise
(threshold ``lam``, per-candidate ``nu``) from its own generator and passes
everything in. The kernels then evaluate every candidate step
``eta_k = eta0·beta^k`` over the batch in **one** sweep over the margins, with
no further pass over ``X``: the margin of example ``i`` at ``w − eta_k·g`` is
``z_i − eta_k·u_i``.

Passing the noise in keeps the kernels deterministic: tests compare them with
a plain numpy reference and with a sequential Algorithm-1 loop bit for bit
(the index released), which is how the spec defines correctness. Only the
index of the first accepted candidate is a private output; the clipped sums
and queries computed here are intermediate values that the caller must not
release.

Losses (``loss_code``, a member of ``fastdp._kernels._losses.LossCode``), all ``>= 0``
(the same formulas as ``_losses.pxd``, which numba cannot cimport; the tests
compare them):

=================  ========================  ===========================
code               loss(z, y)                stable form used
=================  ========================  ===========================
``LOSS_SQUARED``   (z − y)² / 2
``LOSS_LOGISTIC``  log(1 + exp(−y z))        max(−t, 0) + log1p(exp(−|t|)), t = y z
``LOSS_HINGE``     max(0, 1 − y z)
=================  ========================  ===========================

Every per-example value is clipped to ``min(loss, c_obj)`` (objective
clipping, spec 003 §1.3); ``c_obj = inf`` disables clipping.

Argument checks
---------------
No argument can make a kernel read or write out of bounds: every entry point
checks the lengths of its arrays first (O(1)) and raises
:class:`fastdp.exceptions.ValidationError` when they disagree (``u`` and
``y`` as long as ``z``; ``out``/``sums`` one longer than ``etas``; ``nu`` and
the queries as long as ``etas``).
"""

import numpy as np
from numba import njit

from fastdp._kernels._losses import LossCode
from fastdp.exceptions import ValidationError

__all__ = [
    "LOSS_SQUARED",
    "LOSS_LOGISTIC",
    "LOSS_HINGE",
    "LOSS_CODES",
    "clipped_loss",
    "clipped_loss_sums",
    "armijo_queries",
    "first_above",
    "noisy_backtracking",
]

# The loss codes of every kernel (one definition: ``_losses.pxd``), as plain
# ints, which numba compiles in as constants.
LOSS_SQUARED = int(LossCode.SQUARED)
LOSS_LOGISTIC = int(LossCode.LOGISTIC)
LOSS_HINGE = int(LossCode.HINGE)

#: canonical loss name -> kernel code (read off the enum, not a second table)
LOSS_CODES = {code.name.lower(): int(code) for code in LossCode}


@njit(cache=True, inline="always")
def clipped_loss(loss_code, z, y, c_obj):
    """min(loss(z, y), c_obj) for one example (see the module table)."""
    if loss_code == LOSS_LOGISTIC:
        t = y * z
        if t >= 0.0:
            value = np.log1p(np.exp(-t))
        else:
            value = -t + np.log1p(np.exp(t))
    elif loss_code == LOSS_HINGE:
        value = 1.0 - y * z
        if value < 0.0:
            value = 0.0
    else:
        d = z - y
        value = 0.5 * d * d
    if value > c_obj:
        return c_obj
    return value


@njit(cache=True)
def clipped_loss_sums(z, u, y, etas, loss_code, c_obj, out):
    """Sums of clipped losses at ``w`` and at every candidate ``w − eta_k g``.

    One sweep over the batch: ``out[0] = Σ_i min(loss(z_i, y_i), c_obj)`` and
    ``out[k + 1] = Σ_i min(loss(z_i − etas[k]·u_i, y_i), c_obj)``.

    Parameters
    ----------
    z, u, y : float64 arrays of shape (b,)
        Margins ``x_i·w``, ``x_i·g`` and labels of the batch rows.
    etas : float64 array of shape (K,)
        Candidate steps.
    loss_code : int
    c_obj : float
        Clipping threshold of the per-example loss (> 0, may be inf).
    out : float64 array of shape (K + 1,)
        Overwritten.

    Raises
    ------
    ValidationError
        Unless ``len(u) == len(y) == len(z)`` and ``len(out) == len(etas) + 1``.
    """
    n_cand = etas.shape[0]
    if u.shape[0] != z.shape[0] or y.shape[0] != z.shape[0]:
        raise ValidationError("clipped_loss_sums: z, u and y need one entry per batch row "
                              "(the same length).")
    if out.shape[0] != n_cand + 1:
        raise ValidationError("clipped_loss_sums: out needs len(etas) + 1 entries.")
    for k in range(n_cand + 1):
        out[k] = 0.0
    for i in range(z.shape[0]):
        zi = z[i]
        ui = u[i]
        yi = y[i]
        out[0] += clipped_loss(loss_code, zi, yi, c_obj)
        for k in range(n_cand):
            out[k + 1] += clipped_loss(loss_code, zi - etas[k] * ui, yi, c_obj)


@njit(cache=True)
def armijo_queries(sums, etas, slope, curvature, out):
    """Armijo queries from the clipped sums (spec 003 §3.1).

    ``out[k] = sums[0] − sums[k + 1] − slope·etas[k] − curvature·etas[k]²``.
    ``slope`` and ``curvature`` are public given the released gradient (the
    Armijo term and the exact regulariser difference), so the query's
    sensitivity is that of the clipped sums.  Raises ValidationError unless
    ``len(sums) == len(etas) + 1`` and ``len(out) == len(etas)``.
    """
    if sums.shape[0] != etas.shape[0] + 1 or out.shape[0] != etas.shape[0]:
        raise ValidationError("armijo_queries: need len(sums) == len(etas) + 1 and "
                              "len(out) == len(etas).")
    for k in range(etas.shape[0]):
        eta = etas[k]
        out[k] = sums[0] - sums[k + 1] - slope * eta - curvature * eta * eta


@njit(cache=True)
def first_above(queries, lam, nu):
    """AboveThreshold with pre-drawn noise: the first ``k`` with
    ``queries[k] + nu[k] >= lam`` (ties accept), or −1 if there is none.
    Raises ValidationError unless ``len(nu) == len(queries)`` (one noise per query)."""
    if nu.shape[0] != queries.shape[0]:
        raise ValidationError("first_above: nu needs one noise value per query "
                              "(len(nu) == len(queries)).")
    for k in range(queries.shape[0]):
        if queries[k] + nu[k] >= lam:
            return k
    return -1


@njit(cache=True)
def noisy_backtracking(z, u, y, etas, loss_code, c_obj, slope, curvature, lam, nu,
                       sums_out, queries_out):
    """Batched NOISYBTLS over precomputed margins: clipped sums, queries, SVT.

    Returns the index of the first accepted candidate (−1: failure). The
    intermediate ``sums_out`` (K + 1) and ``queries_out`` (K) are filled for
    tests and diagnostics; they are **not** private outputs.  Every length is
    checked (ValidationError), see the module docstring.
    """
    clipped_loss_sums(z, u, y, etas, loss_code, c_obj, sums_out)
    armijo_queries(sums_out, etas, slope, curvature, queries_out)
    return first_above(queries_out, lam, nu)
