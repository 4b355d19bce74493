"""Runs refused before any budget is reserved: too many steps, or model vectors
larger than this machine's memory (public quantities only).
"""

import math
import os

from fastdp.exceptions import ValidationError


MAX_STEPS = 10**9
"""Largest number of mini-batch steps a fit may ask for (about a day of kernel time)."""


def _available_memory():
    """Physical memory in bytes (None when the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _check_run_size(n_samples, n_features, n_outputs, config):
    """Refuse, before any budget is reserved, runs that cannot finish or cannot be allocated.

    Public quantities only: the number of steps ``epochs n / L`` and the size of
    the dense model vectors (a few per feature and output).
    """
    epochs, batch = float(config["epochs"]), float(config["batch_size"])
    if not math.isfinite(epochs) or epochs * n_samples / batch > MAX_STEPS:
        raise ValidationError(
            f"epochs={config['epochs']!r} with n={n_samples} and batch size {batch:g} asks for "
            f"more than {MAX_STEPS:.0e} steps; use fewer epochs.")
    needed = 6 * 8 * n_features * n_outputs  # coef, noise state, scratch: a few float64 vectors
    memory = _available_memory()
    if memory is not None and needed > memory:
        raise ValidationError(
            f"{n_features} features x {n_outputs} outputs need about {needed / 2**30:.1f} GiB of "
            f"dense model vectors, more than this machine's {memory / 2**30:.1f} GiB; check the "
            "column indices of the data (a LIBSVM file with a huge feature index?).")
