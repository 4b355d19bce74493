"""Seed 004's protocol: the problems, F*, one run of private dual averaging, the grid
in priority order, and the claims checked.
"""

import math
import time
import warnings

import numpy as np

from fastdp.datasets import load_dataset
from fastdp.distributed import (
    L1Penalty,
    L2Penalty,
    convex_schedule,
    objective,
    private_dual_averaging,
    strongly_convex_schedule,
)
from fastdp.experiments import runner
from fastdp.preprocessing import normalize_rows


EPSILONS = (0.2, 0.4, 0.6, 0.8, 1.0)
METHODS = {   # name -> (gossip, edges per round)
    "Alg1 iota=0.1": ("edge_matching", 1),
    "Alg1 iota=0.2": ("edge_matching", 2),
    "B19 (all active)": ("all_active", 1),
}
PENALTY = {"l2": 5e-4, "l1": 5e-4}
N_NODES = 20
DELTA0 = 0.01
DELTA = 1e-5


def load_problem(name, data_home=None, seed=0):
    """``(X_train, y_train, X_test, y_test)`` with unit-norm rows and labels ±1."""
    if name == "a9a":
        X, y = load_dataset("a9a", data_home)
        Xt, yt = load_dataset("a9a", data_home, subset="test")
        return normalize_rows(X), y, normalize_rows(Xt), yt
    if name == "news20":
        X, y = load_dataset("news20", data_home)
        y = np.where(y <= 10, 1.0, -1.0)
        X = normalize_rows(X)
        perm = np.random.default_rng(seed).permutation(X.shape[0])
        cut = int(0.8 * X.shape[0])
        return X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]]
    raise ValueError(f"unknown dataset {name!r}")


def _problem(penalty):
    if penalty == "l2":
        return L2Penalty(PENALTY["l2"]), strongly_convex_schedule(20.0)
    return L1Penalty(PENALTY["l1"]), convex_schedule(0.01)


def ground_truth(X, y, penalty):
    """F* and x* from scikit-learn (LinearSVC for ℓ2, SGDClassifier for ℓ1; spec 004 §2.6).

    Both are seeded (``random_state=0``): an unseeded LinearSVC draws its
    coordinate order from the global numpy state and moved F* in the 12th digit.
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    reg, _ = _problem(penalty)
    lam = PENALTY[penalty]
    candidates = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if penalty == "l2":
            svc = LinearSVC(loss="hinge", C=1.0 / (X.shape[0] * lam), fit_intercept=False,
                            dual=True, tol=1e-8, max_iter=200_000, random_state=0).fit(X, y)
            candidates.append(svc.coef_.ravel())
        sgd = SGDClassifier(loss="hinge", penalty=penalty, alpha=lam, fit_intercept=False,
                            max_iter=200, tol=1e-10, random_state=0).fit(X, y)
        candidates.append(sgd.coef_.ravel())
    values = [objective(c, X, y, "hinge", reg) for c in candidates]
    best = int(np.argmin(values))
    return values[best], candidates[best]


def _accuracy(coef, X, y):
    pred = np.where(np.asarray(X @ coef).ravel() >= 0, 1.0, -1.0)
    return float(np.mean(pred == y))


def run_one(data, penalty, method, *, epsilon, calibration, seed, epochs=3.0, curve=False,
            message_dtype="float64"):
    """One run; returns a dict of the outcome (suboptimality is filled in by the caller)."""
    X, y, Xt, yt = data
    gossip, k = METHODS[method]
    reg, sched = _problem(penalty)
    q = X.shape[0] // N_NODES
    iota = 1.0 if gossip == "all_active" else 2 * k / N_NODES
    T = int(math.ceil(epochs * q / iota))
    evals = sorted(set(np.unique(np.geomspace(10, T, 25).astype(int)).tolist())) if curve else []
    kw = dict(n_nodes=N_NODES, gossip=gossip, edges_per_round=k, regularizer=reg, schedule=sched,
              n_rounds=T, random_state=seed, delta=DELTA, delta0=DELTA0, eval_rounds=evals,
              message_dtype=message_dtype)
    if epsilon is not None:
        kw.update(epsilon=epsilon, calibration=calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = private_dual_averaging(X, y, **kw)
    return dict(coef=r.coef, T=T, sigma=r.sigma, seconds_per_round=r.seconds_per_round,
                eps_paper=r.privacy.epsilon_paper, paper_ok=r.privacy.paper_preconditions_ok,
                eps_kov=r.privacy.epsilon_kov, delta_kov=r.privacy.delta_kov,
                eps_accountant=r.privacy.epsilon,
                acc_train=_accuracy(r.coef, X, y), acc_test=_accuracy(r.coef, Xt, yt),
                message_bytes=r.message_bytes, curve=[(t, c) for t, c in r.history])


_EPS_PRIORITY = (0.2, 1.0, 0.6, 0.4, 0.8)   # extremes first: the ε trends need them


def _tasks(penalties, methods_for, calibrations, epsilons, seeds, float32, curve_eps=None):
    """Runs in priority order, so that a time-boxed run gives the most informative subset.

    First seed before the others; within a seed: the paper's Fig. 1 / Fig. 3
    configurations (paper σ at the curve ε), the noiseless ι = 0.1 runs, the
    paper's σ over the rest of the ε grid (extremes first), the other noiseless
    runs, fastdp's calibration at the curve ε then over the grid, and last
    the float32-message re-runs.
    """
    curve_eps = curve_eps or {}
    tasks = []
    for penalty in penalties:
        for method in methods_for[penalty]:
            tasks.append((penalty, method, "none", 0.0, 0, "float64"))
    for cal in calibrations:
        for penalty in penalties:
            for eps in epsilons:
                for seed in seeds:
                    for method in methods_for[penalty]:
                        tasks.append((penalty, method, cal, eps, seed, "float64"))
    tasks += [(p, m, c, e, 0, "float32") for p, m, c, e in float32 if p in penalties]

    return sorted(tasks, key=lambda task: _rank(task, calibrations, seeds, curve_eps, penalties))


def _rank(task, calibrations, seeds, curve_eps, penalties):
    """Sort key of :func:`_tasks` (``calibrations[0]`` is the first calibration)."""
    penalty, method, cal, eps, seed, dtype = task
    at_curve = math.isclose(eps, curve_eps.get(penalty, -1.0))
    eps_pos = next((k for k, e in enumerate(_EPS_PRIORITY) if math.isclose(e, eps)), 9)
    if dtype == "float32":
        group = 6
    elif cal == "none":
        group = 1 if method == "Alg1 iota=0.1" else 3
    elif cal == calibrations[0]:
        group = 0 if at_curve else 2
    else:
        group = 4 if at_curve else 5
    return (seed != seeds[0], group, eps_pos, list(penalties).index(penalty))


def run_grid(data, penalties, *, epsilons=EPSILONS, seeds=(0,), calibrations=("paper", "accountant"),
             epochs=3.0, curve_eps=None, methods_for=None, float32=(), deadline=None,
             log=runner.log_line, previous=None):
    """All runs of a dataset in priority order (:func:`_tasks`), stopping at ``deadline``.

    The in-memory form of the units (:func:`run_task`, :func:`result_from_units`):
    returns a JSON-able dict: ``truth`` (F* per penalty), ``runs`` (one record
    per run: the key fields, the outcome, the suboptimality ``subopt``, the
    curve ``curve_subopt``) and ``skipped`` (the tasks left when the deadline
    ``time.perf_counter()`` value passed). ``previous``: a result of an
    earlier time-boxed call; its skipped runs are run now (re-ordered with
    ``calibrations``) and added to its runs.
    """
    X, y = data[0], data[1]
    curve_eps = curve_eps or {}
    if previous is None:
        methods_for = _methods_for(penalties, methods_for)
        truth = {p: ground_truth(X, y, p)[0] for p in penalties}
        tasks = _tasks(penalties, methods_for, calibrations, epsilons, seeds, float32, curve_eps)
        old_runs = []
    else:
        truth = dict(previous["truth"])
        penalties = tuple(truth)
        tasks = sorted((tuple(t) for t in previous["skipped"]),
                       key=lambda t: _rank(t, calibrations, seeds, curve_eps, penalties))
        old_runs = previous["runs"]
    old_truth = dict(truth)
    coefs = {}
    budget = None if deadline is None else (deadline - time.perf_counter()) / 60.0
    status, done = runner.run_units(
        None, tasks, lambda task, units: run_task(data, task, epochs=epochs, first_seed=seeds[0],
                                                  curve_eps=curve_eps, float32=float32,
                                                  coefs=coefs),
        budget_min=budget, clock=time.perf_counter, describe=_describe_task, summarize=_summarize,
        log=log)
    records = list(done.values())
    skipped = [list(task) for task in tasks if task not in done]
    truth = _truth(truth, records)
    runs = _finish_runs(records, truth)
    for out in old_runs:             # F* may have moved down with new noiseless runs
        shift = old_truth[out["penalty"]] - truth[out["penalty"]]
        out["subopt"] += shift
        out["curve_subopt"] = [(t, v + shift) for t, v in out["curve_subopt"]]
    return {"truth": truth, "runs": old_runs + runs, "skipped": skipped}


def _methods_for(penalties, methods_for=None):
    return {p: (methods_for or {}).get(p) or (
        list(METHODS) if p == "l2" else ["Alg1 iota=0.1", "Alg1 iota=0.2"]) for p in penalties}


def run_task(data, task, *, epochs, first_seed, curve_eps, float32, coefs, reference=None):
    """One run of :func:`_tasks` as a record (outcome, objective and curve objectives).

    ``coefs`` keeps the float64 models of the configurations in ``float32``
    (seed 0) so that their float32 re-run records ``coef_diff`` (max
    |coefficient difference|); when the float64 model is not at hand (a
    resumed run) it is re-run, and ``float64_rerun_identical`` says whether
    the re-run has the objective of ``reference`` (the float64 run's record).
    """
    X, y = data[0], data[1]
    penalty, method, cal, eps, seed, dtype = task
    t0 = time.perf_counter()
    cur = (bool(curve_eps) and dtype == "float64" and seed == first_seed
           and (cal == "none" or math.isclose(eps, curve_eps.get(penalty, -1))))

    def run(message_dtype, curve):
        return run_one(data, penalty, method, epsilon=None if cal == "none" else eps,
                       calibration=None if cal == "none" else cal, seed=seed, epochs=epochs,
                       curve=curve, message_dtype=message_dtype)

    out = run(dtype, cur)
    out.update(penalty=penalty, method=method, calibration=cal, eps=eps, seed=seed,
               message_dtype=dtype, seconds=time.perf_counter() - t0)
    reg, _ = _problem(penalty)
    out["objective"] = objective(out["coef"], X, y, "hinge", reg)
    out["curve_objective"] = [(int(t), objective(c, X, y, "hinge", reg)) for t, c in out.pop("curve")]
    coef = out.pop("coef")
    want_f32 = {tuple(c) for c in float32}
    if tuple(task[:4]) in want_f32 and seed == 0:
        if dtype == "float64":
            coefs[tuple(task[:4])] = coef
        else:
            if tuple(task[:4]) not in coefs:
                coefs[tuple(task[:4])] = run("float64", False)["coef"]
                out["float64_rerun_identical"] = reference is not None and \
                    reference["objective"] == objective(coefs[tuple(task[:4])], X, y, "hinge", reg)
            out["coef_diff"] = float(np.max(np.abs(coef - coefs[tuple(task[:4])])))
    return out


def _truth(truth, records):
    """F* per penalty: the given values lowered to the noiseless float64 runs' objectives."""
    truth = dict(truth)
    for out in records:
        if out["calibration"] == "none" and out["message_dtype"] == "float64":
            truth[out["penalty"]] = min(truth[out["penalty"]], out["objective"])
    return truth


def _finish_runs(records, truth):
    """The runs of a report: each record with ``subopt`` and ``curve_subopt`` against F*."""
    runs = []
    for record in records:
        out = {k: v for k, v in record.items() if k not in ("curve_objective", "unit")}
        f_star = truth[out["penalty"]]
        out["subopt"] = out["objective"] - f_star
        out["curve_subopt"] = [(t, f - f_star) for t, f in record["curve_objective"]]
        runs.append(out)
    return runs


def grid_of(result, message_dtype="float64"):
    """``{(penalty, method, calibration, eps, seed): run}`` of one message precision."""
    return {(r["penalty"], r["method"], r["calibration"], r["eps"], r["seed"]): r
            for r in result["runs"] if r.get("message_dtype", "float64") == message_dtype}


def _mean(grid, penalty, method, cal, eps, field="subopt"):
    vals = [v[field] for k, v in grid.items() if k[:4] == (penalty, method, cal, eps)]
    return float(np.mean(vals)) if vals else math.nan


def check_claims(grid, epsilons=EPSILONS):
    """The qualitative claims of spec 004 §6F, for each calibration."""
    from scipy.stats import spearmanr

    claims = []
    for cal in sorted({k[2] for k in grid if k[2] != "none"}):
        e08 = 0.8 if 0.8 in epsilons else epsilons[-1]
        a, b, c = (_mean(grid, "l2", m, cal, e08) for m in METHODS)
        if not any(math.isnan(v) for v in (a, b, c)):
            claims.append((cal, f"l2, eps={e08}: iota=0.1 < iota=0.2 < B19", a < b < c,
                           f"{a:.4g} / {b:.4g} / {c:.4g}"))
        gaps = [(e, _mean(grid, "l2", "B19 (all active)", cal, e)
                 - min(_mean(grid, "l2", m, cal, e) for m in list(METHODS)[:2])) for e in epsilons]
        gaps = [(e, g) for e, g in gaps if not math.isnan(g)]
        if len(gaps) >= 2:
            claims.append((cal, "l2: gap to B19 largest at the smallest eps",
                           int(np.argmax([g for _, g in gaps])) == 0,
                           ", ".join(f"ε={e}: {g:.3g}" for e, g in gaps)))
        for penalty in ("l2", "l1"):
            for m in METHODS:
                pts = [(e, _mean(grid, penalty, m, cal, e)) for e in epsilons]
                pts = [(e, v) for e, v in pts if not math.isnan(v)]
                if len(pts) < 2:
                    continue
                es, vals = zip(*pts)
                rho = spearmanr(es, vals).correlation if len(pts) > 2 else \
                    (-1.0 if vals[-1] < vals[0] else 1.0)
                claims.append((cal, f"{penalty}, {m}: suboptimality decreasing in eps"
                               + ("" if len(pts) == len(epsilons) else f" (ε ∈ {list(es)})"),
                               rho <= -0.8, f"Spearman rho = {rho:.2f}"))
        e04 = 0.4 if 0.4 in epsilons else epsilons[0]
        a, b = (_mean(grid, "l1", m, cal, e04) for m in list(METHODS)[:2])
        if not (math.isnan(a) or math.isnan(b)):
            claims.append((cal, f"l1, eps={e04}: iota=0.1 < iota=0.2", a < b, f"{a:.4g} / {b:.4g}"))
    return claims


def _describe_task(task):
    penalty, method, cal, eps, seed, dtype = task
    return f"{penalty} {method} {cal} ε={eps:g} seed {seed} {dtype}"


def _summarize(record):
    return f"σ={record['sigma']:.4g} objective {record['objective']:.6g}"


def _load_problem_meta(name, data):
    X, _, Xt, _ = data
    return {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]), "dim": int(X.shape[1]),
            "q": int(X.shape[0] // N_NODES)}
