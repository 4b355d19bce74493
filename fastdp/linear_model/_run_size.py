"""Runs refused before any budget is reserved: too many steps, or model vectors
larger than this machine's memory (public quantities only).
"""

import math
import os
import resource

from fastdp.exceptions import ValidationError


MAX_STEPS = 10**9
"""Largest number of mini-batch steps a fit may ask for (about a day of kernel time)."""


def _physical_memory():
    """Physical memory in bytes (None when the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _address_space_left():
    """Bytes this process may still map under its ``RLIMIT_AS`` (None: no limit known)."""
    try:
        limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError, AttributeError):
        return None
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", "rb") as statm:
            mapped = int(statm.read(200).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(limit - mapped, 0)


def _available_memory():
    """Memory a fit may allocate, in bytes: the physical memory, or less when
    the process runs under an address-space limit (``ulimit -v``); None when
    the platform says neither."""
    known = [m for m in (_physical_memory(), _address_space_left()) if m is not None]
    return min(known) if known else None


def _check_run_size(n_samples, n_features, n_outputs, config, n_fits=1):
    """Refuse, before any budget is reserved, runs that cannot finish or cannot be allocated.

    Public quantities only: the number of steps ``epochs n / L`` and the size of
    the dense model vectors: a few per feature and output for the run, and one
    kept per fit (``n_fits`` one-vs-rest fits each keep their coefficients).
    """
    epochs, batch = float(config["epochs"]), float(config["batch_size"])
    if not math.isfinite(epochs) or epochs * n_samples / batch > MAX_STEPS:
        raise ValidationError(
            f"epochs={config['epochs']!r} with n={n_samples} and batch size {batch:g} asks for "
            f"more than {MAX_STEPS:.0e} steps; use fewer epochs.")
    # coef, noise state, scratch: a few float64 vectors per run; then each
    # fit's coefficients are kept, and stacked once into coef_ (twice)
    needed = 8 * n_features * (6 * n_outputs + (2 * n_fits if n_fits > 1 else 0))
    memory = _available_memory()
    if memory is not None and needed > memory:
        outputs = f"{n_outputs} outputs" if n_fits == 1 else f"{n_fits} one-vs-rest fits"
        raise ValidationError(
            f"{n_features} features x {outputs} need about {needed / 2**30:.1f} GiB of "
            f"dense model vectors, more than the {memory / 2**30:.1f} GiB this process may allocate; check the "
            "column indices of the data (a LIBSVM file with a huge feature index?).")


def _check_noise_scale(noise, config, n_features):
    """Refuse a private run whose noise provably overflows float64 (public quantities only).

    A step adds noise of standard deviation ``noise * clip`` to each of
    ``n_features`` coordinates; when the squared norm of that noise vector,
    about ``(noise * clip)^2 * n_features``, exceeds the largest float64, the
    coefficients cannot stay finite and the run could only diverge after its
    budget was spent.
    """
    clip = config.get("clip")
    if clip is None or isinstance(clip, str) or not noise > 0.0:
        return
    scale = float(noise) * float(clip)
    if math.isinf(float(clip)):
        return  # clip=inf: no clipping (the solver refuses it when private)
    if not scale * math.sqrt(max(n_features, 1)) < 1e150:
        raise ValidationError(
            f"clip={clip!r} with noise multiplier {noise:.4g} adds noise of standard deviation "
            f"{scale:.3g} per coordinate to {n_features} coordinates: its squared norm "
            "overflows float64, so no run could stay finite; use a smaller clip.")
