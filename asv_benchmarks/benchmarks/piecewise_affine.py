"""asv benchmarks of spec 001 (DP piecewise affine minimisation).

* ``MetropolisKernel``: the numba random-walk Metropolis kernel at the
  paper's setting (box [-1, 1]^d, beta = 0.05, proposal std sqrt(0.1)),
  d = 10, m in {20, 200}, 1000 chains x 1000 steps, on 1 thread;
  ``track_steps_per_second`` reports the throughput per core.
* ``Mechanisms``: one call of each public mechanism with 1000 runs at the
  paper's defaults (d = 10, m = 20, c = 1, eps = 0.1); the exponential
  mechanism with the paper's random-walk Metropolis and with independence
  Metropolis (quantified delta).

``setup`` runs every kernel once so that timings exclude numba compilation
(the kernels are cached on disk).
"""

import math

import numpy as np

N_CHAINS = 1000
N_STEPS = 1000


def _problem(m, d=10, c=1.0):
    from fastdp.solvers.piecewise_affine import Box, PiecewiseAffineProblem

    rng = np.random.default_rng(0)
    return PiecewiseAffineProblem(rng.standard_normal((m, d)), rng.standard_normal(m), 1.0,
                                  Box.cube(d, c))


class MetropolisKernel:
    params = [20, 200]
    param_names = ["m"]
    repeat = 3
    number = 1
    processes = 1

    def setup(self, m):
        import numba

        from fastdp.solvers.piecewise_affine import metropolis_sample

        self.sample = metropolis_sample
        self.problem = _problem(m)
        self.x0 = np.zeros((N_CHAINS, 10))
        self.threads = numba.get_num_threads()
        numba.set_num_threads(1)
        self.sample(self.problem, 0.05, self.x0[:2], 10, math.sqrt(0.1), np.random.default_rng(0))

    def teardown(self, m):
        import numba

        numba.set_num_threads(self.threads)

    def _run(self):
        self.sample(self.problem, 0.05, self.x0, N_STEPS, math.sqrt(0.1), np.random.default_rng(1))

    def time_chains(self, m):
        self._run()

    def track_steps_per_second(self, m):
        import time

        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            self._run()
            best = min(best, time.perf_counter() - t)
        return N_CHAINS * N_STEPS / best

    track_steps_per_second.unit = "steps/s"


_OPTIONS = {"exponential_independence": ("exponential", {"sampler": "independence"})}


class Mechanisms:
    params = ["offset_perturbation", "solution_perturbation", "exponential",
              "exponential_independence", "subgradient"]
    param_names = ["method"]
    repeat = 2
    number = 1
    processes = 1
    timeout = 300

    def setup(self, method):
        from fastdp.solvers.piecewise_affine import dp_minimize

        self.dp_minimize = dp_minimize
        self.problem = _problem(20)
        self.method, self.options = _OPTIONS.get(method, (method, {}))
        dp_minimize(self.problem, 0.1, self.method, n_runs=2, random_state=0, **self.options)

    def time_1000_runs(self, method):
        self.dp_minimize(self.problem, 0.1, self.method, n_runs=1000, random_state=0, **self.options)
