"""asv benchmarks of DP-SGD (fastdp.solvers.sgd) on the 200k x 50k synthetic problem.

Logistic loss, lambda = 1e-4, lot size 1000, C = 1, Poisson sampling, sigma
calibrated for epsilon = 1, delta = 1e-6 over 4 epochs (as
``benchmarks/compare_sgd.py``).  Timed: one DP-SGD epoch (lazy and eager
noise) and one epoch of scikit-learn's ``SGDClassifier`` on the same data;
``track_ratio_to_sklearn`` is the CPU-time ratio (target <= 2).  The peers
snapml and Opacus are only in the comparison script (they are slow: seconds
to minutes per epoch).
"""

import time
import warnings

N, D, NNZ, L = 200_000, 50_000, 50, 1000
LAM, CLIP = 1e-4, 1.0


def _problem():
    from fastdp.datasets import make_sparse_classification

    return make_sparse_classification(N, D, NNZ, random_state=0)


def _sigma():
    from fastdp.privacy import calibrate_noise_multiplier

    return float(calibrate_noise_multiplier(1.0, 1e-6, L / N, 4 * N // L))


def _dpsgd_epoch(X, y, sigma, lazy_noise):
    from fastdp.solvers.sgd import dpsgd

    return dpsgd(X, y, loss="logistic", lam=LAM, epochs=1, batch_size=L, clip=CLIP,
                 noise_multiplier=sigma, lazy_noise=lazy_noise, random_state=0)


def _sklearn_epoch(X, y):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=1, tol=None,
                      random_state=0).fit(X, y)


class DPSGDEpoch:
    """Wall time of one epoch, lazy vs eager noise."""

    timeout = 600
    repeat = 3
    number = 1
    params = [True, False]
    param_names = ["lazy_noise"]

    def setup_cache(self):
        X, y = _problem()
        return X, y, _sigma()

    def setup(self, cache, lazy_noise):
        self.X, self.y, self.sigma = cache
        _dpsgd_epoch(self.X, self.y, self.sigma, lazy_noise)  # warm caches

    def time_epoch(self, cache, lazy_noise):
        _dpsgd_epoch(self.X, self.y, self.sigma, lazy_noise)


class SklearnSGDEpoch:
    """One epoch of scikit-learn's (non-private) SGDClassifier, and fastdp's ratio to it."""

    timeout = 600
    repeat = 3
    number = 1

    def setup_cache(self):
        X, y = _problem()
        return X, y, _sigma()

    def setup(self, cache):
        self.X, self.y, self.sigma = cache

    def time_sklearn_epoch(self, cache):
        _sklearn_epoch(self.X, self.y)

    def track_ratio_to_sklearn(self, cache):
        def cpu(fn):
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                fn()
                best = min(best, time.process_time() - start)
            return best

        ours = cpu(lambda: _dpsgd_epoch(self.X, self.y, self.sigma, True))
        theirs = cpu(lambda: _sklearn_epoch(self.X, self.y))
        return ours / theirs

    track_ratio_to_sklearn.unit = "ratio"
