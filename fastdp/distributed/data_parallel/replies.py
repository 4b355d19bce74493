"""Checks of the workers' replies before the driver adds them (one definition for every query).

The driver scatters each worker's per-shard partial sums into a model-sized
vector (``out[cols] += sums``).  numpy accepts much that is wrong there:
negative column numbers count from the end, a length-1 ``sums`` is broadcast
over every column, a column outside the ones the driver sent lands on an
unrelated coordinate, ``zip`` drops a missing shard, and an index past the
model raises a bare ``IndexError``.  A worker of another fastdp version (a
Ray cluster whose nodes were not upgraded) or a bug would then change the
model silently.  These checks cost O(size of the reply) and turn any such
reply into one :class:`~fastdp.exceptions.FastDPError` before anything is
added:

* one reply per worker, one entry per shard of the worker (in shard order);
* column arrays: 1-D integers, strictly increasing, within ``[0, n_columns)``,
  and within the columns the driver sent when it knows them;
* sums: float arrays of the column count (times the model's K for the
  multinomial), or of the length a query asked for;
* a clipped gradient partial of m rows has norm at most ``m * clip`` (each
  clipped gradient has norm <= clip): the one bound the driver can check on
  un-noised sums, when the worker reports m.

Privacy: reads only the shapes and the partial sums the driver adds anyway;
releases nothing.
"""

import numpy as np

from fastdp.exceptions import FastDPError

__all__ = ["bad_reply", "check_columns", "check_count", "check_partials", "check_row_counts",
           "check_values"]


def bad_reply(worker, what):
    """The error for a reply the driver will not use (``worker`` None: the replies as a whole)."""
    who = "the data-parallel workers" if worker is None else f"data-parallel worker {worker}"
    return FastDPError(
        f"{who} replied with {what}; the reply was not used and the "
        "run stopped before releasing anything (a worker running another fastdp version, or "
        "a bug: upgrade every worker to the driver's fastdp).")


def check_count(worker, items, expected, what):
    """``items`` is a list or tuple of ``expected`` entries (one per shard or worker)."""
    if not isinstance(items, (list, tuple)) or len(items) != expected:
        got = len(items) if isinstance(items, (list, tuple)) else type(items).__name__
        raise bad_reply(worker, f"{got} {what}, not {expected}")
    return items


def check_columns(worker, cols, n_columns, within=None, what="columns"):
    """Sorted distinct column numbers in ``[0, n_columns)`` (and in sorted ``within``)."""
    if (not isinstance(cols, np.ndarray) or cols.ndim != 1
            or cols.dtype.kind not in "iu"):
        raise bad_reply(worker, f"{what} that are not a 1-D integer array")
    if cols.size:
        if cols[0] < 0 or cols[-1] >= n_columns or np.any(cols[1:] <= cols[:-1]):
            raise bad_reply(worker, f"{what} that are not strictly increasing within "
                                    f"[0, {n_columns})")
        if within is not None:
            at = np.searchsorted(within, cols)
            if at[-1] >= within.size or np.any(within[at] != cols):
                raise bad_reply(worker, f"{what} outside the columns the driver sent it")
    return cols


def check_values(worker, values, shape, what="sums"):
    """A float array of exactly ``shape`` (no broadcasting)."""
    if (not isinstance(values, np.ndarray) or values.dtype.kind != "f"
            or values.shape != tuple(shape)):
        got = values.shape if isinstance(values, np.ndarray) else type(values).__name__
        raise bad_reply(worker, f"{what} of shape {got}, not {tuple(shape)}")
    return values


def check_row_counts(worker, sizes, n_shards):
    """One non-negative row count per shard."""
    check_count(worker, sizes, n_shards, "row counts")
    if not all(isinstance(m, (int, np.integer)) and m >= 0 for m in sizes):
        raise bad_reply(worker, "row counts that are not non-negative integers")
    return sizes


def check_partials(worker, partials, n_shards, n_columns, *, known=None, within=None,
                   extra=(), clip=None, sizes=None):
    """One worker's per-shard gradient partials ``[(cols, sums), ...]``, checked.

    Parameters
    ----------
    worker : int
    partials : list of (cols or None, sums)
    n_shards, n_columns : int
    known : list of int64 arrays or None
        Per shard the columns the driver knows (a partial then carries None);
        None: every partial carries its columns.
    within : int64 array or None
        Sorted columns the driver sent the worker (the partials' columns must
        be among them).
    extra : tuple
        Trailing shape of ``sums`` (multinomial: ``(K,)``).
    clip, sizes : float and list of int, optional
        With both: each partial's norm is at most ``sizes[k] * clip`` (up to
        rounding).

    Returns
    -------
    list of (cols, sums)
        With the known columns filled in.
    """
    check_count(worker, partials, n_shards, "shard partials")
    out = []
    for k, part in enumerate(partials):
        if not isinstance(part, (list, tuple)) or len(part) != 2:
            raise bad_reply(worker, f"a partial of shard {k} that is not a (cols, sums) pair")
        cols, sums = part
        if cols is None:
            if known is None or known[k] is None:
                raise bad_reply(worker, f"no columns for shard {k}, whose columns the driver "
                                        "does not know")
            cols = known[k]
        else:
            check_columns(worker, cols, n_columns, within, f"columns of shard {k}")
        check_values(worker, sums, (cols.size,) + tuple(extra), f"sums of shard {k}")
        if clip is not None and sizes is not None and np.isfinite(clip):
            norm = float(np.linalg.norm(sums))
            if not norm <= sizes[k] * clip * (1.0 + 1e-9) + 1e-300:
                raise bad_reply(worker, f"a clipped gradient sum of norm {norm:.6g} over "
                                        f"{sizes[k]} rows of shard {k}, more than rows x "
                                        f"clip = {sizes[k] * clip:.6g}")
        out.append((cols, sums))
    return out
