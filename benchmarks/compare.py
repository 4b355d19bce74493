"""Side-by-side speed of fastdp against the peers users would pick; writes docs/performance.md.

One command::

    python benchmarks/compare.py            # full run (about 20-30 min on 2 cores)
    python benchmarks/compare.py --quick    # smaller problem, fewer repeats (a few minutes)

The script first creates/updates its own virtualenv with the peers
(``benchmarks/peer_env.py``: scikit-learn, liblinear-official, snapml, cyanure,
dp-accounting, Opacus + CPU torch 2.13.0, prv_accountant, diffprivlib, and
fastdp built from this repository), then re-executes itself inside it.  Each
pair runs in the same process on the same data; the timed calls of a pair are
interleaved, repeated, and summarised by their median.  The main figure is
CPU time (``time.process_time``: all threads of the process), because the
machine may be shared; wall time is kept beside it and used for the thread
comparison.  The load average is recorded with every section.

Sections (each optional with ``--only`` / ``--skip``):

``floor``       one ``X @ w`` pass and one dot-plus-axpy pass over the same CSR
                (storage order and random row order), compiled with Cython;
``scd``         DP-SCD epoch vs LIBLINEAR dual CD, scikit-learn SGD, snapml SDCA;
``sgd``         DP-SGD epoch vs snapml DP-SGD, Opacus, scikit-learn SGDClassifier;
``target``      time to 1e-3 relative suboptimality (non-private SCD/SDCA vs peers);
``port``        a numpy port of the seed-000 reference loop vs DP-SCD;
``calibration`` noise calibration vs dp_accounting (RDP, PLD), an Opacus-style
                bisection and prv_accountant;
``loader``      the LIBSVM loader vs scikit-learn's;
``scaling``     epoch time at 1x, 3x, 10x nnz, and 1 vs 2 threads;
``metropolis``  Metropolis steps per second vs a per-step numpy loop;
``imports``     ``import fastdp`` time and numba compilations on import.

Results go to ``docs/performance.md`` (tables, the targets of the other
issues marked met or not) with a PNG chart next to it, and the raw numbers to
``~/.cache/fastdp-bench/results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = Path(os.environ.get("FASTDP_BENCH_CACHE", Path.home() / ".cache" / "fastdp-bench"))
SECTIONS = ["imports", "floor", "scd", "sgd", "target", "port", "calibration", "loader",
            "scaling", "metropolis"]

LAM = 1e-4            # lambda of the 1/n-averaged objective (anchors-perf.md)
L_BATCH = 1000        # lot size of the DP solvers
EPSILON, DELTA = 1.0, 1e-6
SCD_CLIP, SGD_CLIP = 0.5, 1.0
F_STAR_SYNTH = 0.584667594964   # anchors-perf.md 4.1: logistic, lambda 1e-4, 200k x 50k synth


# ---------------------------------------------------------------------------
# timing helpers
# ---------------------------------------------------------------------------

def load_average():
    return round(os.getloadavg()[0], 2)


def clock():
    return time.process_time(), time.perf_counter()


def timed(fn):
    """(cpu seconds, wall seconds, result) of one call."""
    c0, w0 = clock()
    out = fn()
    c1, w1 = clock()
    return c1 - c0, w1 - w0, out


def interleaved(fns, repeats):
    """Run every callable ``repeats`` times, round-robin; median CPU and wall of each.

    Returns {name: {"cpu": median, "wall": median, "cpu_runs": [...]}}.  A callable
    may return a (cpu, wall) pair of its own (e.g. per-epoch figures); then those
    are used instead of the call's total time.
    """
    runs = {name: [] for name in fns}
    values = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            cpu, wall, out = timed(fn)
            if isinstance(out, tuple) and len(out) == 2 and all(isinstance(v, float) for v in out):
                cpu, wall = out
            elif isinstance(out, (int, float)):
                values[name] = float(out)
            runs[name].append((cpu, wall))
    res = {name: {"cpu": statistics.median(c for c, _ in r),
                  "wall": statistics.median(w for _, w in r),
                  "cpu_runs": [round(c, 6) for c, _ in r]} for name, r in runs.items()}
    for name, value in values.items():
        res[name]["value"] = value
    return res


def epoch_from_callbacks(run, epochs):
    """(cpu, wall) median of epochs 2..``epochs`` of ``run(epochs, callback)``."""
    stamps = [clock()]
    run(epochs, lambda state: stamps.append(clock()))
    cpu = [b[0] - a[0] for a, b in zip(stamps[1:], stamps[2:])]
    wall = [b[1] - a[1] for a, b in zip(stamps[1:], stamps[2:])]
    return float(statistics.median(cpu)), float(statistics.median(wall))


def quiet_stdout(fn):
    """Call ``fn`` with the process's stdout (fd 1) captured; returns (result, text)."""
    fd = sys.stdout.fileno()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        sys.stdout.flush()
        os.dup2(tmp.fileno(), fd)
        try:
            out = fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, fd)
            os.close(saved)
        tmp.seek(0)
        return out, tmp.read()


def peer(name):
    """Import a peer module or return None (the section then reports it missing)."""
    try:
        return __import__(name, fromlist=["_"])
    except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
        print(f"  peer {name} not available: {type(exc).__name__}: {exc}")
        return None


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------

class Problem:
    """The synthetic problem of anchors-perf.md 4.1 (seed 0), built once per run."""

    def __init__(self, n, d=50_000, nnz=50):
        from fastdp.datasets import make_sparse_classification

        self.n, self.d, self.nnz_per_row = n, d, nnz
        self.X, self.y = make_sparse_classification(n, d, nnz, random_state=0)
        self.is_synth = (n, d, nnz) == (200_000, 50_000, 50)

    def describe(self):
        X = self.X
        return (f"{X.shape[0]} x {X.shape[1]}, {X.nnz} stored entries ({X.nnz / X.shape[0]:.1f} "
                f"per row), {X.dtype} values, {X.indices.dtype} indices, unit-norm rows")


def sigma_for(n, epochs):
    from fastdp.privacy import calibrate_noise_multiplier

    return float(calibrate_noise_multiplier(EPSILON, DELTA, L_BATCH / n, int(epochs * n // L_BATCH)))


def logistic_objective(w, X, y, lam=LAM):
    import numpy as np

    z = y * (X @ w)
    return float(np.mean(np.logaddexp(0.0, -z)) + 0.5 * lam * (w @ w))


# ---------------------------------------------------------------------------
# the peers' epochs (functions shared by several sections)
# ---------------------------------------------------------------------------

def fastdp_dpscd_epoch(X, y, sigma, num_threads=1, epochs=4):
    from fastdp.solvers.scd import dual_dpscd

    def run(k, cb):
        dual_dpscd(X, y, loss="logistic", lam=LAM, epochs=k, batch_size=L_BATCH, clip=SCD_CLIP,
                   noise_multiplier=sigma, random_state=0, num_threads=num_threads, callback=cb)
    return lambda: epoch_from_callbacks(run, epochs)


def fastdp_dpsgd_epoch(X, y, sigma, num_threads=1, epochs=4, lazy_noise=True):
    from fastdp.solvers.sgd import dpsgd

    def run(k, cb):
        dpsgd(X, y, loss="logistic", lam=LAM, epochs=k, batch_size=L_BATCH, clip=SGD_CLIP,
              noise_multiplier=sigma, learning_rate=1.0, lazy_noise=lazy_noise, random_state=0,
              num_threads=num_threads, callback=cb)
    return lambda: epoch_from_callbacks(run, epochs)


def liblinear_dual_epoch(X, y):
    """LIBLINEAR -s 7 (dual CD, L2 logistic): training time / outer iterations (= epochs).

    The conversion into LIBLINEAR's format is done once outside the timing."""
    lib = peer("liblinear.liblinearutil")
    if lib is None:
        return None
    prob = lib.problem(y, X)
    opts = f"-s 7 -c {1.0 / (LAM * X.shape[0])} -e 0.1 -q"

    def run():
        # -q silences the log; the iteration count comes from a verbose run below
        cpu, wall, _ = timed(lambda: lib.train(prob, lib.parameter(opts)))
        return cpu / iters[0], wall / iters[0]

    _, log = quiet_stdout(lambda: lib.train(prob, lib.parameter(opts.replace(" -q", ""))))
    iters = [max(1, int(log.split("#iter =")[1].split()[0]))]
    return run


def sklearn_sgd_epoch(X, y):
    """scikit-learn SGDClassifier(log_loss), batch 1: (t(5 epochs) - t(1 epoch)) / 4."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    def fit(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=k,
                                 tol=None, random_state=0).fit(X, y)

    def run():
        c1, w1, _ = timed(lambda: fit(1))
        c5, w5, _ = timed(lambda: fit(5))
        return (c5 - c1) / 4, (w5 - w1) / 4
    return run


def snapml_sdca_epoch(X, y):
    """snapml LogisticRegression(dual=True): (t(5 epochs) - t(1 epoch)) / 4, 1 thread."""
    snapml = peer("snapml")
    if snapml is None:
        return None

    def fit(k):
        return snapml.LogisticRegression(max_iter=k, regularizer=LAM * X.shape[0], dual=True,
                                         fit_intercept=False, n_jobs=1, tol=1e-12,
                                         random_state=0).fit(X, y)

    def run():
        c1, w1, _ = timed(lambda: fit(1))
        c5, w5, _ = timed(lambda: fit(5))
        return (c5 - c1) / 4, (w5 - w1) / 4
    return run


def snapml_dpsgd_epoch(X, y):
    """snapml LogisticRegression(privacy=True): a 1-epoch fit (DP-SGD, batch 1000, eps 1)."""
    snapml = peer("snapml")
    if snapml is None:
        return None

    def run():
        model = snapml.LogisticRegression(max_iter=1, regularizer=LAM * X.shape[0], privacy=True,
                                          dual=False, eta=0.3, batch_size=L_BATCH,
                                          privacy_epsilon=EPSILON, grad_clip=SGD_CLIP,
                                          fit_intercept=False, n_jobs=1, random_state=0)
        model.fit(X, y)
    return run


def opacus_epoch(X, y, sigma, n_lots):
    """Opacus on torch.nn.Linear, Poisson sampling; ``n_lots`` lots extrapolated to an epoch."""
    if peer("opacus") is None or peer("torch") is None:
        return None
    from compare_sgd import opacus_epoch as opacus_lots

    def run():
        return tuple(float(v) for v in opacus_lots(X, y, sigma, L_BATCH, n_lots))
    return run


# ---------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------

def build_floor():
    """Compile benchmarks/_floor.pyx into the cache (once) and import it."""
    import importlib

    build = CACHE / "floor_build"
    build.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(build))
    try:
        return importlib.import_module("_floor")
    except ImportError:
        pass
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    ext = Extension("_floor", [str(HERE / "_floor.pyx")], extra_compile_args=["-O3"])
    dist = Distribution({"ext_modules": cythonize([ext], build_dir=str(build / "c"), quiet=True)})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = str(build)
    cmd.build_temp = str(build / "tmp")
    cmd.ensure_finalized()
    quiet_stdout(cmd.run)
    importlib.invalidate_caches()
    return importlib.import_module("_floor")


def section_floor(ctx):
    import numpy as np

    floor = build_floor()
    X = ctx.problem.X
    n, d = X.shape
    w = np.random.default_rng(0).standard_normal(d) * 1e-3
    out = np.empty(n)
    storage = np.arange(n, dtype=np.int64)
    shuffled = np.random.default_rng(1).permutation(n).astype(np.int64)
    v = np.zeros(d)
    res = interleaved({
        "scipy X @ w": lambda: X @ w,
        "X @ w (compiled)": lambda: floor.matvec(X.data, X.indices, X.indptr, w, out),
        "dot+axpy, storage order": lambda: floor.dot_axpy(X.data, X.indices, X.indptr, storage,
                                                          v, 1e-9),
        "dot+axpy, random row order": lambda: floor.dot_axpy(X.data, X.indices, X.indptr,
                                                             shuffled, v, 1e-9),
    }, ctx.repeats + 2)
    ctx.floor = {"matvec": res["X @ w (compiled)"]["cpu"],
                 "dot_axpy": res["dot+axpy, storage order"]["cpu"],
                 "dot_axpy_random": res["dot+axpy, random row order"]["cpu"]}
    return {"rows": res}


def section_scd(ctx):
    X, y = ctx.problem.X, ctx.problem.y
    sigma = sigma_for(X.shape[0], 4)
    fns = {"fastdp DP-SCD (dual, Poisson, L=1000)": fastdp_dpscd_epoch(X, y, sigma)}
    for name, fn in [("LIBLINEAR -s 7 dual CD (non-private)", liblinear_dual_epoch(X, y)),
                     ("scikit-learn SGDClassifier (non-private)", sklearn_sgd_epoch(X, y)),
                     ("snapml SDCA dual=True (non-private)", snapml_sdca_epoch(X, y))]:
        if fn is not None:
            fns[name] = fn
    return {"sigma": sigma, "rows": interleaved(fns, ctx.repeats)}


def section_sgd(ctx):
    X, y = ctx.problem.X, ctx.problem.y
    sigma = sigma_for(X.shape[0], 4)
    fns = {"fastdp DP-SGD (Poisson, L=1000, lazy noise)": fastdp_dpsgd_epoch(X, y, sigma),
           "scikit-learn SGDClassifier (non-private)": sklearn_sgd_epoch(X, y)}
    res = interleaved(fns, ctx.repeats)
    slow = {}
    fn = snapml_dpsgd_epoch(X, y)
    if fn is not None:
        slow["snapml DP-SGD (privacy=True)"] = fn
    fn = opacus_epoch(X, y, sigma, ctx.opacus_lots)
    if fn is not None:
        slow[f"Opacus (torch {ctx.torch_version}, extrapolated from {ctx.opacus_lots} lots)"] = fn
    if slow:
        res.update(interleaved(slow, ctx.slow_repeats))
    return {"sigma": sigma, "rows": res}


def _doubling(run, objective, f_star, budget, tol=1e-3, efforts=None):
    """Rerun ``run(effort)`` with growing effort until (F - f*)/f* <= tol or ``budget`` CPU s.

    Returns (cpu seconds of the first run at tol or None, effort, history)."""
    spent, history = 0.0, []
    for effort in efforts:
        cpu, _, w = timed(lambda: run(effort))
        spent += cpu
        gap = (objective(w) - f_star) / f_star
        history.append((effort, round(cpu, 4), float(gap)))
        if gap <= tol:
            return cpu, effort, history
        if spent > budget:
            break
    return None, None, history


def f_star_of(ctx):
    """Optimum of the logistic objective: anchors value for the synth problem (checked),
    else a tight LIBLINEAR primal solve (cached on disk)."""
    import numpy as np

    X, y = ctx.problem.X, ctx.problem.y
    key = f"fstar_{X.shape[0]}x{X.shape[1]}_{X.nnz}_{LAM}"
    path = CACHE / "fstar.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    if key in known:
        return known[key]
    lib = peer("liblinear.liblinearutil")
    f_star = None
    if lib is not None:
        prob = lib.problem(y, X)
        model = lib.train(prob, lib.parameter(f"-s 0 -c {1.0 / (LAM * X.shape[0])} -e 1e-8 -q"))
        w = np.array([model.w[j] for j in range(X.shape[1])])
        f_star = logistic_objective(w, X, y)
    if ctx.problem.is_synth:
        f_star = min(F_STAR_SYNTH, f_star) if f_star is not None else F_STAR_SYNTH
    if f_star is None:
        from fastdp.solvers.scd import scd

        w = scd(X, y, loss="logistic", lam=LAM, epochs=200, random_state=0).coef
        f_star = logistic_objective(w, X, y)
    known[key] = f_star
    path.write_text(json.dumps(known))
    return f_star


def section_target(ctx):
    import numpy as np

    X, y = ctx.problem.X, ctx.problem.y
    f_star = f_star_of(ctx)
    obj = lambda w: logistic_objective(np.asarray(w, dtype=np.float64).ravel(), X, y)  # noqa: E731
    budget = ctx.target_budget
    epochs = [1, 2, 4, 8, 16, 32, 64, 128]
    rows = {}
    from fastdp.solvers.scd import scd

    rows["fastdp SCD (SDCA, batch 1, non-private)"] = _doubling(
        lambda k: scd(X, y, loss="logistic", lam=LAM, epochs=k, random_state=0).coef,
        obj, f_star, budget, efforts=epochs)
    rows["fastdp mini-batch SCD (L=1000, non-private)"] = _doubling(
        lambda k: scd(X, y, loss="logistic", lam=LAM, epochs=k, batch_size=L_BATCH,
                      random_state=0).coef, obj, f_star, budget, efforts=epochs)
    lib = peer("liblinear.liblinearutil")
    if lib is not None:
        prob = lib.problem(y, X)
        C = 1.0 / (LAM * X.shape[0])

        def liblinear(e):
            model = lib.train(prob, lib.parameter(f"-s 7 -c {C} -e {e} -q"))
            return np.array([model.w[j] for j in range(X.shape[1])])
        rows["LIBLINEAR -s 7 dual CD"] = _doubling(
            liblinear, obj, f_star, budget, efforts=[1.0, 0.3, 0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4,
                                                     1e-4, 3e-5, 1e-5])
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    def sk(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=k,
                                 tol=None, random_state=0).fit(X, y).coef_
    rows["scikit-learn SGDClassifier"] = _doubling(sk, obj, f_star, budget, efforts=epochs)
    snapml = peer("snapml")
    if snapml is not None:
        rows["snapml SDCA (dual=True)"] = _doubling(
            lambda k: snapml.LogisticRegression(max_iter=k, regularizer=LAM * X.shape[0], dual=True,
                                                fit_intercept=False, n_jobs=1, tol=1e-12,
                                                random_state=0).fit(X, y).coef_,
            obj, f_star, budget, efforts=epochs)
    cyanure = peer("cyanure.estimators")
    if cyanure is not None:
        def cy(k):
            model = cyanure.Classifier(loss="logistic", penalty="l2", lambda_1=LAM, max_iter=k,
                                       tol=1e-12, fit_intercept=False, solver="auto",
                                       duality_gap_interval=10**6, n_threads=1, verbose=False,
                                       random_state=0)
            model.fit(X, y)
            return model.get_weights() if hasattr(model, "get_weights") else model.coef_
        try:
            rows["cyanure (auto: catalyst/QNing MISO)"] = _doubling(cy, obj, f_star, budget,
                                                                    efforts=epochs)
        except Exception as exc:  # noqa: BLE001 - a peer API change must not stop the run
            print(f"  cyanure failed: {type(exc).__name__}: {exc}")
    return {"f_star": f_star, "rows": {k: {"cpu": v[0], "effort": v[1], "history": v[2]}
                                       for k, v in rows.items()}}


def section_port(ctx):
    from compare_scd import reference_port_epoch

    X, y = ctx.problem.X, ctx.problem.y
    sigma = sigma_for(X.shape[0], 4)
    res = interleaved({
        "fastdp DP-SCD": fastdp_dpscd_epoch(X, y, sigma),
        "numpy port of the reference loop": lambda: tuple(float(v) for v in reference_port_epoch(
            X, y, sigma, L_BATCH, LAM, SCD_CLIP, ctx.port_lots)),
    }, ctx.slow_repeats)
    return {"lots": ctx.port_lots, "rows": res}


def prv_calibrate(q, steps, target, delta, eps_error=0.01):
    """Opacus-style bisection (absolute ε tolerance 0.01) on prv_accountant's upper ε bound."""
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    def eps(sigma):
        acc = PRVAccountant(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma,
                                                                   sampling_probability=q),
                            max_self_compositions=steps, eps_error=eps_error,
                            delta_error=delta / 1000)
        return acc.compute_epsilon(delta=delta, num_self_compositions=[steps])[2]

    lo, hi = 0.0, 10.0
    eps_hi = eps(hi)
    while eps_hi > target:
        lo, hi = hi, 2 * hi
        eps_hi = eps(hi)
    while target - eps_hi > 0.01:
        mid = (lo + hi) / 2
        e = eps(mid)
        if e < target:
            hi, eps_hi = mid, e
        else:
            lo = mid
    return hi


def dp_accounting_pld_calibrate(q, steps, target, delta):
    import dp_accounting
    from dp_accounting import mechanism_calibration
    from dp_accounting.pld import pld_privacy_accountant

    def make_event(sigma):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)

    return float(mechanism_calibration.calibrate_dp_mechanism(
        lambda: pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4),
        make_event, target, delta, tol=1e-3))


def section_calibration(ctx):
    import compare_accounting as ca
    from fastdp.privacy import GaussianEvent, PoissonSampledEvent, RdpAccountant, SelfComposedEvent
    from fastdp.privacy import calibrate_noise_multiplier, compute_epsilon

    out = {"rdp": {}, "pld": {}, "epsilon": {}}
    ca.fastdp_calibrate(*ca.SETTINGS["K1"])      # warm module-level tables
    for sid, (q, steps, target, delta) in ca.SETTINGS.items():
        fns = {"fastdp (RDP)": lambda a=(q, steps, target, delta): ca.fastdp_calibrate(*a),
               "dp_accounting calibrate_dp_mechanism (RDP)":
                   lambda a=(q, steps, target, delta): ca.dp_accounting_calibrate(*a),
               "Opacus-style bisection (RDP)":
                   lambda a=(q, steps, target, delta): ca.opacus_style_calibrate(*a)}
        row = interleaved(fns, ctx.repeats)
        for name in row:
            row[name]["sigma"] = row[name].pop("value")
            row[name]["epsilon"] = float(compute_epsilon(row[name]["sigma"], q, steps, delta))
        out["rdp"][sid] = row
    pld_settings = ["K1", "K3"] if ctx.quick else ["K1", "K2", "K3"]
    prv = peer("prv_accountant")
    for sid in pld_settings:
        q, steps, target, delta = ca.SETTINGS[sid]
        fns = {"fastdp (PLD)": lambda a=(target, delta, q, steps): calibrate_noise_multiplier(
                   *a, accountant="pld", rtol=1e-3),
               "dp_accounting calibrate_dp_mechanism (PLD)":
                   lambda a=(q, steps, target, delta): dp_accounting_pld_calibrate(*a)}
        if prv is not None:
            fns["prv_accountant, Opacus-style bisection"] = \
                lambda a=(q, steps, target, delta): prv_calibrate(*a)
        row = interleaved(fns, 1)
        for name in row:
            row[name]["sigma"] = row[name].pop("value")
            row[name]["epsilon"] = float(compute_epsilon(row[name]["sigma"], q, steps, delta,
                                                         accountant="pld"))
        out["pld"][sid] = row
    # one RDP epsilon (cold accountant, no curve cache) against dp_accounting's
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

    q, sigma, steps, delta = 256 / 60000, 1.1, 14_063, 1e-5

    def ours():
        acc = RdpAccountant()
        return acc.epsilon(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps),
                           delta)

    def theirs():
        acc = dp_rdp.RdpAccountant()
        acc.compose(dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
        return acc.get_epsilon(delta)
    ours()
    many = 20

    out["epsilon"] = interleaved({"fastdp RDP epsilon": lambda: [ours() for _ in range(many)],
                                  "dp_accounting RDP epsilon": lambda: [theirs() for _ in range(many)]},
                                 ctx.repeats)
    for row in out["epsilon"].values():
        row["cpu"] /= many
        row["wall"] /= many
    return out


def section_loader(ctx):
    from compare_loader import benchmark_file
    from sklearn.datasets import load_svmlight_file

    from fastdp.datasets import load_libsvm

    path = benchmark_file(str(CACHE))
    load_libsvm(path)
    load_svmlight_file(path)
    res = interleaved({"fastdp load_libsvm": lambda: load_libsvm(path),
                       "scikit-learn load_svmlight_file": lambda: load_svmlight_file(path)},
                      ctx.repeats)
    return {"file_mb": os.path.getsize(path) / 1e6, "rows": res}


def section_scaling(ctx):
    import numpy as np
    import scipy.sparse as sp

    X, y = ctx.problem.X, ctx.problem.y
    sigma = sigma_for(X.shape[0], 4)
    scales = [1, 3] if ctx.quick else [1, 3, 10]
    out = {"nnz": {}, "threads": {}}
    for k in scales:
        Xk = X if k == 1 else sp.vstack([X] * k, format="csr")
        yk = y if k == 1 else np.tile(y, k)
        row = interleaved({"DP-SCD": fastdp_dpscd_epoch(Xk, yk, sigma, epochs=3),
                           "DP-SGD": fastdp_dpsgd_epoch(Xk, yk, sigma, epochs=3)},
                          max(1, ctx.repeats - (k > 3)))
        out["nnz"][k] = {"nnz": int(Xk.nnz), **row}
        del Xk, yk
    for name, make in [("DP-SCD", fastdp_dpscd_epoch), ("DP-SGD", fastdp_dpsgd_epoch)]:
        out["threads"][name] = interleaved({t: make(X, y, sigma, num_threads=t) for t in (1, 2)},
                                           ctx.repeats)
    return out


def section_metropolis(ctx):
    import math

    import numba
    import numpy as np
    from compare_piecewise_affine import numpy_loop

    from fastdp.solvers.piecewise_affine import metropolis_sample
    from fastdp.solvers.piecewise_affine import Box, PiecewiseAffineProblem

    d, m = 10, 20
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((m, d)), rng.standard_normal(m)
    problem = PiecewiseAffineProblem(A, b, 1.0, Box.cube(d, 1.0))
    lo, hi = problem.constraints.lo, problem.constraints.hi
    beta, std = 0.05, math.sqrt(0.1)
    loop_steps = 5_000 if ctx.quick else 20_000
    chains, steps = (200, 2000) if ctx.quick else (1000, 2000)
    x0 = np.zeros((chains, d))
    metropolis_sample(problem, beta, x0[:2], 10, std, np.random.default_rng(0))
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        res = interleaved({
            "numpy loop (1 chain, 1 step per iteration)": lambda: numpy_loop(
                A, b, lo, hi, beta, std, np.zeros(d), loop_steps, np.random.default_rng(1)),
            "fastdp kernel (1 thread)": lambda: metropolis_sample(
                problem, beta, x0, steps, std, np.random.default_rng(2)),
        }, ctx.repeats)
    finally:
        numba.set_num_threads(threads)
    res["numpy loop (1 chain, 1 step per iteration)"]["steps"] = loop_steps
    res["fastdp kernel (1 thread)"]["steps"] = chains * steps
    return {"rows": res}


IMPORT_PROBE = r"""
import importlib, json, pkgutil, time
from numba.core import event
compiles = []
class Listener(event.Listener):
    def on_start(self, ev):
        compiles.append(str(ev.data.get("dispatcher", "?")))
    def on_end(self, ev):
        pass
event.install_listener("numba:compile", Listener())
t0 = time.process_time()
import fastdp
t_top = time.process_time() - t0
import fastdp as pkg
mods = []
for info in pkgutil.walk_packages(pkg.__path__, "fastdp."):
    if ".experiments" in info.name or info.name.endswith("ray_engine") or info.name.endswith("__main__"):
        continue
    importlib.import_module(info.name)
    mods.append(info.name)
t_all = time.process_time() - t0
print(json.dumps({"top": t_top, "all": t_all, "modules": len(mods), "compiles": compiles}))
"""


def section_imports(ctx):
    res = {}
    times = []
    for _ in range(ctx.repeats):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True,
                             check=True)
        times.append(json.loads(out.stdout.strip().splitlines()[-1]))
    res["import_fastdp_cpu"] = statistics.median(t["top"] for t in times)
    res["import_all_cpu"] = statistics.median(t["all"] for t in times)
    res["modules"] = times[0]["modules"]
    res["numba_compiles"] = times[0]["compiles"]
    linear = subprocess.run([sys.executable, "-c", "import time; t = time.process_time(); "
                             "import fastdp.linear_model; print(time.process_time() - t)"],
                            capture_output=True, text=True, check=True)
    res["import_linear_model_cpu"] = float(linear.stdout.strip())
    return res


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------

def _fmt_s(x):
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} µs"


def _ratio(a, b):
    return a / b if a and b else float("nan")


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _epoch_table(rows, ours, floor):
    body = []
    base = rows[ours]["cpu"]
    for name, r in rows.items():
        body.append([name, _fmt_s(r["cpu"]), _fmt_s(r["wall"]), f"{r['cpu'] / base:.2f}x",
                     f"{r['cpu'] / floor:.1f}x" if floor else "—"])
    return _table(["implementation", "CPU / epoch", "wall / epoch", "÷ fastdp",
                   "÷ floor (random-order dot+axpy)"], body)


def evaluate_targets(results):
    """[(issue, target, measured text, met: bool or None)]."""
    t = []
    R = results
    if "loader" in R:
        rows = R["loader"]["rows"]
        x = _ratio(rows["scikit-learn load_svmlight_file"]["cpu"], rows["fastdp load_libsvm"]["cpu"])
        t.append(("2", "LIBSVM loader ≥ 5x faster than scikit-learn (file ≥ 50 MB)",
                  f"{x:.1f}x on {R['loader']['file_mb']:.0f} MB", x >= 5))
    if "calibration" in R:
        cal = R["calibration"]
        eps = cal["epsilon"]["fastdp RDP epsilon"]["cpu"]
        t.append(("3", "one RDP ε well under 1 ms", _fmt_s(eps), eps < 1e-3))
        worst = max(r["fastdp (RDP)"]["cpu"] for r in cal["rdp"].values())
        t.append(("3", "one calibration under 20 ms", f"slowest of K1-K4: {_fmt_s(worst)}",
                  worst < 0.02))
        for peer_name in ["dp_accounting calibrate_dp_mechanism (RDP)", "Opacus-style bisection (RDP)"]:
            ratios = [r[peer_name]["cpu"] / r["fastdp (RDP)"]["cpu"] for r in cal["rdp"].values()]
            tight = all(r["fastdp (RDP)"]["sigma"] <= r[peer_name]["sigma"] * (1 + 1e-6)
                        for r in cal["rdp"].values())
            t.append(("3", f"calibration ≥ 20x faster than {peer_name}, same or tighter σ",
                      f"{min(ratios):.0f}x–{max(ratios):.0f}x; σ same or tighter: {tight}",
                      min(ratios) >= 20 and tight))
    if "scd" in R:
        rows = R["scd"]["rows"]
        ours = rows["fastdp DP-SCD (dual, Poisson, L=1000)"]["cpu"]
        ll = rows.get("LIBLINEAR -s 7 dual CD (non-private)")
        if ll:
            x = ours / ll["cpu"]
            t.append(("4", "DP-SCD epoch ≤ 1.5x a LIBLINEAR dual-CD epoch", f"{x:.2f}x", x <= 1.5))
    if "port" in R:
        rows = R["port"]["rows"]
        x = _ratio(rows["numpy port of the reference loop"]["cpu"], rows["fastdp DP-SCD"]["cpu"])
        t.append(("4", "DP-SCD ≥ 100x faster per epoch than a numpy port of the reference loop",
                  f"{x:.0f}x", x >= 100))
    if "scaling" in R:
        nnz = R["scaling"]["nnz"]
        base = nnz[1]["DP-SCD"]["cpu"]
        parts, ok = [], True
        for k, row in nnz.items():
            x = row["DP-SCD"]["cpu"] / base
            parts.append(f"{k}x: {x:.2f}")
            ok = ok and 0.75 * int(k) <= x <= 1.35 * int(k)
        t.append(("4", "DP-SCD epoch linear in nnz (1x, 3x, 10x data; within 0.75k–1.35k)",
                  ", ".join(parts), ok))
        th = R["scaling"]["threads"]["DP-SCD"]
        s = th[1]["wall"] / th[2]["wall"]
        t.append(("4", "report the 2-thread speed-up (DP-SCD, wall)", f"{s:.2f}x", None))
    if "sgd" in R:
        rows = R["sgd"]["rows"]
        ours = rows["fastdp DP-SGD (Poisson, L=1000, lazy noise)"]["cpu"]
        x = ours / rows["scikit-learn SGDClassifier (non-private)"]["cpu"]
        t.append(("5", "DP-SGD epoch ≤ 2x a scikit-learn SGDClassifier epoch", f"{x:.2f}x", x <= 2))
        snap = rows.get("snapml DP-SGD (privacy=True)")
        if snap:
            x = snap["cpu"] / ours
            t.append(("5", "DP-SGD ≥ 50x faster per epoch than snapml's DP-SGD", f"{x:.0f}x",
                      x >= 50))
        op = [r for k, r in rows.items() if k.startswith("Opacus")]
        if op:
            t.append(("5", "report the ratio to Opacus", f"{op[0]['cpu'] / ours:.0f}x faster", None))
    if "metropolis" in R:
        rows = R["metropolis"]["rows"]
        loop = rows["numpy loop (1 chain, 1 step per iteration)"]
        ker = rows["fastdp kernel (1 thread)"]
        x = (ker["steps"] / ker["cpu"]) / (loop["steps"] / loop["cpu"])
        t.append(("8", "Metropolis ≥ 100x the steps/s of a per-step numpy loop (d=10, m=20)",
                  f"{x:.0f}x ({ker['steps'] / ker['cpu']:.3g} steps/s per core)", x >= 100))
    if "imports" in R:
        c = R["imports"]["numba_compiles"]
        t.append(("11", "`import fastdp` (and every fastdp module) compiles nothing",
                  f"{len(c)} numba compilations over {R['imports']['modules']} modules", not c))
    return t


def write_chart(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, t) for k, t in [("scd", "DP-SCD epoch vs peers"), ("sgd", "DP-SGD epoch vs peers")]
              if k in results]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    floor = results.get("floor_summary", {}).get("dot_axpy_random")
    for ax, (key, title) in zip(axes[0], panels):
        rows = results[key]["rows"]
        names = list(rows)
        vals = [rows[n]["cpu"] for n in names]
        colors = ["tab:blue" if n.startswith("fastdp") else "tab:gray" for n in names]
        ax.barh(range(len(names)), vals, color=colors)
        ax.set_yticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=7)
        wide = max(vals) / min(vals) > 10
        if wide:
            ax.set_xscale("log")
        for i, v in enumerate(vals):
            ax.text(v, i, f" {_fmt_s(v)}", va="center", fontsize=7)
        ax.set_xlim(right=max(vals) * (3 if wide else 1.25))
        ax.set_xlabel("CPU seconds per epoch" + (" (log scale)" if wide else "") +
                      "; lower is better")
        if floor:
            ax.axvline(floor, color="tab:red", ls="--", lw=1)
            ax.text(floor, len(names) - 0.5, " floor (random-order dot+axpy)", color="tab:red", fontsize=7, va="top")
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(results, meta, out_path):
    R = results
    floor = R.get("floor_summary", {})
    fr = floor.get("dot_axpy_random")
    lines = [
        "# Performance",
        "",
        "Measured by `python benchmarks/compare.py` (one command: it builds its own virtualenv",
        "with the peers, then times every pair in one process on the same data, interleaved and",
        "repeated; medians). The tracked micro-benchmarks are the asv suite (`asv_benchmarks/`,",
        "see [Running the benchmarks](#running-the-benchmarks)).",
        "",
        f"* Run: {meta['date']} ({'quick' if meta['quick'] else 'full'} run, {meta['repeats']} "
        f"repeats, the slow peers {meta['slow_repeats']}), fastdp {meta['fastdp']} at "
        f"`{meta['commit']}`.",
        f"* Machine: {meta['machine']}; load average {meta['load_start']} at the start, "
        f"{meta['load_end']} at the end (per section below). The machine was shared: CPU time "
        "(`time.process_time`, all threads) is the main figure, wall time is beside it.",
        f"* Problem: {meta['problem']}; logistic loss, λ = {LAM}, lot size L = {L_BATCH}, "
        f"ε = {EPSILON}, δ = {DELTA} (σ calibrated with fastdp's RDP accountant).",
        f"* Peers: {meta['peers']}.",
        "",
        "![fastdp and peers, CPU time per epoch](performance.png)",
        "",
        "## Targets",
        "",
    ]
    targets = evaluate_targets(R)
    lines.append(_table(["issue", "target", "measured", "met"],
                        [[i, tgt, m, "—" if ok is None else ("**yes**" if ok else "**no**")]
                         for i, tgt, m, ok in targets]))
    if "floor" in R:
        lines += ["", "## The floor", "",
                  "The least work an epoch over this CSR matrix can do: one gather per stored entry",
                  "(`X @ w`) or a gather plus a scatter (`dot+axpy`: `s = x_i·v; v += c s x_i`",
                  "row by row). A DP epoch visits the rows of random lots, so its floor is the",
                  "random-order dot+axpy. Every epoch below is also given as a multiple of it.",
                  f" Load average {R['floor']['load']}.", "",
                  _table(["pass", "CPU", "wall", "ns per stored entry"],
                         [[k, _fmt_s(v["cpu"]), _fmt_s(v["wall"]),
                           f"{v['cpu'] / meta['nnz'] * 1e9:.2f}"] for k, v in R["floor"]["rows"].items()])]
    if "scd" in R:
        lines += ["", "## DP-SCD epoch", "",
                  f"fastdp's dual DP-SCD (σ = {R['scd']['sigma']:.4f}, C = {SCD_CLIP}, lazy noise) "
                  "per epoch, read from its per-epoch callback (epochs 2-4: sampling + the compiled "
                  "epoch); LIBLINEAR: training time / outer iterations (its format conversion "
                  "excluded); scikit-learn and snapml: (t(5 epochs) − t(1 epoch)) / 4. Load average "
                  f"{R['scd']['load']}.", "",
                  _epoch_table(R["scd"]["rows"], "fastdp DP-SCD (dual, Poisson, L=1000)", fr)]
    if "sgd" in R:
        lines += ["", "## DP-SGD epoch", "",
                  f"fastdp's DP-SGD (σ = {R['sgd']['sigma']:.4f}, C = {SGD_CLIP}, Poisson, lazy "
                  "noise) per epoch from its callback; snapml's DP-SGD: a 1-epoch fit; Opacus: "
                  "`torch.nn.Linear` with Poisson sampling, lots densified in the collate function "
                  "(Opacus has no sparse per-sample gradients), a few lots extrapolated to an epoch. "
                  f"Load average {R['sgd']['load']}.", "",
                  _epoch_table(R["sgd"]["rows"], "fastdp DP-SGD (Poisson, L=1000, lazy noise)", fr)]
    if "target" in R:
        T = R["target"]
        body = []
        for name, r in T["rows"].items():
            last = r["history"][-1] if r["history"] else None
            body.append([name, _fmt_s(r["cpu"]) if r["cpu"] is not None else "not reached",
                         r["effort"] if r["effort"] is not None else "—",
                         f"{last[2]:.2e}" if last else "—"])
        lines += ["", "## Time to 1e-3 relative suboptimality (non-private)", "",
                  f"Each solver is rerun from scratch with doubling effort (epochs 1, 2, 4, …; "
                  f"LIBLINEAR: `-e` 1, 0.3, 0.1, …) until (F − f*)/f* ≤ 1e-3, F the 1/n-averaged "
                  f"logistic objective with λ = {LAM}, f* = {T['f_star']:.12f}. The time is that of "
                  f"the first run at the target (an upper bound at the factor-2 resolution), capped "
                  f"at {meta['target_budget']:.0f} CPU s per solver. Load average {T['load']}.", "",
                  _table(["solver", "CPU to 1e-3", "effort (epochs or -e)",
                          "last relative suboptimality"], body)]
    if "port" in R:
        rows = R["port"]["rows"]
        lines += ["", "## DP-SCD vs a numpy port of the reference loop", "",
                  "The port follows the seed-000 reference implementation's per-lot loop (a Python "
                  "loop over the lot's examples, dense primal model, Gaussian noise on the lot's α "
                  f"and on all of v), written in the benchmark; {R['port']['lots']} lots timed and "
                  f"extrapolated to an epoch. Load average {R['port']['load']}.", "",
                  _table(["implementation", "CPU / epoch", "÷ fastdp"],
                         [[k, _fmt_s(v["cpu"]), f"{v['cpu'] / rows['fastdp DP-SCD']['cpu']:.0f}x"]
                          for k, v in rows.items()])]
    if "calibration" in R:
        cal = R["calibration"]
        body = []
        for sid, row in cal["rdp"].items():
            base = row["fastdp (RDP)"]["cpu"]
            for name, r in row.items():
                body.append([sid, name, f"{r['sigma']:.6f}", f"{r['epsilon']:.6f}", _fmt_s(r["cpu"]),
                             f"{r['cpu'] / base:.0f}x"])
        lines += ["", "## Noise calibration", "",
                  "σ for a target ε of the Poisson-subsampled Gaussian (settings K1-K4 of "
                  "`anchors-dp-libs.md` §2.3: K1 q=256/60000, T=14063, ε=1, δ=1e-5; K2 same with "
                  "ε=8; K3 q=0.01, T=10000, ε=0.1, δ=1e-3; K4 q=1e-3, T=100000, ε=2, δ=1e-7). "
                  "ε(σ) is fastdp's RDP ε of the returned σ (must not exceed the target). "
                  f"Load average {cal['load']}.", "",
                  "### RDP", "",
                  _table(["setting", "method", "σ", "ε(σ)", "CPU", "÷ fastdp"], body)]
        body = []
        for sid, row in cal["pld"].items():
            base = row["fastdp (PLD)"]["cpu"]
            for name, r in row.items():
                body.append([sid, name, f"{r['sigma']:.6f}", f"{r['epsilon']:.6f}", _fmt_s(r["cpu"]),
                             f"{r['cpu'] / base:.1f}x"])
        lines += ["", "### PLD (tighter σ, slower)", "",
                  "fastdp's PLD accountant (dp_accounting's PLD, grid 1e-4, σ to 1e-3 relative) "
                  "against `calibrate_dp_mechanism` with dp_accounting's PLD accountant (same grid "
                  "and tolerance) and an Opacus-style bisection on prv_accountant's upper ε bound. "
                  "ε(σ) here is fastdp's PLD ε. One run each.", "",
                  _table(["setting", "method", "σ", "ε(σ)", "CPU", "÷ fastdp"], body)]
        e = cal["epsilon"]
        lines += ["", "One RDP ε (q = 256/60000, σ = 1.1, T = 14063, δ = 1e-5, fresh accountant): "
                  f"fastdp {_fmt_s(e['fastdp RDP epsilon']['cpu'])}, dp_accounting "
                  f"{_fmt_s(e['dp_accounting RDP epsilon']['cpu'])}."]
    if "loader" in R:
        rows = R["loader"]["rows"]
        lines += ["", "## LIBSVM loader", "",
                  f"A {R['loader']['file_mb']:.0f} MB uncompressed LIBSVM file (45 000 x 50 000, "
                  "written by scikit-learn's `dump_svmlight_file`), page cache warm, numba cache "
                  f"warm. Load average {R['loader']['load']}.", "",
                  _table(["loader", "CPU", "wall", "MB/s (CPU)"],
                         [[k, _fmt_s(v["cpu"]), _fmt_s(v["wall"]),
                           f"{R['loader']['file_mb'] / v['cpu']:.0f}"] for k, v in rows.items()])]
    if "scaling" in R:
        S = R["scaling"]
        body = []
        for k, row in S["nnz"].items():
            base = S["nnz"][1]
            body.append([f"{k}x", row["nnz"], _fmt_s(row["DP-SCD"]["cpu"]),
                         f"{row['DP-SCD']['cpu'] / base['DP-SCD']['cpu']:.2f}",
                         _fmt_s(row["DP-SGD"]["cpu"]),
                         f"{row['DP-SGD']['cpu'] / base['DP-SGD']['cpu']:.2f}"])
        lines += ["", "## Scaling", "",
                  "Rows replicated k times (L fixed). Epoch CPU time and its ratio to the 1x epoch "
                  f"(linear scaling gives k). Load average {S['load']}.", "",
                  _table(["data", "stored entries", "DP-SCD epoch", "÷ 1x", "DP-SGD epoch", "÷ 1x"],
                         body)]
        body = []
        for name, row in S["threads"].items():
            one, two = row[1] if 1 in row else row["1"], row[2] if 2 in row else row["2"]
            body.append([name, _fmt_s(one["wall"]), _fmt_s(two["wall"]),
                         f"{one['wall'] / two['wall']:.2f}x", _fmt_s(one["cpu"]), _fmt_s(two["cpu"])])
        lines += ["", f"1 vs 2 OpenMP threads (bit-identical results; OMP_WAIT_POLICY="
                  f"{meta['omp_wait_policy']}). On a shared 2-core machine the second thread "
                  "competes with other processes, so read the wall speed-up with the load average.", "",
                  _table(["solver", "wall, 1 thread", "wall, 2 threads", "speed-up (wall)",
                          "CPU, 1 thread", "CPU, 2 threads"], body)]
    if "metropolis" in R:
        rows = R["metropolis"]["rows"]
        lines += ["", "## Metropolis sampler (seed 001)", "",
                  "Random-walk Metropolis steps per CPU second at d = 10, m = 20 (box [-1, 1]^d, "
                  f"β = 0.05, proposal std √0.1), one thread. Load average {R['metropolis']['load']}.",
                  "",
                  _table(["implementation", "steps / CPU s"],
                         [[k, f"{v['steps'] / v['cpu']:.3g}"] for k, v in rows.items()])]
    if "imports" in R:
        I = R["imports"]
        lines += ["", "## Import time", "",
                  f"`import fastdp`: {_fmt_s(I['import_fastdp_cpu'])} CPU; importing all "
                  f"{I['modules']} fastdp modules (experiments and the Ray engine aside): "
                  f"{_fmt_s(I['import_all_cpu'])}; `import fastdp.linear_model` (pulls in "
                  f"scikit-learn and scipy): {_fmt_s(I['import_linear_model_cpu'])}. Numba "
                  f"compilations during these imports (numba's `numba:compile` event): "
                  f"{len(I['numba_compiles'])}."]
    if meta.get("notes"):
        lines += ["", "## Optimisation notes", "", meta["notes"]]
    lines += ["", "## Running the benchmarks", "",
              "Side-by-side comparison (this page):", "",
              "    python benchmarks/compare.py [--quick] [--only scd,sgd] [--skip target]", "",
              "asv suite (`asv.conf.json` at the repository root, existing-environment mode, "
              "benchmarks in `asv_benchmarks/benchmarks`):", "",
              "    make bench                                     # install, then a quick asv run",
              "    asv machine --yes                              # once per machine",
              "    asv check --python=same",
              "    asv run --python=same --quick --show-stderr    # smoke run",
              "    asv run --python=same -b ScdEpoch              # one class, full repeats",
              "    asv run --python=same --set-commit-hash=$(git rev-parse HEAD)   # save results",
              "    asv compare <hash-before> <hash-after>",
              "",
              "`asv continuous` refuses existing environments; save two runs with "
              "`--set-commit-hash` (rebuilding the kernels in between) and `asv compare` them.",
              ""]
    out_path.write_text("\n".join(lines))


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------

class Context:
    pass


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item"):
        return obj.item()
    return obj


def inner(args):
    import numpy as np  # noqa: F401 - imported before timing

    import fastdp

    ctx = Context()
    ctx.quick = args.quick
    ctx.repeats = 3 if args.quick else 5
    ctx.slow_repeats = 1 if args.quick else 2
    ctx.opacus_lots = 5 if args.quick else 10
    ctx.port_lots = 2 if args.quick else 3
    ctx.target_budget = 10.0 if args.quick else 40.0
    torch = peer("torch")
    ctx.torch_version = getattr(torch, "__version__", "n/a")
    sections = [s for s in SECTIONS if (not args.only or s in args.only) and s not in args.skip]
    n = args.n or (50_000 if args.quick else 200_000)
    load_start = load_average()
    t0 = time.perf_counter()
    ctx.problem = Problem(n)
    print(f"problem: {ctx.problem.describe()} (built in {time.perf_counter() - t0:.1f} s)")
    results = {}
    for name in sections:
        print(f"== {name} (load average {load_average()})", flush=True)
        t0 = time.perf_counter()
        res = globals()[f"section_{name}"](ctx)
        res["load"] = load_average()
        res["seconds"] = round(time.perf_counter() - t0, 1)
        results[name] = res
        if name == "floor":
            results["floor_summary"] = ctx.floor
        print(json.dumps(_jsonable(res), default=str)[:1500], flush=True)
    peers = []
    for mod in ["sklearn", "liblinear", "snapml", "cyanure", "dp_accounting", "opacus", "torch",
                "prv_accountant", "diffprivlib"]:
        try:
            m = __import__(mod)
            from importlib.metadata import version
            dist = {"sklearn": "scikit-learn", "liblinear": "liblinear-official",
                    "prv_accountant": "prv-accountant", "dp_accounting": "dp-accounting"}.get(mod, mod)
            peers.append(f"{dist} {version(dist)}")
        except Exception:  # noqa: BLE001
            peers.append(f"{mod} (not importable)")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "fastdp"],
                           capture_output=True, text=True).stdout.strip()
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "quick": args.quick, "repeats": ctx.repeats, "slow_repeats": ctx.slow_repeats,
        "fastdp": fastdp.__version__, "commit": commit + ("+local changes" if dirty else ""),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}",
        "load_start": load_start, "load_end": load_average(),
        "problem": ctx.problem.describe(), "nnz": ctx.problem.X.nnz,
        "peers": ", ".join(peers), "target_budget": ctx.target_budget,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(default)"),
        "notes": Path(args.notes).read_text() if args.notes else "",
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "results.json").write_text(json.dumps(_jsonable({"meta": meta, "results": results}),
                                                   indent=1, default=str))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_chart(results, out.with_suffix(".png"))
        write_report(results, meta, out)
        print(f"wrote {out} and {out.with_suffix('.png')}")
    for issue, target, measured, ok in evaluate_targets(results):
        print(f"[issue {issue}] {target}: {measured} -> "
              f"{'—' if ok is None else ('met' if ok else 'NOT met')}")


def _int_keys(obj):
    """JSON turned the int keys (scales, thread counts) into strings; turn them back."""
    if isinstance(obj, dict):
        return {(int(k) if isinstance(k, str) and k.isdigit() else k): _int_keys(v)
                for k, v in obj.items()}
    return obj


def report_from_json(args):
    saved = json.loads((CACHE / "results.json").read_text())
    meta, results = saved["meta"], _int_keys(saved["results"])
    if args.notes:
        meta["notes"] = Path(args.notes).read_text()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_chart(results, out.with_suffix(".png"))
    write_report(results, meta, out)
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50k rows, fewer repeats")
    ap.add_argument("--n", type=int, default=None, help="rows of the synthetic problem")
    ap.add_argument("--only", type=lambda s: s.split(","), default=[],
                    help=f"comma-separated sections among {','.join(SECTIONS)}")
    ap.add_argument("--skip", type=lambda s: s.split(","), default=[])
    ap.add_argument("--out", default=str(REPO / "docs" / "performance.md"),
                    help="report path ('' for none); the PNG goes next to it")
    ap.add_argument("--notes", default=None, help="markdown file appended as optimisation notes")
    ap.add_argument("--here", action="store_true",
                    help="run in the current interpreter (no peer environment)")
    ap.add_argument("--env", type=Path, default=None, help="peer virtualenv directory")
    ap.add_argument("--no-reinstall", action="store_true",
                    help="do not rebuild fastdp into the peer environment")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report and chart from the last results.json (no timing)")
    args = ap.parse_args(argv)
    if args.report_only:
        return report_from_json(args)
    if args.here or os.environ.get("FASTDP_BENCH_INNER"):
        return inner(args)
    import peer_env

    py = peer_env.ensure(args.env or peer_env.DEFAULT_DIR, reinstall_fastdp=not args.no_reinstall)
    env = dict(os.environ, FASTDP_BENCH_INNER="1", OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    cmd = [str(py), str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:])]
    # run outside the repository so that the installed fastdp is the one imported
    return subprocess.run(cmd, env=env, cwd=str(CACHE)).returncode


if __name__ == "__main__":
    sys.exit(main())
