# cython: language_level=3
# (boundscheck, wraparound, cdivision and initializedcheck come from setup.py, so that
# FASTDP_DEBUG_KERNELS=1 builds a bounds-checked debug version; a directive here would win)
"""Shared sparse GLM kernels: margins and (clipped) per-example gradient sums over CSR rows.

Every solver family that needs ``X_B theta`` or ``sum_{i in B} grad loss_i``
on a subset B of the rows calls these (DP-SGD, the accelerated methods, the
line search, the perturbation baselines' L-BFGS).  C-level pieces for other
kernels are in ``_glm.pxd``.

Array contract (every entry point)
----------------------------------
* ``data``: float32 or float64; ``indices``, ``indptr``: int32 or int64, the
  same type; C-contiguous 1-D arrays of a CSR matrix with column indices
  sorted within each row (``fastdp._validation.check_X`` output).  Nothing is
  copied or converted; a mismatched dtype raises ``TypeError`` or
  ``ValueError`` (buffer dtype mismatch).
* ``rows``: int64 row numbers (any order, repeats allowed), each in
  ``[0, len(indptr) - 1)``.
* ``theta``, ``y``, ``weights``, ``out``: float64, C-contiguous.  Every column
  index of the rows read must be ``< len(theta)`` and ``< len(out)``.
* Accumulation is in float64, in a fixed order (rows in the order given,
  entries in storage order).

Checks
------
Every entry point refuses, with ``fastdp.exceptions.ValidationError``, any
argument that could make it read or write out of bounds (``_checks.pxd``).  Always (O(1) or O(len(rows))): the array lengths,
``indptr[0] == 0``, ``indptr[-1] == len(indices) <= len(data)``, every row
number in range, ``1 <= num_threads <= 1024``; and the CSR structure of the
rows read, one pass over their column indices:
``0 <= indptr[j] <= indptr[j + 1] <= nnz`` and column indices strictly
increasing within ``[0, n_features)``.  Only that pass can be skipped, and only
with proof: ``check_structure=fastdp._validation.structure_token(X)`` for the
arrays of that very X (O(1) for a matrix ``check_X`` returned; the fastdp
solvers).  ``check_structure=True`` or ``False`` both scan (``False`` used to
skip the scan, which let a bad column index crash the process).

Threads
-------
``num_threads > 1`` splits independent work: the per-row margins and
coefficients (``prange`` over rows), then the scatter into ``out`` with the
columns split among threads; each column still receives its updates in row
order, so results are bit-identical for any thread count.  Each call takes
the parallel or the serial path as a timing gate per entry point decides
(``_gate.pxd: ParallelGate``, opened by :func:`_open_gate`), so threads never
cost much more than one on a busy machine; the bits do not depend on the path.

Privacy: these kernels read private data and release nothing; clipping bounds
each example's contribution (``||clip(g, C)|| <= C``), which is what makes the
callers' noise calibration valid.
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t

from fastdp._kernels._checks cimport (
    CSR_OK, check_csr, check_length, check_loss_code, check_row_map, check_rows_read,
    check_threads, column_splits_of, first_flawed_unchecked_row, raise_invalid,
    raise_untrusted_row,
)
from fastdp._kernels._csr cimport (
    CsrView, csr_row, csr_view, index_t, mapped_view, prefetch_row, real_t, row_dot,
)
from fastdp._kernels._gate cimport (
    GATE_SLOTS, GatedBatch, ParallelGate, gate_close, gate_open, gate_slot, gate_state,
    gates_reset,
)
from fastdp._kernels._glm cimport (
    ClippedLoss, RowBatch, every_column, gradient_coefficient, scatter_rows, thread_columns,
)

import numpy as np

from fastdp._kernels._losses import LossCode as _LossCode
from fastdp._validation import _StructureToken

# the loss codes under their kernel-level names (the one definition is
# fastdp._kernels._losses.LossCode)
LOSS_SQUARED = _LossCode.SQUARED
LOSS_LOGISTIC = _LossCode.LOGISTIC
LOSS_HINGE = _LossCode.HINGE

_PARALLEL_MIN_ROWS = 256

# Serial-or-parallel choice (speed only, see ``_gate.pxd: ParallelGate``), one
# gate per entry point (margins, clipped_gradient_sum, weighted_row_sum) and
# thread count.
cdef enum:
    _KIND_MARGINS = 0
    _KIND_GRADIENT = 1
    _KIND_SCATTER = 2
cdef ParallelGate _gates[3][GATE_SLOTS]
gates_reset(&_gates[0][0], 3 * GATE_SLOTS)


cdef int _open_gate(str caller, int kind, num_threads, Py_ssize_t count,
                    GatedBatch* timed) except -1:
    """Check ``num_threads`` (None: 1) and open the timed call of ``count`` rows on the
    entry point's gate (``kind``) for that thread count: ``timed.nt`` threads, or one
    below ``_PARALLEL_MIN_ROWS`` rows or when the gate chose the serial path."""
    cdef int64_t nt = 1 if num_threads is None else int(num_threads)
    if nt < 1:
        return raise_invalid(f"{caller}: num_threads must be >= 1; got {nt}.")
    check_threads(caller, nt)
    timed[0] = gate_open(&_gates[kind][gate_slot(nt)], <int>nt, count, _PARALLEL_MIN_ROWS)
    return 0


cdef int _check_arrays(str caller, const real_t[::1] data, const index_t[::1] indices,
                       const index_t[::1] indptr, const int64_t[::1] rows, object check_structure,
                       Py_ssize_t n_features, str features_name) except -1:
    """The CSR arrays (O(1)), the row numbers (O(len(rows))) and, unless
    ``check_structure`` is a token proving it, the CSR structure of the rows read
    (O(their nnz)); see the module docstring."""
    check_csr(caller, data.shape[0], indices, indptr)
    return check_rows_read(caller, check_structure, _StructureToken, indices, indptr, rows,
                           n_features, features_name)


cdef inline int64_t _row_map_columns(str caller, const double[::1] row_scale,
                                     const double[::1] row_shrink, int64_t tail_column,
                                     Py_ssize_t n_rows, Py_ssize_t n_columns) except -2:
    """``check_row_map`` of an entry point's optional row map: the columns the stored
    entries must stay below."""
    return check_row_map(caller, row_scale.shape[0] if row_scale is not None else -1,
                         row_shrink.shape[0] if row_shrink is not None else -1, tail_column,
                         n_rows, n_columns)


cdef void _scatter(const CsrView[real_t, index_t]* X, RowBatch batch, const double* coefs,
                   double* out, int nt, const int64_t* splits) noexcept nogil:
    """``out += sum_q coefs[q] x_{rows[q]}``, the columns split among ``nt`` threads."""
    cdef int tid
    if nt <= 1:
        scatter_rows(X, batch, coefs, 1.0, out, every_column())
    else:
        for tid in prange(nt, num_threads=nt, schedule="static"):
            scatter_rows(X, batch, coefs, 1.0, out, thread_columns(splits, tid))


def margins(const real_t[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
            const int64_t[::1] rows, const double[::1] theta, double[::1] out, num_threads=1, *,
            check_structure=True, const double[::1] row_scale=None,
            const double[::1] row_shrink=None, double tail_value=0.0, int64_t tail_column=-1):
    """``out[k] = x_{rows[k]}^T theta`` for every k (overwrites ``out``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays (see the module's array contract).
    rows : int64 array of row numbers.
    theta : float64 array of length n_features.
    out : float64 array of length ``len(rows)``.
    num_threads : int, default=1
        Rows are independent: any thread count gives the same bits.
    check_structure : True or a structure token, default=True
        The CSR structure of the rows read is checked (one pass over their
        column indices) unless this is ``fastdp._validation.structure_token(X)``
        for these arrays; ``False`` checks too.
    row_scale, row_shrink, tail_value, tail_column : optional row map
        Read the rows through a row map (the estimators' mapped rows,
        ``fastdp._mapped_rows.MappedRows.kernel_map``), as ``_sgd.run_sgd``
        does: the bits of the written-out rows, without the copy.

    Raises
    ------
    ValidationError
        If an argument could make the kernel read or write out of bounds
        (see the module docstring, "Checks").
    """
    cdef Py_ssize_t count = rows.shape[0]
    cdef Py_ssize_t q                   # position in rows
    cdef int64_t stored = _row_map_columns("margins", row_scale, row_shrink, tail_column,
                                           indptr.shape[0] - 1, theta.shape[0])
    check_length("margins", "out", out.shape[0], count, "one entry per row number in rows")
    _check_arrays("margins", data, indices, indptr, rows, check_structure, stored, "theta")
    if count == 0:
        return
    cdef GatedBatch timed               # the path the gate chose, and its threads
    _open_gate("margins", _KIND_MARGINS, num_threads, count, &timed)
    cdef CsrView[real_t, index_t] X = mapped_view(data, indices, indptr, row_scale,
                                                  row_shrink, tail_value, tail_column)
    cdef const double* theta_ = &theta[0] if theta.shape[0] > 0 else NULL
    with nogil:
        if timed.path == 1:
            for q in prange(count, num_threads=timed.nt, schedule="static"):
                out[q] = row_dot(csr_row(&X, rows[q]), theta_)
        else:
            for q in range(count):
                if q + 4 < count:
                    prefetch_row(&X, rows[q + 4])
                out[q] = row_dot(csr_row(&X, rows[q]), theta_)
    gate_close(&timed, count)


def clipped_gradient_sum(const real_t[::1] data, const index_t[::1] indices,
                         const index_t[::1] indptr, const double[::1] y,
                         const int64_t[::1] rows, const double[::1] theta, int loss_code,
                         double clip, double[::1] out, num_threads=1, *,
                         check_structure=True, const double[::1] row_scale=None,
                         const double[::1] row_shrink=None, double tail_value=0.0,
                         int64_t tail_column=-1):
    """``out += sum_{i in rows} clip(loss'(x_i^T theta, y_i) x_i, C)``; returns None.

    ``clip(g, C) = g / max(1, ||g|| / C)``; ``clip = inf`` means no clipping.
    A row listed twice contributes twice.

    Parameters
    ----------
    data, indices, indptr : CSR arrays (see the module's array contract).
    y : float64 labels, indexed by row number.
    rows : int64 row numbers.
    theta : float64 model, length n_features.
    loss_code : a member of ``fastdp._kernels._losses.LossCode`` (``LOSS_SQUARED``,
        ``LOSS_LOGISTIC`` or ``LOSS_HINGE``).
    clip : float
        C > 0 (``inf`` for none).
    out : float64 dense accumulator of length n_features (added to, not reset).
    num_threads : int, default=1
        Same bits for any value.
    check_structure : True or a structure token, default=True
        The CSR structure of the rows read is checked (one pass over their
        column indices) unless this is ``fastdp._validation.structure_token(X)``
        for these arrays; ``False`` checks too.
    row_scale, row_shrink, tail_value, tail_column : optional row map
        As :func:`margins`: the rows, their norms for the clipping and the
        scatter read through the map, the bits of the written-out rows.

    Raises
    ------
    ValidationError
        If an argument could make the kernel read or write out of bounds, or
        the loss code or the clip is invalid (see the module docstring, "Checks").
    """
    cdef Py_ssize_t count = rows.shape[0]
    cdef Py_ssize_t n_columns = out.shape[0]
    cdef Py_ssize_t q                   # position in rows
    cdef int64_t stored = _row_map_columns("clipped_gradient_sum", row_scale, row_shrink,
                                           tail_column, indptr.shape[0] - 1, n_columns)
    check_loss_code("clipped_gradient_sum", loss_code)
    if not clip > 0.0:
        raise_invalid(f"clipped_gradient_sum: clip must be > 0 (inf for none); got {clip}.")
    check_length("clipped_gradient_sum", "theta", theta.shape[0], n_columns,
                 "the length of out: one entry per column of X (n_features)")
    check_csr("clipped_gradient_sum", data.shape[0], indices, indptr)
    check_length("clipped_gradient_sum", "y", y.shape[0], indptr.shape[0] - 1,
                 "one entry per row of X")
    _check_arrays("clipped_gradient_sum", data, indices, indptr, rows, check_structure,
                  stored, "theta and out")
    if count == 0:
        return
    cdef GatedBatch timed               # the path the gate chose, and its threads
    _open_gate("clipped_gradient_sum", _KIND_GRADIENT, num_threads, count, &timed)
    cdef int nt = timed.nt
    coef_arr = np.empty(count, dtype=np.float64)
    splits_arr = column_splits_of("clipped_gradient_sum", None, nt, n_columns, "len(out)")
    cdef double[::1] coefs = coef_arr
    cdef const int64_t[::1] splits = splits_arr
    cdef CsrView[real_t, index_t] X = mapped_view(data, indices, indptr, row_scale,
                                                  row_shrink, tail_value, tail_column)
    cdef ClippedLoss g                  # the loss, the clip and the labels
    g.loss = loss_code
    g.clip = clip
    g.clipping = clip < INFINITY
    g.y = &y[0] if y.shape[0] > 0 else NULL
    g.sq_norms = NULL                   # computed from each row
    cdef const double* theta_ = &theta[0] if n_columns > 0 else NULL
    cdef RowBatch batch
    batch.rows = &rows[0]
    batch.count = count
    with nogil:
        if nt > 1:
            for q in prange(count, num_threads=nt, schedule="static"):
                coefs[q] = gradient_coefficient(&g, &X, rows[q], theta_, 1.0)
        else:
            for q in range(count):
                if q + 4 < count:
                    prefetch_row(&X, rows[q + 4])
                coefs[q] = gradient_coefficient(&g, &X, rows[q], theta_, 1.0)
        _scatter(&X, batch, &coefs[0], &out[0] if n_columns > 0 else NULL, nt, &splits[0])
    gate_close(&timed, count)


def gradient_sum(const real_t[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                 const double[::1] y, const int64_t[::1] rows, const double[::1] theta,
                 int loss_code, double[::1] out, num_threads=1, *, check_structure=True):
    """``out += sum_{i in rows} loss'(x_i^T theta, y_i) x_i`` (no clipping); returns None.

    Same contract and checks as :func:`clipped_gradient_sum` with
    ``clip = inf`` (and the same bits).
    """
    clipped_gradient_sum(data, indices, indptr, y, rows, theta, loss_code, INFINITY, out,
                         num_threads, check_structure=check_structure)


def weighted_row_sum(const real_t[::1] data, const index_t[::1] indices,
                     const index_t[::1] indptr, const int64_t[::1] rows,
                     const double[::1] weights, double[::1] out, num_threads=1, *,
                     check_structure=True, const double[::1] row_scale=None,
                     const double[::1] row_shrink=None, double tail_value=0.0,
                     int64_t tail_column=-1):
    """``out += sum_k weights[k] x_{rows[k]}`` (i.e. ``X_rows^T weights``); returns None.

    The scatter half of a gradient, for callers that already have the
    per-row derivatives (e.g. from :func:`margins` plus a vectorised loss),
    and for Hessian-vector products ``X^T (D X v)``.

    Parameters
    ----------
    data, indices, indptr : CSR arrays (see the module's array contract).
    rows : int64 row numbers.
    weights : float64, one per entry of ``rows``.
    out : float64 accumulator of length n_features (added to).
    num_threads : int, default=1
        Same bits for any value.
    check_structure, row_scale, row_shrink, tail_value, tail_column
        As :func:`margins` (the structure check, the optional row map).

    Raises
    ------
    ValidationError
        As :func:`margins`.
    """
    cdef Py_ssize_t count = rows.shape[0]
    cdef Py_ssize_t n_columns = out.shape[0]
    cdef int64_t stored = _row_map_columns("weighted_row_sum", row_scale, row_shrink,
                                           tail_column, indptr.shape[0] - 1, n_columns)
    check_length("weighted_row_sum", "weights", weights.shape[0], count,
                 "one entry per row number in rows")
    _check_arrays("weighted_row_sum", data, indices, indptr, rows, check_structure, stored,
                  "out")
    if count == 0:
        return
    cdef GatedBatch timed               # the path the gate chose, and its threads
    _open_gate("weighted_row_sum", _KIND_SCATTER, num_threads, count, &timed)
    cdef int nt = timed.nt
    splits_arr = column_splits_of("weighted_row_sum", None, nt, n_columns, "len(out)")
    cdef const int64_t[::1] splits = splits_arr
    cdef CsrView[real_t, index_t] X = mapped_view(data, indices, indptr, row_scale,
                                                  row_shrink, tail_value, tail_column)
    cdef RowBatch batch
    batch.rows = &rows[0]
    batch.count = count
    with nogil:
        _scatter(&X, batch, &weights[0], &out[0] if n_columns > 0 else NULL, nt, &splits[0])
    gate_close(&timed, count)


def check_rows_once(str caller, const index_t[::1] indices, const index_t[::1] indptr,
                    unsigned char[::1] row_checked, int64_t n_features):
    """Check every row of a CSR whose structure was trusted, not scanned, that no kernel
    checked before in this process (``row_checked``: the per-row map of its structure
    token, updated), one pass over those rows' column indices: pointers, column indices
    strictly increasing within ``[0, n_features)``.  For the callers that hand the whole
    matrix to scipy or numpy, whose compiled code trusts the indices
    (``fastdp._validation.check_rows_as_read``).

    Raises
    ------
    ValidationError
        Naming the first flawed row (``_checks.pxd: raise_untrusted_row``).
    """
    cdef int64_t n_rows = indptr.shape[0] - 1
    cdef int flaw = CSR_OK
    cdef int64_t q
    check_csr(caller, indices.shape[0], indices, indptr)
    check_length(caller, "row_checked", row_checked.shape[0], n_rows, "one flag per row of X")
    if n_rows <= 0:
        return
    with nogil:
        q = first_flawed_unchecked_row(&indices[0] if indices.shape[0] > 0 else NULL,
                                       &indptr[0], indices.shape[0], n_features, NULL, n_rows,
                                       &row_checked[0], &flaw)
    if q >= 0:
        raise_untrusted_row(caller, q, flaw, n_features)


def _parallel_gate_state(str kind, int num_threads):
    """The serial/parallel gate of an entry point (``"margins"``, ``"gradient"``,
    ``"scatter"``) for a thread count (diagnostics for benchmarks)."""
    kinds = {"margins": _KIND_MARGINS, "gradient": _KIND_GRADIENT, "scatter": _KIND_SCATTER}
    if kind not in kinds:
        raise_invalid(f"_parallel_gate_state: kind must be one of {sorted(kinds)}; got {kind!r}.")
    return gate_state(&_gates[<int>kinds[kind]][gate_slot(num_threads)])
