"""asv benchmarks of multinomial (softmax) DP-SGD (fastdp.solvers.multinomial), K = 20 classes.

The synthetic problem of ``common.py`` (50 000 columns, about 49 stored
entries per row, unit rows) at 20k rows, with K = 20 labels drawn from a
planted softmax model (``argmax(5 X W* + Gumbel)``, ``W* ~ N(0, I)``, seed 0).
lambda = 1e-4, lot size 1000, C = 1, Poisson sampling, sigma = 1.  Timed: one
DP epoch (lazy and eager noise), one non-private epoch, and one epoch of
scikit-learn's ``SGDClassifier`` (log loss, one-vs-rest: 20 binary passes)
on the same data; ``track_ratio_to_sklearn`` is the CPU-time ratio of the
lazy DP epoch to it (measured at 100k rows: about 0.35).
"""

import time
import warnings

import numpy as np

from . import common

N, K, L = 20_000, 20, common.BATCH
LAM, CLIP, SIGMA = common.LAM, 1.0, 1.0


def _problem(n=N):
    X, _ = common.synthetic(n)
    rng = np.random.default_rng(0)
    scores = 5.0 * np.asarray(X @ rng.normal(size=(X.shape[1], K)))
    return X, np.argmax(scores + rng.gumbel(size=(n, K)), axis=1)


def _epoch(X, y, noise_multiplier, lazy_noise=True):
    from fastdp.solvers.multinomial import dp_multinomial_sgd

    return dp_multinomial_sgd(X, y, n_classes=K, lam=LAM, epochs=1, batch_size=L, clip=CLIP,
                              noise_multiplier=noise_multiplier, lazy_noise=lazy_noise,
                              random_state=0)


def _sklearn_epoch(X, y):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=1, tol=None,
                      random_state=0).fit(X, y)


def _best_cpu(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


class MultinomialEpoch:
    """One multinomial epoch: DP with lazy or eager noise, or non-private (sigma = 0)."""

    timer = time.process_time   # CPU time: the machine may be shared
    timeout = 600
    repeat = 3
    number = 1
    params = ["dp_lazy", "dp_eager", "nonprivate"]
    param_names = ["mode"]

    def setup_cache(self):
        return _problem()

    def setup(self, data, mode):
        self.X, self.y = data
        self.run = lambda: _epoch(self.X, self.y, 0.0 if mode == "nonprivate" else SIGMA,
                                  lazy_noise=mode != "dp_eager")
        self.run()   # warm caches

    def time_epoch(self, data, mode):
        self.run()


class MultinomialVsSklearn:
    """scikit-learn's one-vs-rest SGDClassifier epoch, and the DP epoch's ratio to it."""

    timer = time.process_time
    timeout = 600
    repeat = 3
    number = 1

    def setup_cache(self):
        return _problem()

    def setup(self, data):
        self.X, self.y = data

    def time_sklearn_epoch(self, data):
        _sklearn_epoch(self.X, self.y)

    def track_ratio_to_sklearn(self, data):
        ours = _best_cpu(lambda: _epoch(self.X, self.y, SIGMA))
        return ours / _best_cpu(lambda: _sklearn_epoch(self.X, self.y))

    track_ratio_to_sklearn.unit = "ratio"
