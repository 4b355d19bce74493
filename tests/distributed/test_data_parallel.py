"""Data-parallel DP-SGD (issue 21): same event, same bits for 1/2/4 workers, faults, shard errors.

Ray runs locally with num_cpus=2, bound to 127.0.0.1 (one session for the module).
"""
import os

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import dump_svmlight_file

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fastdp.datasets import load_libsvm  # noqa: E402
from fastdp.distributed.data_parallel import (  # noqa: E402
    LocalWorkers,
    RayWorkers,
    ShardValidationError,
    array_source,
    fit_distributed,
    libsvm_source,
)
from fastdp.distributed.data_parallel import driver  # noqa: E402
from fastdp.distributed.data_parallel.driver import LazyNoisyModel  # noqa: E402
from fastdp.persistence import load_model, save_model  # noqa: E402
from fastdp.privacy.ledger import PrivacyLedger  # noqa: E402
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key  # noqa: E402
from fastdp.solvers.sgd import dpsgd  # noqa: E402

from shard_setup import BLOCK, N  # noqa: E402
from shard_setup import shard_estimator as estimator  # noqa: E402


@pytest.fixture(scope="module")
def single(shard_data):
    return estimator().fit(*shard_data)


# ---------------------------------------------------------------- no Ray


def test_one_shard_equals_single_machine_bit_for_bit(shard_data, single):
    fit = fit_distributed(array_source(*shard_data, block_size=BLOCK), estimator())
    assert np.array_equal(fit.coef_, single.coef_)
    assert np.array_equal(fit.intercept_, single.intercept_)
    assert fit.epsilon_ == single.epsilon_ and fit.privacy_event_ == single.privacy_event_
    assert fit.n_iter_ == single.n_iter_ and fit.noise_multiplier_ == single.noise_multiplier_


def test_event_and_epsilon_are_the_poisson_ones(shard_data, single):
    poisson = estimator(sampler="poisson").fit(*shard_data)
    assert single.privacy_event_ == poisson.privacy_event_
    assert single.epsilon_ == poisson.epsilon_


def test_shard_layout_changes_only_rounding(shard_data, single):
    fits = [fit_distributed(array_source(*shard_data, n_shards=s, block_size=BLOCK), estimator(),
                            engine=LocalWorkers(w)) for s, w in ((4, 1), (4, 3), (8, 8))]
    assert np.array_equal(fits[0].coef_, fits[1].coef_)       # same shards, other workers
    scale = np.abs(single.coef_).max()
    for f in fits:
        np.testing.assert_allclose(f.coef_, single.coef_, rtol=0, atol=1e-12 * scale)


def test_noiseless_steps_match_a_numpy_reference(shard_data):
    """sigma = 0: the driver/worker split equals plain clipped SGD written with numpy."""
    from fastdp.preprocessing import normalize_rows
    X = normalize_rows(shard_data[0]).tocsr()
    y = np.where(shard_data[1] > 0, 1.0, -1.0)
    sampler = BlockPoissonSampler(batch_size=100, block_size=BLOCK)
    clip, lam, eta = 0.5, 1e-3, 0.7
    res = dpsgd(X, y, loss="logistic", lam=lam, epochs=1, batch_size=100, clip=clip,
                noise_multiplier=0.0, learning_rate=eta, sampler=sampler, random_state=4)
    rng = np.random.default_rng(4)
    from fastdp.solvers._common import split_random_state
    key = sampling_key(split_random_state(rng)[0])
    theta = np.zeros(X.shape[1])
    for t in range(1, res.n_iter + 1):
        rows = sampler.lot(key, N, t)
        Xb = X[rows].toarray()
        g = -y[rows] / (1.0 + np.exp(y[rows] * (Xb @ theta)))
        G = g[:, None] * Xb
        norms = np.linalg.norm(G, axis=1)
        G = (G / np.maximum(1.0, norms / clip)[:, None]).sum(axis=0)
        theta = (1 - eta * lam) * theta - eta / 100 * G
    np.testing.assert_allclose(res.coef, theta, rtol=1e-10, atol=1e-13)


def test_lazy_keyed_noise_has_the_eager_law():
    """Final noise of coordinate c is N(0, (kappa s)^2 h(T)) whatever the read pattern.

    KS test against the closed form, false-alarm rate 1e-6.
    """
    m, T, rho, kappa, std = 20000, 25, 0.9, 0.3, 2.0
    model = LazyNoisyModel(m, rho, kappa, std, np.array([5, 9], dtype=np.uint64), T)
    pattern = np.random.default_rng(0)
    for t in range(1, T + 1):
        cols = np.flatnonzero(pattern.random(m) < 0.2)
        values = model.read(t, cols)
        again = model.read(t, cols)
        assert np.array_equal(values, again)        # keyed: a retried step replays its draw
        model.commit(t, cols, values, np.zeros(cols.size))
    theta = model.flush(T)
    h = (1 - rho ** (2 * T)) / (1 - rho ** 2)
    assert stats.kstest(theta / (kappa * std * np.sqrt(h)), "norm").pvalue > 1e-6


def test_bad_shard_is_named_before_any_noise(shard_data, tmp_path, monkeypatch):
    X, y = shard_data
    path = tmp_path / "bad.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3 * BLOCK + 5] = b"nan 1:0.5\n"          # a row of shard 1 of 4 (blocks 2..3)
    path.write_bytes(b"".join(lines))
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)

    def no_noise(*a, **k):
        raise AssertionError("noise drawn before the shards were checked")

    monkeypatch.setattr(driver.LazyNoisyModel, "__init__", no_noise)
    source = libsvm_source(path, n_shards=4, block_size=BLOCK)
    with pytest.raises(ShardValidationError, match=r"shard 1 \(rows 512\.\.1023 of bad\.svm\)"):
        fit_distributed(source, estimator(ledger=ledger), engine=LocalWorkers(2))
    assert len(ledger.entries) == 0


def test_fitted_model_persists(shard_data, tmp_path):
    fit = fit_distributed(array_source(*shard_data, n_shards=2, block_size=BLOCK),
                          estimator(sampler="block_poisson"), engine=LocalWorkers(2))
    save_model(fit, tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert np.array_equal(back.predict_proba(shard_data[0]), fit.predict_proba(shard_data[0]))
    assert back.epsilon_ == fit.epsilon_


def test_source_with_fewer_rows_than_counted(shard_svm_file):
    source = libsvm_source(shard_svm_file, n_shards=2, block_size=BLOCK, n_rows=N + 300)
    with pytest.raises(ShardValidationError, match="shard 1 .*expected"):
        fit_distributed(source, estimator(), engine=LocalWorkers(2))


# ---------------------------------------------------------------- Ray


# One and four actors run under -m slow; in the default run, two actors here, one actor in
# test_ray_libsvm_shards_equal_single_machine, and LocalWorkers(1, 3, 8) on the same shards in
# test_shard_layout_changes_only_rounding check that the worker count changes no bit.
@pytest.mark.parametrize("n_workers", [pytest.param(1, marks=pytest.mark.slow), 2,
                                       pytest.param(4, marks=pytest.mark.slow)])
def test_ray_workers_give_identical_bits(ray_cluster, shard_data, single, n_workers):
    local = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator())
    fit = fit_distributed(array_source(*shard_data, n_shards=4, block_size=BLOCK), estimator(),
                          engine=RayWorkers(n_workers=n_workers))
    assert np.array_equal(fit.coef_, local.coef_)
    assert np.array_equal(fit.intercept_, local.intercept_)
    assert fit.epsilon_ == single.epsilon_


def test_ray_libsvm_shards_equal_single_machine(ray_cluster, shard_data, shard_svm_file, single,
                                                tmp_path):
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    source = libsvm_source(shard_svm_file, block_size=BLOCK)      # the default shards
    fit = fit_distributed(source, estimator(ledger=ledger), engine=RayWorkers(n_workers=1))
    X, y = load_libsvm(str(shard_svm_file))
    reference = estimator().fit(X, y)
    assert np.array_equal(fit.coef_, reference.coef_)
    assert ledger.spent() == pytest.approx(single.epsilon_, rel=1e-12)
    four = fit_distributed(libsvm_source(shard_svm_file, n_shards=4, block_size=BLOCK), estimator(),
                           engine=RayWorkers(n_workers=2))
    np.testing.assert_allclose(four.coef_, reference.coef_, rtol=0,
                               atol=1e-12 * np.abs(reference.coef_).max())


def test_killed_worker_is_restarted_with_identical_result(ray_cluster, shard_data):
    source = array_source(*shard_data, n_shards=4, block_size=BLOCK)
    clean = fit_distributed(source, estimator(), engine=RayWorkers(n_workers=2))
    engine = RayWorkers(n_workers=2, fail_at=(1, 7))
    fit = fit_distributed(source, estimator(), engine=engine)
    assert engine.restarts == 1 and fit.distributed_stats_["restarts"] == 1
    assert np.array_equal(fit.coef_, clean.coef_)
    assert np.array_equal(fit.intercept_, clean.intercept_)


@pytest.mark.slow   # default run: test_binary_shards.py::test_ray_binary_shards_and_cli (the CLI
#                     --ray route, same output lines, bits) and LIBSVM shards on Ray just above
def test_cli_train_on_ray(ray_cluster, shard_svm_file, tmp_path, capsys):
    from fastdp.cli import main

    out = tmp_path / "model"
    status = main(["train", str(shard_svm_file), "--model", "logistic", "--ray", "local",
                   "--workers", "2", "--shards", "2", "--block-size", str(BLOCK),
                   "--batch-size", "150", "--epochs", "2", "--seed", "11", "--out", str(out)])
    assert status == 0
    text = capsys.readouterr().out
    assert "data-parallel on Ray" in text and "bytes per step" in text
    model = load_model(str(out) + ".json")
    ref = fit_distributed(libsvm_source(shard_svm_file, n_shards=2, block_size=BLOCK),
                          estimator(sampler="block_poisson", delta=model.delta_),
                          engine=LocalWorkers(1))
    assert np.array_equal(model.coef_, ref.coef_) and model.epsilon_ == ref.epsilon_
