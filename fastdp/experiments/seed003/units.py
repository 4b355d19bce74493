"""The seed-003 grid as resumable units: one unit is one fit, checkpointed, merged into cell grids."""

import math
import time

import numpy as np

from fastdp.exceptions import FastDPError
from fastdp.experiments import runner
from fastdp.experiments.seed003.protocol import (
    ALGORITHMS,
    DATASETS,
    EPSILONS,
    LOSSES,
    PRIVATE,
    _mean_loss,
    fold_indices,
    load_paper_dataset,
    run_algorithm,
)


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
