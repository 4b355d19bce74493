"""What this process has already checked, so that it is not scanned again.

*Checked CSR structures.*  The kernels of fastdp._kernels scan the CSR
structure of the rows they read (O(nnz)) unless the caller passes, as
``check_structure``, a token (:class:`_StructureToken`, made by
:func:`fastdp._validation.structure_token`) for exactly the arrays it passes.
``check_X`` registers the index arrays of every sparse matrix it returns
(weakly: nothing is kept alive), so a solver that validated X with
``check_X`` gets its token in O(1).

*CSR data checked when it was written* (fastdp.io.binary).  A binary dataset
is checked once, when it is converted: canonical structure, finite values,
squared row norms stored beside it.  ``open_binary`` registers its
memory-mapped arrays here (:func:`register_verified_csr`), so that validating
it for a fit reads O(n) metadata instead of scanning all of X (which may not
fit in memory) again, with a guard that refuses the record once a mapped
file changed on disk (checked in O(1) whenever the record is consulted: see
:func:`_verified`).  The registry is weak (nothing is kept alive) and is
keyed by the very array objects: any other array (a copy, a slice) is
checked in full as usual.

*Mapped rows* (:class:`fastdp._mapped_rows.MappedRows`): their X was checked
when they were mapped; :func:`is_mapped_rows` recognises them.
"""

import weakref

import numpy as np
import scipy.sparse as sp


def _address(array):
    return int(array.__array_interface__["data"][0])


class _StructureToken:
    """Proof that ``indices``/``indptr`` form canonical CSR with ``n_features`` columns.

    Private: made only by :func:`structure_token`.  It holds the two arrays,
    so their memory stays valid while the token exists, and their addresses,
    lengths and index width, which a kernel compares (O(1)) with the arrays
    it is given.

    ``row_checked`` is None when the structure was scanned in this process
    (``check_X``, ``open_binary(verify=True)``): the kernels read the rows
    unchecked.  For a structure trusted from a binary dataset's header it is
    the dataset's per-row map (uint8, 1 once a row was checked): the kernels
    skip the O(nnz) scan but check every row the first time they read it
    (``fastdp/_kernels/_checks.pxd: rows_unsafe``), so a damaged or forged
    ``indices.npy`` gives an error naming the row, never an out-of-bounds read.
    """

    __slots__ = ("indices", "indptr", "n_features", "itemsize", "indices_address",
                 "indices_length", "indptr_address", "indptr_length", "row_checked")

    def __init__(self, indices, indptr, n_features, indices_address, indptr_address,
                 row_checked=None):
        self.row_checked = row_checked
        self.indices = indices
        self.indptr = indptr
        self.n_features = n_features
        self.itemsize = indices.dtype.itemsize
        self.indices_address = indices_address
        self.indices_length = indices.shape[0]
        self.indptr_address = indptr_address
        self.indptr_length = indptr.shape[0]

    def __reduce__(self):
        raise TypeError("a CSR structure token is valid in this process only; make a new one "
                        "with fastdp._validation.structure_token(X)")

    def __repr__(self):
        return (f"<CSR structure checked: {self.indptr_length - 1} rows, "
                f"{self.n_features} columns, {self.indices_length} entries>")


# id(indices) -> (weakref(indices), weakref(indptr), n_features, address of indices,
#                 address of indptr, row_checked: None (scanned) or the per-row map of a
#                 trusted structure, see _StructureToken)
_CHECKED_STRUCTURES = {}


def _forget_structure(key):
    _CHECKED_STRUCTURES.pop(key, None)


def _remember_structure(indices, indptr, n_features, *, trusted=False):
    """Register canonical CSR index arrays as checked (weakly); returns the entry.

    ``trusted``: the structure was not scanned but trusted (a binary dataset's
    header): the entry gets a per-row map, and the kernels check each row as they
    first read it.  Arrays already registered keep their entry (a trusted
    structure stays trusted when ``check_X`` returns it unscanned).
    """
    known = _known_structure(indices, indptr, n_features)
    if known is not None and not trusted:
        return known
    key = id(indices)
    rows = max(int(indptr.shape[0]) - 1, 0)
    try:
        entry = (weakref.ref(indices, lambda _, key=key: _forget_structure(key)),
                 weakref.ref(indptr), int(n_features), _address(indices), _address(indptr),
                 np.zeros(rows, dtype=np.uint8) if trusted else None)
    except (TypeError, AttributeError):  # not weak-referenceable: scanned when used
        return None
    _CHECKED_STRUCTURES[key] = entry
    return entry


def _known_structure(indices, indptr, n_features):
    """The registry entry of these arrays, or None."""
    entry = _CHECKED_STRUCTURES.get(id(indices))
    if (entry is not None and entry[0]() is indices and entry[1]() is indptr
            and entry[2] == n_features):
        return entry
    return None


# id(data) -> _VerifiedCsr
_VERIFIED_CSR = {}


class _VerifiedCsr:
    """What was verified about one CSR's arrays when they were written."""

    __slots__ = ("data", "indices", "indptr", "shape", "sq_norms", "finite", "max_row_length",
                 "kernel_sq_norms", "guard")

    def __init__(self, X, sq_norms, finite, kernel_sq_norms=None, guard=None):
        self.kernel_sq_norms = kernel_sq_norms
        self.guard = guard
        self.data = weakref.ref(X.data)
        self.indices = weakref.ref(X.indices)
        self.indptr = weakref.ref(X.indptr)
        self.shape = tuple(X.shape)
        self.sq_norms = sq_norms
        self.finite = bool(finite)
        lengths = np.diff(np.asarray(X.indptr)) if X.shape[0] else np.zeros(1, np.int64)
        self.max_row_length = int(lengths.max()) if lengths.size else 0


def register_verified_csr(X, *, sq_norms, finite, kernel_sq_norms=None, guard=None,
                          scanned=False):
    """Record that the arrays of CSR ``X`` were verified when they were written.

    For :mod:`fastdp.io.binary` only: call it with the arrays of a dataset
    whose structure was checked canonical at conversion and whose header
    still matches.  Afterwards :func:`check_sparse_structure`, :func:`check_X`
    and :func:`structure_token` trust these very arrays (cheap checks only:
    the same objects, the shape, the first and last ``indptr``) and the row
    norm bound is decided from ``sq_norms``.

    Parameters
    ----------
    X : scipy.sparse CSR matrix
        Canonical, with ``indices``/``indptr`` of one dtype and tight storage.
    sq_norms : ndarray of float64, shape (n_samples,)
        ``sum_j x_ij**2`` of every row, computed by :func:`_csr_sq_norms`
        (the same bits the full check computes).
    finite : bool
        Whether every value was checked finite.
    kernel_sq_norms : ndarray of float64, shape (n_samples,), optional
        The row norms as the kernels sum them
        (``fastdp._kernels._scd.row_squared_norms(X.data, X.indptr)``, the
        same bits), returned by :func:`stored_kernel_sq_norms`.
    guard : callable, optional
        Called (no arguments) every time the record is consulted, before
        anything is read from the arrays; it raises a
        :class:`~fastdp.exceptions.ValidationError` when the record no longer
        holds (``fastdp.io.binary``: a mapped file changed since it was
        opened, :meth:`fastdp.io._mapped_files.MappedFiles.check`).  It must
        cost O(1): it runs at least once per fit, prediction or norm pass.
    scanned : bool, default=False
        Whether the structure (canonical, columns in ``[0, n_features)``) was
        checked in this process (``open_binary(verify=True)``, or a copy of a
        matrix that was).  False: it is trusted from the dataset's header, and
        the kernels check each row the first time they read it (see
        :class:`_StructureToken`), at one pass over each row's column indices
        per process instead of an O(nnz) scan before the first fit.

    Notes
    -----
    ``X.data``, ``X.indices`` and ``X.indptr`` are made read-only: an edit in
    place would leave the recorded norms and structure stale (rows above a
    norm bound accepted, column indices past the model read by the kernels),
    so it raises numpy's "assignment destination is read-only" instead.
    """
    for array in (X.data, X.indices, X.indptr):
        array.flags.writeable = False
    key = id(X.data)
    if kernel_sq_norms is not None:
        kernel_sq_norms = np.asarray(kernel_sq_norms, dtype=np.float64).view()
        kernel_sq_norms.flags.writeable = False
    entry = _VerifiedCsr(X, np.asarray(sq_norms, dtype=np.float64), finite, kernel_sq_norms,
                         guard)
    try:
        weakref.finalize(X.data, _VERIFIED_CSR.pop, key, None)
    except TypeError:  # pragma: no cover - ndarray is weak-referenceable
        return
    _VERIFIED_CSR[key] = entry
    _remember_structure(X.indices, X.indptr, X.shape[1], trusted=not scanned)


def rows_checked_as_read(X):
    """The per-row map of CSR ``X``'s structure if it is trusted, not scanned (a binary
    dataset opened without ``verify``: see :func:`register_verified_csr`), else None."""
    if not (sp.issparse(X) and getattr(X, "format", None) == "csr"):
        return None
    entry = _known_structure(X.indices, X.indptr, X.shape[1])
    return None if entry is None else entry[5]


def stored_kernel_sq_norms(X):
    """The kernels' squared row norms of CSR ``X`` stored when its arrays were written
    (:func:`register_verified_csr`, read-only), or None: then compute them."""
    entry = _verified(X)
    return None if entry is None else entry.kernel_sq_norms


def known_finite_csr(X):
    """True if CSR ``X``'s arrays are registered as verified with finite values
    (:func:`register_verified_csr`: a binary dataset checked when it was written), so that
    no check needs to read its values again."""
    entry = _verified(X)
    return entry is not None and bool(entry.finite)


def _verified(X):
    """The registry entry of CSR ``X``'s arrays if they are the verified ones, else None.

    Every consumer of the record (``check_X``, the structure and finiteness
    checks, the stored row norms) comes through here, so the entry's guard runs
    here, before anything is read from the arrays: for a memory-mapped binary
    dataset whose files changed since it was opened it raises a
    :class:`~fastdp.exceptions.ValidationError` (a truncated map would fault
    when read, a rewritten one would not match the stored norms).
    """
    if not (sp.issparse(X) and getattr(X, "format", None) == "csr"):
        return None
    entry = _VERIFIED_CSR.get(id(getattr(X, "data", None)))
    if (entry is None or entry.data() is not X.data or entry.indices() is not X.indices
            or entry.indptr() is not X.indptr or tuple(X.shape) != entry.shape):
        return None
    if entry.guard is not None:
        entry.guard()
    indptr = X.indptr
    nnz = X.data.shape[0]
    if indptr.shape[0] != entry.shape[0] + 1 or indptr[0] != 0 or int(indptr[-1]) != nnz:
        return None
    return entry


def is_mapped_rows(X):
    """True for the estimators' mapped rows (:class:`fastdp._mapped_rows.MappedRows`),
    recognised by a class marker (this module cannot import that one)."""
    return getattr(X, "_fastdp_mapped_rows", False) is True
