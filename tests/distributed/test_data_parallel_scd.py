"""Dual DP-SCD on the data-parallel engine (issue 21 item 1).

Same bits for 1/2/4 workers and for the single-machine ``solver="dpscd"`` fit
with the block-keyed sampler; same event and epsilon; a killed worker (alpha
lost) is recovered from the epoch checkpoint with the same result.  Ray runs
locally with num_cpus=2, bound to 127.0.0.1.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fastdp._kernels import _scd  # noqa: E402
from fastdp._kernels._losses import LossCode  # noqa: E402
from fastdp.distributed.data_parallel import (  # noqa: E402
    LocalWorkers,
    RayWorkers,
    array_source,
    fit_distributed,
)
from fastdp.distributed.data_parallel.driver import WorkersRestarted  # noqa: E402
from fastdp.distributed.data_parallel.worker import ShardWorker  # noqa: E402
from fastdp.exceptions import ValidationError  # noqa: E402
from fastdp.preprocessing import normalize_rows  # noqa: E402
from fastdp.privacy.ledger import PrivacyLedger  # noqa: E402
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key  # noqa: E402
from fastdp.solvers._common import split_random_state  # noqa: E402
from fastdp.solvers.scd import dual_dpscd  # noqa: E402

from shard_setup import BLOCK, N, shard_estimator  # noqa: E402


def estimator(**kw):
    return shard_estimator(solver="dpscd", **kw)


@pytest.fixture(scope="module")
def single(shard_data):
    return estimator().fit(*shard_data)


@pytest.fixture(scope="module")
def four_shards(shard_data):
    return fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator())


def lots(sampler, seed, n_steps):
    key = sampling_key(split_random_state(np.random.default_rng(seed))[0])
    return [sampler.lot(key, N, t) for t in range(1, n_steps + 1)]


# ---------------------------------------------------------------- no Ray


def test_one_shard_equals_single_machine_bit_for_bit(shard_data, single):
    fit = fit_distributed(array_source(*shard_data, block_size=BLOCK), estimator())
    assert single.solver_ == fit.solver_ == "dpscd"
    assert np.array_equal(fit.coef_, single.coef_)
    assert np.array_equal(fit.intercept_, single.intercept_)
    assert fit.epsilon_ == single.epsilon_ and fit.privacy_event_ == single.privacy_event_
    assert fit.n_iter_ == single.n_iter_ and fit.noise_multiplier_ == single.noise_multiplier_
    assert fit.distributed_stats_["n_noise_draws"] > 0


def test_event_and_epsilon_are_the_poisson_dpscd_ones(shard_data, single):
    poisson = estimator(sampler="poisson").fit(*shard_data)
    assert single.privacy_event_ == poisson.privacy_event_
    assert single.epsilon_ == poisson.epsilon_
    assert single.noise_multiplier_ == poisson.noise_multiplier_


def test_workers_change_nothing_and_shards_only_rounding(shard_data, single, four_shards):
    for w in (2, 4):
        fit = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator(),
                              engine=LocalWorkers(w))
        assert np.array_equal(fit.coef_, four_shards.coef_)
        assert np.array_equal(fit.intercept_, four_shards.intercept_)
    scale = np.abs(single.coef_).max()
    np.testing.assert_allclose(four_shards.coef_, single.coef_, rtol=0, atol=1e-12 * scale)


def test_noiseless_ridge_matches_numpy_algorithm_1(shard_data):
    """sigma = 0, squared loss: the closed-form steps of Algorithm 1 written with numpy."""
    X = normalize_rows(shard_data[0]).tocsr()
    y = np.random.default_rng(1).normal(size=N)
    sampler = BlockPoissonSampler(batch_size=100, block_size=BLOCK)
    lam, clip = 1e-2, 0.3
    res = dual_dpscd(X, y, loss="squared", lam=lam, epochs=1.5, batch_size=100, clip=clip,
                     noise_multiplier=0.0, sampler=sampler, random_state=4)
    alpha, v = np.zeros(N), np.zeros(X.shape[1])
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    for rows in lots(sampler, 4, res.n_iter):
        m = X[rows] @ v / (lam * N)
        zeta = (y[rows] - m - alpha[rows]) / (1.0 + 100 * sq[rows] / (lam * N))
        zeta = zeta / np.maximum(1.0, np.abs(zeta) / clip)
        alpha[rows] += zeta
        v += X[rows].T @ zeta
    np.testing.assert_allclose(res.coef, v / (lam * N), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(res.alpha, alpha, rtol=1e-10, atol=1e-13)


def test_noiseless_logistic_matches_the_single_machine_kernel(shard_data):
    """sigma = 0: the split into shards equals the kernel's own batch loop on the same lots."""
    X = normalize_rows(shard_data[0]).tocsr()
    y = np.where(shard_data[1] > 0, 1.0, -1.0)
    sampler = BlockPoissonSampler(batch_size=120, block_size=BLOCK)
    lam, clip = 1e-3, 0.5
    res = dual_dpscd(X, y, loss="logistic", lam=lam, epochs=2, batch_size=120, clip=clip,
                     noise_multiplier=0.0, sampler=sampler, random_state=9)
    batches = lots(sampler, 9, res.n_iter)
    ptr = np.concatenate(([0], np.cumsum([b.size for b in batches]))).astype(np.int64)
    alpha, v = np.zeros(N), np.zeros(X.shape[1])
    _scd.run_dual_scd(X.data, X.indices, X.indptr, y, _scd.row_squared_norms(X.data, X.indptr),
                      alpha, v, ptr, np.concatenate(batches), np.zeros(ptr[-1] + 1),
                      np.zeros(1, dtype=np.int32), int(LossCode.LOGISTIC), lam * N,
                      float(sampler.expected_batch_size(N)), clip, 1e-4, False, 0.0, 0.0, False,
                      None, 1, 1 << 40)
    np.testing.assert_allclose(res.v, v, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(res.alpha, alpha, rtol=1e-11, atol=1e-13)


def test_released_alpha_is_refused_before_any_charge(shard_data):
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    with pytest.raises(ValidationError, match="released='v'"):
        fit_distributed(array_source(*shard_data, block_size=BLOCK),
                        estimator(solver_options={"released": "alpha_and_v"}, ledger=ledger))
    assert len(ledger.entries) == 0
    X = normalize_rows(shard_data[0]).tocsr()
    with pytest.raises(ValidationError, match="released='v'"):
        dual_dpscd(X, np.where(shard_data[1] > 0, 1.0, -1.0), loss="logistic", lam=1e-3, epochs=1,
                   batch_size=100, clip=1.0, noise_multiplier=1.0, released="alpha_and_v",
                   sampler=BlockPoissonSampler(batch_size=100, block_size=BLOCK))


class _RestartOnce(LocalWorkers):
    """In-process stand-in for a killed actor: at step ``at`` worker ``w`` is replaced by a
    fresh one (its alpha lost, its shards reloaded) and the executor reports the restart."""

    def __init__(self, n_workers, w, at):
        super().__init__(n_workers)
        self.w, self.at = w, at

    def step(self, t, theta_values):
        if t == self.at:
            self.at = None
            fresh = ShardWorker(self.source, self.assignment[self.w])
            assert fresh.prepare(self.setup)[0] == "ok"
            self.workers[self.w] = fresh
            self.restarts += 1
            raise WorkersRestarted()
        return super().step(t, theta_values)


@pytest.mark.parametrize("at", [7, 20])     # epoch 1 (from the start) and epoch 2 (checkpoint)
def test_restarted_worker_replays_the_epoch_with_identical_bits(shard_data, four_shards, at):
    engine = _RestartOnce(2, 1, at)
    fit = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator(),
                          engine=engine)
    steps_epoch_1 = estimator().sampler.epoch_boundaries(N, 2)[0]
    assert fit.distributed_stats_["restarts"] == 1
    assert fit.distributed_stats_["replayed_steps"] == (at if at <= steps_epoch_1
                                                        else at - steps_epoch_1)
    assert np.array_equal(fit.coef_, four_shards.coef_)
    assert np.array_equal(fit.intercept_, four_shards.intercept_)


# ---------------------------------------------------------------- Ray


# One and four actors run under -m slow; in the default run, two actors here and two again in
# test_ray_killed_worker_recovers_alpha_from_the_checkpoint, and LocalWorkers(2, 4) on the same
# shards in test_workers_change_nothing_and_shards_only_rounding.
@pytest.mark.parametrize("n_workers", [pytest.param(1, marks=pytest.mark.slow), 2,
                                       pytest.param(4, marks=pytest.mark.slow)])
def test_ray_workers_give_identical_bits(ray_cluster, shard_data, single, four_shards, n_workers):
    fit = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator(),
                          engine=RayWorkers(n_workers=n_workers))
    assert np.array_equal(fit.coef_, four_shards.coef_)
    assert np.array_equal(fit.intercept_, four_shards.intercept_)
    assert fit.epsilon_ == single.epsilon_ and fit.privacy_event_ == single.privacy_event_


def test_ray_killed_worker_recovers_alpha_from_the_checkpoint(ray_cluster, shard_data, four_shards):
    """The actor dies in epoch 2: its alpha comes back from the epoch-1 checkpoint (object store)."""
    engine = RayWorkers(n_workers=2, fail_at=(1, 20))
    fit = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator(),
                          engine=engine)
    assert engine.restarts == 1 and fit.distributed_stats_["restarts"] == 1
    assert fit.distributed_stats_["replayed_steps"] > 0
    assert np.array_equal(fit.coef_, four_shards.coef_)
    assert np.array_equal(fit.intercept_, four_shards.intercept_)
