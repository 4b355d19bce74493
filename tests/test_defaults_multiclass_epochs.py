"""The class-pair rule's epochs follow the accounted epsilon (issue 17 follow-up).

Closed form: E = clip(round(20 eps), 5, 80) with the total step H = 0.3 (eps / kappa_K) n
unchanged; and a utility check on news20 restricted to its first 10 classes (held out
when the rule was fixed; docs/defaults.md, "The epochs of the class-pair rule").
"""

import math
import os

import numpy as np
import pytest

from fastdp.defaults import dpsgd_defaults, multiclass_noise_factor
from fastdp.linear_model import DPLogisticRegression


def _old_rule(n, eps, K):
    """The class-pair rule before the change: the epochs at eps / kappa_K."""
    L = max(1, min(min(256, n // 4) * K // 2, n // 4))
    e = eps / (2.0 * math.sqrt(math.log(K)))
    E = float(min(80, max(5, round(20.0 * e))))
    return {"batch_size": L, "epochs": E, "learning_rate": min(0.3 * e * L / E, 4.0 * K) / 0.3}


@pytest.mark.parametrize("n, K", [(12748, 20), (6366, 10), (3158, 5), (3342, 3)])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 8.0])
def test_epochs_at_eps_and_the_same_total_step(n, K, eps):
    new, old = dpsgd_defaults(n, eps, "multinomial", K), _old_rule(n, eps, K)
    assert new["epochs"] == float(min(80, max(5, round(20.0 * eps))))
    assert new["batch_size"] == old["batch_size"]
    e = eps / multiclass_noise_factor(K)
    s = new["learning_rate"] * new["clip"]
    if s < 4.0 * K:                       # below the cap: nominal H = s E n / L = 0.3 e n
        assert s * new["epochs"] * n / new["batch_size"] == pytest.approx(0.3 * e * n, rel=1e-12)
    if old["epochs"] == new["epochs"]:    # eps = 0.1 (both at the floor of 5 epochs)
        assert new["learning_rate"] == pytest.approx(old["learning_rate"], rel=1e-12)


def _news20_first_classes(K):
    from fastdp.datasets import load_dataset

    X, y = load_dataset("news20", data_home=os.environ.get("FASTDP_DATA"))
    perm = np.random.default_rng(0).permutation(X.shape[0])
    cut = int(round(0.8 * X.shape[0]))
    tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
    Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
    ktr, kte = ytr <= K, yte <= K
    return Xtr[ktr], ytr[ktr], Xte[kte], yte[kte]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FASTDP_DATA"), reason="needs FASTDP_DATA")
def test_news20_ten_classes_gain_at_eps_1():
    """Median test accuracy of seeds 0-4 at eps = 1 on news20's first 10 classes (raw rows).

    Measured (benchmarks/derive_highd_defaults.py --grid mcE, rev mcE1): the old
    epochs 55.5 %, the new 56.8 % on seeds 0-4 (8 seeds: 55.4 and 57.1 %).  The
    test asks for at least 56.0 % and a gain of at least 0.6 points: the old rule
    fails the first (55.5 %), the new one passes both with a margin of 0.6 points.
    """
    Xtr, ytr, Xte, yte = _news20_first_classes(10)
    n = Xtr.shape[0]
    old = _old_rule(n, 1.0, 10)
    new_acc, old_acc = [], []
    for seed in range(5):
        m = DPLogisticRegression(epsilon=1.0, random_state=seed).fit(Xtr, ytr)
        new_acc.append(100.0 * np.mean(m.predict(Xte) == yte))
        o = DPLogisticRegression(epsilon=1.0, random_state=seed, epochs=old["epochs"],
                                 solver_options={"learning_rate": old["learning_rate"]}
                                 ).fit(Xtr, ytr)
        old_acc.append(100.0 * np.mean(o.predict(Xte) == yte))
        assert o.batch_size_ == m.batch_size_ and m.epochs_ == 20.0 and o.epochs_ == old["epochs"]
    new_med, old_med = float(np.median(new_acc)), float(np.median(old_acc))
    assert old_med < 56.0
    assert new_med >= 56.0
    assert new_med - old_med >= 0.6
