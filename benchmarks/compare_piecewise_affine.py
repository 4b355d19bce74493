"""Metropolis sampler of spec 001's M_E: compiled kernel against a per-step numpy loop.

Measures random-walk Metropolis steps per second at the paper's setting
(d = 10, m = 20, box [-1, 1]^d, beta = eps / (2 b_max) = 0.05, proposal std
sqrt(0.1)) for

* ``numpy loop``: one chain advanced one step at a time in Python with numpy
  (draw a proposal, box check, A @ y + b, max, accept) -- what a direct
  transcription of the paper's sampler costs;
* ``numpy batched``: all chains advanced together, one numpy call per step
  (the best pure-numpy layout);
* ``fastdp kernel``: :func:`fastdp._kernels._metropolis.metropolis_chains`
  on 1 thread (per core) and on all threads.

Both sides do the same work per step: d normal draws and one uniform, a
box check, and (inside the box) all m piece scores, their max and the
acceptance test. The kernel draws its normals in blocks (vectorised ziggurat)
and skips the logarithm and the other pieces when cheap bounds already decide;
every decision equals the plain rule's.

Run: ``python benchmarks/compare_piecewise_affine.py [--quick] [--cpu-time]``.
Prints a table; nothing is asserted (timings depend on the machine and its
load). Measured on the 2-core development machine (AMD EPYC, AVX-512, shared
with other jobs), ``--cpu-time``: kernel ~60 ns/step (1.6e7 steps/s/core),
numpy loop 6-9 us/step, ratio 100-150x depending on load (the kernel was
~85-110 ns/step before the block generator).
"""

import argparse
import math
import time

import numba
import numpy as np

from fastdp.solvers.piecewise_affine import Box, PiecewiseAffineProblem
from fastdp.solvers.piecewise_affine import metropolis_sample


def numpy_loop(A, b, lo, hi, beta, std, x0, n_steps, rng):
    x = x0.copy()
    fx = float(np.max(A @ x + b))
    accepted = 0
    for _ in range(n_steps):
        y = x + std * rng.standard_normal(x.shape[0])
        u = rng.random()
        if np.any(y < lo) or np.any(y > hi):
            continue
        fy = float(np.max(A @ y + b))
        if fy <= fx or math.log(u) < -beta * (fy - fx):
            x, fx = y, fy
            accepted += 1
    return x, accepted


def numpy_batched(A, b, lo, hi, beta, std, X0, n_steps, rng):
    X = X0.copy()
    fX = (X @ A.T + b).max(axis=1)
    for _ in range(n_steps):
        Y = X + std * rng.standard_normal(X.shape)
        u = rng.random(X.shape[0])
        inside = np.all((Y >= lo) & (Y <= hi), axis=1)
        fY = (Y @ A.T + b).max(axis=1)
        accept = inside & ((fY <= fX) | (np.log(u) < -beta * (fY - fX)))
        X[accept] = Y[accept]
        fX[accept] = fY[accept]
    return X


def best_time(fn, repeats, clock):
    best = math.inf
    for _ in range(repeats):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--m", type=int, default=20)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with process CPU time (per-core rate on a loaded machine; "
                             "single-threaded rows only)")
    args = parser.parse_args(argv)
    d, m = args.d, args.m
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((m, d)), rng.standard_normal(m)
    problem = PiecewiseAffineProblem(A, b, 1.0, Box.cube(d, 1.0))
    lo, hi = problem.constraints.lo, problem.constraints.hi
    beta, std = 0.05, math.sqrt(0.1)
    loop_steps = 5_000 if args.quick else 50_000
    batch_chains, batch_steps = (200, 200) if args.quick else (1000, 1000)
    kernel_chains, kernel_steps = (200, 5000) if args.quick else (1000, 5000)
    repeats = 2 if args.quick else 3

    clock = time.process_time if args.cpu_time else time.perf_counter
    x0 = np.zeros((kernel_chains, d))
    metropolis_sample(problem, beta, x0[:2], 10, std, np.random.default_rng(0))  # compile / load cache
    original = numba.get_num_threads()

    def loop():
        numpy_loop(A, b, lo, hi, beta, std, np.zeros(d), loop_steps, np.random.default_rng(1))

    def kernel():
        metropolis_sample(problem, beta, x0, kernel_steps, std, np.random.default_rng(2))

    # The numpy loop and the 1-thread kernel are timed alternately (best of each),
    # so a change of machine load between the two does not bias their ratio.
    numba.set_num_threads(1)
    t_loop = t_kernel = math.inf
    for _ in range(repeats):
        t_loop = min(t_loop, best_time(loop, 1, clock))
        t_kernel = min(t_kernel, best_time(kernel, 1, clock))
    rows = [("numpy loop (1 chain, 1 step per iteration)", loop_steps / t_loop)]
    t = best_time(lambda: numpy_batched(A, b, lo, hi, beta, std, np.zeros((batch_chains, d)),
                                        batch_steps, np.random.default_rng(1)), repeats, clock)
    rows.append((f"numpy batched ({batch_chains} chains)", batch_chains * batch_steps / t))
    rows.append(("fastdp kernel (1 thread)", kernel_chains * kernel_steps / t_kernel))
    threads = numba.config.NUMBA_NUM_THREADS
    if not args.cpu_time and threads > 1:
        numba.set_num_threads(threads)
        t = best_time(kernel, repeats, clock)
        rows.append((f"fastdp kernel ({threads} threads)", kernel_chains * kernel_steps / t))
    numba.set_num_threads(original)
    base = rows[0][1]
    print(f"Metropolis steps per second, d = {d}, m = {m}"
          + (" (per CPU second)" if args.cpu_time else " (wall clock)"))
    print(f"{'implementation':48s} {'steps/s':>14s} {'ns/step':>9s} {'vs numpy loop':>14s}")
    for name, rate in rows:
        print(f"{name:48s} {rate:14.4g} {1e9 / rate:9.1f} {rate / base:13.1f}x")


if __name__ == "__main__":
    main()
