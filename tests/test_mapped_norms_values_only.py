"""The row-norm passes over mapped rows read the values only, never the column indices,
and the rows shrunk onto the bound are read once (issue 20: a DP-SCD estimator fit of a
3 G-entry memory-mapped dataset read 101 GiB from the disk, 2.8x the dataset: the norm
pass read data and int64 indices, and the shrink read the over-bound rows twice more).

Reference: the same computations on an unguarded twin (the code before this change, which
gathered the indices too, gave these bits: ``tests/test_mapped_norms_fused.py`` compares
them with the kernels' scan and with the written-out copy).
"""

import numpy as np
import pytest

from fastdp._validation import check_X
from fastdp.preprocessing import RowMap

from test_mapped_rows import _same_bits  # noqa: E402  (tests/ is on sys.path)
from test_mapped_rows_products import _data  # noqa: E402


class _NoIndices:
    """A CSR stand-in whose column indices must not be read."""

    def __init__(self, csr):
        self._csr = csr

    def __getattr__(self, name):
        if name == "indices":
            raise AssertionError("a row-norm pass read the column indices")
        return getattr(self._csr, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_norm_passes_do_not_read_indices(dtype, fit_intercept):
    X, _ = _data(dtype, np.int64, n=900)
    X = check_X(X)
    twin = RowMap(bound="normalize", fit_intercept=fit_intercept).map_rows(X)
    guarded = RowMap(bound="normalize", fit_intercept=fit_intercept).map_rows(X)
    guarded.csr = _NoIndices(guarded.csr)
    sq = guarded.scaled_sq_norms(1.0)
    assert _same_bits(sq, twin.scaled_sq_norms(1.0))
    rows = np.flatnonzero(sq > 1.0)
    if dtype == np.float32:
        assert rows.size > 0          # float32 rounding leaves rows a few ulp above 1
    rows = rows if rows.size else np.arange(5)     # float64: shrink a few rows anyway
    a = guarded.shrunk(rows, 1.0, np.maximum(sq[rows], 1.0 + 1e-12))
    b = twin.shrunk(rows, 1.0, np.maximum(sq[rows], 1.0 + 1e-12))
    assert _same_bits(a.row_shrink, b.row_shrink)
    assert _same_bits(a.kernel_sq_norms(), b.kernel_sq_norms())
