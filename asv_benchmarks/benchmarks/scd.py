"""asv benchmarks of the compiled DP-SCD kernels (fastdp.solvers.scd), one epoch.

Solvers: dual DP-SCD (Algorithm 1, Poisson sampling), seqDP-SCD (Algorithm 3,
shuffling) and non-private SDCA (batch 1), logistic loss, lambda = 1e-4,
L = 1000, C = 0.5, sigma = 1, on the synthetic problem at 20 000 and 200 000
rows (``common.py``).  ``time_epoch`` is a whole 1-epoch call (validation +
sampling + the compiled epoch); ``track_epoch_cpu`` the median CPU time of
epochs 2-4 read from the per-epoch callback (the compiled epoch alone, plus
sampling).  ``peakmem_epoch`` covers the process (data included).
"""

import time

from . import common

SOLVERS = ["dual_dpscd", "seq_dpscd", "sdca"]


def _call(solver, X, y, epochs, callback=None, num_threads=1):
    from fastdp.solvers import scd

    common_kw = dict(loss="logistic", lam=common.LAM, epochs=epochs, random_state=0,
                     callback=callback)
    if solver == "dual_dpscd":
        return scd.dual_dpscd(X, y, batch_size=common.BATCH, clip=0.5, noise_multiplier=1.0,
                              num_threads=num_threads, **common_kw)
    if solver == "seq_dpscd":
        return scd.seq_dpscd(X, y, batch_size=common.BATCH, clip=0.5, noise_multiplier=1.0,
                             **common_kw)
    return scd.scd(X, y, batch_size=1, **common_kw)


class ScdEpoch:
    timer = time.process_time   # CPU time: the machine may be shared
    params = (common.SIZES, SOLVERS)
    param_names = ["n_samples", "solver"]
    timeout = 900
    repeat = 3
    number = 1
    processes = 1

    def setup_cache(self):
        return common.all_sizes()

    def setup(self, data, n_samples, solver):
        self.X, self.y = data[n_samples]
        _call(solver, self.X, self.y, 1)      # page in, warm caches

    def time_epoch(self, data, n_samples, solver):
        _call(solver, self.X, self.y, 1)

    def peakmem_epoch(self, data, n_samples, solver):
        _call(solver, self.X, self.y, 1)

    def track_epoch_cpu(self, data, n_samples, solver):
        return common.per_epoch_cpu(
            lambda epochs, cb: _call(solver, self.X, self.y, epochs, callback=cb))

    track_epoch_cpu.unit = "CPU seconds"


class ScdThreads:
    """Dual DP-SCD epoch on the largest problem with 1 and 2 OpenMP threads (same bits)."""

    params = [1, 2]
    param_names = ["num_threads"]
    timeout = 900
    repeat = 3
    number = 1
    processes = 1

    def setup_cache(self):
        return common.synthetic(common.LARGEST)

    def setup(self, data, num_threads):
        self.X, self.y = data
        _call("dual_dpscd", self.X, self.y, 1, num_threads=num_threads)

    def time_epoch(self, data, num_threads):
        _call("dual_dpscd", self.X, self.y, 1, num_threads=num_threads)
