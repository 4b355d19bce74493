"""The estimators' mapped rows, read from X through O(n) metadata instead of a copy of X.

An estimator trains on the rows ``a [b(x), c]`` of :class:`fastdp.preprocessing.RowMap`:
every stored value of row i multiplied by one factor ``s_i`` (the row bound and
the scale ``a``), and one constant entry appended (the intercept column).
:class:`MappedRows` holds exactly that description — the validated CSR ``X``,
the factors, the constant — and never the mapped matrix itself:

* the compiled kernels of DP-SGD (:mod:`fastdp._kernels._sgd`) and DP-SCD
  (:mod:`fastdp._kernels._scd`) read the rows through it
  (:meth:`MappedRows.kernel_map`), computing each mapped value when they read
  it, with the same roundings as the materialised matrix;
* the ``_glm`` kernels (margins, clipped gradient sums, weighted row sums)
  read them the same way, for the output/objective perturbation, the exact,
  the accelerated and the line-search solvers
  (:class:`fastdp.solvers.glm_oracle.RowProducts`);
* a run with a block-keyed sampler (the data-parallel step loop, which
  reads CSR rows) gets :meth:`MappedRows.tocsr`, the mapped matrix written
  out once, in blocks of rows, and registered as
  verified so that the solver's own :func:`~fastdp._validation.check_X` does
  not scan it again.

Either way the values are bit for bit those of the materialised map: a stored
value ``x`` of row i becomes ``r((double) r(x * r(s_i)) * g_i)`` where ``r`` rounds
to the dtype of X and ``g_i`` is the optional second factor that
:func:`~fastdp._validation.check_X` applies to rows whose norm exceeds the bound
by rounding only (1 for the others); the constant becomes ``r((double) r(c) * g_i)``.

Validation happens once, in the estimator (``check_X`` of the user's X); a
:class:`MappedRows` is trusted by ``check_X`` (O(n) work, plus one pass in
blocks when a row-norm bound is asked for).

Privacy: a per-example map with public parameters (see
:mod:`fastdp.preprocessing`); nothing here releases anything.
"""

from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from fastdp._validation import (
    _csr_sq_norms,
    _known_structure,
    _row_blocks,
    _shrink_factors,
    check_rows_as_read,
    is_mapped_rows,
    register_verified_csr,
)

__all__ = ["MappedRows", "TransposedMappedRows", "is_mapped_rows", "rows_for_solver"]


class MappedRows:
    """Rows ``x_i`` of a validated CSR matrix, each scaled by ``row_scale[i]``, plus a constant column.

    Parameters
    ----------
    csr : scipy.sparse CSR matrix of shape (n, d)
        Output of :func:`fastdp._validation.check_X` (canonical, finite,
        float32 or float64); never modified.
    row_scale : ndarray of float64, shape (n,)
        The factor of each row (rounded to the dtype of ``csr`` before use).
    tail_value : float or None
        The appended constant (column ``d``), or None for no appended column.
    row_shrink : ndarray of float64, shape (n,), or None
        Second factor of each row, applied after the first rounding (set by
        :func:`~fastdp._validation.check_X`; 1 for rows it leaves alone).

    Attributes
    ----------
    shape : tuple
        ``(n, d + 1)`` with the constant column, else ``(n, d)``.
    dtype : numpy.dtype
        The dtype of the values (that of ``csr``).
    """

    _fastdp_mapped_rows = True  # recognised by fastdp._validation without an import

    def __init__(self, csr, row_scale, tail_value=None, row_shrink=None):
        self.csr = csr
        n, d = csr.shape
        self.row_scale = np.ascontiguousarray(row_scale, dtype=np.float64)
        self.row_shrink = (None if row_shrink is None
                           else np.ascontiguousarray(row_shrink, dtype=np.float64))
        self.tail_value = None if tail_value is None else float(tail_value)
        extra = int(self.tail_value is not None)
        self.shape = (int(n), int(d) + extra)
        self.dtype = csr.data.dtype
        self._sq_norms = None
        self._kernel_sq = None

    @property
    def nnz(self):
        """Entries of the mapped matrix (the stored ones plus one per row for the constant)."""
        return int(self.csr.indptr[-1]) + (self.shape[0] if self.tail_value is not None else 0)

    def __repr__(self):
        return (f"<MappedRows {self.shape[0]}x{self.shape[1]} {self.dtype} rows read from a CSR "
                f"matrix through a row map{' and a constant column' if self.tail_value is not None else ''}>")

    # ------------------------------------------------------------------ kernels
    def kernel_map(self):
        """Keyword arguments of the row-map-aware kernels (``run_sgd``, ``run_dual_scd``)."""
        return {"row_scale": self.row_scale, "row_shrink": self.row_shrink,
                "tail_value": 0.0 if self.tail_value is None else self.tail_value,
                "tail_column": -1 if self.tail_value is None else self.csr.shape[1]}

    def kernel_sq_norms(self):
        """Squared norms of the mapped rows, summed as the kernels sum them (storage order).

        One pass over X, made once and kept (O(n)) for the solver's later calls
        (the exact hinge solver runs SDCA several times); none at all when a
        pass that writes the mapped rows out block by block came first
        (:meth:`scaled_sq_norms`, the row-norm bound of DP-SCD, or
        :meth:`tocsr`): it sums the same materialised values
        (:meth:`_fused_kernel_sq`).

        They cannot be derived from the stored norms of X (``kernel_sq_norms.npy``):
        a mapped value is ``r(x * r(s_i))`` (and ``r(r(...) * g_i)``), rounded to
        the dtype of X before it is squared, and ``s_i`` carries the factor
        ``1 - 2^-40`` of :class:`~fastdp.preprocessing.RowMap` (never 1 or a
        power of two in float64), so ``sum r(x s)^2`` differs from
        ``s^2 sum x^2`` in the last bits of most rows.
        """
        if self._kernel_sq is None:
            self._kernel_sq = self._scan_kernel_sq_norms()
        return self._kernel_sq.copy()

    def known_kernel_sq_norms(self):
        """The :meth:`kernel_sq_norms` if a pass over X already computed them, else None.

        The DP-SGD kernels (``_sgd.run_sgd``, ``_multinomial.run_multinomial_sgd``)
        take None and sum each row's norm while they read the row, the same bits
        as :meth:`kernel_sq_norms` without its pass over X before training.
        """
        return None if self._kernel_sq is None else self._kernel_sq.copy()

    @staticmethod
    def _fused_kernel_sq(data, indptr):
        """Kernel row norms of materialised mapped rows (``_block_values``): the bits of
        the row-map-aware scan (each value as the kernel reads it, squared and summed in
        storage order, the constant last)."""
        from fastdp._kernels import _scd

        return _scd.row_squared_norms(data, indptr)

    def _scan_kernel_sq_norms(self):
        from fastdp._kernels import _scd

        return _scd.row_squared_norms(
            self.csr.data, self.csr.indptr, row_scale=self.row_scale, row_shrink=self.row_shrink,
            tail_value=0.0 if self.tail_value is None else self.tail_value,
            tail=self.tail_value is not None)

    # ------------------------------------------------------------------ blocks
    def _block_values(self, r0, r1, rows=None, shrink=None, with_columns=True):
        """``(data, indices, indptr)`` of mapped rows r0..r1 (or of ``rows``), materialised.

        ``shrink`` overrides the second factor of these rows (one per row).
        ``with_columns=False`` leaves the column indices unread (``indices`` is None): a row
        norm needs the values only, and on a memory-mapped dataset with int64 indices
        the indices are two thirds of the bytes a pass would read from the disk.
        """
        X = self.csr
        dtype = self.dtype
        if rows is None:
            k0, k1 = int(X.indptr[r0]), int(X.indptr[r1])
            counts = np.diff(np.asarray(X.indptr[r0:r1 + 1], dtype=np.int64))
            values = X.data[k0:k1]
            columns = X.indices[k0:k1] if with_columns else None
            scale = self.row_scale[r0:r1]
            if shrink is None and self.row_shrink is not None:
                shrink = self.row_shrink[r0:r1]
        else:
            starts = np.asarray(X.indptr[rows], dtype=np.int64)
            counts = np.asarray(X.indptr[rows + 1], dtype=np.int64) - starts
            positions = (np.arange(int(counts.sum()), dtype=np.int64)
                         - np.repeat(np.cumsum(counts) - counts - starts, counts))
            values = X.data[positions]
            columns = X.indices[positions] if with_columns else None
            scale = self.row_scale[rows]
            if shrink is None and self.row_shrink is not None:
                shrink = self.row_shrink[rows]
        values = values * np.repeat(scale.astype(dtype), counts)
        if shrink is not None:
            values = (values.astype(np.float64) * np.repeat(shrink, counts)).astype(dtype)
        if self.tail_value is None:
            indptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            return values, columns, indptr
        m = counts.shape[0]
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(counts + 1, out=indptr[1:])
        ends = indptr[1:] - 1                           # slot of each row's constant entry
        data = np.empty(indptr[-1], dtype=dtype)
        mask = np.ones(indptr[-1], dtype=bool)
        mask[ends] = False
        data[mask] = values
        tail = np.full(m, dtype.type(self.tail_value))
        if shrink is not None:
            tail = (tail.astype(np.float64) * shrink).astype(dtype)
        data[ends] = tail
        if columns is None:
            return data, None, indptr
        indices = np.empty(indptr[-1], dtype=np.int64)
        indices[mask] = columns
        indices[ends] = X.shape[1]
        return data, indices, indptr

    def _block_norm_rows(self, r0, r1, rows=None, shrink=None):
        """The values and row pointers of mapped rows (no column indices read), shaped
        for :func:`fastdp._validation._csr_sq_norms` and :meth:`_fused_kernel_sq`."""
        data, _, indptr = self._block_values(r0, r1, rows, shrink, with_columns=False)
        return SimpleNamespace(data=data, indptr=indptr,
                               shape=(indptr.shape[0] - 1, self.shape[1]))

    def _block_csr(self, r0, r1, rows=None, shrink=None):
        data, indices, indptr = self._block_values(r0, r1, rows, shrink)
        n_rows = indptr.shape[0] - 1
        return sp.csr_matrix((data, indices, indptr), shape=(n_rows, self.shape[1]))

    def toarray(self):
        """The mapped matrix as a dense ndarray (``tocsr().toarray()``, without the CSR copy)."""
        check_rows_as_read(self.csr, "MappedRows.toarray")  # scipy trusts the columns
        out = np.zeros(self.shape, dtype=self.dtype)
        for r0, r1 in _row_blocks(self.csr.indptr):
            out[r0:r1] = self._block_csr(r0, r1).toarray()
        return out

    def row_l1_norms(self):
        """L1 norm of every mapped row: the bits of ``abs(tocsr()).sum(axis=1)``, in blocks."""
        out = np.empty(self.shape[0], dtype=self.dtype)
        for r0, r1 in _row_blocks(self.csr.indptr):
            out[r0:r1] = np.asarray(abs(self._block_csr(r0, r1)).sum(axis=1)).ravel()
        return out

    def scaled_sq_norms(self, bound=1.0):
        """``sum_j (m_ij / bound)**2`` of every mapped row, as ``check_X`` sums them.

        The same bits as :func:`fastdp._validation._csr_sq_norms` of :meth:`tocsr`
        (each row is summed by the same call on the same values), computed in
        blocks of rows: no O(nnz) temporary.  Cached for ``bound == 1``.
        """
        if bound == 1.0 and self._sq_norms is not None:
            return self._sq_norms.copy()
        sq = np.empty(self.shape[0])
        fused = np.empty(self.shape[0]) if self._kernel_sq is None else None
        for r0, r1 in _row_blocks(self.csr.indptr):
            block = self._block_norm_rows(r0, r1)
            sq[r0:r1] = _csr_sq_norms(block, bound)
            if fused is not None:    # the kernels' norms from the same block: no second pass
                fused[r0:r1] = self._fused_kernel_sq(block.data, block.indptr)
        if fused is not None:
            self._kernel_sq = fused
        if bound == 1.0:
            self._sq_norms = sq.copy()
        return sq

    def row(self, i):
        """Mapped row i as a 1 x d CSR matrix (for error messages)."""
        return self._block_csr(i, i + 1)

    def shrunk(self, rows, bound, sq):
        """A copy whose ``rows`` are scaled down onto ``bound`` exactly as ``check_X`` scales
        a materialised matrix (:func:`fastdp._validation._shrink_factors`, the same factors),
        by a second per-row factor: O(n) memory, the rows processed in blocks.

        ``sq``: the rows' :meth:`scaled_sq_norms` (``> 1``)."""
        shrink = (np.ones(self.shape[0]) if self.row_shrink is None else self.row_shrink.copy())
        rows = np.asarray(rows, dtype=np.int64)
        kernel_sq = None if self._kernel_sq is None else self._kernel_sq.copy()
        X = self.csr
        lengths = (np.asarray(X.indptr[rows + 1], dtype=np.int64)
                   - np.asarray(X.indptr[rows], dtype=np.int64) + 1)
        # blocks of rows of at most about 2**20 entries each (a single longer row alone)
        ends = np.cumsum(lengths)
        start = 0
        while start < rows.size:
            stop = int(np.searchsorted(ends, (ends[start - 1] if start else 0) + (1 << 20),
                                       side="right"))
            stop = min(max(stop, start + 1), rows.size)
            chunk = rows[start:stop]

            def shrunk_sq(todo, factors, chunk=chunk):
                return _csr_sq_norms(self._block_norm_rows(0, 0, chunk[todo], factors), bound)

            shrink[chunk] = _shrink_factors(sq[start:stop], self.dtype, shrunk_sq)
            if kernel_sq is not None:   # only the shrunk rows changed: recompute those,
                # from the chunk just read (still in the page cache), not a second pass
                block = self._block_norm_rows(0, 0, chunk, shrink[chunk])
                kernel_sq[chunk] = self._fused_kernel_sq(block.data, block.indptr)
            start = stop
        out = MappedRows(self.csr, self.row_scale, self.tail_value, shrink)
        out._kernel_sq = kernel_sq
        return out

    # ------------------------------------------------------------------ products
    def __matmul__(self, other):
        """``M @ other`` for the mapped matrix M, one block of rows at a time (no copy of X).

        Bit for bit ``self.tocsr() @ other``: every row's sum is scipy's, over the
        same values in the same order (each block is written out, multiplied and
        dropped).  ``other``: a vector of length ``shape[1]`` or a matrix with
        ``shape[1]`` rows; returns an ndarray.
        """
        other = np.asarray(other)
        if other.ndim not in (1, 2) or other.shape[0] != self.shape[1]:
            raise ValueError(f"MappedRows of shape {self.shape} @ array of shape {other.shape}: "
                             f"dimension mismatch.")
        check_rows_as_read(self.csr, "MappedRows @")  # scipy's product trusts the columns
        out = None
        for r0, r1 in _row_blocks(self.csr.indptr):
            part = np.asarray(self._block_csr(r0, r1) @ other)
            if out is None:
                out = np.empty((self.shape[0],) + other.shape[1:], dtype=part.dtype)
            out[r0:r1] = part
        if out is None:                                  # no rows
            out = np.zeros((0,) + other.shape[1:], dtype=np.result_type(self.dtype, other))
        return out

    @property
    def T(self):
        """The transpose, for products ``M.T @ a`` (:class:`TransposedMappedRows`)."""
        return TransposedMappedRows(self)

    # ------------------------------------------------------------------ copy
    def tocsr(self):
        """The mapped matrix, written out once (in blocks of rows; no other O(nnz) temporary).

        Returns
        -------
        csr_matrix of shape ``self.shape``, dtype ``self.dtype``
            Bit for bit the rows the kernels read through :meth:`kernel_map`.
            When ``csr`` came from ``check_X``, registered as verified
            (canonical, finite, with its squared row norms), so that
            ``check_X`` of it costs O(n).
        """
        X = self.csr
        n, d = X.shape
        extra = int(self.tail_value is not None)
        nnz = self.nnz
        big = nnz >= np.iinfo(np.int32).max or d + extra >= np.iinfo(np.int32).max
        idx_dtype = np.int64 if big else np.result_type(X.indices.dtype, np.int32)
        indptr = np.empty(n + 1, dtype=idx_dtype)
        indptr[0] = 0
        np.cumsum(np.diff(X.indptr) + extra, out=indptr[1:])
        data = np.empty(nnz, dtype=self.dtype)
        indices = np.empty(nnz, dtype=idx_dtype)
        sq = np.empty(n)
        fused = np.empty(n) if self._kernel_sq is None else None
        for r0, r1 in _row_blocks(X.indptr):
            k0, k1 = int(indptr[r0]), int(indptr[r1])
            block_data, block_indices, block_ptr = self._block_values(r0, r1)
            data[k0:k1] = block_data
            indices[k0:k1] = block_indices
            sq[r0:r1] = _csr_sq_norms(SimpleNamespace(data=block_data, indptr=block_ptr,
                                                      shape=(r1 - r0, self.shape[1])))
            if fused is not None:
                fused[r0:r1] = self._fused_kernel_sq(block_data, block_ptr)
        out = sp.csr_matrix(self.shape, dtype=self.dtype)
        out.data, out.indices, out.indptr = data, indices, indptr  # no index downcast, no copy
        known = _known_structure(X.indices, X.indptr, X.shape[1])
        if known is not None:  # check_X output (a trusted structure stays checked as read)
            out.has_sorted_indices = True
            register_verified_csr(out, sq_norms=sq, finite=True, scanned=known[5] is None)
        else:
            out.has_sorted_indices = bool(X.has_sorted_indices)
        self._sq_norms = sq.copy()
        if fused is not None:
            self._kernel_sq = fused
        return out


class TransposedMappedRows:
    """``M.T`` of mapped rows M, for the products ``M.T @ a`` of the per-epoch diagnostics.

    Parameters
    ----------
    rows : MappedRows
    """

    def __init__(self, rows):
        self.rows = rows
        self.shape = rows.shape[::-1]
        self.dtype = rows.dtype

    def __matmul__(self, other):
        """``M.T @ a`` for a vector a (one entry per row of M), bit for bit
        ``M.tocsr().T @ a``: the products ``m_ij a_i`` are added to column j in row
        order and storage order, as scipy's transposed product adds them
        (``np.add.at`` is unbuffered and goes in order), a block of rows at a time."""
        other = np.asarray(other)
        if other.ndim != 1 or other.shape[0] != self.shape[1]:
            raise ValueError(f"transposed MappedRows of shape {self.shape} @ array of shape "
                             f"{other.shape}: dimension mismatch.")
        check_rows_as_read(self.rows.csr, "MappedRows.T @")  # np.add.at wraps negative columns
        dtype = np.result_type(self.dtype, other.dtype)
        out = np.zeros(self.shape[0], dtype=dtype)
        for r0, r1 in _row_blocks(self.rows.csr.indptr):
            data, indices, indptr = self.rows._block_values(r0, r1)
            weights = np.repeat(other[r0:r1].astype(dtype), np.diff(indptr))
            np.add.at(out, indices, data.astype(dtype) * weights)
        return out


def rows_for_solver(Xm, solver, config):
    """What ``solver.run`` gets: ``Xm`` itself when the solver reads mapped rows on the fly
    (``solver.reads_row_map``, no per-epoch history), else the mapped matrix written out once.

    Parameters
    ----------
    Xm : MappedRows, ndarray or sparse matrix
        The estimator's mapped rows (:meth:`fastdp.preprocessing.RowMap.map_rows`).
    solver : fastdp.solvers.registry.EstimatorSolver
    config : dict
        The resolved settings (a block-keyed sampler runs the data-parallel step
        loop on a CSR matrix).  ``record_history`` reads ``Xm`` too: its
        per-epoch objectives take the products ``Xm @ theta`` and ``Xm.T @ alpha``
        block by block (:meth:`MappedRows.__matmul__`, :class:`TransposedMappedRows`).
    """
    if not is_mapped_rows(Xm):
        return Xm
    if (getattr(solver, "reads_row_map", False)
            and not getattr(config.get("sampler"), "keyed", False)):
        return Xm
    return Xm.tocsr()
