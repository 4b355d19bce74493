"""asv benchmarks of keyed Poisson sampling (the splitting tree, issue 36).

One lot of ``BlockPoissonSampler`` at q = 1e-4 over n rows, all of them (one
worker) or the first 1/8 (one of eight workers); the cost is O(q n + log n),
so it should grow with n q, not with n.  Target: at most 1 ms per lot at
n = 10**8 (``benchmarks/bench_keyed_sampling.py`` for the full table).
"""

import numpy as np


class KeyedLot:
    """Time of one keyed lot (the members in one worker's rows)."""

    params = ([10**6, 10**8], [1, 8])
    param_names = ["n_rows", "workers"]

    def setup(self, n_rows, workers):
        from fastdp.sampling_blocks import BlockPoissonSampler, keyed_streams, sampling_key

        self.sampler = BlockPoissonSampler(1e-4)
        self.streams = keyed_streams(sampling_key(np.random.default_rng(0)))
        self.stop = n_rows // workers
        self.t = 0
        self.sampler.lot(self.streams, n_rows, 1, 0, self.stop)   # numba compilation

    def time_lot(self, n_rows, workers):
        self.t += 1
        self.sampler.lot(self.streams, n_rows, 1 + self.t % 1000, 0, self.stop)
