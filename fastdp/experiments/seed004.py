"""Reproduction of seed 004 (Liu, Johansson, Shi: distributed ERM with DP), Figs. 1-4.

Run ``python -m fastdp.experiments.seed004 --out DIR`` (the full grid on a9a
and news20: Figs. 1-4, both calibrations, float32-message re-runs) or
``--quick`` (a9a, 1 epoch, ε ∈ {0.2, 1.0}, seed 0; about 3 CPU minutes;
``--datasets a9a,news20`` adds news20, ~30 CPU s a run). Writes
``seed004.md`` (tables and the claims checked), ``seed004.json`` and PNG
figures when matplotlib is installed.

Units (:func:`plan_units`, run by :mod:`fastdp.experiments.runner`): F* of
each (dataset, penalty), then every run of every dataset in priority order
(the paper's Fig. 1/3 configurations, noiseless references, the paper's
calibration over the ε grid, fastdp's calibration, float32 re-runs;
:func:`_tasks`), so a time-boxed session (``--budget-min M``) gives every
dataset its most informative runs. ``OUT/seed004_units.jsonl`` keeps every
finished unit and the report is built from all of them: ``--resume``
continues it (with more datasets, or ``--calibrations accountant,paper`` to
put fastdp's calibration first), ``--float32-only`` (with
``--float32-penalties``) adds only the float32-message comparisons and
``--report-only`` rewrites the report (from ``seed004.json`` when there is no
checkpoint, as for reports made before it).

Setup (spec 004 §5): 20 agents on the complete graph, 1 or 2 random disjoint
edges per round (ι = 0.1, 0.2), Metropolis weights, 3 epochs
(T = 3q/ι rounds; the baseline [19] has every agent active, exact averaging,
T = 3q), hinge loss, L = 1 (rows normalised to unit norm), δ0 = 0.01,
ε ∈ {0.2, 0.4, 0.6, 0.8, 1.0}. ℓ2: h = (μ/2)‖x‖², μ = 5e-4, a_t = t,
γ_t = 20. ℓ1: h = ϕ‖x‖₁, ϕ = 5e-4, a_t = 1, γ_t = 0.01√t.

Data: the paper's epsilon and rcv1 are not available here. a9a (32561 × 123)
and news20 made binary (classes 1-10 against 11-20; 15935 × 62061, sparse) are
used instead; news20 is the high-dimensional stand-in for rcv1. Rows are
normalised to unit L2 norm (per example: no privacy cost). a9a is evaluated on
a9a.t; news20 holds out 20 % of its rows (fixed seed) for accuracy.

Every run is reported with the three ε of :mod:`fastdp.distributed.privacy`:
the paper's nominal ε, the corrected paper argument and fastdp's accountant
(RDP, activation public) on the event that ran. Runs are made both with the
paper's σ ("paper" calibration, to reproduce the figures) and with the σ that
fastdp's accountant needs for the same ε ("accountant").

Privacy: suboptimality and accuracy read the whole dataset: they are
non-private diagnostics, as in the paper.
"""

import functools
import json
import math
import sys
import time
import warnings
from pathlib import Path

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
from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.preprocessing import normalize_rows

__all__ = ["load_problem", "ground_truth", "run_one", "run_grid", "check_claims",
           "write_report", "main", "EPSILONS", "METHODS"]

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


def _float32_rows(result):
    """Pairs (float64 run, float32 run) of the same configuration."""
    ref = grid_of(result)
    pairs = []
    for key, r32 in grid_of(result, "float32").items():
        if key in ref:
            pairs.append((key, ref[key], r32))
    return pairs


def write_report(out_dir, results, *, epochs, seeds, command="", summary=()):
    """``seed004.md``, ``seed004.json`` and the figures, from :func:`run_grid` results.

    ``summary``: lines of a hand-written summary (kept in the JSON, shown first).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "seed004.json").write_text(json.dumps(
        {"epochs": epochs, "seeds": list(seeds), "n_nodes": N_NODES, "delta0": DELTA0,
         "delta": DELTA, "command": command, "summary": list(summary), "datasets": results},
        indent=1, default=float))
    lines = ["# Seed 004 reproduction: private distributed dual averaging (Liu, Johansson, Shi)", "",
             f"Generated by `{command or 'python -m fastdp.experiments.seed004'}` "
             "(`fastdp.experiments.seed004`).", "",
             f"Setup as in the paper: {N_NODES} agents, complete graph, 1 or 2 random disjoint edges "
             "per round (ι = 0.1 / 0.2, Metropolis weights = pairwise averaging), the baseline [19] "
             f"with every agent active and exact averaging, {epochs:g} epochs (T = {epochs:g}·q/ι "
             f"rounds), hinge loss, L = 1, δ0 = {DELTA0}, ε ∈ {{0.2, …, 1.0}}; ℓ2: μ = 5e-4, "
             "a_t = t, γ_t = 20; ℓ1: ϕ = 5e-4, a_t = 1, γ_t = 0.01√t. Private runs: mean over "
             "the seeds listed per dataset (noiseless runs: seed 0).", "",
             "**Data.** The paper's rcv1 and epsilon are **not available** here. news20 made binary "
             "(classes 1-10 against 11-20; 62,061 sparse features; 80 % train / 20 % held out, fixed "
             "seed) is the high-dimensional stand-in for rcv1, and a9a (123 features; test set "
             "a9a.t) the low-dimensional one. Rows are normalised to unit L2 norm (per example, no "
             "privacy cost).", "",
             "**Metrics.** Suboptimality F(x̄) − F* on the training set, against the non-private "
             "optimum F* = min(scikit-learn LinearSVC / SGDClassifier, the noiseless runs); "
             "accuracy on train and held-out data; σ; the paper's nominal ε (Theorem 1; **not a "
             "guarantee**; ✗ = its preconditions fail); the paper's argument evaluated correctly "
             f"(ε KOV, δ = {DELTA}); fastdp's accountant ε (RDP, activation public, δ = {DELTA}) "
             "for the event that ran; simulator time per round. Calibration `paper` = Theorem 1's "
             "σ (reproduces the figures), `accountant` = the σ fastdp's accountant needs for the "
             "same ε (an honest guarantee).", ""]
    if summary:
        lines += ["## Summary", ""] + list(summary) + [""]
    for name, res in results.items():
        grid = grid_of(res)
        lines += [f"## {name}", "",
                  f"{res.get('n_train', '?')} training rows ({res.get('q', '?')} per agent), "
                  f"{res.get('n_test', '?')} held out, {res.get('dim', '?')} features; seeds "
                  f"{sorted({r['seed'] for r in res['runs'] if r['calibration'] != 'none'})}; elapsed "
                  f"{res.get('elapsed', 0) / 60:.1f} min (`nice -n 10`, 2 shared cores).", "",
                  "F*: " + ", ".join(f"{p} = {v:.6g}" for p, v in res["truth"].items()), ""]
        if res.get("skipped"):
            lines += [f"**Time budget reached**: {len(res['skipped'])} run(s) skipped "
                      "(the lowest-priority runs, see `_tasks`): "
                      + "; ".join(f"{t[0]} {t[1]} {t[2]} ε={t[3]}" + (" f32" if t[5] == "float32" else "")
                                  for t in res["skipped"][:12])
                      + (" …" if len(res["skipped"]) > 12 else ""), ""]
        lines += ["| penalty | method | calibration | ε target | subopt | acc train | acc test | σ | "
                  "ε paper | ε KOV | ε accountant | ms/round |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in sorted({k[:4] for k in grid}):
            p, m, cal, eps = key
            runs = [v for k, v in grid.items() if k[:4] == key]
            r0 = runs[0]
            priv = (f"{r0['eps_paper']:.3g}{'' if r0['paper_ok'] else ' ✗'} | {r0['eps_kov']:.3g} | "
                    f"{r0['eps_accountant']:.3g}") if cal != "none" else "∞ | ∞ | ∞"
            lines.append(
                f"| {p} | {m} | {cal} | {eps if eps else '—'} | {np.mean([r['subopt'] for r in runs]):.4g}"
                f" | {np.mean([r['acc_train'] for r in runs]):.4f}"
                f" | {np.mean([r['acc_test'] for r in runs]):.4f}"
                f" | {r0['sigma']:.4g} | {priv} | {r0['seconds_per_round'] * 1e3:.3f} |")
        pairs = _float32_rows(res)
        if pairs:
            lines += ["", "### float32 messages (`message_dtype=\"float32\"`) against float64, same seed",
                      "", "| penalty | method | calibration | ε | subopt f64 | subopt f32 | "
                      "acc test f64 | acc test f32 | max abs coef diff | bytes f32/f64 | "
                      "f64 re-run same bits |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]
            for (p, m, cal, eps, _), r64, r32 in pairs:
                lines.append(f"| {p} | {m} | {cal} | {eps if eps else '—'} | {r64['subopt']:.6g} | "
                             f"{r32['subopt']:.6g} | {r64['acc_test']:.4f} | {r32['acc_test']:.4f} | "
                             f"{r32.get('coef_diff', float('nan')):.3g} | "
                             f"{r32['message_bytes'] / r64['message_bytes']:.2f} | "
                             f"{ {True: 'yes', False: 'NO'}.get(r32.get('float64_rerun_identical'), '—')} |")
        lines += ["", "### Claims of the paper (spec 004 §6F)", "",
                  "| calibration | claim | holds | numbers |", "|---|---|---|---|"]
        for cal, text, ok, nums in check_claims(grid, sorted({k[3] for k in grid if k[3]})):
            lines.append(f"| {cal} | {text} | {'yes' if ok else 'NO'} | {nums} |")
        lines.append("")
        for penalty in res["truth"]:
            png = _figure(out_dir, name, penalty, grid)
            if png:
                lines += [f"![{name} {penalty}]({png})", ""]
    (out_dir / "seed004.md").write_text("\n".join(lines) + "\n")
    return out_dir / "seed004.md"


def _figure(out_dir, name, penalty, grid):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - optional
        return None
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for (p, m, cal, eps, seed), out in sorted(grid.items()):
        if p == penalty and out.get("curve_subopt") and cal in ("paper", "none"):
            t, s = zip(*out["curve_subopt"])
            axes[0].loglog(np.asarray(t) / out["T"], np.maximum(s, 1e-8), "-" if cal == "paper" else ":",
                           label=f"{m} ({'ε=' + str(eps) if cal == 'paper' else 'σ=0'})")
    axes[0].set_xlabel("fraction of the run (T = 3 epochs)")
    axes[0].set_ylabel("F(x̄) − F*")
    axes[0].set_title(f"{name} {penalty}: paper σ (Fig. {'1' if penalty == 'l2' else '3'})")
    for cal, style in (("paper", "-"), ("accountant", "--")):
        for m in METHODS:
            eps = sorted({k[3] for k in grid if k[:3] == (penalty, m, cal)})
            if eps:
                axes[1].semilogy(eps, [_mean(grid, penalty, m, cal, e) for e in eps], style,
                                 marker="o", label=f"{m}, {cal}")
                axes[2].plot(eps, [_mean(grid, penalty, m, cal, e, "acc_test") for e in eps], style,
                             marker="o", label=f"{m}, {cal}")
    axes[1].set_xlabel("ε target")
    axes[1].set_ylabel("final suboptimality")
    axes[1].set_title(f"Fig. {'2' if penalty == 'l2' else '4'}: suboptimality")
    axes[2].set_xlabel("ε target")
    axes[2].set_ylabel("held-out accuracy")
    axes[2].set_title(f"Fig. {'2' if penalty == 'l2' else '4'}: accuracy")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.tight_layout()
    png = f"seed004_{name}_{penalty}.png"
    fig.savefig(Path(out_dir) / png, dpi=100)
    plt.close(fig)
    return png


def _describe_task(task):
    penalty, method, cal, eps, seed, dtype = task
    return f"{penalty} {method} {cal} ε={eps:g} seed {seed} {dtype}"


def _summarize(record):
    return f"σ={record['sigma']:.4g} objective {record['objective']:.6g}"


def _load_problem_meta(name, data):
    X, _, Xt, _ = data
    return {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]), "dim": int(X.shape[1]),
            "q": int(X.shape[0] // N_NODES)}


# ---------------------------------------------------------------------------
# units: F* per (dataset, penalty), then the runs of every dataset in priority order
# ---------------------------------------------------------------------------
CHECKPOINT_NAME = "seed004_units.jsonl"
PENALTIES = ("l2", "l1")


def float32_configs(curve_eps):
    """The configurations re-run with float32 messages: noiseless and the paper's at the curve ε."""
    return [("l2", "Alg1 iota=0.1", "none", 0.0), ("l2", "Alg1 iota=0.1", "paper", curve_eps["l2"]),
            ("l1", "Alg1 iota=0.1", "none", 0.0), ("l1", "Alg1 iota=0.1", "paper", curve_eps["l1"])]


def plan_units(datasets, settings, calibrations=None, float32_only=False,
               float32_penalties=PENALTIES):
    """Unit keys in execution order.

    ``("truth", dataset, penalty)``: the scikit-learn optimum F* (and the data
    sizes); ``("run", dataset) + task``: one run of :func:`_tasks`. The truths
    come first, then the runs of all datasets by priority (:func:`_rank`),
    so a time-boxed session gives every dataset its most informative runs.
    ``calibrations`` orders the calibrations (the first has priority;
    default: ``settings``' order); ``float32_only`` plans only the float32
    re-runs, and ``float32_penalties`` the penalties whose float32 re-runs are
    planned.
    """
    calibrations = tuple(calibrations or settings["calibrations"])
    seeds, curve_eps = tuple(settings["seeds"]), settings["curve_eps"]
    float32 = [tuple(c) for c in settings["float32"]]
    keys = [("truth", name, p) for name in datasets for p in PENALTIES]
    runs = []
    for index, name in enumerate(datasets):
        tasks = _tasks(PENALTIES, _methods_for(PENALTIES), calibrations,
                       tuple(settings["epsilons"]), seeds, float32, curve_eps)
        tasks = [t for t in tasks if (t[5] == "float32" and t[0] in float32_penalties)
                 or (t[5] == "float64" and not float32_only)]
        for task in tasks:
            rank = _rank(task, calibrations, seeds, curve_eps, PENALTIES)
            runs.append((rank[:3] + (index,) + rank[3:], ("run", name) + task))
    return keys + [key for _, key in sorted(runs, key=lambda pair: pair[0])]


def results_from_units(units, settings):
    """``{dataset: result}`` for :func:`write_report` from unit records.

    A dataset is reported when its truths are present; ``skipped`` lists
    the planned runs not in the records (a time-boxed session).
    """
    results = {}
    names = [key[1] for key in units if key[0] == "truth"]
    for name in dict.fromkeys(names):
        truths = {key[2]: r for key, r in units.items() if key[:2] == ("truth", name)}
        if set(truths) != set(PENALTIES):
            continue
        records = [r for key, r in units.items() if key[:2] == ("run", name)]
        truth = _truth({p: truths[p]["f_star"] for p in PENALTIES}, records)
        planned = [key[2:] for key in plan_units([name], settings) if key[0] == "run"]
        present = {key[2:] for key in units if key[:2] == ("run", name)}
        results[name] = {"truth": truth, "runs": _finish_runs(records, truth),
                         "skipped": [list(t) for t in planned if t not in present],
                         **truths[PENALTIES[0]]["meta"],
                         "elapsed": sum(r["seconds"] for key, r in units.items()
                                        if key[1] == name)}
    return results


def run_unit(key, units, *, settings, datasets, coefs):
    """The record of one unit (see :func:`plan_units`)."""
    data = datasets(key[1])
    if key[0] == "truth":
        return {"f_star": ground_truth(data[0], data[1], key[2])[0],
                "meta": _load_problem_meta(key[1], data)}
    task = key[2:]
    reference = units.get(("run", key[1]) + task[:5] + ("float64",))
    record = run_task(data, task, epochs=settings["epochs"], first_seed=settings["seeds"][0],
                      curve_eps=settings["curve_eps"],
                      float32=[tuple(c) for c in settings["float32"]],
                      coefs=coefs.setdefault(key[1], {}), reference=reference)
    return record


def _settings(quick, seeds):
    epsilons = (0.2, 1.0) if quick else EPSILONS
    curve_eps = {"l2": 0.8 if 0.8 in epsilons else epsilons[-1],
                 "l1": 0.4 if 0.4 in epsilons else epsilons[0]}
    return {"epochs": 1.0 if quick else 3.0, "seeds": list(seeds), "epsilons": list(epsilons),
            "calibrations": ["paper", "accountant"], "curve_eps": curve_eps,
            "float32": [list(c) for c in float32_configs(curve_eps)]}


def reproduce(out, *, quick=False, datasets=("a9a", "news20"), seeds=None, data_home=None,
              resume=False, budget_min=None, checkpoint=None, calibrations=None,
              float32_only=False, float32_penalties=PENALTIES, command="", log=runner.log_line):
    """Run the units (:func:`plan_units`) into the checkpoint and write the report.

    ``quick``: 1 epoch, ε ∈ {0.2, 1.0}, seed 0 only. ``seeds``: number of
    seeds of the private runs (default 2; quick 1). The checkpoint (default
    ``OUT/seed004_units.jsonl``) keeps every finished unit of every dataset
    and the report is built from all of them: ``resume`` continues it (e.g.
    with more datasets), ``budget_min`` starts no unit after that many
    minutes. Returns the report path (None when the budget ran out before any unit).
    """
    seeds = tuple(range(1 if quick else (seeds or 2)))
    settings = _settings(quick, seeds)
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    plan = plan_units(datasets, settings, calibrations, float32_only, float32_penalties)
    loader = functools.lru_cache(maxsize=None)(lambda name: load_problem(name, data_home))
    coefs = {}
    _, units = runner.run_units(checkpoint, plan,
                     lambda key, units: run_unit(key, units, settings=settings,
                                                 datasets=loader, coefs=coefs),
                     resume=resume, budget_min=budget_min, settings=settings,
                     describe=lambda key: f"{key[1]} " + (f"F* {key[2]}" if key[0] == "truth"
                                                          else _describe_task(key[2:])),
                     summarize=lambda r: f"F* {r['f_star']:.6g}" if "f_star" in r
                     else _summarize(r), log=log, label="seed004 unit")
    if not units:
        return None                     # the budget ended the session before any unit
    return report_from_units(out, checkpoint, command=command)


def report_from_units(out, checkpoint, *, command=""):
    """Write the report from every unit of a checkpoint (the summary of an existing
    ``OUT/seed004.json`` is kept)."""
    settings, units = runner.read_checkpoint(checkpoint, label="seed004 unit")
    saved = Path(out) / "seed004.json"
    summary = json.loads(saved.read_text()).get("summary", ()) if saved.exists() else ()
    return write_report(out, results_from_units(units, settings), epochs=settings["epochs"],
                        seeds=settings["seeds"], command=command, summary=summary)


def main(argv=None):
    """``python -m fastdp.experiments.seed004 [--quick] [--out DIR] ...``; returns 0."""
    ap = runner.base_parser(__doc__.splitlines()[0], name="seed004",
                            quick_help="a9a, 1 epoch, ε ∈ {0.2, 1.0}, seed 0")
    ap.add_argument("--datasets", default=None,
                    help="comma-separated (default a9a,news20; --quick: a9a)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--float32-only", action="store_true",
                    help="only (re-)run the float32-message comparisons")
    ap.add_argument("--float32-penalties", default="l2,l1",
                    help="penalties of the float32 comparisons (default: both)")
    ap.add_argument("--calibrations", default="paper,accountant",
                    help="calibrations, the first one with priority (default: paper,accountant)")
    args = ap.parse_args(argv)
    command = "python -m fastdp.experiments.seed004 " + " ".join(
        sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    checkpoint = runner.checkpoint_path(args, "seed004")
    if args.report_only:
        if checkpoint.exists():
            path = report_from_units(out, checkpoint, command=command)
        elif (out / "seed004.json").exists():      # a report made before the unit checkpoint
            saved = json.loads((out / "seed004.json").read_text())
            path = write_report(out, saved["datasets"], epochs=saved["epochs"],
                                seeds=saved["seeds"], command=saved.get("command", ""),
                                summary=saved.get("summary", ()))
        else:
            ap.error(f"--report-only needs {checkpoint} (or {out / 'seed004.json'}); "
                     "run the grid first.")
        print(f"wrote {path}")
        return 0
    datasets = (args.datasets or ("a9a" if args.quick else "a9a,news20")).split(",")
    calibrations = tuple(args.calibrations.split(","))
    if sorted(calibrations) != ["accountant", "paper"]:
        ap.error("--calibrations takes paper and accountant, in the order of priority")
    try:
        path = reproduce(out, quick=args.quick, datasets=datasets, seeds=args.seeds,
                         data_home=args.data_home, resume=args.resume,
                         budget_min=args.budget_min, checkpoint=checkpoint,
                         calibrations=calibrations, float32_only=args.float32_only,
                         float32_penalties=tuple(args.float32_penalties.split(",")),
                         command=command)
    except ValidationError as exc:
        ap.error(str(exc))
    print("no report: the time budget ran out before the first unit (rerun with --resume)"
          if path is None else f"wrote {path}")
    return 0


if __name__ == "__main__":
    main()
