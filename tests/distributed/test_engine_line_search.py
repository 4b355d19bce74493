"""The Gaussian line-search family on the data-parallel engine (issue 21).

Reference: the single-machine estimator with the same block-keyed sampler
(``GlmOracle`` over all rows, lots drawn by ``BlockPoissonSampler``'s own
stream): bit for bit with one shard; with 4 shards the bits do not depend on
the number of workers and agree with one shard to 1e-12 x max |coef| (the
reduction's rounding).  Same event, same epsilon, same ledger charge.
"""
import numpy as np
import pytest

from fastdp.distributed.data_parallel import (
    LocalWorkers,
    RayWorkers,
    ShardValidationError,
    array_source,
    fit_distributed,
    libsvm_source,
)
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.sampling_blocks import BlockPoissonSampler

from shard_setup import BLOCK

SOLVERS = ["dp_blsgd", "dp_blsgd_adaptive", "dp_blsgd_ac", "dp_blgd", "dpagd"]


def _estimator(solver, cls=DPLogisticRegression, **params):
    settings = dict(epsilon=1.0, batch_size=150, epochs=2, random_state=11, solver=solver,
                    accountant="rdp", sampler=BlockPoissonSampler(batch_size=150, block_size=BLOCK))
    settings.update(params)
    return cls(**settings)


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())


@pytest.fixture(scope="module")
def singles(shard_data):
    return {s: _estimator(s).fit(*shard_data) for s in SOLVERS}


@pytest.mark.parametrize("solver", SOLVERS)
def test_one_shard_is_the_single_machine_fit(shard_data, singles, solver):
    """The one-machine line search reads all rows as one oracle: one shard's bits."""
    one = singles[solver]
    fit = fit_distributed(array_source(*shard_data, n_shards=1, block_size=BLOCK),
                          _estimator(solver))
    assert np.array_equal(fit.coef_, one.coef_) and np.array_equal(fit.intercept_, one.intercept_)
    assert fit.privacy_event_ == one.privacy_event_ and fit.epsilon_ == one.epsilon_
    assert fit.n_iter_ == one.n_iter_ and fit.noise_multiplier_ == one.noise_multiplier_
    assert fit.distributed_stats_["n_queries"] >= 2 * fit.n_iter_
    assert fit.solver_result_.extra.keys() == one.solver_result_.extra.keys()


@pytest.mark.parametrize("solver", SOLVERS)
def test_four_shards_any_worker_count(shard_data, singles, solver):
    fits = [_estimator(solver, engine=LocalWorkers(w, n_shards=4)).fit(*shard_data)
            for w in (1, 2, 4)]
    for fit in fits[1:]:
        assert np.array_equal(fit.coef_, fits[0].coef_)
    _close(fits[0].coef_, singles[solver].coef_)
    assert fits[0].epsilon_ == singles[solver].epsilon_
    assert fits[0].n_iter_ == singles[solver].n_iter_


def test_libsvm_byte_range_source(shard_svm_file):
    from sklearn.datasets import load_svmlight_file

    one = _estimator("dp_blsgd_adaptive").fit(*load_svmlight_file(str(shard_svm_file)))
    fit = fit_distributed(libsvm_source(shard_svm_file, n_shards=1, block_size=BLOCK),
                          _estimator("dp_blsgd_adaptive"), engine=LocalWorkers(1))
    assert np.array_equal(fit.coef_, one.coef_) and fit.epsilon_ == one.epsilon_
    four = fit_distributed(libsvm_source(shard_svm_file, n_shards=4, block_size=BLOCK),
                           _estimator("dp_blsgd_adaptive"), engine=LocalWorkers(2))
    _close(four.coef_, one.coef_)


def test_event_is_the_poisson_one_and_ledger_charge(shard_data):
    poisson = _estimator("dp_blsgd", sampler="poisson").fit(*shard_data)
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    fit = _estimator("dp_blsgd", ledger=ledger, engine=LocalWorkers(2)).fit(*shard_data)
    assert fit.privacy_event_ == poisson.privacy_event_ and fit.epsilon_ == poisson.epsilon_
    assert ledger.spent() == pytest.approx(poisson.epsilon_, rel=1e-12)


def test_regression_and_record_history(shard_data):
    X, y = shard_data
    target = X @ np.linspace(-1, 1, X.shape[1]) + 0.1 * y
    for solver in ("dp_blsgd", "dp_blsgd_adaptive"):
        one = _estimator(solver, cls=DPRidge, record_history=True).fit(X, target)
        fit = _estimator(solver, cls=DPRidge, record_history=True,
                         engine=LocalWorkers(2, n_shards=4)).fit(X, target)
        _close(fit.coef_, one.coef_)
        assert len(fit.history_) == len(one.history_) == one.n_iter_
        for a, b in zip(fit.history_, one.history_):
            assert a.keys() == b.keys() and a["iteration"] == b["iteration"]
            assert a["objective"] == pytest.approx(b["objective"], rel=1e-12)
            assert a["regularized_objective"] == pytest.approx(b["regularized_objective"],
                                                               rel=1e-12)


def test_non_private_line_search(shard_data):
    one = _estimator("dp_blsgd_adaptive", epsilon=np.inf).fit(*shard_data)
    fit = _estimator("dp_blsgd_adaptive", epsilon=np.inf,
                     engine=LocalWorkers(2, n_shards=4)).fit(*shard_data)
    _close(fit.coef_, one.coef_)
    assert fit.epsilon_ == np.inf


def test_refusals_before_anything_is_charged(shard_data, monkeypatch):
    X, y = shard_data
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    three = np.where(np.arange(X.shape[0]) % 3 == 0, 2.0, y)
    with pytest.raises(ValidationError, match="one-vs-rest"):
        _estimator("dp_blsgd", ledger=ledger, engine=LocalWorkers(2)).fit(X, three)
    with pytest.raises(ValidationError, match="callback"):
        _estimator("dp_blsgd", ledger=ledger, callback=print,
                   engine=LocalWorkers(2)).fit(X, y)
    import fastdp.distributed.data_parallel.shards as shards

    real = shards.ArrayRows.__call__

    def bad(self, start, stop):
        Xs, ys = real(self, start, stop)
        ys = ys.copy()
        if start > 0:
            ys[3] = np.nan
        return Xs, ys

    monkeypatch.setattr(shards.ArrayRows, "__call__", bad)
    with pytest.raises(ShardValidationError, match="shard 1"):
        fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                        _estimator("dp_blsgd_adaptive", ledger=ledger), engine=LocalWorkers(2))
    assert len(ledger.entries) == 0


# ------------------------------------------------- callback and record_history (DP-SGD, DP-SCD)


def test_dpsgd_callback_and_history_on_the_engine(shard_data):
    seen_one, seen = [], []
    one = _estimator("dpsgd", record_history=True, callback=seen_one.append).fit(*shard_data)
    fit = _estimator("dpsgd", record_history=True, callback=seen.append,
                     engine=LocalWorkers(2, n_shards=4)).fit(*shard_data)
    _close(fit.coef_, one.coef_)
    assert [s["epoch"] for s in seen] == [s["epoch"] for s in seen_one] == [1, 2]
    for a, b in zip(seen, seen_one):
        assert a.keys() == b.keys() and a["n_iter"] == b["n_iter"]
        _close(a["coef"], b["coef"])
        _close(a["intercept"], b["intercept"])
    assert np.array_equal(seen[-1]["coef"], fit.coef_)
    assert len(fit.history_) == len(one.history_) == 2
    for a, b in zip(fit.history_, one.history_):
        assert a.keys() == b.keys() and (a["epoch"], a["n_iter"]) == (b["epoch"], b["n_iter"])
        assert a["primal_objective"] == pytest.approx(b["primal_objective"], rel=1e-12)


def test_multinomial_history_and_dpscd_callback(shard_data):
    X, y = shard_data
    three = np.where(np.arange(X.shape[0]) % 3 == 0, 2.0, y)
    one = _estimator("dpsgd", record_history=True).fit(X, three)
    fit = _estimator("dpsgd", record_history=True, engine=LocalWorkers(2)).fit(X, three)
    for a, b in zip(fit.history_, one.history_):
        assert a["primal_objective"] == pytest.approx(b["primal_objective"], rel=1e-12)
    seen_one, seen = [], []
    one = _estimator("dpscd", callback=seen_one.append).fit(X, y)
    fit = _estimator("dpscd", callback=seen.append, engine=LocalWorkers(1)).fit(X, y)
    assert np.array_equal(fit.coef_, one.coef_)
    assert len(seen) == len(seen_one) == 2
    for a, b in zip(seen, seen_one):
        assert a.keys() == b.keys()
        assert np.array_equal(a["coef"], b["coef"]) and np.array_equal(a["v"], b["v"])


# ------------------------------------------------- dual DP-SCD record_history from shard sums

_DUAL_KEYS = ["epoch", "n_iter", "primal_objective", "dual_objective", "gap_public"]


@pytest.fixture(scope="module")
def dpscd_history_single(shard_data):
    return _estimator("dpscd", record_history=True).fit(*shard_data)


def test_dpscd_history_default_shards(shard_data, dpscd_history_single):
    """The default shards: the coefficients bit for bit; the history (the one-machine fit
    computes it on all rows at once, the engine adds per-shard sums) to 1e-12."""
    one = dpscd_history_single
    fit = _estimator("dpscd", record_history=True, engine=LocalWorkers(1)).fit(*shard_data)
    assert np.array_equal(fit.coef_, one.coef_)
    assert [list(h) for h in one.history_] == [_DUAL_KEYS] * 2   # private: no duality_gap
    for a, b in zip(fit.history_, one.history_):
        assert (a["epoch"], a["n_iter"]) == (b["epoch"], b["n_iter"])
        for key in _DUAL_KEYS[2:]:
            assert a[key] == pytest.approx(b[key], rel=1e-12)


def test_dpscd_history_four_shards_within_1e12(shard_data, dpscd_history_single):
    one = dpscd_history_single
    fits = [_estimator("dpscd", record_history=True,
                       engine=LocalWorkers(w, n_shards=4)).fit(*shard_data) for w in (1, 2)]
    assert fits[0].history_ == fits[1].history_      # bits depend on the shards only
    for a, b in zip(fits[0].history_, one.history_):
        assert list(a) == _DUAL_KEYS and (a["epoch"], a["n_iter"]) == (b["epoch"], b["n_iter"])
        for key in _DUAL_KEYS[2:]:
            assert a[key] == pytest.approx(b[key], rel=1e-12)


# ---------------------------------------------------------------- Ray


@pytest.mark.parametrize("solver", ["dp_blsgd", pytest.param("dp_blsgd_adaptive",
                                                             marks=pytest.mark.slow)])
def test_ray_line_search_same_bits_and_killed_worker(ray_cluster, shard_data, solver):
    source = array_source(*shard_data, n_shards=4, block_size=BLOCK)
    local = fit_distributed(source, _estimator(solver), engine=LocalWorkers(1))
    fit = fit_distributed(source, _estimator(solver), engine=RayWorkers(n_workers=2))
    assert np.array_equal(fit.coef_, local.coef_) and fit.epsilon_ == local.epsilon_
    engine = RayWorkers(n_workers=2, fail_at=(1, 5))
    again = fit_distributed(source, _estimator(solver), engine=engine)
    assert engine.restarts == 1 and again.distributed_stats_["restarts"] == 1
    assert np.array_equal(again.coef_, local.coef_)


def test_ray_dpscd_history_same_bits_and_killed_worker(ray_cluster, shard_data):
    source = array_source(*shard_data, n_shards=4, block_size=BLOCK)
    local = fit_distributed(source, _estimator("dpscd", record_history=True),
                            engine=LocalWorkers(1))
    engine = RayWorkers(n_workers=2, fail_at=(1, 5))
    fit = fit_distributed(source, _estimator("dpscd", record_history=True), engine=engine)
    assert engine.restarts == 1
    assert np.array_equal(fit.coef_, local.coef_)
    assert fit.history_ == local.history_ and len(fit.history_) == 2


def test_dpscd_history_query_survives_a_restart():
    # A worker lost during the history query: the executor restores the epoch-end
    # checkpoint and the query is repeated (the entry describes that state).
    from fastdp.distributed.data_parallel.driver import WorkersRestarted
    from fastdp.distributed.data_parallel.dual import engine_history_terms, shard_objective_sums
    from fastdp.losses import dual_objective, get_loss, primal_objective

    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5)) / 3.0
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    alpha = y * rng.uniform(0.1, 0.9, size=40)
    coef = rng.normal(size=5)

    class Flaky:
        calls, restores = 0, 0

        def broadcast(self, method, c, loss):
            assert method == "dual_objective_sums"
            self.calls += 1
            if self.calls == 1:
                raise WorkersRestarted()
            return [[shard_objective_sums(X[:25], y[:25], alpha[:25], c, loss)],
                    [shard_objective_sums(X[25:], y[25:], alpha[25:], c, loss)]]

        def restore(self):
            self.restores += 1

    flaky = Flaky()
    got = engine_history_terms(flaky, coef, get_loss("logistic"), 0.1, 40)
    assert (flaky.calls, flaky.restores) == (2, 1)
    # independent reference: fastdp.losses on all rows (dense X, one shard)
    assert got["primal_objective"] == pytest.approx(
        primal_objective(coef, X, y, "logistic", 0.1), rel=1e-12)
    assert got["dual_objective"] == pytest.approx(
        dual_objective(alpha, X, y, "logistic", 0.1), rel=1e-12)
    assert got["gap_public"] == got["primal_objective"] + got["dual_objective"]
