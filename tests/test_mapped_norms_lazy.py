"""DP-SGD fits of mapped rows sum each row's squared norm in the kernel, while they read the
row, instead of a pass over X before training (issue 20, items 2 and 3).

References: the up-front scan (``_scd.row_squared_norms`` with the row map, which
:meth:`MappedRows.kernel_sq_norms` runs and every DP-SGD fit of mapped rows passed to
the kernel before): the kernels given None must give the bits of the kernels given
the scan's norms, and full estimator fits (binary logistic/hinge/squared with lazy
and eager noise, multinomial) the bits of the same fits with the scan's norms, for
in-memory CSR and a memory-mapped binary dataset.  That the norms matter at all (so
that the comparisons can fail) is checked by a run with wrong norms.  That the pass is
gone is checked by making the scan raise.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from fastdp._kernels import _multinomial, _scd, _sgd
from fastdp._mapped_rows import MappedRows
from fastdp.exceptions import ValidationError
from fastdp.io import convert_libsvm, open_binary
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.solvers._kernel_epochs import KernelEpochs

from test_mapped_rows import _same_bits  # noqa: E402  (tests/ is on sys.path)

LOSSES = {"squared": 0, "logistic": 1, "hinge": 2}


def _scan(data, indptr, row_map):
    """The up-front scan of the kernels' norms (what the fits ran before)."""
    kw = {}
    if row_map:
        kw = dict(row_scale=row_map["row_scale"], row_shrink=row_map["row_shrink"],
                  tail_value=row_map["tail_value"], tail=row_map["tail_column"] >= 0)
    return _scd.row_squared_norms(data, indptr, **kw)


def _kernel_data(dtype, index_dtype, n=300, m=50, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, m, density=0.12, format="csr", random_state=seed)
    X.data = rng.normal(size=X.nnz) * 3.0
    X.sort_indices()
    return (X.data.astype(dtype), X.indices.astype(index_dtype), X.indptr.astype(index_dtype),
            rng)


def _row_map(n, m, rng, kind):
    if kind == "none":
        return {}
    row_map = dict(row_scale=rng.uniform(0.05, 0.4, n), row_shrink=None, tail_value=0.0,
                   tail_column=-1)
    if kind in ("shrink", "all"):
        row_map["row_shrink"] = rng.uniform(0.5, 1.0, n)
    if kind in ("tail", "all"):
        row_map.update(tail_value=0.7, tail_column=m)
    return row_map


def _batches(n, rng, size=25, steps=30):
    rows = np.concatenate([rng.choice(n, size=size, replace=False) for _ in range(steps)])
    return np.arange(0, steps * size + 1, size, dtype=np.int64), rows.astype(np.int64)


def _run_binary(data, indices, indptr, y, sq, row_map, m, batches, loss, lazy, threads=1,
                clip=0.5):
    w = np.zeros(m)
    _sgd.run_sgd(data, indices, indptr, y, sq, w, *batches, np.zeros(64), np.zeros(m, np.int32),
                 LOSSES[loss], clip, 0.995, 0.2, 0.3, lazy, np.random.PCG64(7), threads, 8,
                 **row_map)
    return w


def _run_multinomial(data, indices, indptr, y, sq, row_map, m, batches, lazy, K=4, threads=1):
    w = np.zeros((m, K))
    _multinomial.run_multinomial_sgd(data, indices, indptr, y, sq, w, *batches, np.zeros(64 * K),
                                     np.zeros(m, np.int32), 0.5, 0.995, 0.2, 0.3, lazy,
                                     np.random.PCG64(7), threads, 8, **row_map)
    return w


# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("kind", ["none", "scale", "shrink", "tail", "all"])
@pytest.mark.parametrize("lazy", [True, False])
def test_kernels_given_no_norms_give_the_bits_of_the_scan(dtype, index_dtype, kind, lazy):
    data, indices, indptr, rng = _kernel_data(dtype, index_dtype)
    n, m = indptr.shape[0] - 1, 50
    row_map = _row_map(n, m, rng, kind)
    width = m + (row_map.get("tail_column", -1) >= 0)
    batches = _batches(n, rng)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    classes = rng.integers(0, 4, n)
    sq = _scan(data, indptr, row_map)
    wrong = sq * 0.5                                    # the comparison can fail
    for threads in (1, 2):
        for loss in LOSSES:
            want = _run_binary(data, indices, indptr, y, sq, row_map, width, batches, loss, lazy,
                               threads)
            got = _run_binary(data, indices, indptr, y, None, row_map, width, batches, loss,
                              lazy, threads)
            assert _same_bits(got, want), (loss, threads)
            assert not _same_bits(_run_binary(data, indices, indptr, y, wrong, row_map, width,
                                              batches, loss, lazy, threads), want)
        want = _run_multinomial(data, indices, indptr, classes, sq, row_map, width, batches,
                                lazy, threads=threads)
        got = _run_multinomial(data, indices, indptr, classes, None, row_map, width, batches,
                               lazy, threads=threads)
        assert _same_bits(got, want), threads
        assert not _same_bits(_run_multinomial(data, indices, indptr, classes, wrong, row_map,
                                               width, batches, lazy, threads=threads), want)


def test_overflowing_norm_is_clipped_to_nothing_as_with_the_scan():
    """A row whose squares overflow has norm inf in both paths: its clipped gradient is 0."""
    data, indices, indptr, rng = _kernel_data(np.float64, np.int64)
    data[indptr[3]:indptr[4]] = 1e200
    n, m = indptr.shape[0] - 1, 50
    sq = _scan(data, indptr, {})
    assert sq[3] == np.inf
    batches = (np.array([0, 3], dtype=np.int64), np.array([3, 5, 7], dtype=np.int64))
    y = np.ones(n)
    for loss in ("logistic", "hinge"):
        want = _run_binary(data, indices, indptr, y, sq, {}, m, batches, loss, True)
        got = _run_binary(data, indices, indptr, y, None, {}, m, batches, loss, True)
        assert _same_bits(got, want) and np.all(np.isfinite(got))
    got = _run_multinomial(data, indices, indptr, np.zeros(n, np.int64), None, {}, m, batches,
                           True)
    assert _same_bits(got, _run_multinomial(data, indices, indptr, np.zeros(n, np.int64), sq,
                                            {}, m, batches, True))


def test_given_norms_are_still_checked():
    data, indices, indptr, rng = _kernel_data(np.float64, np.int32)
    n = indptr.shape[0] - 1
    batches = _batches(n, rng)
    y = np.ones(n)
    sq = _scan(data, indptr, {})
    sq[5] = np.nan
    with pytest.raises(ValidationError, match="sq_norms"):
        _run_binary(data, indices, indptr, y, sq, {}, 50, batches, "logistic", True)
    with pytest.raises(ValidationError, match="sq_norms"):
        _run_binary(data, indices, indptr, y, sq[:-1] * 0 + 1, {}, 50, batches, "logistic",
                    True)
    with pytest.raises(ValidationError, match="sq_norms"):
        _run_multinomial(data, indices, indptr, np.zeros(n, np.int64), sq, {}, 50, batches,
                         True)
    w = np.zeros((50, 3))
    with pytest.raises(ValidationError, match="sq_norms is None"):   # no in-kernel norms here
        _multinomial.clipped_gradient_sum(data, indices, indptr, np.zeros(n, np.int64), None,
                                          np.arange(3, dtype=np.int64), w, 0.5, np.zeros_like(w))


# --------------------------------------------------------------------------- estimator fits


def _estimator_data(dtype, index_dtype, classes, normalize, n=360, d=40, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.15, random_state=seed, format="csr", dtype=np.float64)
    X.data = rng.normal(size=X.nnz) * 3.0
    if not normalize:                   # rows inside the unit ball already
        X = sp.diags(0.9 / np.maximum(np.sqrt(X.multiply(X).sum(axis=1)).A1, 1e-12)) @ X
        X = X.tocsr()
    X = X.astype(dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    labels = rng.integers(0, max(classes, 2), size=n)
    if classes == 0:
        y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    elif classes == 2:
        y = np.where(labels == 1, 1.0, -1.0)
    else:
        y = labels.astype(np.float64)
    return X, np.asarray(y, dtype=np.float64)


def _memory_mapped(tmp_path, X, y, dtype, index_dtype):
    dump_svmlight_file(X.astype(np.float64), y, str(tmp_path / "d.svm"), zero_based=True)
    convert_libsvm(tmp_path / "d.svm", tmp_path / "d.fdp", dtype=dtype, index_dtype=index_dtype,
                   n_features=X.shape[1], zero_based=True)
    Xm, ym = open_binary(tmp_path / "d.fdp")
    assert isinstance(Xm.data, np.memmap)
    assert Xm.data.dtype == dtype and Xm.indices.dtype == index_dtype
    return Xm, np.asarray(ym)


# name: (estimator, classes, parameters)
FITS = {
    "logistic-lazy": (DPLogisticRegression, 2, {}),
    "logistic-eager": (DPLogisticRegression, 2, dict(lazy_noise=False)),
    "hinge": (DPLinearSVC, 2, {}),
    "squared": (DPRidge, 0, dict(clip=1.0)),
    "multinomial-lazy": (DPLogisticRegression, 4, {}),
    "multinomial-eager": (DPLogisticRegression, 4, dict(lazy_noise=False)),
}


def _fit(case, X, y, normalize, fit_intercept, **extra):
    estimator, _, params = FITS[case]
    return estimator(epsilon=2.0, solver="dpsgd", epochs=2, batch_size=40, random_state=3,
                     normalize=normalize, fit_intercept=fit_intercept,
                     **params, **extra).fit(X, y)


def _up_front(self):
    """The norms as before: the scan over X, made before training."""
    return self.kernel_sq_norms()


def _no_scan(self):
    raise AssertionError("the mapped rows' kernel norms were computed by a scan of X")


def _same_fit(got, want):
    assert _same_bits(got.coef_, want.coef_)
    assert _same_bits(np.asarray(got.intercept_), np.asarray(want.intercept_))
    assert np.all(np.isfinite(got.coef_)) and np.any(got.coef_ != 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("case", sorted(FITS))
@pytest.mark.parametrize("storage", ["memory", "mapped"])
def test_fit_has_the_bits_of_the_up_front_norms(monkeypatch, tmp_path, storage, case, dtype,
                                                index_dtype, normalize, fit_intercept):
    X, y = _estimator_data(dtype, index_dtype, FITS[case][1], normalize)
    if storage == "mapped":
        X, y = _memory_mapped(tmp_path, X, y, dtype, index_dtype)
    with monkeypatch.context() as patch:      # before: the scan, then the kernel
        patch.setattr(MappedRows, "known_kernel_sq_norms", _up_front)
        want = _fit(case, X, y, normalize, fit_intercept)
    with monkeypatch.context() as patch:      # now: no scan, the kernel sums the norms
        patch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
        got = _fit(case, X, y, normalize, fit_intercept)
    _same_fit(got, want)


@pytest.mark.parametrize("case", ["logistic-lazy", "multinomial-lazy"])
def test_fit_with_two_threads_has_the_bits_of_the_up_front_norms(monkeypatch, case):
    X, y = _estimator_data(np.float32, np.int32, FITS[case][1], True)
    with monkeypatch.context() as patch:
        patch.setattr(MappedRows, "known_kernel_sq_norms", _up_front)
        want = _fit(case, X, y, True, True, num_threads=2)
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    _same_fit(_fit(case, X, y, True, True, num_threads=2), want)
    _same_fit(_fit(case, X, y, True, True, num_threads=1), want)


# --------------------------------------------------------------------------- the pass is gone


@pytest.mark.parametrize("case", sorted(FITS))
def test_dpsgd_fit_of_mapped_rows_does_not_scan_x(monkeypatch, case):
    X, y = _estimator_data(np.float64, np.int32, FITS[case][1], True)
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    model = _fit(case, X, y, True, True)
    assert np.all(np.isfinite(model.coef_))


def test_the_scan_guard_fires_where_the_norms_are_asked_for(monkeypatch):
    """The guard of the test above can fail: the set-up of the epochs without in-kernel
    norms (DP-SCD's, and every DP-SGD fit's before) runs the scan."""
    from fastdp.preprocessing import RowMap
    from fastdp._validation import check_X

    X, y = _estimator_data(np.float64, np.int32, 2, True)
    mapped = RowMap(bound="normalize", fit_intercept=True).map_rows(check_X(X))
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    rng = np.random.default_rng(0)
    run = KernelEpochs(mapped, y, num_threads=1, noise_rng=rng, norms_in_kernel=True)
    assert run.sq_norms is None
    with pytest.raises(AssertionError, match="scan of X"):
        KernelEpochs(mapped, y, num_threads=1, noise_rng=rng)


def test_norms_a_pass_already_computed_are_passed_on(monkeypatch):
    """Mapped rows whose norms came from a pass that wrote them out (``tocsr``) hand those
    to the kernel (no work in the kernel), with the same bits."""
    from fastdp.preprocessing import RowMap
    from fastdp._validation import check_X

    X, y = _estimator_data(np.float32, np.int64, 2, True)
    mapped = RowMap(bound="normalize", fit_intercept=True).map_rows(check_X(X))
    assert mapped.known_kernel_sq_norms() is None
    want = mapped.kernel_sq_norms()
    fresh = RowMap(bound="normalize", fit_intercept=True).map_rows(check_X(X))
    fresh.tocsr()
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    run = KernelEpochs(fresh, y, num_threads=1, noise_rng=np.random.default_rng(0),
                       norms_in_kernel=True)
    assert _same_bits(run.sq_norms, want)


# --------------------------------------------------------------------------- no scan of values


def test_estimator_fit_reads_no_values_of_a_verified_dataset(monkeypatch, tmp_path):
    """scikit-learn's finiteness check (a pass over X.data) is skipped for a binary dataset,
    whose values were checked when it was written; it still runs on any other X."""
    import sklearn.utils.validation as skv

    X, y = _estimator_data(np.float32, np.int32, 2, True)
    Xm, ym = _memory_mapped(tmp_path, X, y, np.float32, np.int32)
    seen = []
    real = skv._assert_all_finite

    def spy(values, *args, **kwargs):
        seen.append(np.asarray(values).shape)
        return real(values, *args, **kwargs)

    monkeypatch.setattr(skv, "_assert_all_finite", spy)
    monkeypatch.setattr(MappedRows, "_scan_kernel_sq_norms", _no_scan)
    mapped_fit = _fit("logistic-lazy", Xm, ym, True, True)
    assert (Xm.nnz,) not in seen                         # labels only
    copy = sp.csr_matrix((np.array(Xm.data), np.array(Xm.indices), np.array(Xm.indptr)),
                         shape=Xm.shape)
    seen.clear()
    _same_fit(_fit("logistic-lazy", copy, ym, True, True), mapped_fit)
    assert (Xm.nnz,) in seen                             # the spy sees a scan of values
    bad = copy.copy()
    bad.data[3] = np.nan
    with pytest.raises(ValidationError, match="NaN"):
        _fit("logistic-lazy", bad, ym, True, True)
