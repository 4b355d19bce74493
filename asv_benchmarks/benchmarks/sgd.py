"""asv benchmarks of DP-SGD (fastdp.solvers.sgd) on the synthetic problem (20k and 200k rows).

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

from . import common

N, L = common.LARGEST, common.BATCH
LAM, CLIP = common.LAM, 1.0


def _problem():
    return common.synthetic(N)


def _sigma(n=N):
    from fastdp.privacy import calibrate_noise_multiplier

    return float(calibrate_noise_multiplier(1.0, 1e-6, L / n, 4 * n // L))


def _dpsgd_epoch(X, y, sigma, lazy_noise, epochs=1, callback=None):
    from fastdp.solvers.sgd import dpsgd

    return dpsgd(X, y, loss="logistic", lam=LAM, epochs=epochs, batch_size=L, clip=CLIP,
                 noise_multiplier=sigma, lazy_noise=lazy_noise, random_state=0,
                 callback=callback)


def _sklearn_epoch(X, y):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=1, tol=None,
                      random_state=0).fit(X, y)


class DPSGDEpoch:
    """One epoch (a 1-epoch call), lazy vs eager noise, at both sizes."""

    timer = time.process_time   # CPU time: the machine may be shared
    timeout = 900
    repeat = 3
    number = 1
    params = (common.SIZES, [True, False])
    param_names = ["n_samples", "lazy_noise"]

    def setup_cache(self):
        return {n: (*data, _sigma(n)) for n, data in common.all_sizes().items()}

    def setup(self, cache, n_samples, lazy_noise):
        self.X, self.y, self.sigma = cache[n_samples]
        _dpsgd_epoch(self.X, self.y, self.sigma, lazy_noise)  # warm caches

    def time_epoch(self, cache, n_samples, lazy_noise):
        _dpsgd_epoch(self.X, self.y, self.sigma, lazy_noise)

    def track_epoch_cpu(self, cache, n_samples, lazy_noise):
        return common.per_epoch_cpu(lambda epochs, cb: _dpsgd_epoch(
            self.X, self.y, self.sigma, lazy_noise, epochs=epochs, callback=cb))

    track_epoch_cpu.unit = "CPU seconds"


class SklearnSGDEpoch:
    """One epoch of scikit-learn's (non-private) SGDClassifier, and fastdp's ratio to it."""

    timer = time.process_time   # CPU time: the machine may be shared
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
