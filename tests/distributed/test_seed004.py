"""The seed-004 reproduction helpers (the full runs are ``python -m fastdp.experiments.seed004``)."""
import numpy as np
import pytest

from fastdp.datasets import make_sparse_classification
from fastdp.experiments import seed004
from fastdp.preprocessing import normalize_rows


@pytest.fixture(scope="module")
def small():
    X, y = make_sparse_classification(1200, 40, 8, random_state=2)[:2]
    X = normalize_rows(X)
    return X[:1000], y[:1000], X[1000:], y[1000:]


def test_run_one_reports_three_epsilons(small):
    out = seed004.run_one(small, "l2", "Alg1 iota=0.1", epsilon=1.0, calibration="accountant",
                          seed=0, epochs=0.2, curve=True)
    assert out["eps_accountant"] <= 1.0
    assert out["eps_paper"] < 1.0           # the accountant's sigma exceeds the paper's
    assert 0.0 <= out["acc_test"] <= 1.0 and out["curve"]
    assert out["T"] == int(np.ceil(0.2 * 50 / 0.1))


def test_check_claims_reads_the_grid():
    grid = {}
    for i, m in enumerate(seed004.METHODS):
        for e in seed004.EPSILONS:
            grid[("l2", m, "paper", e, 0)] = {"subopt": (i + 1) / e}
    for i, m in enumerate(list(seed004.METHODS)[:2]):
        for e in seed004.EPSILONS:
            grid[("l1", m, "paper", e, 0)] = {"subopt": (i + 1) / e}
    claims = {text: ok for _, text, ok, _ in seed004.check_claims(grid)}
    assert all(claims.values()) and len(claims) == 8


@pytest.mark.slow
def test_news20_binary(data_dir):
    X, y, Xt, yt = seed004.load_problem("news20", data_dir)
    assert X.shape[1] == 62061 and set(np.unique(y)) == {-1.0, 1.0}
    assert X.shape[0] + Xt.shape[0] == 15935
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).ravel()
    assert np.allclose(norms[norms > 0], 1.0)
