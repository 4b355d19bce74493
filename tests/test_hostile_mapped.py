"""Hostile use of the estimators' mapped rows and of CSR matrices registered as verified.

* ``RowMap.map_rows(X).tocsr()`` returns the mapped matrix registered as
  verified (canonical, finite, with its row norms), so that ``check_X`` of it
  costs O(n).  Editing its arrays in place afterwards left that record stale:
  rows of norm 500 passed ``check_X(max_row_norm=1)`` (a privacy bug: the
  output/objective perturbation and DP-SCD calibrate their noise to that
  bound), and a column index set past the model made the next fit read and
  write out of bounds (the interpreter died with SIGSEGV).  The arrays of a
  verified CSR are now read-only, so the edit itself raises.
* ``check_X`` decides the row-norm bound with ``sq > 1``, which is False for
  NaN: mapped rows with a NaN row factor passed the bound.  A NaN norm is now
  its own ``ValidationError``.

The crash case runs in a child process, so a segfault fails the test instead
of killing the run.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.preprocessing import RowMap


def _data(n=200, d=30, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng)
    X.sort_indices()
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return check_X(X), y


def test_written_out_mapped_rows_cannot_be_edited_behind_their_stored_norms():
    X, _ = _data()
    T = RowMap().map_rows(X).tocsr()
    assert check_X(T, max_row_norm=1.0) is T          # trusted: O(n)
    for array in (T.data, T.indices, T.indptr):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0] * 2 + 1000
    with pytest.raises(ValueError, match="read-only"):
        T.data *= 1000.0
    # the record still describes the arrays: the bound holds for the real values
    assert float(T.multiply(T).sum(axis=1).max()) <= 1.0 + 1e-12


def test_editing_a_written_out_copy_is_fine():
    """A copy is not registered: it is checked in full (an edit is found there)."""
    X, _ = _data()
    C = RowMap().map_rows(X).tocsr().copy()
    C.data *= 1000.0
    with pytest.raises(ValidationError, match="L2 norm above 1"):
        check_X(C, max_row_norm=1.0)


CHILD = """
import numpy as np, scipy.sparse as sp
from fastdp._validation import check_X
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import RowMap
rng = np.random.default_rng(0)
X = sp.random(200, 30, density=0.2, format="csr", random_state=rng); X.sort_indices()
y = np.where(rng.random(200) < 0.5, -1.0, 1.0)
T = RowMap().map_rows(check_X(X)).tocsr()
try:
    T.indices[3] = 10**6          # past the model: the kernels trust the registered structure
except ValueError as exc:
    print("refused:", exc)
DPLogisticRegression(epsilon=1.0, random_state=0).fit(T, y)
print("fit done")
"""


def test_index_edit_behind_a_registered_structure_does_not_crash_a_fit():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "refused: assignment destination is read-only" in done.stdout
    assert "fit done" in done.stdout


@pytest.mark.parametrize("where", ["all", "one"])
def test_nan_row_factor_does_not_pass_the_norm_bound(where):
    X, _ = _data()
    scale = np.full(X.shape[0], 0.1)
    if where == "all":
        scale[:] = np.nan
    else:
        scale[17] = np.nan
    rows = MappedRows(X, scale, 0.5)
    with pytest.raises(ValidationError, match="NaN"):
        check_X(rows, max_row_norm=1.0)
    # the same rows without the NaN pass: the refusal is the NaN's
    scale[np.isnan(scale)] = 0.1
    assert check_X(MappedRows(X, scale, 0.5), max_row_norm=1.0) is not None


def test_nan_row_norms_of_a_verified_matrix_do_not_pass_the_norm_bound():
    """The bound is decided from the stored norms of a verified CSR: a NaN there is refused
    (open_binary refuses such files itself; this is the validation layer's own guard)."""
    from fastdp._validation import register_verified_csr

    X, _ = _data()
    X = X.copy()
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    sq[5] = np.nan
    register_verified_csr(X, sq_norms=sq, finite=True)
    with pytest.raises(ValidationError, match="NaN"):
        check_X(X, max_row_norm=1.0)


def _tiny_rows(dtype, scale):
    rng = np.random.default_rng(3)
    X = sp.random(300, 20, density=0.3, format="csr", random_state=rng)
    X.sort_indices()
    X.data = (rng.uniform(0.5, 1.0, X.nnz) * scale).astype(dtype)
    y = np.where(rng.random(300) < 0.5, 0.0, 1.0)
    return X.astype(dtype), y


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e-44), (np.float64, 1e-310)])
@pytest.mark.parametrize("solver", ["output", "dpsgd", "dp_blsgd"])
def test_rows_too_small_to_normalise_in_their_dtype_are_one_clear_error(dtype, scale, solver):
    """Valid rows of subnormal values: normalising them needs a factor beyond the dtype's
    range, which made NaN rows (a kernel-level 'sq_norms = nan', 'non-finite coefficients',
    or NaN norms passing the bound).  Now one ValidationError saying what to do."""
    from fastdp.linear_model import DPLogisticRegression

    X, y = _tiny_rows(dtype, scale)
    with pytest.raises(ValidationError, match="too small to be normalised"):
        DPLogisticRegression(epsilon=1.0, random_state=0, solver=solver).fit(X, y)


def test_tiny_rows_in_float64_normalise_like_the_rescaled_rows():
    """Reference: normalising is scale-free, so float64 rows of norm ~1e-40 fit like the
    same rows times 1e40 (same bits up to the rounding of the row factors)."""
    from fastdp.linear_model import DPLogisticRegression

    X, y = _tiny_rows(np.float64, 1e-40)
    small = DPLogisticRegression(epsilon=1.0, random_state=0, solver="output").fit(X, y)
    big = DPLogisticRegression(epsilon=1.0, random_state=0, solver="output").fit(X * 1e40, y)
    np.testing.assert_allclose(small.coef_, big.coef_, rtol=1e-6, atol=1e-9)
