"""Input validation shared by every fastdp estimator and solver.

This package is the single place where user input is checked and brought into
the layout the compiled kernels expect:

* feature matrices become either a *canonical* CSR matrix (sorted column
  indices, no duplicate entries, ``indices`` and ``indptr`` of one integer
  type) or a C-contiguous dense array, with float32 or float64 values;
* labels become float64 arrays (``{-1, +1}`` for binary tasks);
* hyper-parameters and privacy parameters are checked for range;
* ``random_state`` becomes a :class:`numpy.random.Generator`.

Every failure raises :class:`fastdp.exceptions.ValidationError` (a
``ValueError``) whose message says what to do about it.

Modules, each one idea (lower ones first):

* ``scalars``: real numbers, intervals, integers, batch sizes;
* ``privacy_params``: epsilon and delta;
* ``random_state``: ``random_state`` to a Generator;
* ``blocks``: blocks of CSR rows that bound the temporaries of O(nnz) checks;
* ``values``: finite values, non-empty shape;
* ``trusted``: what this process already checked (the registry behind
  structure tokens, verified binary data, mapped rows);
* ``sparse_structure``: the index arrays of every sparse format, checked
  before scipy converts anything;
* ``csr``: canonical CSR (the test, the copy) and :func:`structure_token`;
* ``row_norms``: row norms and the row-norm bound;
* ``features``: :func:`check_X`;
* ``labels``: :func:`check_labels` and :func:`check_X_y`.

Code imports from ``fastdp._validation`` (this module re-exports the names it
uses); a test that patches a private helper patches it in the module that looks
it up.

Privacy
-------
Validation reads the private data (for example to reject a row whose norm
exceeds the bound a mechanism needs) but releases nothing except the decision
to reject, which is raised to the *caller* before any mechanism runs. The
error messages name row indices and counts of offending rows: they are meant
for the data owner, not for publication. No function here spends privacy.
"""

from fastdp._validation.blocks import _BLOCK_ENTRIES, _row_blocks  # noqa: F401
from fastdp._validation.csr import (  # noqa: F401
    _csr_is_canonical,
    check_rows_as_read,
    structure_token,
)
from fastdp._validation.features import check_X  # noqa: F401
from fastdp._validation.labels import check_labels, check_X_y  # noqa: F401
from fastdp._validation.privacy_params import (  # noqa: F401
    check_delta,
    check_epsilon,
    check_privacy_params,
)
from fastdp._validation.random_state import check_random_state  # noqa: F401
from fastdp._validation.row_norms import (  # noqa: F401
    _csr_sq_norms,
    _scaled_sq_norms,
    _shrink_factors,
    row_norms,
)
from fastdp._validation.scalars import (  # noqa: F401
    check_batch_size,
    check_in_interval,
    check_in_open_interval,
    check_integer,
    check_positive,
    check_real,
    check_real_array,
)
from fastdp._validation.sparse_structure import (  # noqa: F401
    _check_csr_arrays,
    check_sparse_structure,
)
from fastdp._validation.trusted import (  # noqa: F401
    _known_structure,
    _StructureToken,
    is_mapped_rows,
    register_verified_csr,
    rows_checked_as_read,
    stored_kernel_sq_norms,
)
from fastdp._validation.values import _reject_non_finite_csr  # noqa: F401

__all__ = [
    "check_sparse_structure",
    "structure_token",
    "check_X",
    "row_norms",
    "check_labels",
    "check_X_y",
    "check_real",
    "check_real_array",
    "check_positive",
    "check_integer",
    "check_epsilon",
    "check_delta",
    "check_in_interval",
    "check_in_open_interval",
    "check_privacy_params",
    "check_random_state",
    "check_batch_size",
]
