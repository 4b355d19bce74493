"""Fits of memory-mapped binary datasets (issue 20): stored row norms and access advice.

References: the same fit on the same data copied into memory (the arrays
equal, the kernels' row norms computed by a scan) must give the same bits;
the row-norm scan itself is replaced by a function that raises, so a fit of
mapped data that still scanned X would fail.  The readahead of
``fastdp.io._advice`` is checked by forcing it on (small budget, pages
dropped from the page cache first) and comparing bits again, and against
``mincore``: the rows it asks for arrive in the page cache.
"""

import os
import time

import numpy as np
import pytest
import scipy.sparse as sp

import fastdp._kernels._scd as scd_kernels
import fastdp.io._advice as advice
import fastdp.preprocessing as preprocessing
from fastdp.datasets import make_sparse_classification
from fastdp.exceptions import ValidationError
from fastdp.io import open_binary
from fastdp.io.binary import save_binary
from fastdp.io.libsvm import csr_from_arrays
from fastdp.linear_model import DPLogisticRegression
from fastdp.solvers.scd import dual_dpscd, seq_dpscd
from fastdp.solvers.sgd import dpsgd

SOLVERS = {
    "dpsgd": lambda X, y: dpsgd(X, y, loss="logistic", lam=1e-4, epochs=2, batch_size=40,
                                clip=1.0, noise_multiplier=1.0, random_state=3),
    "dual_dpscd": lambda X, y: dual_dpscd(X, y, loss="logistic", lam=1e-4, epochs=2,
                                          batch_size=40, clip=0.05, noise_multiplier=1.0,
                                          random_state=3),
    "seq_dpscd": lambda X, y: seq_dpscd(X, y, loss="hinge", lam=1e-3, epochs=1, batch_size=40,
                                        clip=0.05, noise_multiplier=1.0, random_state=3),
}


def _dataset(tmp_path, dtype, index_dtype=None, n=1500, d=300, name="d.fdp"):
    X, y = make_sparse_classification(n, d, nnz_per_row=25, random_state=0)
    X = X.astype(np.float64) * 0.999  # rows of norm 0.999: the DP mechanisms' bound
    X.data *= np.random.default_rng(1).uniform(0.2, 1.0, X.nnz)  # rows of many norms
    chunks = ((X[a:a + 400], y[a:a + 400]) for a in range(0, n, 400))
    save_binary(tmp_path / name, chunks, n_features=d, dtype=dtype, index_dtype=index_dtype)
    return open_binary(tmp_path / name)


def _in_memory(Xm):
    """The mapped matrix copied into memory (same dtypes; not registered: norms scanned)."""
    return csr_from_arrays(np.array(Xm.data), np.array(Xm.indices), np.array(Xm.indptr),
                           Xm.shape)


def _no_scan(*args, **kwargs):
    raise AssertionError("the row norms of X were computed by a scan of X")


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


def _same_result(a, b):
    assert _bits(a.coef) == _bits(b.coef)
    for name in ("alpha", "v"):
        if getattr(a, name) is not None:
            assert _bits(getattr(a, name)) == _bits(getattr(b, name))
    assert a.n_iter == b.n_iter and a.event == b.event


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("dtype,index_dtype", [(np.float32, None), (np.float64, None),
                                               (np.float32, np.int64)])
def test_solver_fit_of_mapped_data_equals_in_memory_without_scanning(tmp_path, monkeypatch,
                                                                      solver, dtype,
                                                                      index_dtype):
    Xm, y = _dataset(tmp_path, dtype, index_dtype)
    assert isinstance(Xm.data, np.memmap)
    Xmem = _in_memory(Xm)
    reference = SOLVERS[solver](Xmem, y)  # scans Xmem for the kernels' row norms
    monkeypatch.setattr(scd_kernels, "row_squared_norms", _no_scan)
    with pytest.raises(AssertionError, match="scan of X"):  # the patch does bite
        SOLVERS[solver](_in_memory(Xm), y)
    _same_result(SOLVERS[solver](Xm, y), reference)


def test_stored_kernel_norms_are_the_kernels_bits(tmp_path):
    """``kernel_sq_norms.npy`` equals the kernels' own sum, and differs from check_X's
    pairwise sums (``row_sq_norms.npy``) on some rows: they are not interchangeable."""
    Xm, _ = _dataset(tmp_path, np.float64)
    stored = np.load(tmp_path / "d.fdp" / "kernel_sq_norms.npy")
    scanned = scd_kernels.row_squared_norms(np.array(Xm.data), np.array(Xm.indptr))
    assert _bits(stored) == _bits(scanned)
    pairwise = np.load(tmp_path / "d.fdp" / "row_sq_norms.npy")
    assert np.any(pairwise != stored) and np.allclose(pairwise, stored, rtol=1e-14, atol=0)


@pytest.mark.parametrize("solver", ["dpsgd", "dpscd"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_estimator_row_map_takes_stored_norms(tmp_path, monkeypatch, solver, dtype):
    """normalize=True and fit_intercept=True: the row map's norms come from the dataset
    (its scan raises), and the fitted model has the bits of the in-memory fit."""
    Xm, y = _dataset(tmp_path, dtype)
    y01 = (y > 0).astype(int)

    def fit(X):
        return DPLogisticRegression(epsilon=1.0, solver=solver, epochs=2, batch_size=40,
                                    random_state=5).fit(X, y01)

    reference = fit(_in_memory(Xm))
    scan = preprocessing._csr_blocks
    monkeypatch.setattr(preprocessing, "_csr_blocks", _no_scan)
    with pytest.raises(AssertionError, match="scan of X"):
        fit(_in_memory(Xm))
    model = fit(Xm)
    monkeypatch.setattr(preprocessing, "_csr_blocks", scan)
    assert _bits(model.coef_) == _bits(reference.coef_)
    assert _bits(model.intercept_) == _bits(reference.intercept_)
    assert model.epsilon_ == reference.epsilon_


def test_row_map_reads_only_the_zero_rows(tmp_path, monkeypatch):
    """An all-zero row (norm 0) is looked at on its own, not with a scan of all of X."""
    X, y = make_sparse_classification(300, 50, nnz_per_row=5, random_state=2)
    X = X.tolil()
    X[7] = 0.0
    X = X.tocsr()
    X.eliminate_zeros()
    save_binary(tmp_path / "z.fdp", [(X * 0.5, y)], n_features=50)
    Xm, _ = open_binary(tmp_path / "z.fdp")
    reference = preprocessing.row_norms(_in_memory(Xm))
    seen = []
    real = preprocessing._csr_blocks

    def counting(M):
        seen.append(M.shape[0])
        return real(M)

    monkeypatch.setattr(preprocessing, "_csr_blocks", counting)
    assert _bits(preprocessing.row_norms(Xm)) == _bits(reference)
    assert seen == [1]  # the zero row alone
    assert reference[7] == 0.0


def test_format_version_1_is_refused_with_the_fix(tmp_path):
    import json

    from fastdp.io.binary import _header_digest

    _dataset(tmp_path, np.float32)
    path = tmp_path / "d.fdp" / "header.json"
    header = json.loads(path.read_text())
    header["format_version"] = 1
    header["header_sha256"] = _header_digest(header)
    path.write_text(json.dumps(header))
    with pytest.raises(ValidationError, match=r"version 1.*fastdp convert"):
        open_binary(tmp_path / "d.fdp")


def test_verify_checks_the_stored_kernel_norms(tmp_path):
    _dataset(tmp_path, np.float64)
    path = tmp_path / "d.fdp" / "kernel_sq_norms.npy"
    norms = np.load(path)
    norms[5] = np.nextafter(norms[5], 2.0)
    np.save(path, norms)
    open_binary(tmp_path / "d.fdp")  # cheap checks only
    with pytest.raises(ValidationError, match="kernel row norms"):
        open_binary(tmp_path / "d.fdp", verify=True)


# --------------------------------------------------------------------------- advice


def _evict(directory):
    """Drop the dataset's pages from the page cache (written back first)."""
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def _cached_pages(array):
    lo, length = advice._span(array)
    vec = np.zeros((length + advice._PAGE - 1) // advice._PAGE, dtype=np.uint8)
    assert advice._LIBC.mincore(lo, length, vec.ctypes.data) == 0
    return lo // advice._PAGE, vec & 1


def test_advice_is_a_no_op_in_memory():
    X = sp.random(50, 20, density=0.3, format="csr", random_state=0)
    assert advice.mapped_arrays(X) is None
    with advice.step_advice(X, np.array([0, 3]), np.array([1, 2, 3])) as active:
        assert active.thread is None and active.arrays is None


@pytest.mark.skipif(advice._LIBC is None, reason="madvise/mincore through libc (Linux)")
@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_forced_readahead_changes_no_bits(tmp_path, monkeypatch, solver):
    """Readahead on (whatever is cached), with a budget of a few pages so that it waits
    for the kernel: the same bits as without any advice, in memory."""
    Xm, y = _dataset(tmp_path, np.float32, n=4000, d=2000)
    reference = SOLVERS[solver](_in_memory(Xm), y)
    monkeypatch.setattr(advice, "_RESIDENT_SKIP", 2.0)
    monkeypatch.setattr(advice, "_BUDGET_MAX", 3 * advice._PAGE)
    started = []
    real = advice._Readahead.start

    def start(self):
        started.append(self)
        real(self)

    monkeypatch.setattr(advice._Readahead, "start", start)
    _evict(tmp_path / "d.fdp")
    _same_result(SOLVERS[solver](Xm, y), reference)
    assert started and all(not thread.is_alive() for thread in started)
    assert sum(thread.pages_asked for thread in started) > 0


@pytest.mark.skipif(advice._LIBC is None, reason="madvise/mincore through libc (Linux)")
def test_readahead_brings_the_batch_rows_into_the_page_cache(tmp_path):
    Xm, _ = _dataset(tmp_path, np.float64, n=6000, d=4000)
    rows = np.arange(0, 6000, 97, dtype=np.int64)
    starts = np.array(Xm.indptr[rows], dtype=np.int64)
    ends = np.array(Xm.indptr[rows + 1], dtype=np.int64)
    _evict(tmp_path / "d.fdp")
    if _cached_pages(Xm.data)[1].mean() > 0.5:
        pytest.skip("this file system keeps the pages cached (tmpfs?)")
    thread = advice._Readahead((Xm.data, Xm.indices, Xm.indptr),
                               np.array([0, rows.size]), rows, budget=1 << 30)
    thread.start()
    thread.join()
    assert thread.pages_asked > 0
    for array in (Xm.data, Xm.indices):  # every page holding one of the rows arrives
        size = array.itemsize
        first = (array.ctypes.data + starts * size) // advice._PAGE
        last = (array.ctypes.data + ends * size - 1) // advice._PAGE
        wanted = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)]))
        for _ in range(200):  # the reads are asynchronous: up to 10 s
            lo, cached = _cached_pages(array)
            if np.all(cached[wanted - lo]):
                break
            time.sleep(0.05)
        assert np.all(cached[wanted - lo])
        assert cached.mean() < 0.9  # and not the whole file (MADV_WILLNEED of rows only)


def test_page_runs_merge_adjacent_ranges():
    page = advice._PAGE
    starts = np.array([0, 10, page - 4, 5 * page, 5 * page + 8, 9 * page])
    ends = np.array([8, 20, page + 4, 5 * page + 8, 6 * page + 1, 9 * page])  # last: empty
    lo, count = advice._page_runs(starts, ends, 0)
    assert lo.tolist() == [0, 5] and count.tolist() == [2, 2]


@pytest.mark.parametrize("y", [
    np.array([-1.0, 1.0, 1.0, -1.0]), np.array([0, 1, 1, 0, 1]), np.array([0.0, 1.0, 0.0]),
    np.array([2.5, -7.0, 2.5]), np.array([True, False, False]),
    np.array([3, 9, 9], dtype=np.uint8), np.array([0.0, -0.0, 1.0, 1.0]),
    np.array([-0.0, 1.0, 0.0]), np.array([1.0, 1.0]), np.array([1.0, 2.0, 3.0]),
], ids=lambda y: f"{y.dtype}:{y.tolist()}")
def test_binary_labels_without_a_sort_give_the_bits_of_np_unique(y):
    """The O(n) path of ``check_labels`` (min, max, comparisons) against np.unique."""
    from fastdp._validation import check_labels

    classes, codes = np.unique(y, return_inverse=True)
    if classes.shape[0] != 2:
        with pytest.raises(ValidationError, match="exactly 2 classes"):
            check_labels(y, "binary")
        return
    y_pm, found = check_labels(y, "binary")
    assert _bits(y_pm) == _bits(np.where(codes.reshape(-1) == 1, 1.0, -1.0))
    assert found.dtype == classes.dtype and _bits(found) == _bits(classes)
