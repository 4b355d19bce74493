"""What every line-search solver releases: Gaussian gradient releases, and the run's record.

The shared pieces of DP-BLSGD, DP-BLGD, the fixed split and DP-AGD: the GLM
oracle over the training set, the initial point, a Poisson batch, a clipped
gradient sum released with Gaussian noise (and DP-AGD's averaging of two
releases), the non-private objective diagnostic and the
:class:`~fastdp.solvers._result.SolverResult` of a run.

Privacy: a gradient release of budget ρ is a ``GaussianEvent(1/sqrt(2ρ))``
of the clipped sum (L2 sensitivity ``c_grad``); the solvers charge it to
their privacy filter.  The objective values read all the data and are a
non-private diagnostic.
"""

import dataclasses
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from fastdp._validation import check_labels, is_mapped_rows
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import GaussianEvent
from fastdp.solvers._result import SolverResult
from fastdp.solvers.glm_oracle import GlmOracle

__all__ = ["prepare_oracle", "initial_point", "draw_batch", "gradient_event", "add_gaussian",
           "average_releases", "noisy_gradient", "objective_values", "filter_report",
           "FilterReport", "line_search_result"]


def prepare_oracle(X, y, loss, num_threads=1):
    if getattr(X, "is_batch_oracle", False):   # the data-parallel engine's (over shards)
        return X
    if loss not in ("logistic", "hinge", "squared"):
        raise ValidationError(f"loss must be 'logistic', 'hinge' or 'squared'; got {loss!r}.")
    if not (sp.issparse(X) or is_mapped_rows(X)):   # mapped rows: read through their row map
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValidationError("X must be a 2-D array or sparse matrix.")
    task = "regression" if loss == "squared" else "binary"
    y_arr = np.asarray(y)
    if y_arr.ndim != 1 or y_arr.shape[0] != X.shape[0]:
        raise ValidationError(f"y must be 1-D with one entry per row of X ({X.shape[0]}).")
    if task == "binary":
        labels = np.unique(y_arr)
        if not np.all(np.isin(labels, (-1.0, 1.0))):
            y_arr, _ = check_labels(y_arr, task, n_samples=X.shape[0])
    return GlmOracle(X, y_arr, loss=loss, num_threads=num_threads, labels="as_given")


def initial_point(kind, scale, d, rng):
    if kind == "zeros":
        return np.zeros(d)
    return scale * rng.standard_normal(d)


def draw_batch(sampler_stream, q, oracle):
    if q >= 1.0:
        return oracle.all_rows
    _, idx = sampler_stream.take(1)
    return idx


def gradient_event(rho):
    return GaussianEvent(1.0 / math.sqrt(2.0 * rho))


def add_gaussian(clean_sum, c_grad, rho, rng, noise_free=False):
    """clean_sum + N(0, C²/(2ρ)·I): the Gaussian release of a clipped sum (sensitivity C)."""
    if noise_free:
        return clean_sum.copy()
    return clean_sum + (c_grad / math.sqrt(2.0 * rho)) * rng.standard_normal(clean_sum.shape[0])


def average_releases(noisy_old, fresh, rho_old, rho_new):
    """DP-AGD's GradAvg: combine two Gaussian releases of the same clipped sum.

    ``noisy_old`` was released with budget ρ_old, ``fresh`` with
    ρ_new − ρ_old; the weights (ρ_old/ρ_new, 1 − ρ_old/ρ_new) give noise
    variance exactly C²/(2ρ_new) per coordinate, as one release at ρ_new
    (post-processing: no extra privacy cost).
    """
    weight = rho_old / rho_new
    return weight * noisy_old + (1.0 - weight) * fresh


def noisy_gradient(oracle, rows, w, c_grad, rho, m, mu, rng, noise_free=False):
    """(released mean gradient incl. μw, noisy sum, clean sum) of one Gaussian release.

    The clean sum is private and never released; DP-BLGD re-noises it.
    """
    clean = oracle.clipped_gradient_sum(rows, w, c_grad)
    noisy = add_gaussian(clean, c_grad, rho, rng, noise_free)
    return noisy / m + mu * w, noisy, clean


def objective_values(oracle, w, mu):
    losses = oracle.loss_values(w)
    mean = float(np.mean(losses))
    return mean, mean + 0.5 * mu * float(np.dot(w, w))


@dataclasses.dataclass(frozen=True)
class FilterReport:
    """What a zCDP-filtered run consumed against its cap (all public: functions of the
    transcript); a part of the typed details of the runs under a
    :class:`~fastdp.privacy.filters.ZcdpFilter`.

    Attributes
    ----------
    budget_filter : str
        ``"zcdp"``.
    rho_cap : float
        The cap ρ; the run is ρ-zCDP.
    rho_consumed : float
        ρ of the calls that ran (≤ ``rho_cap``).
    epsilon_cap : float
        ε of the cap at the filter's δ (NaN when the filter has no δ).
    consumed_event : DpEvent
        The composition of the calls that ran.
    """

    budget_filter: str
    rho_cap: float
    rho_consumed: float
    epsilon_cap: float
    consumed_event: Any


def filter_report(budget):
    """The :class:`FilterReport` of the zCDP filter ``budget`` after its run."""
    return FilterReport(budget_filter="zcdp", rho_cap=budget.rho_cap,
                        rho_consumed=budget.rho_spent, epsilon_cap=budget.epsilon_cap(),
                        consumed_event=budget.consumed_event())


_NON_PRIVATE_KEYS = ("n_noise_draws", "batch_sizes", "gradient_evaluations",
                     "objective_evaluations")


def line_search_result(w, *, algorithm, loss, mu, n_iter, q, n, rho, c_grad, event, history, extra,
            sampler="poisson", num_threads=1, details=None):
    # realised batch sizes and evaluation counts reveal |B|: non-private diagnostics;
    # with typed ``details``, ``extra`` holds only those
    diagnostics = {k: extra.pop(k) for k in _NON_PRIVATE_KEYS if k in extra}
    sigma = 1.0 / math.sqrt(2.0 * rho) if rho > 0 else 0.0
    return SolverResult(
        coef=w, alpha=None, v=None, n_iter=int(n_iter), epochs=float(n_iter * q),
        algorithm=algorithm, loss=loss, lam=float(mu), noise_multiplier=sigma,
        sensitivity=float(c_grad), noise_std=sigma * c_grad, clip=float(c_grad),
        batch_size=float(q * n), sample_rate=float(q), sampler=sampler,
        adjacency="add_remove", event=event, lazy_noise=False,
        diagnostics=diagnostics, num_threads=1 if num_threads is None else int(num_threads),
        history=history, details=details, extra=extra)
