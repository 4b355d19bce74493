"""Interleaved A/B timing of the asv epoch benchmarks' kernels on two builds (issue 19).

The machine is shared, so the two builds are run alternately (A, B, B, A, A, B,
...), each round in a fresh process that times every case ``--repeats`` times
after a warm-up call; a case's time is its best CPU time
(``time.process_time``) over the rounds and repeats.  The cases are those of ``asv_benchmarks/benchmarks``: ``sgd.py``
(one DP-SGD epoch, lazy and eager noise), ``scd.py`` (one epoch of dual
DP-SCD, seqDP-SCD and SDCA) and ``multinomial.py`` (one epoch, DP lazy, DP
eager, non-private), on the same synthetic problems and settings.

Usage::

    python3 benchmarks/kernel_ab.py --old /path/to/old/tree --new /path/to/new/tree \\
        [--rounds 7] [--repeats 5] [--n-samples 200000]

Each tree is a directory holding a built ``fastdp`` package.  Prints one line
per case: best old, best new, new/old.  ``--level kernel`` times the compiled
epoch calls alone (``_sgd.run_sgd``, ``_scd.run_dual_scd``,
``_multinomial.run_multinomial_sgd`` on one epoch's batches prepared once, the
benchmarks' settings), without the validation and sampling around them, which
both builds share and which only add noise.
"""
import argparse
import json
import os
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))


def _cases(n_samples):
    sys.path.insert(0, os.path.join(_HERE, "..", "asv_benchmarks"))
    from benchmarks import common, multinomial, scd, sgd

    X, y = common.synthetic(n_samples)
    sigma = sgd._sigma(n_samples)
    Xm, ym = multinomial._problem()
    cases = {}
    for lazy in (True, False):
        cases[f"sgd n={n_samples} lazy={lazy}"] = (
            lambda lazy=lazy: sgd._dpsgd_epoch(X, y, sigma, lazy))
    for solver in scd.SOLVERS:
        cases[f"scd n={n_samples} {solver}"] = lambda solver=solver: scd._call(solver, X, y, 1)
    for mode in ("dp_lazy", "dp_eager", "nonprivate"):
        cases[f"multinomial n={multinomial.N} {mode}"] = (
            lambda mode=mode: multinomial._epoch(
                Xm, ym, 0.0 if mode == "nonprivate" else multinomial.SIGMA,
                lazy_noise=mode != "dp_eager"))
    return cases


def _kernel_cases(n_samples):
    """One epoch of each compiled kernel on prepared arguments (the asv settings)."""
    import numpy as np

    sys.path.insert(0, os.path.join(_HERE, "..", "asv_benchmarks"))
    from benchmarks import common, multinomial, sgd
    from fastdp._kernels import _multinomial, _scd, _sgd
    from fastdp._validation import structure_token

    def batches(n, rng):
        sizes = rng.binomial(n, common.BATCH / n, size=n // common.BATCH)
        idx = np.concatenate([rng.choice(n, size=s, replace=False) for s in sizes])
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), idx.astype(np.int64)

    X, y = common.synthetic(n_samples)
    token = structure_token(X)
    sq = _scd.row_squared_norms(X.data, X.indptr)
    bp, bi = batches(n_samples, np.random.default_rng(0))
    m = X.shape[1]
    sigma = sgd._sigma(n_samples)
    cases = {}
    for lazy in (True, False):
        def run_sgd(lazy=lazy):
            _sgd.run_sgd(X.data, X.indices, X.indptr, y, sq, np.zeros(m), bp, bi,
                         np.empty(int(np.diff(bp).max())), np.zeros(m, dtype=np.int32), 1,
                         sgd.CLIP, 0.99, 0.5, sigma * sgd.CLIP, lazy, np.random.PCG64(0), 1,
                         256, check_structure=token)
        cases[f"kernel sgd n={n_samples} lazy={lazy}"] = run_sgd
    for sequential in (False, True):
        def run_scd(sequential=sequential):
            _scd.run_dual_scd(X.data, X.indices, X.indptr, y, sq, np.zeros(n_samples),
                              np.zeros(m), bp, bi, np.empty(int(np.diff(bp).max())),
                              np.zeros(m, dtype=np.int32), 1, common.LAM * n_samples, 1000.0,
                              0.5, 1e-9, sequential, 0.5, 0.5, True, np.random.PCG64(0), 1,
                              256, check_structure=token)
        cases[f"kernel scd n={n_samples} seq={sequential}"] = run_scd
    Xm, ym = multinomial._problem()
    tm = structure_token(Xm)
    sqm = _scd.row_squared_norms(Xm.data, Xm.indptr)
    bpm, bim = batches(Xm.shape[0], np.random.default_rng(1))
    K = multinomial.K
    for mode in ("dp_lazy", "dp_eager", "nonprivate"):
        def run_mn(mode=mode):
            _multinomial.run_multinomial_sgd(
                Xm.data, Xm.indices, Xm.indptr, ym.astype(np.int64), sqm,
                np.zeros((Xm.shape[1], K)), bpm, bim, np.empty(int(np.diff(bpm).max()) * K),
                np.zeros(Xm.shape[1], dtype=np.int32), 1.0, 0.99, 0.5,
                0.0 if mode == "nonprivate" else 0.5, mode != "dp_eager", np.random.PCG64(0), 1,
                256, check_structure=tm)
        cases[f"kernel multinomial n={Xm.shape[0]} {mode}"] = run_mn
    return cases


def _child(n_samples, repeats, level):
    import warnings

    warnings.simplefilter("ignore")
    import fastdp

    out = {"fastdp": os.path.dirname(fastdp.__file__)}
    cases = _kernel_cases(n_samples) if level == "kernel" else _cases(n_samples)
    for name, run in cases.items():
        run()                                   # warm-up: page in, warm caches
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            run()
            best = min(best, time.process_time() - start)
        out[name] = best
    print(json.dumps(out))


def _round(tree, n_samples, repeats, level):
    env = dict(os.environ, PYTHONPATH=tree,
               NUMBA_CACHE_DIR=os.path.join(tree, ".numba-cache"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                           "--n-samples", str(n_samples), "--repeats", str(repeats),
                           "--level", level], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old")
    parser.add_argument("--new")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n-samples", type=int, default=200_000)
    parser.add_argument("--level", choices=["asv", "kernel"], default="asv")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        _child(args.n_samples, args.repeats, args.level)
        return
    best = {"old": {}, "new": {}}
    for r in range(args.rounds):
        order = [("old", args.old), ("new", args.new)]
        if r % 2:
            order.reverse()
        for label, tree in order:
            times = _round(tree, args.n_samples, args.repeats, args.level)
            where = times.pop("fastdp")
            for name, seconds in times.items():
                best[label][name] = min(best[label].get(name, float("inf")), seconds)
            print(f"# round {r + 1} {label} ({where}) load {os.getloadavg()[0]:.2f}",
                  file=sys.stderr, flush=True)
    print(f"{'case':40s} {'old s':>8s} {'new s':>8s} {'new/old':>8s}")
    for name in best["old"]:
        old, new = best["old"][name], best["new"][name]
        print(f"{name:40s} {old:8.4f} {new:8.4f} {new / old:8.3f}")


if __name__ == "__main__":
    main()
