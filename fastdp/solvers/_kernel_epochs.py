"""The epochs of a compiled mini-batch kernel, as DP-SGD, multinomial DP-SGD and DP-SCD run them.

The three solvers (:mod:`fastdp.solvers.sgd`, :mod:`fastdp.solvers.multinomial`,
:mod:`fastdp.solvers.scd`) drive their kernels (``_sgd.run_sgd``,
``_multinomial.run_multinomial_sgd``, ``_scd.run_dual_scd``) the same way: the
rows of X as the kernels read them (stored, or the estimators' mapped rows
without a copy), their squared norms (for the DP-SGD kernels on mapped rows: none,
the kernel sums each row's norm as it reads the row), the lazy-noise bookkeeping, the
threads' column ranges and the structure token are set up once; every epoch
takes its batches from the sampler's stream and runs inside one kernel call,
with the noise generator's lock held.  :class:`KernelEpochs` is that loop;
:func:`mini_batch_result` fills the fields of the result every such run
reports alike.

Every kernel takes its arguments in the same order::

    kernel(data, indices, indptr, y, sq_norms, *state, batch_ptr, batch_idx, buffer,
           last_noised, *params, bit_generator, num_threads, parallel_min_rows,
           column_splits, check_structure=token, **row_map)

Privacy: nothing here decides or releases anything; the solvers choose the
noise and account the run (see their module docstrings).
"""

import numpy as np

from fastdp._validation import structure_token
from fastdp.exceptions import FastDPError
from fastdp.io._advice import step_advice  # no-op for data in memory
from fastdp.privacy.events import GaussianEvent
from fastdp.sampling import get_sampler
from fastdp.solvers._common import (
    balanced_column_splits,
    epoch_batches,
    kernel_rows,
    kernel_sq_norms,
    sampled_gaussian_event,
)
from fastdp.solvers._result import SolverResult

__all__ = ["KernelEpochs", "check_finite_iterate", "gaussian_steps_event", "mini_batch_result"]


class KernelEpochs:
    """The inputs every epoch of a compiled mini-batch kernel reads, and its calls.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix or fastdp._mapped_rows.MappedRows
        Prepared by the solver (``prepare_data`` or ``check_X``): mapped rows are
        read through their row map, without a copy.
    y : ndarray
        The labels as the kernel takes them (float64, or int64 class indices).
    num_threads : int
    noise_rng : numpy.random.Generator
        The run's noise stream; its bit generator is locked during each call.
    per_row : int, default=1
        Scratch numbers the kernel needs per row of a batch (K for multinomial).
    norms_in_kernel : bool, default=False
        The kernel sums each mapped row's squared norm itself when it gets None
        (the DP-SGD kernels): mapped rows then get no scan of X before the first
        epoch (``kernel_sq_norms(X, mapped_in_kernel=True)``).  Stored rows keep
        their norms (stored at conversion, or one scan).

    Attributes
    ----------
    n_draws : int
        Standard normal draws taken so far.
    n_steps : int
        Steps done so far.
    """

    def __init__(self, X, y, *, num_threads, noise_rng, per_row=1, norms_in_kernel=False):
        self.n_samples, n_columns = X.shape
        self.X = X
        self.y = y
        self.sq_norms = kernel_sq_norms(X, mapped_in_kernel=norms_in_kernel)  # None: in kernel
        self.data, self.indices, self.indptr, self.row_map = kernel_rows(X)
        self.last_noised = np.zeros(n_columns, dtype=np.int32)
        self.column_splits = balanced_column_splits(X, num_threads)
        self.num_threads = num_threads
        self.token = structure_token(X)  # O(1) for check_X output: the kernel skips its scan
        self.bit_generator = noise_rng.bit_generator
        self.per_row = int(per_row)
        self.buffer = np.zeros(self.per_row, dtype=np.float64)
        self.n_draws = 0
        self.n_steps = 0

    def run(self, kernel, sampler, stream, epochs, *, state, params, parallel_min_rows):
        """Run the epochs; yields the epoch number after each epoch's kernel call.

        Parameters
        ----------
        kernel : callable
            The compiled kernel (argument order in the module docstring).
        sampler, stream, epochs
            The run's sampler, its stream (``start_batches``) and the epochs.
        state : tuple of ndarray
            The arrays the kernel updates in place (between ``sq_norms`` and the batches).
        params : tuple
            The kernel's arguments between ``last_noised`` and the bit generator.
        parallel_min_rows : int
            Smallest batch the kernel may process in parallel.

        Yields
        ------
        epoch : int
            1, 2, ...; ``n_steps`` is the count of steps done at its end.
        """
        for epoch, done, batch_ptr, batch_idx in epoch_batches(sampler, stream, self.n_samples,
                                                                epochs):
            needed = self.per_row * int(np.diff(batch_ptr).max(initial=1))
            if needed > self.buffer.shape[0]:
                self.buffer = np.zeros(needed, dtype=np.float64)
            with self.bit_generator.lock, step_advice(self.X, batch_ptr, batch_idx):
                self.n_draws += kernel(
                    self.data, self.indices, self.indptr, self.y, self.sq_norms, *state,
                    batch_ptr, batch_idx, self.buffer, self.last_noised, *params,
                    self.bit_generator, self.num_threads, parallel_min_rows,
                    self.column_splits, check_structure=self.token, **self.row_map)
            self.n_steps = done
            yield epoch


def check_finite_iterate(coef, algorithm, epoch, learning_rate):
    """Raise :class:`FastDPError` if the released iterate ``coef`` of ``epoch`` is not finite.

    Checking the flushed, released iterate is post-processing (no privacy cost).
    """
    if not np.all(np.isfinite(coef)):
        raise FastDPError(
            f"{algorithm} diverged in epoch {epoch} (non-finite coefficients); lower "
            f"learning_rate (now {learning_rate:g}) or normalise the rows.")


def gaussian_steps_event(n_samples, config, noise):
    """The event of the estimators' mini-batch DP-SGD fits: the sampler of ``config``'s
    event of its T steps of ``GaussianEvent(noise)`` (add/remove sensitivity C)."""
    sampler = get_sampler(config["sampler"], config["batch_size"])
    n_steps = sampler.n_steps(n_samples, config["epochs"])
    return sampler.event(n_samples, n_steps, GaussianEvent(noise))


def mini_batch_result(run, *, sampler, noise_multiplier, lazy_noise, **fields):
    """The :class:`SolverResult` of a run of :class:`KernelEpochs` ``run``.

    Fills what every mini-batch run reports alike: ``n_iter`` (the steps done),
    ``batch_size`` (the expected L), ``sample_rate``, ``sampler``, ``adjacency``,
    ``event`` (the sampler's event of the steps, ``GaussianEvent(sigma)`` each),
    ``noise_multiplier``, ``lazy_noise``, ``diagnostics`` (the draws) and
    ``num_threads``; ``fields`` gives the rest.
    """
    n = run.n_samples
    return SolverResult(
        n_iter=int(run.n_steps), batch_size=float(sampler.expected_batch_size(n)),
        sample_rate=float(sampler.sample_rate(n)), sampler=sampler.name,
        adjacency=sampler.adjacency,
        event=sampled_gaussian_event(sampler, n, int(run.n_steps), noise_multiplier),
        noise_multiplier=noise_multiplier, lazy_noise=bool(lazy_noise),
        diagnostics={"n_noise_draws": int(run.n_draws)}, num_threads=run.num_threads,
        **fields)
