"""Reproduction of seed 003 (Chen & Lee, DP stochastic adaptive line search): Figs. 3–4.

Run ``python -m fastdp.experiments.seed003 --out DIR`` (paper protocol:
10-fold cross-validation × 5 runs, ε ∈ {0.05, 0.1, 0.2, 0.4, 0.8, 1.6},
logistic regression and SVM on Adult, Bank and IPUMS-BR; hours on two
cores) or ``--quick`` (fold 0 of the 10, 1 run, ε ∈ {0.05, 0.2, 0.8, 1.6}:
every claim keeps a small, moderate and large ε; about 3 CPU minutes). Writes
``seed003.md`` (accuracy and objective tables, run statistics, which of the
paper's qualitative claims held) and PNG figures when matplotlib is installed.
``--sweeps`` adds the Fig. 1 hyper-parameter sweeps (Adult, logistic,
ε ∈ {0.05, 0.2}), the Fig. 2 evaluation counts against q (ε = 0.4) and the
amplification ablation of spec 003 §8 A1 (the q sweep and the counts under
each of the three amplification bounds, and which reproduces C4/C5), i.e.
R2, R3 and R5, over the same folds × runs as the grid.

Resumable, splittable runs. One *unit* is one fit: (dataset, loss,
algorithm, ε, fold, run), seeded ``random_state = 1000·fold + run`` on fold
``fold`` of the shuffled 10-fold split (seed 0), exactly as the in-memory
:func:`run_grid`, so cells are bit-identical to it. Each finished unit is
appended (flushed, fsync'ed) as a JSON line to ``OUT/seed003_units.jsonl``
(``--checkpoint`` to change), so a killed process loses at most the fit in
flight; units run run-major (all folds of run 0 first). Options:

* ``--resume``: skip the units already in the checkpoint (without it an
  existing checkpoint is an error, never overwritten);
* ``--fold-range START STOP`` / ``--folds N`` and ``--run-range START STOP`` /
  ``--runs N``: the subset of folds (0–9) and runs to run;
* ``--budget-min M``: start no fit after M minutes, then write the report;
* ``--report-only`` (+ ``--units FILE ...``): write the report from the
  checkpoint and other checkpoints (e.g. one per fold range), running nothing;
  ``--archive-units`` also writes every merged unit to
  ``OUT/seed003_units.jsonl.gz`` (sorted, gzip'ed, byte-reproducible), the
  per-fit records published beside the report: ``--units`` reads archives, so
  ``--report-only --checkpoint reproductions/seed003_units.jsonl.gz`` rebuilds
  the committed report and any fit can be re-run and compared.

The report is always built from every unit present and states how many
folds × runs each cell averages ("Fits per cell" tables when cells differ).
The whole protocol (12,600 private fits, ~2 CPU-hours of fits here), as
the committed report was made (two processes, then the sweeps)::

    mkdir -p seed003_full
    nohup nice -n 5 python -m fastdp.experiments.seed003 --out seed003_full \\
        --resume --run-range 0 3 > seed003_full/log_A.txt 2>&1 &
    nohup nice -n 5 python -m fastdp.experiments.seed003 --out seed003_full \\
        --resume --run-range 3 5 --checkpoint seed003_full/units_r34.jsonl \\
        > seed003_full/log_B.txt 2>&1 &
    # --budget-min M stops early; rerun the same commands to continue
    cat seed003_full/seed003_units.jsonl seed003_full/units_r34.jsonl \\
        > seed003_full/merged.jsonl
    python -m fastdp.experiments.seed003 --out reproductions --resume --runs 1 \\
        --checkpoint seed003_full/merged.jsonl --sweeps
    python -m fastdp.experiments.seed003 --out reproductions --report-only \\
        --checkpoint seed003_full/merged.jsonl --notes NOTES.md --archive-units

Two processes must not share a checkpoint: split with ``--run-range`` (or
``--fold-range``) into two ``--checkpoint`` files and merge them with
``--report-only --units`` (or concatenate them). ``--from-json FILE`` still
rebuilds a report from saved cell grids (``--folds``/``--runs`` describe
grids without per-cell fold/run indices).

Data (spec 003 §6.1), read from ``../shared/data`` (or ``FASTDP_DATA``):

* Adult: LIBSVM a9a ∪ a9a.t (48,842 × 123 binary) plus a bias column (124).
* Bank: DP-AGD's BANK.dat (45,211 × 32), min-max scaled to [0, 1] over the
  whole file as in the DP-AGD loader, plus a bias column (33).
* IPUMS-BR: DP-AGD's IPUMS-BR.dat (38,000 × 52), same preprocessing (53).
* IPUMS-US is **not available** (spec 003 §8 A19; not in ``shared/data``):
  its column of the paper's figures is not reproduced.

The per-feature min-max scaling of Bank/IPUMS-BR uses the data (the
paper's protocol, not private); Adult's features are binary.

Algorithms (spec 003 §5.4 settings: δ = 1e-8, C_grad = 3, C_obj = 1,
μ = 1e-3, q = 0.1, α = 0.5, β = 0.8, ξ = 0.3, ε_iter = ε/100, η0 = 1,
max_it = 10): DP-BLSGD, DP-BLSGD-AC (ζ = 0.05), DP-BLGD, DP-AGD, DP-SGD
(the DP-AGD harness: σ = 4, batch √n + 10, step 0.05, the largest
number of steps ≤ 20000 within ε by the RDP accountant), objective and output perturbation
(Chaudhuri et al. 2011, rows scaled to norm ≤ 1 per example, the SVM with
the Huberized hinge h = 0.5), NON-PRIVATE (trust-region Newton on the
regularised logistic / Huberized hinge objective) and MAJORITY. The paper's
OUTPERT-RSGD and OUTPERT-GD are replaced by Chaudhuri's output perturbation
(the one fastdp provides); PRIVGENE is not run.

Privacy: each private run is private with respect to the training fold
(add/remove for the gradient methods, replace-one for the perturbation
baselines). The reported test accuracy and training objective read the data:
they are non-private evaluation numbers, as in the paper.
"""

import math
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fastdp.datasets import load_dataset
from fastdp.exceptions import FastDPError, ValidationError
from fastdp.experiments import runner
from fastdp.privacy.calibration import calibrate_noise_multiplier, compute_epsilon
from fastdp.privacy.filters import AMPLIFICATIONS
from fastdp.solvers import line_search as LS

__all__ = [
    "DATASETS",
    "ALGORITHMS",
    "EPSILONS",
    "QUICK_EPSILONS",
    "load_paper_dataset",
    "fold_indices",
    "run_algorithm",
    "run_grid",
    "plan_units",
    "run_units",
    "read_units",
    "grid_from_units",
    "report_from_units",
    "coverage",
    "ablation_report",
    "run_amplification_ablation",
    "run_sweeps",
    "sweep_report",
    "check_claims",
    "present_cells",
    "grid_to_records",
    "grid_from_records",
    "write_report",
    "reproduce",
    "main",
]

DATASETS = ("adult", "bank", "ipums_br")
LOSSES = ("logistic", "hinge")
EPSILONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
#: ``--quick``: the smallest and a moderate ε (C8/C11, the C8 split at 0.2) and two large ones (R1)
QUICK_EPSILONS = (0.05, 0.2, 0.8, 1.6)
DELTA = 1e-8
MU = 1e-3
ALGORITHMS = ("DP-BLSGD", "DP-BLSGD-AC", "DP-BLGD", "DP-AGD", "DP-SGD", "OBJPERT", "OUTPERT",
              "NON-PRIVATE", "MAJORITY")
PRIVATE = ALGORITHMS[:7]
TABLE1_MAJORITY = {"adult": 0.761, "bank": 0.883, "ipums_br": 0.507}


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------
def _with_bias(X):
    ones = sp.csr_matrix(np.ones((X.shape[0], 1)))
    return sp.hstack([ones, sp.csr_matrix(X)], format="csr")


def load_paper_dataset(name, data_home=None):
    """(X with bias column as CSR, y in ±1) for ``adult``, ``bank`` or ``ipums_br``."""
    if name == "adult":
        X1, y1 = load_dataset("a9a", data_home)
        X2, y2 = load_dataset("a9a", data_home, subset="test")
        return _with_bias(sp.vstack([X1, X2]).tocsr()), np.concatenate([y1, y2])
    if name in ("bank", "ipums_br"):
        X, y = load_dataset(name, data_home)
        lo, hi = X.min(axis=0), X.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        return _with_bias((X - lo) / span), y
    raise FastDPError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def fold_indices(n, n_folds=10, seed=0):
    """Shuffled 10-fold split: a list of (train, test) index arrays."""
    perm = np.random.default_rng(seed).permutation(n)
    chunks = np.array_split(perm, n_folds)
    return [(np.sort(np.concatenate(chunks[:k] + chunks[k + 1:])), np.sort(chunks[k]))
            for k in range(n_folds)]


def _unit_rows(X):
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    scale = 1.0 / np.maximum(norms, 1.0)
    return sp.diags(scale) @ X


def _mean_loss(loss, X, y, w):
    z = y * (X @ w)
    if loss == "logistic":
        return float(np.mean(np.logaddexp(0.0, -z)))
    return float(np.mean(np.maximum(0.0, 1.0 - z)))


# --------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------
def run_algorithm(name, loss, X, y, epsilon, seed, **overrides):
    """Train one algorithm on (X, y); returns (coef, info dict)."""
    common = dict(epsilon=epsilon, delta=DELTA, loss=loss, random_state=seed, mu=MU)
    if name in ("DP-BLSGD", "DP-BLSGD-AC"):
        res = LS.dp_blsgd(X, y, adaptive_clipping=(name == "DP-BLSGD-AC"), **common, **overrides)
        return res.coef, _adaptive_info(res)
    if name == "DP-BLGD":
        res = LS.dp_blgd(X, y, **common, **overrides)
        return res.coef, _adaptive_info(res)
    if name == "DP-AGD":
        res = LS.dp_agd(X, y, **common, **overrides)
        return res.coef, dict(iterations=res.n_iter, refinements=res.extra["n_refinements"])
    if name == "DP-SGD":
        from fastdp.solvers.sgd import dpsgd

        n = X.shape[0]
        batch = int(math.sqrt(n)) + 10
        sigma, steps = dpsgd_schedule(epsilon, n, batch)
        res = dpsgd(X, y, loss=loss, lam=MU, epochs=steps * batch / n, batch_size=batch,
                    clip=3.0, noise_multiplier=sigma, learning_rate=0.05, random_state=seed)
        return res.coef, dict(iterations=res.n_iter, sigma=sigma)
    if name in ("OBJPERT", "OUTPERT"):
        from fastdp.solvers.perturbation import objective_perturbation, output_perturbation

        smooth = "logistic" if loss == "logistic" else "huber_hinge"
        fn = objective_perturbation if name == "OBJPERT" else output_perturbation
        res = fn(_unit_rows(X), y, lam=MU, epsilon=epsilon, loss=smooth, random_state=seed,
                 tol=1e-4, max_iter=1000)
        return res.coef, {}
    if name == "NON-PRIVATE":
        from fastdp.solvers.perturbation import solve_erm

        smooth = "logistic" if loss == "logistic" else "huber_hinge"
        out = solve_erm(X, y, MU, loss=smooth)
        return (out[0] if isinstance(out, tuple) else out), {}
    if name == "MAJORITY":
        sign = 1.0 if np.mean(y > 0) >= 0.5 else -1.0
        coef = np.zeros(X.shape[1])
        coef[0] = sign                    # bias column: predict the majority class
        return coef, {}
    raise FastDPError(f"unknown algorithm {name!r}")


def dpsgd_schedule(epsilon, n, batch, sigma=4.0, max_steps=20_000):
    """DP-SGD as in the DP-AGD harness (spec 003 §3.10 B1): σ = 4 and the
    largest number of steps T ≤ 20000 whose RDP ε (Poisson rate batch/n,
    δ = 1e-8) is within ``epsilon``; if even one step is too expensive, T = 1
    with σ calibrated. Returns (σ, T)."""
    q = batch / n

    def eps_of(steps):
        return compute_epsilon(sigma, q, steps, DELTA)

    if eps_of(1) > epsilon:
        return float(calibrate_noise_multiplier(epsilon, DELTA, q, 1)), 1
    lo, hi = 1, max_steps
    if eps_of(hi) <= epsilon:
        return sigma, hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if eps_of(mid) <= epsilon else (lo, mid)
    return sigma, lo


def _adaptive_info(res):
    return dict(iterations=res.n_iter, cheb=sum(res.extra["cheb"].values()),
                rho_grad=res.extra["rho_grad"], budget_bt=res.extra["budget_bt"],
                epsilon_spent=res.extra["epsilon_spent"],
                refinements=res.extra.get("n_refinements", 0))


# --------------------------------------------------------------------------
# the grid: one unit = one (dataset, loss, algorithm, ε, fold, run) fit
# --------------------------------------------------------------------------
SPLIT_SEED = 0
CHECKPOINT_NAME = "seed003_units.jsonl"
ARCHIVE_NAME = "seed003_units.jsonl.gz"      # the published per-fit records
SWEEPS_NAME = "seed003_sweeps.json"          # --sweeps results, re-read by --report-only
N_FOLDS = 10


def unit_seed(fold, run):
    """The ``random_state`` of the fit on ``fold`` in ``run``: 1000·fold + run."""
    return 1000 * fold + run


def _fit_and_score(alg, loss, X, y, train, test, eps, seed):
    """One fit on the training fold; returns (test accuracy, training objective, info)."""
    coef, info = run_algorithm(alg, loss, X[train], y[train], eps, seed)
    acc = float(np.mean(np.sign(X[test] @ coef) == y[test]))
    return acc, _mean_loss(loss, X[train], y[train], coef), info


def _cell(accs, objs, infos):
    return dict(acc=float(np.mean(accs)) if accs else math.nan,
                acc_sd=float(np.std(accs)) if accs else math.nan,
                obj=float(np.mean(objs)) if objs else math.nan, n=len(accs),
                info=_mean_info(infos))


def run_grid(*, datasets=DATASETS, losses=LOSSES, epsilons=EPSILONS, algorithms=ALGORITHMS,
             folds=10, runs=5, data_home=None, log=runner.log_line):
    """All (dataset, loss, algorithm, ε) cells, averaged over folds × runs, in memory.

    The original single-process path (nothing is saved until it returns); the
    resumable path is :func:`run_units` + :func:`grid_from_units`, which gives
    bit-identical cells. Returns ``{(dataset, loss, algorithm, eps): dict(acc,
    acc_sd, obj, n, info)}``; ε is None for NON-PRIVATE and MAJORITY.
    """
    grid = {}
    for ds in datasets:
        X, y = load_paper_dataset(ds, data_home)
        splits = fold_indices(X.shape[0], N_FOLDS, SPLIT_SEED)[:folds]
        for loss in losses:
            for alg in algorithms:
                for eps in (list(epsilons) if alg in PRIVATE else [None]):
                    accs, objs, infos = [], [], []
                    started = time.perf_counter()
                    for f, (tr, te) in enumerate(splits):
                        for r in range(runs if alg in PRIVATE else 1):
                            try:
                                acc, obj, info = _fit_and_score(alg, loss, X, y, tr, te, eps,
                                                                unit_seed(f, r))
                            except FastDPError as exc:        # e.g. a solver refusing the data
                                log(f"  {ds}/{loss}/{alg}/ε={eps}: {exc}")
                                continue
                            accs.append(acc)
                            objs.append(obj)
                            infos.append(info)
                    grid[(ds, loss, alg, eps)] = _cell(accs, objs, infos)
                    log(f"{ds:9s} {loss:8s} {alg:12s} ε={eps}: acc={grid[(ds, loss, alg, eps)]['acc']:.4f}"
                        f" ({time.perf_counter() - started:.1f}s)")
    return grid


def _mean_info(infos):
    keys = sorted({k for i in infos for k in i})
    return {k: float(np.mean([i[k] for i in infos if k in i])) for k in keys}


def plan_units(*, datasets=DATASETS, losses=LOSSES, algorithms=ALGORITHMS, epsilons=EPSILONS,
               folds=range(N_FOLDS), runs=range(5)):
    """Unit keys ``(dataset, loss, algorithm, eps, fold, run)`` in execution order.

    Run-major (all folds of run 0 first, then run 1, ...), so a time-boxed
    session leaves every cell with the same folds, give or take one fold.
    NON-PRIVATE and MAJORITY are deterministic: one unit per fold (run 0,
    ε None), planned only when run 0 is selected.
    """
    keys = []
    for run in runs:
        for fold in folds:
            for ds in datasets:
                for loss in losses:
                    for alg in algorithms:
                        if alg in PRIVATE:
                            keys += [(ds, loss, alg, float(e), fold, run) for e in epsilons]
                        elif run == 0:
                            keys.append((ds, loss, alg, None, fold, run))
    return keys


def unit_key(record):
    """The key ``(dataset, loss, algorithm, eps, fold, run)`` of a checkpoint record."""
    eps = record["epsilon"]
    return (record["dataset"], record["loss"], record["algorithm"],
            None if eps is None else float(eps), int(record["fold"]), int(record["run"]))


def read_units(path, *, repair=False):
    """Unit records of a JSON-lines checkpoint (or ``.jsonl.gz`` archive), ``{key: record}``.

    :func:`fastdp.experiments.runner.read_units` with :func:`unit_key`: the
    first record of a key wins; a torn last line (a process killed while
    writing) is ignored, and cut off the file when ``repair``; any other
    unreadable line is a ValidationError.
    """
    return runner.read_units(path, unit_key, repair=repair, label="seed003 unit")


def write_unit_archive(path, units):
    """Write unit records to a gzip'ed JSON-lines archive, sorted by key, byte-reproducible.

    The archive (``.jsonl.gz``) is what a published report is built from:
    :func:`read_units` and ``--report-only --units`` read it, so the report
    can be rebuilt and any fit re-run and compared. Returns the path.
    """
    order = {name: i for i, name in enumerate(ALGORITHMS)}

    def sort_key(record):
        ds, loss, alg, eps, fold, run = unit_key(record)
        return (_rank(ds, DATASETS), _rank(loss, LOSSES), order.get(alg, len(order)), alg,
                -1.0 if eps is None else eps, run, fold)

    return runner.write_unit_archive(path, units, sort_key)


def _rank(value, order):
    return (order.index(value), "") if value in order else (len(order), value)


def _describe(key):
    ds, loss, alg, eps, fold, run = key
    return f"{ds}/{loss} {alg} ε={eps} fold {fold} run {run}"


def _summarize(record):
    return f"acc={record['acc']:.4f}" if "acc" in record else f"error: {record['error']}"


def run_units(checkpoint, *, datasets=DATASETS, losses=LOSSES, algorithms=ALGORITHMS,
              epsilons=EPSILONS, folds=range(N_FOLDS), runs=range(5), resume=False,
              budget_min=None, data_home=None, data=None, log=runner.log_line, clock=time.monotonic,
              after_unit=None):
    """Run the selected units, appending each result to the checkpoint as it finishes.

    The units of :func:`plan_units` through :func:`fastdp.experiments.runner.run_units`
    (checkpoint, resume, budget, one progress line per fit).

    Parameters
    ----------
    checkpoint : path
        JSON-lines file of unit records (created if absent).
    folds, runs : iterables of int
        Fold indices (0–9 of the shuffled 10-fold split, seed 0) and run indices;
        the fit on fold f in run r uses ``random_state = 1000·f + r``.
    resume : bool
        Skip units already in the checkpoint. Without it an existing non-empty
        checkpoint is an error (nothing is overwritten).
    budget_min : float, optional
        Start no unit after this many minutes (the unit in flight finishes).
    data : dict, optional
        ``{dataset: (X, y)}`` used instead of loading (tests use slices).
    after_unit : callable, optional
        Called with each new record after it is saved.

    Returns
    -------
    dict
        ``ran``, ``skipped`` (already present), ``remaining`` (not run because
        of the budget) and ``stopped`` (True if the budget ended the session).

    Privacy: each private fit is private with respect to its training fold;
    the saved accuracy/objective are non-private evaluation numbers.
    """
    loaded = dict(data or {})

    def run_unit(key, units):
        ds, loss, alg, eps, fold, run = key
        if ds not in loaded:
            loaded[ds] = load_paper_dataset(ds, data_home)
        X, y = loaded[ds]
        train, test = fold_indices(X.shape[0], N_FOLDS, SPLIT_SEED)[fold]
        record = dict(dataset=ds, loss=loss, algorithm=alg, epsilon=eps, fold=fold, run=run,
                      seed=unit_seed(fold, run))
        started = time.perf_counter()
        try:
            record["acc"], record["obj"], record["info"] = _fit_and_score(
                alg, loss, X, y, train, test, eps, record["seed"])
        except FastDPError as exc:              # deterministic refusal: recorded, not retried
            record["error"] = str(exc)
        record["seconds"] = time.perf_counter() - started
        return record

    plan = plan_units(datasets=datasets, losses=losses, algorithms=algorithms,
                      epsilons=epsilons, folds=folds, runs=runs)
    status, _ = runner.run_units(checkpoint, plan, run_unit, key_of=unit_key, resume=resume,
                                 budget_min=budget_min, describe=_describe,
                                 summarize=_summarize, log=log, clock=clock,
                                 after_unit=after_unit, label="seed003 unit")
    return status


def grid_from_units(units):
    """Average unit records into grid cells (same numbers as :func:`run_grid`).

    ``units`` is a ``{key: record}`` dict or an iterable of records. Each cell
    gets ``n`` (successful fits), ``folds`` and ``runs`` (the indices it
    averages) and ``failed`` (fits a solver refused). Fits are averaged in
    (fold, run) order, as :func:`run_grid` does, so the floats are identical.
    """
    records = units.values() if isinstance(units, dict) else units
    by_cell = {}
    for record in records:
        key = unit_key(record)
        by_cell.setdefault(key[:4], []).append((key[4], key[5], record))
    grid = {}
    for cell, members in by_cell.items():
        members.sort(key=lambda m: m[:2])
        ok = [m for m in members if "error" not in m[2]]
        grid[cell] = _cell([m[2]["acc"] for m in ok], [m[2]["obj"] for m in ok],
                           [m[2]["info"] for m in ok])
        grid[cell].update(folds=sorted({m[0] for m in ok}), runs=sorted({m[1] for m in ok}),
                          failed=len(members) - len(ok))
    return grid


def _ordered(values, order):
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


def grid_axes(grid):
    """(datasets, losses, epsilons) present in a grid, in the module's canonical order."""
    return (_ordered({k[0] for k in grid}, DATASETS), _ordered({k[1] for k in grid}, LOSSES),
            _ordered({k[3] for k in grid if k[3] is not None}, EPSILONS))


def merge_units(unit_files):
    """``{key: record}`` of all unit files (checkpoints or archives); the first file wins."""
    return runner.merge_units(unit_files, unit_key, label="seed003 unit")


def report_from_units(out, unit_files, *, notes=(), extra_lines=()):
    """Write the report (:func:`write_report`) from every unit in ``unit_files``.

    Several files (e.g. one per fold range run in parallel) are merged; a unit
    present in more than one file is counted once (the first file wins).
    """
    units = merge_units(unit_files)
    if not units:
        raise ValidationError(f"no unit records in {', '.join(map(str, unit_files))}: "
                              "run the grid first (without --report-only)")
    grid = grid_from_units(units)
    datasets, losses, epsilons = grid_axes(grid)
    elapsed = sum(float(r.get("seconds", 0.0)) for r in units.values())
    path = write_report(out, grid, datasets=datasets, losses=losses, epsilons=epsilons,
                        elapsed=elapsed, quick=False, notes=notes,
                        extra_json=dict(units=len(units)))
    if extra_lines:
        with open(path, "a") as fh:
            fh.write("\n" + "\n".join(extra_lines) + "\n")
    return path


# --------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------
def _acc(grid, ds, loss, alg, eps):
    return grid.get((ds, loss, alg, eps), {}).get("acc", math.nan)


def _obj(grid, ds, loss, alg, eps):
    return grid.get((ds, loss, alg, eps), {}).get("obj", math.nan)


def present_cells(grid, datasets, losses):
    """The (dataset, loss) pairs of ``datasets`` × ``losses`` that the grid holds."""
    have = {(k[0], k[1]) for k in grid}
    return [(d, l) for d in datasets for l in losses if (d, l) in have]


def check_claims(grid, datasets, losses, epsilons):
    """The paper's qualitative claims (spec 003 §6.4, R1) on this grid: list of (claim, held, detail).

    Only the (dataset, loss) pairs present in the grid are used.
    """
    out = []
    small = [e for e in epsilons if e <= 0.1] or [min(epsilons)]
    large = [e for e in epsilons if e >= 0.8] or [max(epsilons)]
    cells = present_cells(grid, datasets, losses)

    def count(pred):
        hits = [pred(d, l, e) for d, l in cells for e in epsilons]
        hits = [h for h in hits if h is not None]
        return sum(hits), len(hits)

    rise = [(d, l) for d, l in cells
            if _acc(grid, d, l, "DP-BLSGD", max(epsilons)) > _acc(grid, d, l, "DP-BLSGD", min(epsilons))]
    out.append(("R1: DP-BLSGD accuracy rises with ε (largest vs smallest ε)",
                len(rise) == len(cells), f"{len(rise)}/{len(cells)} dataset×loss cells"))
    above = []
    for d, l in cells:
        maj = _acc(grid, d, l, "MAJORITY", None)
        for alg in ("DP-BLSGD", "DP-BLSGD-AC", "DP-BLGD"):
            above.append(all(_acc(grid, d, l, alg, e) >= maj - 1e-12 for e in large))
    out.append((f"R1: DP-BLSGD(-AC)/DP-BLGD ≥ MAJORITY at ε ∈ {large}", all(above),
                f"{sum(above)}/{len(above)} (algorithm, cell) pairs"))
    k, n = count(lambda d, l, e: _acc(grid, d, l, "DP-BLGD", e) >= _acc(grid, d, l, "DP-AGD", e))
    out.append(("C9: DP-BLGD ≥ DP-AGD at most ε", k > n / 2, f"{k}/{n} (cell, ε)"))
    k, n = count(lambda d, l, e: None if e not in small else
                 _acc(grid, d, l, "DP-BLSGD", e) >= _acc(grid, d, l, "DP-SGD", e))
    out.append((f"C8/C11: DP-BLSGD ≥ DP-SGD at small ε {small}", k > n / 2, f"{k}/{n}"))
    # diagnostics of that claim (see the report's discussion): the training objective,
    # and the trivial classifier, which DP-SGD's one or few tiny steps from w = 0 reproduce
    k, n = count(lambda d, l, e: None if e not in small else
                 _obj(grid, d, l, "DP-BLSGD", e) <= _obj(grid, d, l, "DP-SGD", e))
    out.append((f"C8/C11 (objective): DP-BLSGD's training objective ≤ DP-SGD's at small ε {small}",
                k > n / 2, f"{k}/{n}"))
    k, n = count(lambda d, l, e: None if e not in small else
                 _acc(grid, d, l, "DP-BLSGD", e) >= _acc(grid, d, l, "MAJORITY", None) - 1e-12)
    out.append((f"(diagnostic) DP-BLSGD ≥ MAJORITY at small ε {small}", k > n / 2, f"{k}/{n}"))
    k, n = count(lambda d, l, e: None if e not in small else
                 abs(_acc(grid, d, l, "DP-SGD", e) - _acc(grid, d, l, "MAJORITY", None)) < 0.01)
    out.append((f"(diagnostic) DP-SGD within 0.01 of MAJORITY at small ε {small}", k > n / 2,
                f"{k}/{n}"))
    def line_search_wins(d, l, e):
        return (max(_acc(grid, d, l, a, e) for a in ("DP-BLSGD", "DP-BLSGD-AC", "DP-BLGD"))
                >= max(_acc(grid, d, l, a, e) for a in ("DP-AGD", "DP-SGD", "OBJPERT", "OUTPERT")))

    k, n = count(line_search_wins)
    out.append(("C8: the best line-search method ≥ the best baseline in most cases", k > n / 2,
                f"{k}/{n}"))
    for label, keep in ((f"ε ≤ {MODERATE_EPSILON}", lambda e: e <= MODERATE_EPSILON),
                        (f"ε > {MODERATE_EPSILON}", lambda e: e > MODERATE_EPSILON)):
        k, n = count(lambda d, l, e: line_search_wins(d, l, e) if keep(e) else None)
        if n:
            out.append((f"(diagnostic) C8 at {label}", k > n / 2, f"{k}/{n}"))
    k, n = count(lambda d, l, e: None if e not in small else
                 _acc(grid, d, l, "OBJPERT", e) < _acc(grid, d, l, "DP-BLSGD", e))
    out.append(("C11: OBJPERT poor at small ε (below DP-BLSGD)", k > n / 2, f"{k}/{n}"))
    k, n = count(lambda d, l, e: _acc(grid, d, l, "DP-BLSGD-AC", e) > _acc(grid, d, l, "DP-BLSGD", e))
    out.append(("C12: AC gives a gain on some (cell, ε)", k > 0, f"{k}/{n}"))
    return out


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
def _fmt(v, digits=3):
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _epsilon_header(epsilons, *columns):
    """Header and rule of a markdown table: the given first columns, then one column per ε."""
    return ["| " + " | ".join(columns) + " | " + " | ".join(f"ε={e}" for e in epsilons) + " |",
            "|" + "---|" * (len(columns) + len(epsilons))]


def _algorithm_table(epsilons, value):
    """Markdown table of the private algorithms against ε; ``value(alg, eps)`` fills a cell."""
    return _epsilon_header(epsilons, "algorithm") + [
        f"| {alg} | " + " | ".join(_fmt(value(alg, e)) for e in epsilons) + " |" for alg in PRIVATE]


def grid_to_records(grid):
    """JSON-ready list of the grid's cells."""
    return [dict(dataset=k[0], loss=k[1], algorithm=k[2], epsilon=k[3], **v)
            for k, v in grid.items()]


def grid_from_records(records):
    """Inverse of :func:`grid_to_records` (several lists may be concatenated)."""
    grid = {}
    for r in records:
        r = dict(r)
        key = (r.pop("dataset"), r.pop("loss"), r.pop("algorithm"), r.pop("epsilon"))
        grid[key] = r
    return grid


def coverage(grid):
    """How many folds × runs each cell averages.

    Returns ``(uniform, lines)``: ``uniform`` is ``(n_folds, n_runs)`` when
    every private cell averages the same folds and runs and every baseline
    cell (NON-PRIVATE, MAJORITY: deterministic, one fit per fold) the same
    folds, else None; ``lines`` is the markdown statement. Cells without fold
    and run indices (grids saved before the unit checkpoint) give ``(None, [])``.
    """
    if not grid or any("folds" not in c for c in grid.values()):
        return None, []
    private = {(tuple(c["folds"]), tuple(c["runs"])) for k, c in grid.items() if k[2] in PRIVATE}
    base = {tuple(c["folds"]) for k, c in grid.items() if k[2] not in PRIVATE}
    pairs = {k[:2] for k in grid}
    combos = {k[2:] for k in grid} | {("NON-PRIVATE", None), ("MAJORITY", None)}
    missing = len(pairs) * len(combos) - len(grid)        # cells some (dataset, loss) lacks
    failed = sum(c.get("failed", 0) for c in grid.values())
    note = [f"{failed} fit(s) were refused by a solver and are left out of their cells."] \
        if failed else []
    if not missing and len(private) <= 1 and len(base) <= 1 and (not private or not base
                                                 or base == {next(iter(private))[0]}):
        folds, runs = next(iter(private)) if private else (next(iter(base)), (0,))
        if all(c["n"] == len(c["folds"]) * len(c["runs"]) for c in grid.values()):
            return (len(folds), len(runs)), [
                f"Every private cell averages {len(folds)} fold(s) × {len(runs)} run(s) "
                f"(folds {_span(folds)}, runs {_span(runs)}: {len(folds) * len(runs)} fits); "
                f"NON-PRIVATE and MAJORITY (deterministic) {len(folds)} fold(s) × 1."] + note
    return None, ["**Cells differ in coverage** (a partial run of the protocol): the number of "
                  "fits (folds × runs) behind each cell is given in the 'Fits per cell' table of "
                  "each section."] + note


def _span(indices):
    indices = list(indices)
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}–{indices[-1]}" if len(indices) > 1 else f"{indices[0]}"
    return ", ".join(map(str, indices))


def _fits(cell):
    """'F×R' for a cell averaging whole folds × runs, else 'n (incomplete)'."""
    if not cell:
        return "—"
    f, r, n = len(cell.get("folds", ())), len(cell.get("runs", ())), cell["n"]
    return f"{f}×{r}" if n == f * r else f"{n} (folds {_span(cell['folds'])}; incomplete)"


def write_report(out_dir, grid, *, datasets, losses, epsilons, elapsed, quick, folds=None,
                 runs=None, notes=(), extra_json=None):
    """Write ``seed003.md`` (+ ``seed003.json`` with every cell, and PNGs); returns the md path.

    ``folds``/``runs`` describe grids whose cells carry no fold/run indices
    (e.g. the 4 folds × 1 run grid of an earlier pass); cells built from
    unit records (:func:`grid_from_units`) state their own coverage.
    """
    import json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = present_cells(grid, datasets, losses)
    uniform, covered = coverage(grid)
    if folds is None and uniform:
        folds, runs = uniform
    if folds is not None:
        protocol = f"{folds} of 10 folds × {runs} run(s){' (--quick)' if quick else ''}"
    else:
        protocol = "cells differ (see below)"
    timing = "fit time (sum over the fits)" if covered else "wall time"
    lines = ["# Seed 003 reproduction: DP stochastic adaptive line search", "",
             f"Protocol: {protocol}; "
             f"δ = {DELTA:g}; ε grid {list(epsilons)}; {timing} {elapsed / 60:.1f} min; "
             f"(dataset, loss) pairs run: {', '.join(f'{d}/{l}' for d, l in cells)}.",
             "IPUMS-US is not available in shared/data: not reproduced. OUTPERT is Chaudhuri et "
             "al.'s output perturbation (not OUTPERT-RSGD). Accuracy: test folds; objective: mean "
             "unclipped, unregularised training loss. Both are non-private evaluation numbers.", ""]
    lines += covered + ([""] if covered else [])
    lines += list(notes) + ([""] if notes else [])
    for ds, loss in cells:
        maj = _acc(grid, ds, loss, "MAJORITY", None)
        nonp = grid.get((ds, loss, "NON-PRIVATE", None), {})
        lines += [f"## {ds}, {'logistic regression' if loss == 'logistic' else 'SVM (hinge)'}",
                  "", f"MAJORITY {_fmt(maj)} (paper Table 1: {TABLE1_MAJORITY[ds]}); "
                  f"NON-PRIVATE {_fmt(nonp.get('acc'))} (objective {_fmt(nonp.get('obj'))}).", ""]
        lines += _algorithm_table(epsilons, lambda alg, e: _acc(grid, ds, loss, alg, e))
        lines += ["", "Objective (mean training loss):", ""]
        lines += _algorithm_table(epsilons, lambda alg, e: grid.get((ds, loss, alg, e), {}).get("obj"))
        if covered and uniform is None:
            lines += ["", "Fits per cell (folds × runs):", ""]
            lines += _epsilon_header(epsilons, "algorithm") + [
                f"| {alg} | " + " | ".join(_fits(grid.get((ds, loss, alg, e))) for e in epsilons)
                + " |" for alg in PRIVATE]
            lines += [f"| {alg} | " + _fits(grid.get((ds, loss, alg, None))) + " (any ε) |"
                      + " |" * (len(epsilons) - 1) for alg in ("NON-PRIVATE", "MAJORITY")]
        lines += ["", "Run statistics (means): iterations / CHEB or GradAvg calls / final "
                  "ρ_grad / final ε_BT / ε spent:", ""]
        for alg in ("DP-BLSGD", "DP-BLSGD-AC", "DP-BLGD"):
            parts = []
            for e in epsilons:
                info = grid.get((ds, loss, alg, e), {}).get("info", {})
                if info:
                    parts.append(f"ε={e}: {info.get('iterations', 0):.0f} / "
                                 f"{info.get('cheb', 0) + info.get('refinements', 0):.1f} / "
                                 f"{info.get('rho_grad', 0):.2e} / {info.get('budget_bt', 0):.2e} / "
                                 f"{info.get('epsilon_spent', 0):.3f}")
            lines.append(f"- {alg}: " + "; ".join(parts))
        lines.append("")
    claims = check_claims(grid, datasets, losses, epsilons)
    lines += ["## The paper's qualitative claims", ""]
    lines += runner.claims_table(claims)
    if _write_figures(out_dir, grid, cells, epsilons):
        lines += ["", "Figures: `seed003_<dataset>_<loss>.png` (accuracy and objective against ε)."]
    else:
        lines += ["", "Figures: not written (matplotlib is not installed)."]
    (out_dir / "seed003.md").write_text("\n".join(lines) + "\n")
    payload = dict(protocol=dict(folds=folds, runs=runs, uniform=uniform is not None or not covered,
                                 quick=quick, delta=DELTA,
                                 epsilons=list(epsilons), elapsed_seconds=elapsed,
                                 cells=[list(c) for c in cells]),
                   claims=[dict(claim=c, held=bool(h), detail=d) for c, h, d in claims],
                   grid=grid_to_records(grid))
    if extra_json:
        payload.update(extra_json)
    (out_dir / "seed003.json").write_text(json.dumps(payload, indent=1, default=float) + "\n")
    return out_dir / "seed003.md"


def _write_figures(out_dir, grid, cells, epsilons):
    """One PNG per (dataset, loss); False when matplotlib is not installed."""
    plt = runner.pyplot()
    if plt is None:
        return False
    for ds, loss in cells:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for alg in PRIVATE:
            axes[0].plot(epsilons, [_acc(grid, ds, loss, alg, e) for e in epsilons], "o-",
                         label=alg)
            axes[1].plot(epsilons, [grid.get((ds, loss, alg, e), {}).get("obj", math.nan)
                                    for e in epsilons], "o-", label=alg)
        for alg, style in (("NON-PRIVATE", "k--"), ("MAJORITY", "k:")):
            cell = grid.get((ds, loss, alg, None), {})
            axes[0].axhline(cell.get("acc", math.nan), color="k",
                            linestyle=style[1:], label=alg)
            if alg == "NON-PRIVATE":
                axes[1].axhline(cell.get("obj", math.nan), color="k", linestyle="--")
        for ax, label in zip(axes, ("test accuracy", "training objective")):
            ax.set_xscale("log")
            ax.set_xlabel("ε")
            ax.set_ylabel(label)
        axes[1].set_yscale("log")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{ds}, {loss}")
        runner.save_figure(fig, out_dir / f"seed003_{ds}_{loss}.png", dpi=110)
    return True


# --------------------------------------------------------------------------
# Fig. 1 / Fig. 2 sweeps (R2, R3) and the amplification ablation (R5)
# --------------------------------------------------------------------------
#: spec 003 §6.3 [DECISION] x-axis values of Fig. 1, plus the §8 A1 ablation
SWEEPS = {
    "alpha": [0.1, 0.3, 0.5, 0.7, 0.9],
    "beta": [0.5, 0.6, 0.7, 0.8, 0.9],
    "noise": ["laplace", "gaussian"],
    "sample_rate": [0.01, 0.05, 0.1, 0.5, 1.0],
    "budget_rule": ["no", "must", "adap"],
    "zeta": [0.0, 0.01, 0.05, 0.1],
    "amplification": ["zw_general", "sgm_exact", "zw_tight_all"],
    # not in the paper: its running "some order fits" budget against the sound zCDP filter
    "budget_filter": ["rdp_paper", "zcdp"],
}
SWEEP_EPSILONS = (0.05, 0.2)
MODERATE_EPSILON = 0.2            # C8 is also reported split at this ε (see the report)
FIG2_EPSILON = 0.4


def _blsgd_settings(name, value):
    """DP-BLSGD keyword arguments for one sweep setting (``zeta`` runs DP-BLSGD-AC;
    ``sgm_exact`` needs Gaussian-only calls, so gradient and search are charged separately)."""
    kw = {name: value}
    if name == "zeta":
        kw["adaptive_clipping"] = True
    if name == "amplification" and value == "sgm_exact":
        kw["batch_accounting"] = "separate"
    return kw


def _evaluate_blsgd(X, y, splits, runs, epsilon, settings):
    """Mean test accuracy and per-example gradient / objective evaluation counts of
    DP-BLSGD (Adult protocol: fold f, run r seeded 1000·f + r) with ``settings``."""
    accs, grads, objs = [], [], []
    for f, (tr, te) in enumerate(splits):
        for r in range(runs):
            res = LS.dp_blsgd(X[tr], y[tr], epsilon=epsilon, delta=DELTA, mu=MU,
                              random_state=1000 * f + r, **settings)
            accs.append(float(np.mean(np.sign(X[te] @ res.coef) == y[te])))
            grads.append(res.diagnostics["gradient_evaluations"])
            objs.append(res.diagnostics["objective_evaluations"])
    return dict(acc=float(np.mean(accs)), gradient_evaluations=float(np.mean(grads)),
                objective_evaluations=float(np.mean(objs)))


def run_sweeps(*, folds=2, runs=1, epsilons=SWEEP_EPSILONS, sweeps=None, data_home=None,
               log=runner.log_line):
    """Fig. 1 (Adult, logistic): DP-BLSGD accuracy while one setting varies
    (``zeta`` runs DP-BLSGD-AC), and Fig. 2: per-example gradient / objective
    evaluations against q at ε = 0.4 (runs 0 only). Returns ``(fig1, fig2)`` dicts."""
    X, y = load_paper_dataset("adult", data_home)
    splits = fold_indices(X.shape[0])[:folds]
    fig1 = {}
    for name, values in (sweeps or SWEEPS).items():
        for value in values:
            for eps in epsilons:
                fig1[(name, value, eps)] = _evaluate_blsgd(
                    X, y, splits, runs, eps, _blsgd_settings(name, value))["acc"]
                log(f"sweep {name}={value} ε={eps}: acc={fig1[(name, value, eps)]:.4f}")
    fig2 = {}
    for q in SWEEPS["sample_rate"]:
        fig2[q] = _evaluate_blsgd(X, y, splits, 1, FIG2_EPSILON, dict(sample_rate=q))
        log(f"fig2 q={q}: {fig2[q]}")
    return fig1, fig2


def run_amplification_ablation(*, folds=2, runs=1, epsilons=(*SWEEP_EPSILONS, FIG2_EPSILON),
                               sample_rates=None, data_home=None, log=runner.log_line):
    """Spec 003 R5 (§8 A1): the q sweep (C4) and the Fig. 2 counts (C5) under each
    amplification bound. Returns ``{(amplification, q, ε): evaluation dict}``
    (keys of :func:`_evaluate_blsgd`). Privacy: ``zw_tight_all`` is the
    autodp-like bound, unproven for the SVT query; it is run here only to
    measure what the paper's numbers need, never as a default."""
    X, y = load_paper_dataset("adult", data_home)
    splits = fold_indices(X.shape[0])[:folds]
    table = {}
    for amp in AMPLIFICATIONS:
        for q in sample_rates or SWEEPS["sample_rate"]:
            for eps in epsilons:
                settings = dict(_blsgd_settings("amplification", amp), sample_rate=q)
                table[(amp, q, eps)] = row = _evaluate_blsgd(X, y, splits, runs, eps, settings)
                log(f"ablation {amp} q={q} ε={eps}: {row}")
    return table


def ablation_report(table, *, robust_epsilon=max(SWEEP_EPSILONS), count_epsilon=FIG2_EPSILON):
    """Markdown lines for :func:`run_amplification_ablation`: accuracy and gradient
    evaluations per (bound, q, ε), and which bound reproduces C4 and C5."""
    amps = [a for a in AMPLIFICATIONS if any(k[0] == a for k in table)]
    qs = sorted({k[1] for k in table})
    epsilons = sorted({k[2] for k in table})
    lines = ["## Amplification ablation (R5, spec §8 A1; Adult, logistic regression, DP-BLSGD)", "",
             "Accuracy (per-example gradient evaluations) against q; the faithful default is "
             "`zw_general` (Zhu–Wang general bound, capped by the unamplified RDP).", "",
             "| bound | q | " + " | ".join(f"ε={e}" for e in epsilons) + " |",
             "|---|---|" + "---|" * len(epsilons)]
    for amp in amps:
        for q in qs:
            lines.append(f"| {amp} | {q} | " + " | ".join(
                f"{_fmt(table[(amp, q, e)]['acc'])} ({table[(amp, q, e)]['gradient_evaluations']:.3g})"
                if (amp, q, e) in table else "—" for e in epsilons) + " |")
    claims = []
    for amp in amps:
        accs = {q: table[(amp, q, robust_epsilon)]["acc"] for q in qs
                if (amp, q, robust_epsilon) in table}
        if accs:
            spread = max(accs.values()) - min(accs.values())
            rest = [a for q, a in accs.items() if q > min(accs)]
            claims.append((f"C4 under {amp}: robust to q at ε = {robust_epsilon} (spread < 0.02)",
                           spread < 0.02, f"spread {spread:.3f}" + (
                               f" (without q = {min(accs)}: {max(rest) - min(rest):.3f})"
                               if len(rest) > 1 else "")))
        lo, hi = (amp, 0.1, count_epsilon), (amp, 1.0, count_epsilon)
        if lo in table and hi in table:
            ratio = table[hi]["gradient_evaluations"] / max(table[lo]["gradient_evaluations"], 1)
            gap = abs(table[hi]["acc"] - table[lo]["acc"])
            claims.append((f"C5 under {amp}: q = 0.1 needs > 2x fewer gradient evaluations than "
                           f"q = 1 at accuracy within 0.02 (ε = {count_epsilon})",
                           ratio > 2 and gap < 0.02,
                           f"ratio {ratio:.1f}, accuracy {table[hi]['acc']:.3f} vs {table[lo]['acc']:.3f}"))
    return lines + ([""] + runner.claims_table(claims) if claims else [])


def sweep_report(fig1, fig2, epsilons=SWEEP_EPSILONS):
    """Markdown lines for :func:`run_sweeps` (Fig. 1 claims C1–C7, Fig. 2 claim C5)."""
    lines = ["## Fig. 1 sweeps (Adult, logistic regression, DP-BLSGD)", ""]
    lines += _epsilon_header(epsilons, "setting", "value")
    names = sorted({k[0] for k in fig1}, key=list(SWEEPS).index)
    for name in names:
        for value in SWEEPS[name]:
            if (name, value, epsilons[0]) in fig1:
                lines.append(f"| {name} | {value} | " + " | ".join(
                    _fmt(fig1.get((name, value, e))) for e in epsilons) + " |")
    lines += ["", "## Fig. 2: evaluations against q (ε = 0.4; per-example counts)", "",
              "| q | gradient evaluations | objective evaluations | accuracy |", "|---|---|---|---|"]
    for q, row in fig2.items():
        lines.append(f"| {q} | {row['gradient_evaluations']:.3g} | "
                     f"{row['objective_evaluations']:.3g} | {_fmt(row['acc'])} |")
    claims = []
    hi, lo = max(epsilons), min(epsilons)

    def spread(name, eps):
        vals = [fig1[(name, v, eps)] for v in SWEEPS[name] if (name, v, eps) in fig1]
        return max(vals) - min(vals) if vals else math.nan

    if ("alpha", 0.5, hi) in fig1:
        claims.append(("C1: robust to α and β at the larger ε (spread < 0.02)",
                       spread("alpha", hi) < 0.02 and spread("beta", hi) < 0.02,
                       f"spreads {spread('alpha', hi):.3f}, {spread('beta', hi):.3f}"))
    if ("alpha", 0.5, lo) in fig1 and ("beta", 0.8, lo) in fig1:
        best = {name: max((v for v in SWEEPS[name] if (name, v, lo) in fig1),
                          key=lambda v: fig1[(name, v, lo)]) for name in ("alpha", "beta")}
        claims.append((f"C2: at ε = {lo} the best α is 0.5 and the best β 0.8",
                       best["alpha"] == 0.5 and best["beta"] == 0.8,
                       f"best α = {best['alpha']}, β = {best['beta']}"))
    if ("noise", "laplace", lo) in fig1:
        k = sum(fig1[("noise", "laplace", e)] >= fig1[("noise", "gaussian", e)] for e in epsilons)
        claims.append(("C3: Laplace NOISYBTLS ≥ Gaussian", k == len(epsilons), f"{k}/{len(epsilons)}"))
    if ("sample_rate", 0.1, hi) in fig1:
        claims.append(("C4: robust to q at the larger ε (spread < 0.02)",
                       spread("sample_rate", hi) < 0.02, f"spread {spread('sample_rate', hi):.3f}"))
    if fig2 and 0.1 in fig2 and 1.0 in fig2:
        ratio = fig2[1.0]["gradient_evaluations"] / max(fig2[0.1]["gradient_evaluations"], 1)
        claims.append(("C5: subsampling cuts evaluations (q = 1 vs 0.1) at similar accuracy",
                       ratio > 2 and abs(fig2[1.0]["acc"] - fig2[0.1]["acc"]) < 0.02,
                       f"gradient-evaluation ratio {ratio:.1f}, accuracy "
                       f"{fig2[1.0]['acc']:.3f} vs {fig2[0.1]['acc']:.3f}"))
    if ("budget_rule", "adap", lo) in fig1:
        k = sum(fig1[("budget_rule", "adap", e)] >= max(fig1[("budget_rule", "no", e)],
                                                         fig1[("budget_rule", "must", e)])
                for e in epsilons)
        claims.append(("C6: 'adap' budget allocation beats 'no' and 'must'", k == len(epsilons),
                       f"{k}/{len(epsilons)} ε"))
    if ("zeta", 0.05, lo) in fig1:
        claims.append(("C7: AC (ζ = 0.05) helps at the smaller ε",
                       fig1[("zeta", 0.05, lo)] > fig1[("zeta", 0.0, lo)],
                       f"{fig1[('zeta', 0.05, lo)]:.3f} vs {fig1[('zeta', 0.0, lo)]:.3f}"))
    if claims:
        lines += [""] + runner.claims_table(claims)
    return lines


def save_sweeps(path, fig1, fig2, ablation, *, folds, runs):
    """Write the sweep results (not checkpointed while running) as JSON, so
    ``--report-only`` can re-include them without re-running. Returns the path."""
    import json

    data = dict(folds=folds, runs=runs,
                fig1=[dict(setting=k[0], value=k[1], epsilon=k[2], acc=v) for k, v in fig1.items()],
                fig2=[dict(sample_rate=q, **row) for q, row in fig2.items()],
                ablation=[dict(amplification=k[0], sample_rate=k[1], epsilon=k[2], **row)
                          for k, row in ablation.items()])
    Path(path).write_text(json.dumps(data, indent=1))
    return Path(path)


def load_sweeps(path):
    """``(fig1, fig2, ablation, folds, runs)`` of a :func:`save_sweeps` file."""
    import json

    data = json.loads(Path(path).read_text())
    fig1 = {(r["setting"], r["value"], r["epsilon"]): r["acc"] for r in data["fig1"]}
    fig2 = {r.pop("sample_rate"): r for r in data["fig2"]}
    ablation = {(r.pop("amplification"), r.pop("sample_rate"), r.pop("epsilon")): r
                for r in data["ablation"]}
    return fig1, fig2, ablation, data["folds"], data["runs"]


def sweep_lines(fig1, fig2, ablation, *, folds, runs):
    """The report's sweep sections (:func:`sweep_report` + :func:`ablation_report`)."""
    return ([f"Sweeps below (R2, R3, R5): Adult, {folds} fold(s) × {runs} run(s) per point "
             "(Fig. 2 counts: run 0 only).", ""] + sweep_report(fig1, fig2) + [""]
            + ablation_report(ablation))


def _selection(quick, folds, runs, fold_range, run_range):
    """(fold indices, run indices) from the CLI/API options."""
    if fold_range is not None and folds is not None:
        raise ValidationError("give either folds (the first N folds) or fold_range, not both")
    if run_range is not None and runs is not None:
        raise ValidationError("give either runs (the first N runs) or run_range, not both")
    fold_range = fold_range or (0, (1 if quick else N_FOLDS) if folds is None else folds)
    run_range = run_range or (0, (1 if quick else 5) if runs is None else runs)
    start, stop = fold_range
    if not 0 <= start < stop <= N_FOLDS:
        raise ValidationError(f"fold range [{start}, {stop}) must satisfy 0 ≤ START < STOP ≤ "
                              f"{N_FOLDS}")
    if not 0 <= run_range[0] < run_range[1]:
        raise ValidationError(f"run range [{run_range[0]}, {run_range[1]}) must satisfy "
                              "0 ≤ START < STOP")
    return range(start, stop), range(*run_range)


def reproduce(out, *, quick=False, folds=None, runs=None, fold_range=None, run_range=None,
              datasets=DATASETS, losses=LOSSES, epsilons=None, algorithms=ALGORITHMS,
              data_home=None, data=None, sweeps=False, resume=False, budget_min=None,
              checkpoint=None, extra_units=(), notes=(), log=runner.log_line, clock=time.monotonic,
              after_unit=None):
    """Run the selected units into the checkpoint and write the report from all units there.

    ``folds``/``runs`` select the first N folds/runs, ``fold_range``/``run_range``
    a ``(start, stop)`` slice (defaults: the paper's 10 folds × 5 runs, ``quick``
    1 × 1); ``epsilons`` defaults to :data:`EPSILONS` (``quick``:
    :data:`QUICK_EPSILONS`). The checkpoint defaults to ``OUT/seed003_units.jsonl``;
    ``extra_units`` are more checkpoint files merged into the report. Returns
    ``(report path, status)`` with ``status`` as in :func:`run_units`; the path
    is None when the budget ran out before any unit existed.
    """
    fold_sel, run_sel = _selection(quick, folds, runs, fold_range, run_range)
    if epsilons is None:
        epsilons = QUICK_EPSILONS if quick else EPSILONS
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    status = run_units(checkpoint, datasets=datasets, losses=losses, algorithms=algorithms,
                       epsilons=epsilons, folds=fold_sel, runs=run_sel, resume=resume,
                       budget_min=budget_min, data_home=data_home, data=data, log=log,
                       clock=clock, after_unit=after_unit)
    extra = []
    if sweeps and not status["stopped"]:
        fig1, fig2 = run_sweeps(folds=len(fold_sel), runs=len(run_sel), data_home=data_home,
                                log=log)
        ablation = run_amplification_ablation(folds=len(fold_sel), runs=len(run_sel),
                                              data_home=data_home, log=log)
        Path(out).mkdir(parents=True, exist_ok=True)
        save_sweeps(Path(out) / SWEEPS_NAME, fig1, fig2, ablation, folds=len(fold_sel),
                    runs=len(run_sel))
        extra = sweep_lines(fig1, fig2, ablation, folds=len(fold_sel), runs=len(run_sel))
    if status["stopped"] and not status["ran"] and not status["skipped"] and not extra_units \
            and not read_units(checkpoint):
        return None, status                 # the budget ended the session before any fit
    path = report_from_units(out, [checkpoint, *extra_units], notes=notes, extra_lines=extra)
    return path, status


def main(argv=None):
    parser = runner.base_parser(__doc__.splitlines()[0], name="seed003",
                                quick_help="fold 0, 1 run, ε ∈ {0.05, 0.2, 0.8, 1.6}")
    parser.add_argument("--folds", type=int, default=None, help="the first N of the 10 folds")
    parser.add_argument("--fold-range", type=int, nargs=2, default=None, metavar=("START", "STOP"),
                        help="folds START..STOP-1 (0-based, of the shuffled 10-fold split)")
    parser.add_argument("--runs", type=int, default=None, help="the first N runs (default 5)")
    parser.add_argument("--run-range", type=int, nargs=2, default=None, metavar=("START", "STOP"),
                        help="runs START..STOP-1 (run r of fold f uses seed 1000·f + r)")
    parser.add_argument("--units", nargs="+", default=(), metavar="FILE",
                        help="more unit checkpoints to merge into the report")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--epsilons", nargs="+", type=float, default=None,
                        help=f"default {list(EPSILONS)} (--quick: {list(QUICK_EPSILONS)})")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--sweeps", action="store_true",
                        help="also run the Fig. 1 sweeps, Fig. 2 counts and the amplification "
                             "ablation (in memory, not checkpointed)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="write the report from saved grids (seed003.json files or lists of "
                             "cell records) instead of running; --folds/--runs describe them")
    parser.add_argument("--notes", default=None, help="markdown file appended under the protocol")
    parser.add_argument("--archive-units", action="store_true",
                        help=f"with --report-only: also write every merged unit to "
                             f"OUT/{ARCHIVE_NAME} (gzip'ed, sorted; readable by --units)")
    args = parser.parse_args(argv)
    notes = Path(args.notes).read_text().splitlines() if args.notes else ()
    if args.from_json:
        import json

        records, elapsed = [], 0.0
        for name in args.from_json:
            data = json.loads(Path(name).read_text())
            records += data["grid"] if "grid" in data else data["cells"]
            elapsed += float(data.get("elapsed", data.get("protocol", {}).get("elapsed_seconds", 0)))
        path = write_report(args.out, grid_from_records(records), datasets=args.datasets,
                            losses=args.losses, epsilons=args.epsilons or list(EPSILONS),
                            folds=args.folds or 10,
                            runs=args.runs or 5, elapsed=elapsed, quick=False, notes=notes)
        print(f"report: {path}")
        return 0
    checkpoint = runner.checkpoint_path(args, "seed003")
    if args.report_only:
        sweeps = Path(args.out) / SWEEPS_NAME
        extra = ()
        if sweeps.exists():
            fig1, fig2, ablation, sweep_folds, sweep_runs = load_sweeps(sweeps)
            extra = sweep_lines(fig1, fig2, ablation, folds=sweep_folds, runs=sweep_runs)
        path = report_from_units(args.out, [checkpoint, *args.units], notes=notes,
                                 extra_lines=extra)
        print(f"report: {path}" + (f" (+ sweeps from {sweeps})" if extra else ""))
        if args.archive_units:
            units = merge_units([checkpoint, *args.units])
            print(f"units: {write_unit_archive(Path(args.out) / ARCHIVE_NAME, units)} "
                  f"({len(units)} fits)")
        return 0
    try:
        path, status = reproduce(
            args.out, quick=args.quick, folds=args.folds, runs=args.runs,
            fold_range=tuple(args.fold_range) if args.fold_range else None,
            run_range=tuple(args.run_range) if args.run_range else None,
            datasets=args.datasets, losses=args.losses, epsilons=args.epsilons,
            data_home=args.data_home, sweeps=args.sweeps, resume=args.resume,
            budget_min=args.budget_min, checkpoint=checkpoint, extra_units=args.units,
            notes=notes)
    except ValidationError as exc:
        parser.error(str(exc))
    if path is None:
        print(f"no report: the time budget ran out before the first fit ({status['remaining']} "
              "left; rerun with --resume)")
        return 0
    print(f"report: {path} ({status['ran']} fit(s) run, {status['skipped']} already in "
          f"{checkpoint}" + (f"; budget reached, {status['remaining']} left: rerun with --resume"
                             if status["stopped"] else "") + ")")
    return 0


if __name__ == "__main__":
    main()
