"""What the line-search family sends the workers (issue 21 item 5).

Every line-search query carries the model (and a search's direction) only on
the columns the worker's rows read: the lot's columns, or the worker's shard
support when that is the smaller payload, and always the support for a full
batch.  Checked here:

* on data whose rows read 11 of d + 1 = 100 001 model coordinates (10
  columns and the intercept), every model vector any query sends holds at
  most 11 values (an instrumented executor records the arguments), the bytes
  per query are bounded by the support, not by d, and the coefficients are the
  single-machine estimator's bit for bit (one shard);
* a worker's answers equal the kernels run on the dense model (the former
  protocol) bit for bit, with NaN in every scratch coordinate it was not sent
  (so no unsent coordinate is read);
* the choice lot columns / support (``sends_support``) and the prefetch of the
  next lot's columns (one ``lot_columns`` round trip per run, not per lot);
* on Ray, a killed actor is restarted and the run ends with the same bits.
"""
import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._kernels import _glm, _line_search
from fastdp.distributed.data_parallel import (
    LocalWorkers,
    RayWorkers,
    array_source,
    fit_distributed,
)
from fastdp.distributed.data_parallel.line_search import Lots, ShardOracle
from fastdp.distributed.data_parallel.worker import ShardWorker, WorkerSetup, sends_support
from fastdp.linear_model import DPLogisticRegression
from fastdp.sampling_blocks import BlockPoissonSampler, keyed_streams, sampling_key

BLOCK = 128
D = 100_000
COLUMNS = np.array([3, 17, 4_096, 12_345, 33_333, 50_000, 61_234, 77_777, 90_001, 99_998])
SUPPORT = COLUMNS.size + 1            # and the intercept column (index D)
_MODEL_ARGS = {"gradient_sums": (1,), "loss_sums": (1, 2), "support_loss_totals": (0,)}


def _narrow_rows(n=1024, d=D, seed=5):
    """n rows of unit norm, each reading 3 of the 10 ``COLUMNS`` of a d-wide matrix."""
    rng = np.random.default_rng(seed)
    cols = np.sort(np.stack([rng.choice(COLUMNS, 3, replace=False) for _ in range(n)]), axis=1)
    data = rng.standard_normal((n, 3))
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    X = sp.csr_matrix((data.ravel(), cols.ravel(), np.arange(0, 3 * n + 1, 3)), shape=(n, d))
    y = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0, 1.0, 0.0)
    return X, y


@pytest.fixture(scope="module")
def narrow():
    return _narrow_rows()


class RecordingWorkers(LocalWorkers):
    """LocalWorkers that record every call's method and per-worker arguments."""

    calls = []

    def _call(self, method, args):
        RecordingWorkers.calls.append((method, args))
        return super()._call(method, args)


def _estimator(solver, **params):
    settings = dict(epsilon=1.0, batch_size=100, epochs=2, random_state=4, solver=solver,
                    accountant="rdp", sampler=BlockPoissonSampler(batch_size=100,
                                                                  block_size=BLOCK))
    settings.update(params)
    return DPLogisticRegression(**settings)


@pytest.mark.parametrize("solver", ["dp_blsgd", "dp_blgd", "dpagd"])
def test_payload_is_the_support_not_d(narrow, solver):
    X, y = narrow
    one = _estimator(solver).fit(X, y)
    RecordingWorkers.calls = []
    fit = fit_distributed(array_source(X, y, n_shards=1, block_size=BLOCK), _estimator(solver),
                          engine=RecordingWorkers(1))
    assert np.array_equal(fit.coef_, one.coef_) and np.array_equal(fit.intercept_,
                                                                   one.intercept_)
    assert fit.n_iter_ == one.n_iter_ and fit.epsilon_ == one.epsilon_
    sent = [(method, a) for method, args in RecordingWorkers.calls for a in args
            if method in _MODEL_ARGS]
    assert {m for m, _ in sent} >= {"gradient_sums", "loss_sums"}
    for method, a in sent:
        for k in _MODEL_ARGS[method]:
            assert a[k].dtype == np.float64 and 1 <= a[k].size <= SUPPORT, (method, a[k].size)
    stats = fit.distributed_stats_
    per_query = stats["bytes_to_workers"] / stats["n_queries"]
    assert per_query <= 8 * (2 * SUPPORT + 64)          # w, g and the step candidates
    assert per_query < 8 * D / 1000                     # the dense point was 8 (D + 1) bytes


def test_four_shards_any_worker_count_same_bits(narrow):
    X, y = narrow
    source = array_source(X, y, n_shards=4, block_size=BLOCK)
    fits = [fit_distributed(source, _estimator("dp_blsgd_adaptive"), engine=LocalWorkers(w))
            for w in (1, 2, 4)]
    for fit in fits[1:]:
        assert np.array_equal(fit.coef_, fits[0].coef_) and fit.n_iter_ == fits[0].n_iter_


def test_next_lot_columns_come_with_the_gradient_reply(narrow):
    X, y = narrow
    RecordingWorkers.calls = []
    fit = fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                          _estimator("dp_blsgd"), engine=RecordingWorkers(2))
    methods = [m for m, _ in RecordingWorkers.calls]
    assert methods.count("lot_columns") == 1            # the first lot only
    assert methods.count("gradient_sums") == methods.count("loss_sums") == fit.n_iter_
    assert fit.distributed_stats_["n_queries"] <= 2 * fit.n_iter_ + 2


# ---------------------------------------------------------------- one worker's answers


def _wide_worker(n=1024, d=5000, nnz=20, seed=2):
    """A prepared one-shard worker over rows reading ``nnz`` random columns of ``d``."""
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.choice(d, size=(n, nnz)), axis=1)
    X = sp.csr_matrix((rng.standard_normal(n * nnz) / np.sqrt(nnz), cols.ravel(),
                       np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    source = array_source(X, y, n_shards=1, block_size=BLOCK)
    worker = ShardWorker(source, [0])
    assert worker.load()[0] == "ok"
    sampler = BlockPoissonSampler(batch_size=12, block_size=BLOCK)
    setup = WorkerSetup(n_rows=n, n_features=d, shift=0, classes=None, row_map=None,
                        max_row_norm=None, loss_code=_glm.LOSS_LOGISTIC, clip=1.0,
                        sampler=sampler, sampling_key=np.zeros(2, dtype=np.uint64), n_steps=0)
    assert worker.prepare(setup)[0] == "ok"
    return worker, worker.shards[0][1], worker.shards[0][2], sampler


def test_worker_answers_equal_the_dense_kernels_and_read_only_what_is_sent():
    worker, X, y, sampler = _wide_worker()
    d = X.shape[1]
    rng = np.random.default_rng(8)
    w, g = rng.standard_normal(d), rng.standard_normal(d)
    key = sampling_key(rng)
    support, = worker.support()
    assert np.array_equal(support, np.unique(X.indices))
    for lot in [(key, 3), (None, None)]:
        sizes, reported = worker.lot_columns(lot)
        rows = (np.arange(X.shape[0]) if lot[1] is None else
                sampler.lot(keyed_streams(key), X.shape[0], 3, 0, X.shape[0]))
        assert sizes == [rows.size]
        lot_cols = np.unique(X[rows].indices)
        if lot[1] is None:
            assert reported is None
            sent = support
        else:   # a lot of ~12 rows reads ~240 of ~5000 columns: its own columns are sent
            assert not sends_support(lot_cols.size, support.size)
            assert len(reported) == 1 and np.array_equal(reported[0], lot_cols)
            sent = lot_cols
        worker._theta[:] = np.nan                     # nothing unsent may be read
        worker._direction = np.full(d, np.nan)
        partials, got_sizes, ahead = worker.gradient_sums(lot, w[sent], 0.5)
        dense = np.zeros(d)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows.astype(np.int64), w,
                                  _glm.LOSS_LOGISTIC, 0.5, dense)
        (cols, sums), = partials
        assert cols is None                           # the driver knows them: not sent again
        cols = lot_cols
        assert np.array_equal(sums, dense[cols])
        assert np.all(dense[np.setdiff1d(np.arange(d), cols)] == 0.0)
        assert got_sizes == [rows.size]
        assert (ahead is None) == (lot[1] is None)
        # numpy reference for the gradient (independent of the kernel)
        Xr = X[rows].toarray()
        z = Xr @ w
        per = (-y[rows] / (1.0 + np.exp(y[rows] * z)))[:, None] * Xr
        per /= np.maximum(1.0, np.linalg.norm(per, axis=1) / 0.5)[:, None]
        np.testing.assert_allclose(sums, per.sum(axis=0)[cols], rtol=0, atol=1e-12)
        etas = np.array([1.0, 0.5, 0.25])
        got, = worker.loss_sums(lot, w[sent], g[sent], etas, 2.0)
        want = np.empty(4)
        _line_search.clipped_loss_sums(Xr @ w, Xr @ g, y[rows], etas, _glm.LOSS_LOGISTIC, 2.0,
                                       want)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_support_is_sent_when_the_lot_reads_most_of_it(narrow):
    # 10 columns: any lot of > 4 rows reads more than 2/3 of them
    assert sends_support(8, 11) and not sends_support(7, 11) and sends_support(1, 1)
    X, y = narrow
    oracle_data = array_source(X, y, n_shards=1, block_size=BLOCK)
    worker = ShardWorker(oracle_data, [0])
    worker.load()
    sampler = BlockPoissonSampler(batch_size=100, block_size=BLOCK)
    worker.prepare(WorkerSetup(n_rows=X.shape[0], n_features=D, shift=0, classes=None,
                               row_map=None, max_row_norm=None, loss_code=_glm.LOSS_LOGISTIC,
                               clip=1.0, sampler=sampler,
                               sampling_key=np.zeros(2, dtype=np.uint64), n_steps=0))
    sizes, reported = worker.lot_columns((sampling_key(np.random.default_rng(1)), 1))
    assert sizes[0] > 20 and reported is None
    assert np.array_equal(worker.support()[0], COLUMNS)
    partials, _, _ = worker.gradient_sums((sampling_key(np.random.default_rng(1)), 1),
                                          np.ones(COLUMNS.size), 1.0)
    assert partials[0][0] is not None and partials[0][0].size <= COLUMNS.size


def test_oracle_asks_a_lot_it_has_no_plan_for_once(narrow):
    # a lot not prefetched: its columns are asked once, then reused by every query on it
    X, y = narrow
    engine = RecordingWorkers(2)
    engine.open(array_source(X, y, n_shards=2, block_size=BLOCK))
    sampler = BlockPoissonSampler(batch_size=100, block_size=BLOCK)
    engine.prepare(WorkerSetup(n_rows=X.shape[0], n_features=D, shift=0, classes=None,
                               row_map=None, max_row_norm=None, loss_code=_glm.LOSS_LOGISTIC,
                               clip=1.0, sampler=sampler,
                               sampling_key=np.zeros(2, dtype=np.uint64), n_steps=0))
    oracle = ShardOracle(engine, X.shape[0], D, "logistic")
    lots = Lots(oracle, sampling_key(np.random.default_rng(3)), 7)
    RecordingWorkers.calls = []
    size = lots.shape[0]
    assert size == lots.shape[0] == oracle.lot_size(lots)
    assert [m for m, _ in RecordingWorkers.calls] == ["lot_columns", "support"]
    w = np.random.default_rng(4).standard_normal(D)
    G = oracle.clipped_gradient_sum(lots, w, 1.0)
    assert np.count_nonzero(G) <= COLUMNS.size
    assert [m for m, _ in RecordingWorkers.calls][2:] == ["gradient_sums"]


# ---------------------------------------------------------------- Ray


def test_ray_sparse_queries_survive_a_killed_worker(ray_cluster, narrow):
    X, y = narrow
    source = array_source(X, y, n_shards=4, block_size=BLOCK)
    local = fit_distributed(source, _estimator("dp_blsgd"), engine=LocalWorkers(2))
    engine = RayWorkers(n_workers=2, fail_at=(1, 3))
    fit = fit_distributed(source, _estimator("dp_blsgd"), engine=engine)
    assert engine.restarts == 1 and fit.distributed_stats_["restarts"] == 1
    assert np.array_equal(fit.coef_, local.coef_) and fit.epsilon_ == local.epsilon_
    assert fit.distributed_stats_["bytes_to_workers"] == local.distributed_stats_[
        "bytes_to_workers"]
