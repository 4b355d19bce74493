"""asv benchmarks of the DP line search (spec 003).

* ``BatchedBacktracking``: one NOISYBTLS evaluation over precomputed margins
  (numba kernel: clipped sums at all K candidates in one sweep, queries,
  sparse vector) for batch sizes of the paper's settings (q·n for Adult at
  q = 0.1 and q = 1) and K = 10 / 20 candidates, against the sequential
  numpy loop of Algorithm 1 that re-evaluates the objective per candidate.
* ``BlsgdRun``: a whole DP-BLSGD run on a synthetic Adult-sized sparse set
  (n = 48842, d = 124, 14 ones per row) at ε = 0.4.
* ``BudgetFilter``: the always-succeed accounting stub of spec 003 §4.7
  (ε = 0.4, zw_general), i.e. the filter's overhead per iteration.
"""

import math

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _line_search as K
from fastdp.privacy.events import GaussianEvent, LineSearchEvent
from fastdp.privacy.filters import RdpBudgetFilter
from fastdp.solvers.line_search import dp_blsgd


def _margins(b, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 2, b), rng.normal(0, 1, b), rng.choice([-1.0, 1.0], b)


def _numpy_sequential(z, u, y, etas, c_obj, slope, lam, nu):
    f0 = np.minimum(np.logaddexp(0.0, -y * z), c_obj).sum()
    for k, eta in enumerate(etas):
        fk = np.minimum(np.logaddexp(0.0, -y * (z - eta * u)), c_obj).sum()
        if f0 - fk - slope * eta + nu[k] >= lam:
            return k
    return -1


class BatchedBacktracking:
    params = ([4884, 48842], [10, 20])
    param_names = ["batch", "max_it"]

    def setup(self, batch, max_it):
        self.z, self.u, self.y = _margins(batch)
        self.etas = 0.8 ** np.arange(max_it)
        self.nu = np.full(max_it, -1e9)           # worst case: every candidate examined
        self.sums = np.empty(max_it + 1)
        self.q = np.empty(max_it)
        K.noisy_backtracking(self.z, self.u, self.y, self.etas, K.LOSS_LOGISTIC, 1.0, 0.1, 0.0,
                             0.0, self.nu, self.sums, self.q)      # compile outside timing

    def time_numba_batched(self, batch, max_it):
        K.noisy_backtracking(self.z, self.u, self.y, self.etas, K.LOSS_LOGISTIC, 1.0, 0.1, 0.0,
                             0.0, self.nu, self.sums, self.q)

    def time_numpy_sequential(self, batch, max_it):
        _numpy_sequential(self.z, self.u, self.y, self.etas, 1.0, 0.1, 0.0, self.nu)


class BlsgdRun:
    timeout = 300

    def setup(self):
        rng = np.random.default_rng(0)
        n, d = 48842, 124
        cols = np.concatenate([np.zeros((n, 1), dtype=np.int64),
                               np.sort(rng.choice(np.arange(1, d), size=(n, 14)), axis=1)], axis=1)
        X = sp.csr_matrix((np.ones(n * 15), cols.ravel(), np.arange(0, 15 * n + 1, 15)),
                          shape=(n, d))
        X.sum_duplicates()
        w = rng.normal(0, 0.5, d)
        self.X = X
        self.y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ w))), 1.0, -1.0)
        dp_blsgd(self.X, self.y, epsilon=0.4, delta=1e-8, random_state=0, max_iter=2)

    def time_dp_blsgd_eps04(self):
        dp_blsgd(self.X, self.y, epsilon=0.4, delta=1e-8, random_state=0)


class BudgetFilter:
    def time_stub_eps04(self):
        f = RdpBudgetFilter(0.4, 1e-8)
        eps_iter = 0.004
        grad = GaussianEvent(1 / math.sqrt(eps_iter ** 2))
        ls = LineSearchEvent.laplace(eps_iter)
        while f.can_afford(grad, 0.1):
            f.open_batch()
            f.charge(grad, 0.1)
            if f.can_afford(ls, 0.1):
                f.charge(ls, 0.1)
