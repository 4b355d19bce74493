"""The audit's minor findings next to the mapped-dataset checks, each one clear error.

* ``num_threads`` NaN, infinity, 0, negative, a bool or a float: the GLM
  oracle (under the accelerated and line-search solvers) turned it into a raw
  ``ValueError``/``OverflowError`` (NaN, infinity) or silently into 1 (0, a
  negative count, ``True``, 2.5 truncated to 2); it is now the same
  ``ValidationError`` as the other solvers give, before X is read.
* ``index_dtype=np.int32`` forced on data of more than 2**31 - 1 columns: the
  converter silently wrote int64, ``load_libsvm`` returned int32 indices with
  a column count int32 cannot hold (the estimators append one more column);
  now a ``ValidationError`` naming int32 and the column count.  With
  ``index_dtype=None`` such data gets int64 (``iter_libsvm_chunks`` too, as
  ``load_libsvm`` already did).
* ``RowProducts.dot`` accepted a vector longer than the number of columns
  (the extra entries ignored); ``dot``/``tdot`` now refuse any other length.
"""

import math
import os

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.io.binary import convert_libsvm, save_binary
from fastdp.io.libsvm import iter_libsvm_chunks, load_libsvm
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import RowMap
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.solvers.accelerated.oracle import GLMProblem
from fastdp.solvers.glm_oracle import GlmOracle, RowProducts
from fastdp.solvers.line_search import dp_agd
from fastdp.solvers.line_search.oracle import GlmBatchOracle

BAD_THREADS = [math.nan, math.inf, -math.inf, 0, -1, True, False, 2.5, "2"]
INT32_MAX = 2**31 - 1


def _data(n=80, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    X.data *= 0.3
    return check_X(X), np.where(rng.random(n) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("value", BAD_THREADS, ids=repr)
@pytest.mark.parametrize("make", [
    lambda X, y, t: GlmOracle(X, y, loss="logistic", num_threads=t),
    lambda X, y, t: GlmBatchOracle(X, y, "logistic", num_threads=t),
    lambda X, y, t: GLMProblem(X, y, loss="logistic", lam=0.1, row_l1_bound=10.0,
                               num_threads=t),
    lambda X, y, t: dp_agd(X, y, epsilon=1.0, delta=1e-5, loss="logistic", num_threads=t),
], ids=["GlmOracle", "GlmBatchOracle", "GLMProblem", "dp_agd"])
def test_bad_num_threads_is_a_validation_error_in_the_glm_oracles(make, value):
    X, y = _data()
    with pytest.raises(ValidationError, match="num_threads must be"):
        make(X, y, value)


def test_good_num_threads_give_the_same_bits_as_one_thread():
    X, y = _data()
    w = np.linspace(-1.0, 1.0, X.shape[1])
    reference = GlmOracle(X, y, loss="logistic", lam=0.1).gradient(w)
    for value in (None, 1, 2, np.int64(3)):
        oracle = GlmOracle(X, y, loss="logistic", lam=0.1, num_threads=value)
        assert oracle.num_threads == (1 if value is None else int(value))
        assert np.array_equal(oracle.gradient(w).view(np.uint64), reference.view(np.uint64))
    result = dp_agd(X, y, epsilon=1.0, delta=1e-5, loss="logistic", num_threads=None,
                    random_state=0)
    assert result.num_threads == 1


@pytest.mark.parametrize("solver", ["dpsgd", "output", "dp_nesterov", "dpagd"])
@pytest.mark.parametrize("value", [math.nan, -math.inf, 0, True])
def test_estimators_refuse_bad_num_threads_before_charging(solver, value):
    X, y = _data()
    ledger = PrivacyLedger(epsilon=20.0, delta=1e-5)
    clf = DPLogisticRegression(epsilon=1.0, solver=solver, ledger=ledger, random_state=0)
    clf.fit(X, y)
    coef, entries = clf.coef_.copy(), len(ledger.entries)
    with pytest.raises(ValidationError, match="num_threads must be"):
        clf.set_params(num_threads=value).fit(X, y)
    assert np.array_equal(clf.coef_, coef) and len(ledger.entries) == entries


# ----------------------------------------------------------------------- index dtype


@pytest.fixture(scope="module")
def widest(tmp_path_factory):
    """Zero-based column index 2**31 - 1: 2**31 columns, one more than int32 counts."""
    path = tmp_path_factory.mktemp("wide") / "wide.svm"
    path.write_text(f"1 {INT32_MAX}:1.5\n-1 2:1\n")
    return path


def test_forced_int32_with_too_many_columns_is_refused_by_every_reader(widest, tmp_path):
    int32 = "index_dtype=int32 cannot hold this data: it has 2147483648 columns"
    with pytest.raises(ValidationError, match=int32):
        load_libsvm(widest, zero_based=True, index_dtype=np.int32)
    with pytest.raises(ValidationError, match=int32):
        list(iter_libsvm_chunks(widest, zero_based=True, index_dtype=np.int32))
    with pytest.raises(ValidationError, match=int32):
        convert_libsvm(widest, tmp_path / "w.fdp", zero_based=True, index_dtype=np.int32)
    assert not os.listdir(tmp_path)  # nothing left behind
    many = "it has 2147483650 columns"
    with pytest.raises(ValidationError, match=many):
        load_libsvm(widest, n_features=INT32_MAX + 3, index_dtype=np.int32)
    with pytest.raises(ValidationError, match=many):
        convert_libsvm(widest, tmp_path / "w.fdp", n_features=INT32_MAX + 3,
                       index_dtype=np.int32)
    with pytest.raises(ValidationError, match=many):
        save_binary(tmp_path / "s.fdp", [(sp.csr_matrix((1, INT32_MAX + 3)), [1.0])],
                    n_features=INT32_MAX + 3, index_dtype=np.int32)
    assert not os.listdir(tmp_path)


def test_int32_holds_exactly_int32_max_columns_and_none_widens_beyond(widest, tmp_path):
    # one-based: 2**31 - 1 columns, the most int32 counts: int32 is kept when forced
    X, _ = load_libsvm(widest, zero_based=False, index_dtype=np.int32)
    assert X.shape[1] == INT32_MAX and X.indices.dtype == np.int32
    header = convert_libsvm(widest, tmp_path / "a.fdp", zero_based=False, index_dtype=np.int32)
    assert header["index_dtype"] == "int32" and header["shape"][1] == INT32_MAX
    # one column more with the dtype left to fastdp: int64 from every reader
    X, _ = load_libsvm(widest, zero_based=True)
    assert X.shape[1] == INT32_MAX + 1 and X.indices.dtype == np.int64
    (chunk, _), = iter_libsvm_chunks(widest, zero_based=True)
    assert chunk.shape[1] == INT32_MAX + 1
    assert chunk.indices.dtype == chunk.indptr.dtype == np.int64
    assert np.array_equal(chunk.indices, X.indices) and np.array_equal(chunk.data, X.data)
    header = convert_libsvm(widest, tmp_path / "b.fdp", zero_based=True)
    assert header["index_dtype"] == "int64" and header["shape"][1] == INT32_MAX + 1


# ----------------------------------------------------------------------- RowProducts


@pytest.mark.parametrize("intercept", [False, True])
def test_row_products_refuse_a_vector_of_another_length(intercept):
    X, _ = _data(n=20, d=5)
    rows = RowMap(fit_intercept=intercept).map_rows(X)
    products = RowProducts(rows)
    n, d = products.shape
    assert d == 5 + intercept   # the appended constant column counts
    dense = rows.tocsr().toarray()  # the mapped rows written out
    v = np.linspace(-1.0, 2.0, d)
    np.testing.assert_allclose(products.dot(v), dense @ v, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(products.tdot(np.ones(n)), dense.sum(axis=0), rtol=1e-13)
    for bad in (np.ones(d + 1), np.ones(d - 1), np.ones((d + 1, 2)), np.ones((d, 2, 1)),
                np.ones(0)):
        with pytest.raises(ValidationError, match=rf"dot\(V\) needs V of shape \({d},\)"):
            products.dot(bad)
    for bad in (np.ones(n + 1), np.ones((n - 1, 3))):
        with pytest.raises(ValidationError, match=rf"tdot\(A\) needs A of shape \({n},\)"):
            products.tdot(bad)
