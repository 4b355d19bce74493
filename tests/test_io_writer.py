"""Tests of the binary writers: ``save_binary``, and ``convert_libsvm`` failing mid-write.

References: ``convert_libsvm`` of the same rows written as text (the
arrays of both datasets must be byte-identical) and ``open_binary(verify=True)``,
which recomputes every stored check.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

import fastdp.io._npy as npy_module
import fastdp.io.binary as binary
from fastdp.exceptions import ValidationError
from fastdp.io import convert_libsvm, open_binary
from fastdp.io.binary import save_binary

ARRAYS = ("indptr", "indices", "data", "labels", "row_sq_norms")


def _rows(n_rows=300, n_cols=40, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_cols, density=0.2, format="csr", random_state=rng)
    X.data = np.round(rng.standard_normal(X.nnz), 6)  # exact through %.16g text
    return X, rng.choice([-1.0, 1.0], n_rows)


def _chunks(X, y, size):
    return ((X[a:a + size], y[a:a + size]) for a in range(0, X.shape[0], size))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_save_binary_writes_what_convert_writes(tmp_path, dtype):
    X, y = _rows()
    dump_svmlight_file(X, y, str(tmp_path / "a.svm"), zero_based=True)
    convert_libsvm(tmp_path / "a.svm", tmp_path / "c.fdp", dtype=dtype, zero_based=True,
                   n_features=X.shape[1])
    header = save_binary(tmp_path / "s.fdp", _chunks(X, y, 70), n_features=X.shape[1],
                         dtype=dtype)
    for name in ARRAYS:
        assert ((tmp_path / "c.fdp" / f"{name}.npy").read_bytes()
                == (tmp_path / "s.fdp" / f"{name}.npy").read_bytes()), name
    Xs, ys = open_binary(tmp_path / "s.fdp", verify=True)
    assert header["shape"] == list(X.shape) and header["nnz"] == X.nnz
    assert header["source"]["sha256"] is None
    np.testing.assert_array_equal(Xs.toarray(), X.toarray().astype(dtype))
    np.testing.assert_array_equal(ys, y)


def test_save_binary_widens_past_int32(tmp_path, monkeypatch):
    """A small analogue of a dataset of more than 2**31 - 1 entries."""
    monkeypatch.setattr(binary, "INT32_MAX", 500)
    X, y = _rows()
    assert X.nnz > 500
    header = save_binary(tmp_path / "s.fdp", _chunks(X, y, 50), n_features=X.shape[1])
    Xs, _ = open_binary(tmp_path / "s.fdp", verify=True)
    assert header["index_dtype"] == "int64" and Xs.indptr.dtype == np.int64
    np.testing.assert_array_equal(Xs.toarray(), X.toarray())
    with pytest.raises(ValidationError, match="int32"):
        save_binary(tmp_path / "t.fdp", _chunks(X, y, 50), n_features=X.shape[1],
                    index_dtype=np.int32)
    assert not list(tmp_path.glob("t.fdp*"))


def test_save_binary_refuses_bad_chunks_and_leaves_nothing(tmp_path):
    X, y = _rows()
    unsorted = X[:10].copy()
    unsorted.indices[unsorted.indptr[0]:unsorted.indptr[1]] = \
        unsorted.indices[unsorted.indptr[0]:unsorted.indptr[1]][::-1].copy()
    assert unsorted.indptr[1] - unsorted.indptr[0] >= 2
    for chunks, match in (([(X[:10], y[:10]), (unsorted, y[:10])], "strictly increasing"),
                          ([(X[:10], y[:9])], "labels"),
                          ([(X[:10].tocsc(), y[:10])], "CSR"),
                          ([(X[:10, :5], y[:10])], "columns")):
        with pytest.raises(ValidationError, match=match):
            save_binary(tmp_path / "s.fdp", chunks, n_features=X.shape[1])
        assert not list(tmp_path.glob("s.fdp*"))


def test_a_failed_write_is_raised_and_leaves_nothing(tmp_path, monkeypatch):
    X, y = _rows(2000)
    dump_svmlight_file(X, y, str(tmp_path / "a.svm"))
    monkeypatch.setattr("fastdp.io._source.CHUNK_BYTES", 4096)  # many chunks
    calls = []
    append = npy_module.NpyAppender.append

    def failing(self, values):
        calls.append(1)
        if len(calls) > 12:
            raise OSError(28, "No space left on device")
        return append(self, values)

    monkeypatch.setattr(npy_module.NpyAppender, "append", failing)
    with pytest.raises(OSError, match="No space"):
        convert_libsvm(tmp_path / "a.svm", tmp_path / "d.fdp")
    assert not list(tmp_path.glob("d.fdp*"))
