"""Shared problems and helpers of the asv suite (no benchmarks here).

The synthetic problem is the one of ``shared/research/anchors-perf.md``
section 4.1 (``fastdp.datasets.make_sparse_classification``, seed 0, 50 000
columns, about 49 stored entries per row, unit-norm rows); ``n_samples``
scales it.  200 000 rows (9.8 M stored entries) is the "synth" problem every
speed target of the issues refers to; 20 000 rows is the small size.
"""

import os
import time

import numpy as np

SIZES = [20_000, 200_000]
LARGEST = max(SIZES)
N_FEATURES = 50_000
NNZ_PER_ROW = 50
LAM = 1e-4
BATCH = 1000


def synthetic(n_samples):
    """(X, y): CSR float64 / int32 and labels in {-1, +1}."""
    from fastdp.datasets import make_sparse_classification

    return make_sparse_classification(n_samples, N_FEATURES, NNZ_PER_ROW, random_state=0)


def all_sizes():
    """{n_samples: (X, y)} for every size of :data:`SIZES` (built in ``setup_cache``)."""
    return {n: synthetic(n) for n in SIZES}


def per_epoch_cpu(run, epochs=4):
    """Median CPU seconds between consecutive per-epoch callbacks of ``run(epochs, callback)``.

    The first epoch (after validation) is included as a difference from the
    start stamp only when ``epochs == 1``; otherwise differences of epochs
    2..k are used so that one-time costs drop out.
    """
    stamps = [time.process_time()]
    run(epochs, lambda state: stamps.append(time.process_time()))
    diffs = np.diff(stamps)
    return float(np.median(diffs[1:] if len(diffs) > 1 else diffs))


def load_average():
    return os.getloadavg()[0]
