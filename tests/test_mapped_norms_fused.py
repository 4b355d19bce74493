"""The kernels' norms of the estimators' mapped rows come from the pass that already writes
them out block by block (issue 20, leftovers item 2).

References: the row-map-aware scan of the kernels (``_scd.row_squared_norms`` with the
row map, what :meth:`MappedRows.kernel_sq_norms` ran before) and the scan of the
written-out matrix, bit for bit; a DP-SCD fit (whose row-norm bound writes the mapped
rows out block by block) must not run the scan at all and must keep the bits of the
fit that wrote the rows out.
"""

import numpy as np
import pytest

from fastdp._kernels import _scd
from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import RowMap
from fastdp.solvers.scd import _DualScdEstimatorSolver

from test_mapped_rows import _same_bits  # noqa: E402  (tests/ is on sys.path)
from test_mapped_rows_products import _data  # noqa: E402


def _scan(mapped):
    return _scd.row_squared_norms(
        mapped.csr.data, mapped.csr.indptr, row_scale=mapped.row_scale,
        row_shrink=mapped.row_shrink,
        tail_value=0.0 if mapped.tail_value is None else mapped.tail_value,
        tail=mapped.tail_value is not None)


def _no_scan(self):
    raise AssertionError("the mapped rows' kernel norms were computed by a scan of X")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bound, fit_intercept", [("normalize", True), ("normalize", False),
                                                  ("clip", True), ("reject", False)])
def test_fused_norms_are_the_bits_of_the_scan(monkeypatch, dtype, index_dtype, bound,
                                              fit_intercept):
    X, _ = _data(dtype, index_dtype, n=900)
    if bound == "reject":     # rows inside the unit ball already
        X = X * dtype(0.5 / np.sqrt(X.multiply(X).sum(axis=1)).max())
    X = check_X(X)
    mapped = RowMap(bound=bound, fit_intercept=fit_intercept).map_rows(X)
    want = _scan(mapped)
    checked = check_X(mapped, max_row_norm=1.0)        # the row-norm bound: one pass
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    got = checked.kernel_sq_norms()
    assert _same_bits(got, _scan(checked))             # shrunk rows (float32) recomputed
    copy = checked.tocsr()
    assert _same_bits(got, _scd.row_squared_norms(copy.data, copy.indptr))
    if checked is mapped:
        assert _same_bits(got, want)
    fresh = RowMap(bound=bound, fit_intercept=fit_intercept).map_rows(X)
    fresh.tocsr()                                      # writing out fills them too
    assert _same_bits(fresh.kernel_sq_norms(), want)


def test_float32_rows_shrunk_by_the_bound_get_their_own_norms(monkeypatch):
    """Rows that rounding puts a few 1e-8 above 1 get a second factor; their fused norms
    are those of the shrunk rows, the others are unchanged."""
    X, _ = _data(np.float32, np.int32, n=3000, seed=3)
    mapped = RowMap(bound="normalize", fit_intercept=True).map_rows(check_X(X))
    checked = check_X(mapped, max_row_norm=1.0)
    assert checked.row_shrink is not None and np.any(checked.row_shrink < 1.0)
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    got = checked.kernel_sq_norms()
    monkeypatch.undo()
    assert _same_bits(got, _scan(checked))
    changed = checked.row_shrink < 1.0
    assert np.any(got[changed] != mapped.kernel_sq_norms()[changed])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dpscd_fit_does_not_scan_for_the_mapped_norms(monkeypatch, dtype):
    X, y = _data(dtype, np.int32)
    params = dict(epsilon=2.0, solver="dpscd", epochs=2, batch_size=50, random_state=0)
    with monkeypatch.context() as patch:                # before: the rows written out
        patch.setattr(_DualScdEstimatorSolver, "reads_row_map", False)
        want = DPLogisticRegression(**params).fit(X, y)
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    got = DPLogisticRegression(**params).fit(X, y)
    assert _same_bits(got.coef_, want.coef_) and _same_bits(got.intercept_, want.intercept_)
