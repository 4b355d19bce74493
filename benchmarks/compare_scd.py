"""Speed of one DP-SCD epoch against LIBLINEAR and against a numpy port of the reference loop.

Problem: the synthetic LIBSVM-like logistic-regression problem of
``shared/research/anchors-perf.md`` (200 000 x 50 000, about 49 stored entries
per row, Zipf column popularity, Poisson row lengths, unit-norm rows;
``fastdp.datasets.make_sparse_classification(..., random_state=0)``), lambda =
1e-4, L = 1000, C = 0.5, a fixed noise multiplier (calibrated for epsilon = 1,
delta = 1e-6 over the timed epochs when ``fastdp.privacy`` offers calibration,
otherwise 1.0).

What is timed (CPU time of the process, ``time.process_time``, and wall time):

* fastdp ``dual_dpscd`` (Poisson sampling, lazy noise): the epoch time, read
  from the solver's per-epoch callback (median over epochs 2-4; it includes
  the sampling of the batches and the compiled epoch), and the end-to-end
  time of a 1-epoch call (adds validation of X, the row-norm check, etc.).
* LIBLINEAR 2.50 (``liblinear-official``), dual coordinate descent for L2
  logistic regression (``-s 7``, C = 1/(lambda n)): training time divided by
  the number of outer iterations (= epochs over the data) it reports; the
  conversion of the scipy matrix into LIBLINEAR's format is excluded.
* A faithful numpy port of the reference implementation's per-lot loop
  (spec 000 section 2.2 and [R] ``Optimizer.dual_PSCD``: a Python loop over
  the examples of a lot, closed-form step, scaling, then Gaussian noise on
  the lot's alpha and on all of v), run on ``--port-lots`` lots and
  extrapolated to an epoch.
* Epoch time at 1x, 3x and 10x the rows (the matrix replicated), L fixed.
* The 2-thread speed-up of the DP-SCD epoch (results are bit-identical).

Run: ``python benchmarks/compare_scd.py`` (about 1-2 minutes; ``--quick`` skips
the 10x scale).  Numbers depend on machine load; CPU time is the main figure.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from fastdp.solvers.scd import dual_dpscd


def make_problem(n, d, nnz, seed=0):
    try:
        from fastdp.datasets import make_sparse_classification
    except ImportError:  # pragma: no cover - the data layer predates this script
        make_sparse_classification = None
    if make_sparse_classification is not None:
        return make_sparse_classification(n, d, nnz, random_state=seed)
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(d) + 20.0)
    p /= p.sum()
    perm = rng.permutation(d)
    row_nnz = 1 + rng.poisson(nnz - 1, size=n)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    cols = perm[rng.choice(d, size=indptr[-1], p=p)].astype(np.int32)
    X = sp.csr_matrix((rng.lognormal(0.0, 0.7, size=indptr[-1]), cols, indptr), shape=(n, d))
    X.sum_duplicates()
    X = sp.csr_matrix(sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())) @ X)
    m = X @ rng.standard_normal(d)
    y = np.where(m / m.std() + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def noise_multiplier_for(epsilon, delta, q, steps):
    try:
        from fastdp.privacy import calibrate_noise_multiplier
    except ImportError:
        return 1.0, "fixed (fastdp.privacy.calibrate_noise_multiplier not available)"
    return float(calibrate_noise_multiplier(epsilon, delta, q, steps)), f"calibrated: eps={epsilon}, delta={delta}"


def timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def dpscd_epoch(X, y, sigma, L, num_threads=1, epochs=4, repeats=2):
    """Epoch time of ``dual_dpscd`` from the solver's per-epoch callback (median of epochs 2..),
    and the end-to-end time of a 1-epoch call (best of ``repeats``).  (CPU, wall) pairs."""
    kw = dict(loss="logistic", lam=1e-4, batch_size=L, clip=0.5, noise_multiplier=sigma,
              random_state=0, num_threads=num_threads)
    stamps = []
    dual_dpscd(X, y, epochs=epochs,
               callback=lambda state: stamps.append((time.process_time(), time.perf_counter())),
               **kw)
    diffs = np.diff(np.array(stamps), axis=0)
    per_epoch = tuple(np.median(diffs, axis=0))
    one = min(timed(lambda: dual_dpscd(X, y, epochs=1, **kw))[:2] for _ in range(repeats))
    return per_epoch, one


def liblinear_epoch(X, y, lam):
    from liblinear.liblinearutil import parameter, problem, train

    prob = problem(y, X)
    opts = f"-s 7 -c {1.0 / (lam * X.shape[0])} -e 0.1"
    fd = sys.stdout.fileno()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        sys.stdout.flush()
        os.dup2(tmp.fileno(), fd)
        try:
            cpu, wall, _ = timed(lambda: train(prob, parameter(opts)))
        finally:
            sys.stdout.flush()
            os.dup2(saved, fd)
            os.close(saved)
        tmp.seek(0)
        log = tmp.read()
    iters = int(log.split("#iter =")[1].split()[0])
    return cpu / iters, wall / iters, iters


def reference_port_epoch(X, y, sigma, L, lam, clip, n_lots, seed=0, box=1e-4):
    """The reference code's per-lot loop (logistic loss, CSR input), extrapolated to one epoch.

    Mirrors the operations of [R] ``Optimizer.dual_PSCD`` with
    ``LogisticRegression._delta_alpha`` for a scipy CSR matrix, written anew:
    per example, the row ``X[n, :]`` is extracted, the primal model
    ``w / (lam N)`` is formed (dense, length M), the margin and the squared row
    norm are computed from the sparse row, the Newton step is projected into
    the box and scaled by C, and ``delta_w`` (dense, M x 1) gains the scaled
    row; after each lot Gaussian noise is drawn for the lot's alpha and for all
    M coordinates of ``delta_w``, and both are added.
    """
    n, m = X.shape
    rng = np.random.default_rng(seed)
    alpha = np.zeros(n)
    w = np.zeros((m, 1))
    std = sigma * math.sqrt(2.0 * clip**2)
    perm = rng.permutation(n)
    c0, w0 = time.process_time(), time.perf_counter()
    for t in range(n_lots):
        lot = perm[t * L:(t + 1) * L]
        delta_alpha = np.zeros(L)
        delta_w = np.zeros((m, 1))
        for i, j in enumerate(lot):
            xn = X[j, :]
            yn = y[j]
            a = yn * np.clip(yn * alpha[j], box, 1 - box)
            coef = w / (lam * n)
            der1 = -yn * np.log(1 - a * yn) + yn * np.log(yn * a) + xn.dot(coef)[0, 0]
            der2 = -1 / (a * (a - yn)) + L / (lam * n) * np.sum(xn.power(2))
            new = yn * np.clip(yn * (a - der1 / der2), box, 1 - box)
            zeta = new - a
            zeta /= np.maximum(1, np.abs(zeta) / clip)
            delta_alpha[i] = zeta
            delta_w = np.asarray(delta_w + xn.multiply(zeta).transpose())
        delta_alpha += rng.normal(0, std, size=L)
        delta_w += rng.normal(0, std, size=m).reshape(-1, 1)
        w += delta_w
        alpha[lot] += delta_alpha
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    lots_per_epoch = n / L
    return cpu / n_lots * lots_per_epoch, wall / n_lots * lots_per_epoch


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=50_000)
    ap.add_argument("--nnz", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--port-lots", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="skip the 10x scale")
    args = ap.parse_args(argv)

    L, lam = args.batch_size, 1e-4
    X, y = make_problem(args.n, args.d, args.nnz)
    n = X.shape[0]
    print(f"data: {n} x {X.shape[1]}, nnz = {X.nnz} ({X.nnz / n:.1f}/row), {X.dtype}, "
          f"{X.indices.dtype} indices; load average {os.getloadavg()[0]:.2f}")
    sigma, how = noise_multiplier_for(1.0, 1e-6, L / n, 3 * n // L)
    print(f"L = {L}, lambda = {lam}, C = 0.5, sigma = {sigma:.4f} ({how})")

    (ours_cpu, ours_wall), (e2e_cpu, e2e_wall) = dpscd_epoch(X, y, sigma, L)
    print(f"fastdp DP-SCD epoch: {ours_cpu:.3f} s CPU, {ours_wall:.3f} s wall; "
          f"1-epoch call end to end: {e2e_cpu:.3f} s CPU")
    try:
        ll_cpu, ll_wall, iters = liblinear_epoch(X, y, lam)
        print(f"LIBLINEAR -s 7 epoch: {ll_cpu:.3f} s CPU, {ll_wall:.3f} s wall ({iters} iterations)")
        print(f"  ratio DP-SCD / LIBLINEAR epoch (CPU): {ours_cpu / ll_cpu:.2f}x "
              f"(target <= 1.5x); end to end 1 epoch: {e2e_cpu / ll_cpu:.2f}x")
    except ImportError:
        print("LIBLINEAR: not installed (pip install liblinear-official)")
    port_cpu, port_wall = reference_port_epoch(X, y, sigma, L, lam, 0.5, args.port_lots)
    print(f"numpy port of the reference loop, extrapolated epoch: {port_cpu:.2f} s CPU")
    print(f"  speed-up over the numpy port: {port_cpu / ours_cpu:.0f}x (target >= 100x)")

    base = ours_cpu
    for k in ([3] if args.quick else [3, 10]):
        Xk = sp.vstack([X] * k, format="csr")
        yk = np.tile(y, k)
        (cpu_k, _), _ = dpscd_epoch(Xk, yk, sigma, L, epochs=3, repeats=1)
        print(f"{k}x rows ({Xk.nnz} nnz): epoch {cpu_k:.3f} s CPU = {cpu_k / base:.2f}x the 1x epoch")
        del Xk, yk

    (cpu2, wall2), _ = dpscd_epoch(X, y, sigma, L, num_threads=2)
    print(f"2 threads: epoch {wall2:.3f} s wall ({cpu2:.3f} s CPU); speed-up (wall) "
          f"{ours_wall / wall2:.2f}x; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
