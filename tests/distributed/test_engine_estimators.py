"""``engine=`` on the estimators and multinomial DP-SGD on the data-parallel engine (issue 21).

``DPLogisticRegression(..., engine=LocalWorkers(...) / RayWorkers(...)).fit(X, y)``
cuts the rows into shards and runs the data-parallel engine: the same event,
epsilon and ledger charge as ``fit`` on one machine, the same coefficients as
the one-machine fit with the block-keyed sampler (bit for bit with one shard;
otherwise they depend only on the number of shards).  Multinomial DP-SGD: the
K x d clipped gradient sums of the workers, one noise draw on the driver,
checked against the compiled single-machine kernel on the same lots and a
numpy transcription of the clipped softmax gradient.

Ray runs locally with num_cpus=2, bound to 127.0.0.1, in one test.
"""
import json
import os

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import dump_svmlight_file

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fastdp._kernels import _multinomial  # noqa: E402
from fastdp._kernels._scd import row_squared_norms  # noqa: E402
from fastdp.datasets import make_sparse_classification  # noqa: E402
from fastdp.distributed.data_parallel import (  # noqa: E402
    LocalWorkers,
    RayWorkers,
    fit_distributed,
    libsvm_source,
)
from fastdp.distributed.data_parallel.driver import LazyNoisyModel  # noqa: E402
from fastdp.exceptions import ValidationError  # noqa: E402
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge  # noqa: E402
from fastdp.persistence import load_model, save_model  # noqa: E402
from fastdp.preprocessing import normalize_rows  # noqa: E402
from fastdp.privacy.ledger import PrivacyLedger  # noqa: E402
from fastdp.sampling_blocks import BlockPoissonSampler  # noqa: E402
from fastdp.solvers.multinomial import dp_multinomial_sgd  # noqa: E402

BLOCK = 256
N = 2000          # 8 blocks, the last one short


def sampler():
    return BlockPoissonSampler(batch_size=150, block_size=BLOCK)


def make(cls=DPLogisticRegression, **kw):
    params = dict(epsilon=1.0, batch_size=150, epochs=2, random_state=11, sampler=sampler())
    params.update(kw)
    return cls(**params)


@pytest.fixture(scope="module")
def data():
    X, y = make_sparse_classification(N, 40, 6, random_state=3)[:2]
    return X, np.where(y > 0, 1.0, 0.0), np.arange(N) % 3


@pytest.fixture(scope="module")
def binary_single(data):
    return make().fit(data[0], data[1])


@pytest.fixture(scope="module")
def multinomial_single(data):
    return make().fit(data[0], data[2])


def assert_same_fit(a, b):
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    assert a.epsilon_ == b.epsilon_ and a.privacy_event_ == b.privacy_event_
    assert a.n_iter_ == b.n_iter_ and a.noise_multiplier_ == b.noise_multiplier_


# ------------------------------------------------------------ engine= on the estimators


@pytest.mark.parametrize("cls,solver", [(DPLogisticRegression, "dpsgd"),
                                        (DPLinearSVC, "dpsgd"), (DPRidge, "dpscd")])
def test_one_worker_equals_single_machine_bit_for_bit(data, cls, solver):
    X, y = data[0], data[1] if cls is not DPRidge else data[1] * 2.0 - 0.5
    one_ledger, engine_ledger = (PrivacyLedger(epsilon=5.0, delta=1e-5) for _ in range(2))
    one = make(cls, solver=solver, ledger=one_ledger).fit(X, y)
    fit = make(cls, solver=solver, ledger=engine_ledger, engine=LocalWorkers(1)).fit(X, y)
    assert_same_fit(fit, one)
    assert fit.solver_ == one.solver_ == solver and fit.sampler_ == "block_poisson"
    assert engine_ledger.spent() == one_ledger.spent() > 0
    assert fit.n_features_in_ == X.shape[1] and fit.distributed_stats_["n_steps"] == fit.n_iter_


def test_shards_change_only_rounding_and_workers_nothing(data, binary_single):
    X, y = data[0], data[1]
    for k in (2, 3, 8):              # the default shards (8 blocks: 8 shards): the one-machine bits
        assert_same_fit(make(engine=LocalWorkers(k)).fit(X, y), binary_single)
    two = make(engine=LocalWorkers(2, n_shards=2)).fit(X, y)
    one_worker = make(engine=LocalWorkers(1, n_shards=2)).fit(X, y)
    assert_same_fit(two, one_worker)
    np.testing.assert_allclose(two.coef_, binary_single.coef_, rtol=0,
                               atol=1e-12 * np.abs(binary_single.coef_).max())
    assert two.epsilon_ == binary_single.epsilon_


def test_labels_are_encoded_as_fit_does(data, binary_single):
    X, y = data[0], np.where(data[1] > 0, "yes", "no")
    fit = make(engine=LocalWorkers(1)).fit(X, y)
    assert list(fit.classes_) == ["no", "yes"]
    assert np.array_equal(fit.coef_, binary_single.coef_)
    assert np.array_equal(fit.predict(X), np.where(binary_single.predict(X) > 0, "yes", "no"))


def test_sklearn_params_clone_and_the_engine_is_not_changed(data):
    engine = LocalWorkers(2, n_shards=4)
    est = make(engine=engine)
    assert est.get_params()["engine"] is engine
    twin = clone(est)
    assert twin.engine is not engine and repr(twin.engine) == repr(engine) == \
        "LocalWorkers(n_workers=2, n_shards=4)"
    before = dict(vars(engine))
    est.fit(data[0], data[1])
    assert vars(engine) == before                  # fit works on a copy
    assert_same_fit(twin.fit(data[0], data[1]), est)
    assert "engine=LocalWorkers" in repr(est)
    plain = clone(est).set_params(engine=None, sampler="poisson").fit(data[0], data[1])
    assert plain.sampler_ == "poisson" and not hasattr(plain, "distributed_stats_")


def test_engine_is_saved_as_null(data, tmp_path):
    # block_size 4096 > N: one block, so one shard whatever n_workers
    fit = make(engine=LocalWorkers(2), sampler="block_poisson").fit(data[0], data[1])
    assert fit.distributed_stats_["n_steps"] == fit.n_iter_
    path = save_model(fit, tmp_path / "m")
    assert json.loads(open(path).read())["params"]["engine"] is None
    back = load_model(path)
    assert back.engine is None and back.epsilon_ == fit.epsilon_
    assert np.array_equal(back.predict_proba(data[0]), fit.predict_proba(data[0]))


@pytest.mark.parametrize("kw,match", [
    # callback and record_history (DP-SCD's included: per-shard conjugate sums)
    # run on the engine since issue 21's leftovers (test_engine_line_search.py);
    # what is still refused:
    (dict(solver="dp_blsgd_adaptive", callback=print), "does not take a per-epoch callback"),
    (dict(lazy_noise=False), "lazy noise"),
    (dict(sampler="poisson"), "block-keyed Poisson"),
    (dict(solver="output"), "runs DP-SGD"),
    (dict(engine=LocalWorkers(1, n_shards=9)), "into 9 shards"),
    (dict(engine="ray"), "engine must be"),
])
def test_refused_before_any_charge(data, kw, match):
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    kw = dict(kw)
    engine = kw.pop("engine", LocalWorkers(1))
    with pytest.raises(ValidationError, match=match):
        make(ledger=ledger, engine=engine, **kw).fit(data[0], data[1])
    assert len(ledger.entries) == 0


def test_one_vs_rest_is_refused_before_any_charge(data):
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    with pytest.raises(ValidationError, match="3 classes.*one-vs-rest"):
        make(DPLinearSVC, ledger=ledger, engine=LocalWorkers(1)).fit(data[0], data[2])
    assert len(ledger.entries) == 0


# ------------------------------------------------------------ multinomial DP-SGD


def test_multinomial_engine_equals_single_machine_bit_for_bit(data, multinomial_single):
    X, y = data[0], data[2]
    assert multinomial_single.multi_class_ == "multinomial"
    assert multinomial_single.coef_.shape == (3, X.shape[1])
    poisson = make(sampler="poisson").fit(X, y)
    assert multinomial_single.privacy_event_ == poisson.privacy_event_
    assert multinomial_single.epsilon_ == poisson.epsilon_
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    one = make(engine=LocalWorkers(1), ledger=ledger).fit(X, y)
    assert_same_fit(one, multinomial_single)
    assert one.multi_class_ == "multinomial" and list(one.classes_) == [0, 1, 2]
    assert ledger.spent() == pytest.approx(multinomial_single.epsilon_, rel=1e-12)
    four = make(engine=LocalWorkers(2, n_shards=4)).fit(X, y)
    assert_same_fit(four, make(engine=LocalWorkers(4, n_shards=4)).fit(X, y))
    np.testing.assert_allclose(four.coef_, one.coef_, rtol=0,
                               atol=1e-12 * np.abs(one.coef_).max())
    assert np.array_equal(one.predict_proba(X), multinomial_single.predict_proba(X))


def test_multinomial_from_a_file_equals_in_memory(data, tmp_path):
    X, y = data[0], data[2]
    path = tmp_path / "three.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    from fastdp.datasets import load_libsvm
    Xf, yf = load_libsvm(str(path))
    ref = make(engine=LocalWorkers(1, n_shards=2)).fit(Xf, yf)
    fit = fit_distributed(libsvm_source(path, n_shards=2, block_size=BLOCK), make(),
                          engine=LocalWorkers(2))
    assert_same_fit(fit, ref)
    assert np.array_equal(fit.classes_, ref.classes_)


class _UnkeyedBlockSampler(BlockPoissonSampler):
    """The same lots, but taken through the compiled epoch kernel (not the keyed step loop)."""

    keyed = False


def test_noiseless_multinomial_steps_match_the_compiled_kernel(data):
    """sigma = 0, same lots: the engine's step equals ``run_multinomial_sgd``'s (to rounding)."""
    X = normalize_rows(data[0]).tocsr()
    kw = dict(n_classes=3, lam=1e-3, epochs=2, batch_size=120, clip=0.4, noise_multiplier=0.0,
              learning_rate=0.8, random_state=5)
    keyed = dp_multinomial_sgd(X, data[2], sampler=BlockPoissonSampler(batch_size=120,
                                                                       block_size=BLOCK), **kw)
    kernel = dp_multinomial_sgd(X, data[2], sampler=_UnkeyedBlockSampler(batch_size=120,
                                                                         block_size=BLOCK), **kw)
    assert keyed.n_iter == kernel.n_iter > 20 and keyed.coef.shape == (3, X.shape[1])
    np.testing.assert_allclose(keyed.coef, kernel.coef, rtol=0,
                               atol=1e-12 * np.abs(kernel.coef).max())
    assert keyed.event == kernel.event


def test_multinomial_clipped_gradient_sum_matches_numpy(data):
    X = data[0].tocsr() * 3.0          # rows above norm 1: the clipping binds
    y = data[2].astype(np.int64)
    K, d = 3, X.shape[1]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((d, K))
    rows = np.array([5, 17, 17, 300, 1999, 0], dtype=np.int64)
    for clip in (0.3, np.inf):
        out = np.ones((d, K))
        _multinomial.clipped_gradient_sum(X.data, X.indices, X.indptr, y,
                                          row_squared_norms(X.data, X.indptr), rows, w, clip,
                                          out)
        expected = np.ones((d, K))
        for j in rows:
            x = X[j].toarray().ravel()
            s = x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            p[y[j]] -= 1.0
            g = np.outer(x, p)
            expected += g / max(1.0, np.linalg.norm(g) / clip)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValidationError, match="class index"):
        _multinomial.clipped_gradient_sum(X.data, X.indices, X.indptr, np.full(N, 3, np.int64),
                                          row_squared_norms(X.data, X.indptr), rows, w, 1.0,
                                          np.zeros((d, K)))


def test_lazy_keyed_multinomial_noise_has_the_eager_law():
    """Every one of the K d coordinates ends N(0, (kappa s)^2 h(T)) whatever the read
    pattern; a retried read replays its draws.  KS test, false-alarm rate 1e-6."""
    m, K, T, rho, kappa, std = 5000, 4, 25, 0.9, 0.3, 2.0
    model = LazyNoisyModel(m, rho, kappa, std, np.array([5, 9], dtype=np.uint64), T, n_classes=K)
    pattern = np.random.default_rng(0)
    for t in range(1, T + 1):
        cols = np.flatnonzero(pattern.random(m) < 0.2)
        values = model.read(t, cols)
        assert values.shape == (cols.size, K)
        assert np.array_equal(values, model.read(t, cols))
        model.commit(t, cols, values, np.zeros((cols.size, K)))
    theta = model.flush(T)
    h = (1 - rho ** (2 * T)) / (1 - rho ** 2)
    z = theta / (kappa * std * np.sqrt(h))
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-6
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 5.0 / np.sqrt(m)   # classes independent


# ------------------------------------------------------------ Ray (one cluster, one test)


@pytest.mark.slow
def test_ray_engine_estimators_multinomial_and_cli_dpscd(data, binary_single, tmp_path, capsys):
    """On a local Ray cluster: ``engine=RayWorkers`` gives the bits of the local engine
    (binary and multinomial), and ``fastdp train --ray --solver dpscd`` trains dual DP-SCD."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    RayWorkers()._ray()
    try:
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        X, y, y3 = data
        for labels in (y, y3):
            local = make(engine=LocalWorkers(1, n_shards=2)).fit(X, labels)
            fit = make(engine=RayWorkers(n_workers=2)).fit(X, labels)
            assert_same_fit(fit, local)
        assert fit.multi_class_ == "multinomial"

        from fastdp.cli import main

        path = tmp_path / "data.svm"
        dump_svmlight_file(X, y, str(path), zero_based=False)
        out = tmp_path / "model"
        status = main(["train", str(path), "--model", "logistic", "--solver", "dpscd",
                       "--ray", "local", "--workers", "2", "--block-size", str(BLOCK),
                       "--batch-size", "150", "--epochs", "2", "--seed", "11",
                       "--out", str(out)])
        assert status == 0
        assert "solver dpscd, data-parallel on Ray" in capsys.readouterr().out
        model = load_model(str(out) + ".json")
        ref = fit_distributed(libsvm_source(path, n_shards=2, block_size=BLOCK),
                              make(solver="dpscd", sampler="block_poisson", delta=model.delta_),
                              engine=LocalWorkers(1))
        assert np.array_equal(model.coef_, ref.coef_) and model.epsilon_ == ref.epsilon_
        assert model.solver_ == "dpscd"
    finally:
        if started:
            ray.shutdown()


@pytest.mark.parametrize("solver,labels", [("dpsgd", 1), ("dpscd", 1), ("dpsgd", 2)])
def test_sampler_given_by_name_fits_like_the_instance(data, solver, labels):
    """``sampler="block_poisson"`` (a name: the estimator maps the rows lazily) runs the
    keyed step loop on the mapped rows and equals the fit with the sampler instance of
    the same batch size and the default block size (issue 36: it raised
    ``'MappedRows' object is not subscriptable``)."""
    X, y = data[0], data[labels]
    by_name = make(solver=solver, sampler="block_poisson").fit(X, y)
    instance = make(solver=solver, sampler=BlockPoissonSampler(batch_size=150)).fit(X, y)
    assert by_name.sampler_ == "block_poisson"
    assert_same_fit(by_name, instance)
