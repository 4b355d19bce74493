"""Reproduction of seed 003 (Chen & Lee, DP stochastic adaptive line search): Figs. 3–4.

Run ``python -m fastdp.experiments.seed003 --out DIR`` (paper protocol:
10-fold cross-validation × 5 runs, ε ∈ {0.05, 0.1, 0.2, 0.4, 0.8, 1.6},
logistic regression and SVM on Adult, Bank and IPUMS-BR; hours on two
cores) or ``--quick`` (the first 2 of the 10 folds, 1 run). Writes
``seed003.md`` (accuracy and objective tables, run statistics, which of the
paper's qualitative claims held) and PNG figures when matplotlib is installed.
``--sweeps`` adds the Fig. 1 hyper-parameter sweeps (Adult, logistic,
ε ∈ {0.05, 0.2}), the Fig. 2 evaluation counts against q (ε = 0.4) and the
amplification ablation of spec 003 §8 A1 (R2, R3, R5).

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

import argparse
import math
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fastdp.datasets import load_dataset
from fastdp.exceptions import FastDPError
from fastdp.privacy.calibration import calibrate_noise_multiplier, compute_epsilon
from fastdp.solvers import line_search as LS

__all__ = [
    "DATASETS",
    "ALGORITHMS",
    "EPSILONS",
    "load_paper_dataset",
    "fold_indices",
    "run_algorithm",
    "run_grid",
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
# the grid
# --------------------------------------------------------------------------
def run_grid(*, datasets=DATASETS, losses=LOSSES, epsilons=EPSILONS, algorithms=ALGORITHMS,
             folds=10, runs=5, data_home=None, log=print):
    """All (dataset, loss, algorithm, ε) cells, averaged over folds × runs.

    Returns ``{(dataset, loss, algorithm, eps): dict(acc, acc_sd, obj, n, info)}``;
    ε is None for NON-PRIVATE and MAJORITY.
    """
    grid = {}
    for ds in datasets:
        X, y = load_paper_dataset(ds, data_home)
        splits = fold_indices(X.shape[0])[:folds]
        for loss in losses:
            for alg in algorithms:
                eps_list = list(epsilons) if alg in PRIVATE else [None]
                for eps in eps_list:
                    accs, objs, infos = [], [], []
                    started = time.perf_counter()
                    for f, (tr, te) in enumerate(splits):
                        for r in range(runs if alg in PRIVATE else 1):
                            seed = 1000 * f + r
                            try:
                                coef, info = run_algorithm(alg, loss, X[tr], y[tr], eps, seed)
                            except FastDPError as exc:        # e.g. a solver refusing the data
                                log(f"  {ds}/{loss}/{alg}/ε={eps}: {exc}")
                                continue
                            accs.append(float(np.mean(np.sign(X[te] @ coef) == y[te])))
                            objs.append(_mean_loss(loss, X[tr], y[tr], coef))
                            infos.append(info)
                    grid[(ds, loss, alg, eps)] = dict(
                        acc=float(np.mean(accs)) if accs else math.nan,
                        acc_sd=float(np.std(accs)) if accs else math.nan,
                        obj=float(np.mean(objs)) if objs else math.nan, n=len(accs),
                        info=_mean_info(infos))
                    log(f"{ds:9s} {loss:8s} {alg:12s} ε={eps}: acc={grid[(ds, loss, alg, eps)]['acc']:.4f}"
                        f" ({time.perf_counter() - started:.1f}s)")
    return grid


def _mean_info(infos):
    keys = sorted({k for i in infos for k in i})
    return {k: float(np.mean([i[k] for i in infos if k in i])) for k in keys}


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
    k, n = count(lambda d, l, e: max(_acc(grid, d, l, a, e) for a in ("DP-BLSGD", "DP-BLSGD-AC", "DP-BLGD"))
                 >= max(_acc(grid, d, l, a, e) for a in ("DP-AGD", "DP-SGD", "OBJPERT", "OUTPERT")))
    out.append(("C8: the best line-search method ≥ the best baseline in most cases", k > n / 2,
                f"{k}/{n}"))
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


def _claims_table(claims):
    """Markdown table of ``(claim, held, detail)`` triples."""
    return ["| claim | held | detail |", "|---|---|---|"] + [
        f"| {claim} | {'yes' if held else 'no'} | {detail} |" for claim, held, detail in claims]


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


def write_report(out_dir, grid, *, datasets, losses, epsilons, folds, runs, elapsed, quick,
                 notes=(), extra_json=None):
    """Write ``seed003.md`` (+ ``seed003.json`` with every cell, and PNGs); returns the md path."""
    import json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = present_cells(grid, datasets, losses)
    lines = ["# Seed 003 reproduction: DP stochastic adaptive line search", "",
             f"Protocol: {folds} of 10 folds × {runs} run(s){' (--quick)' if quick else ''}; "
             f"δ = {DELTA:g}; ε grid {list(epsilons)}; wall time {elapsed / 60:.1f} min; "
             f"(dataset, loss) pairs run: {', '.join(f'{d}/{l}' for d, l in cells)}.",
             "IPUMS-US is not available in shared/data: not reproduced. OUTPERT is Chaudhuri et "
             "al.'s output perturbation (not OUTPERT-RSGD). Accuracy: test folds; objective: mean "
             "unclipped, unregularised training loss. Both are non-private evaluation numbers.", ""]
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
    lines += _claims_table(claims)
    try:
        _write_figures(out_dir, grid, cells, epsilons)
        lines += ["", "Figures: `seed003_<dataset>_<loss>.png` (accuracy and objective against ε)."]
    except ImportError:
        lines += ["", "Figures: not written (matplotlib is not installed)."]
    (out_dir / "seed003.md").write_text("\n".join(lines) + "\n")
    payload = dict(protocol=dict(folds=folds, runs=runs, quick=quick, delta=DELTA,
                                 epsilons=list(epsilons), elapsed_seconds=elapsed,
                                 cells=[list(c) for c in cells]),
                   claims=[dict(claim=c, held=bool(h), detail=d) for c, h, d in claims],
                   grid=grid_to_records(grid))
    if extra_json:
        payload.update(extra_json)
    (out_dir / "seed003.json").write_text(json.dumps(payload, indent=1, default=float) + "\n")
    return out_dir / "seed003.md"


def _write_figures(out_dir, grid, cells, epsilons):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        fig.tight_layout()
        fig.savefig(out_dir / f"seed003_{ds}_{loss}.png", dpi=110)
        plt.close(fig)


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
}
SWEEP_EPSILONS = (0.05, 0.2)


def run_sweeps(*, folds=2, runs=1, epsilons=SWEEP_EPSILONS, sweeps=None, data_home=None,
               log=print):
    """Fig. 1 (Adult, logistic): DP-BLSGD accuracy while one setting varies
    (``zeta`` runs DP-BLSGD-AC), and Fig. 2: per-example gradient / objective
    evaluations against q at ε = 0.4. Returns ``(fig1, fig2)`` dicts."""
    X, y = load_paper_dataset("adult", data_home)
    splits = fold_indices(X.shape[0])[:folds]
    fig1 = {}
    for name, values in (sweeps or SWEEPS).items():
        for value in values:
            for eps in epsilons:
                accs = []
                for f, (tr, te) in enumerate(splits):
                    for r in range(runs):
                        kw = {name: value}
                        if name == "zeta":
                            kw["adaptive_clipping"] = True
                        if name == "amplification" and value == "sgm_exact":
                            kw["batch_accounting"] = "separate"   # sgm needs a Gaussian-only call
                        res = LS.dp_blsgd(X[tr], y[tr], epsilon=eps, delta=DELTA, mu=MU,
                                          random_state=1000 * f + r, **kw)
                        accs.append(float(np.mean(np.sign(X[te] @ res.coef) == y[te])))
                fig1[(name, value, eps)] = float(np.mean(accs))
                log(f"sweep {name}={value} ε={eps}: acc={fig1[(name, value, eps)]:.4f}")
    fig2 = {}
    for q in SWEEPS["sample_rate"]:
        grads, objs, accs = [], [], []
        for f, (tr, te) in enumerate(splits):
            res = LS.dp_blsgd(X[tr], y[tr], epsilon=0.4, delta=DELTA, mu=MU, sample_rate=q,
                              random_state=1000 * f)
            grads.append(res.diagnostics["gradient_evaluations"])
            objs.append(res.diagnostics["objective_evaluations"])
            accs.append(float(np.mean(np.sign(X[te] @ res.coef) == y[te])))
        fig2[q] = dict(gradient_evaluations=float(np.mean(grads)),
                       objective_evaluations=float(np.mean(objs)), acc=float(np.mean(accs)))
        log(f"fig2 q={q}: {fig2[q]}")
    return fig1, fig2


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
        lines += [""] + _claims_table(claims)
    return lines


def reproduce(out, *, quick=False, folds=None, runs=None, datasets=DATASETS, losses=LOSSES,
              epsilons=EPSILONS, algorithms=ALGORITHMS, data_home=None, sweeps=False, log=print):
    """Run the grid (and the Fig. 1/2 sweeps if asked) and write the report; returns its path."""
    folds = (2 if quick else 10) if folds is None else folds
    runs = (1 if quick else 5) if runs is None else runs
    started = time.perf_counter()
    grid = run_grid(datasets=datasets, losses=losses, epsilons=epsilons, algorithms=algorithms,
                    folds=folds, runs=runs, data_home=data_home, log=log)
    extra = []
    if sweeps:
        fig1, fig2 = run_sweeps(folds=folds, runs=runs, data_home=data_home, log=log)
        extra = sweep_report(fig1, fig2)
    path = write_report(out, grid, datasets=datasets, losses=losses, epsilons=epsilons,
                        folds=folds, runs=runs, elapsed=time.perf_counter() - started, quick=quick)
    if extra:
        with open(path, "a") as fh:
            fh.write("\n" + "\n".join(extra) + "\n")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 folds, 1 run")
    parser.add_argument("--out", default="seed003_results", help="output directory")
    parser.add_argument("--folds", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--sweeps", action="store_true",
                        help="also run the Fig. 1 sweeps, Fig. 2 counts and the amplification ablation")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="write the report from saved grids (seed003.json files or lists of "
                             "cell records) instead of running; --folds/--runs describe them")
    parser.add_argument("--notes", default=None, help="markdown file appended under the protocol")
    args = parser.parse_args(argv)
    if args.from_json:
        import json

        records, elapsed = [], 0.0
        for name in args.from_json:
            data = json.loads(Path(name).read_text())
            records += data["grid"] if "grid" in data else data["cells"]
            elapsed += float(data.get("elapsed", data.get("protocol", {}).get("elapsed_seconds", 0)))
        notes = Path(args.notes).read_text().splitlines() if args.notes else ()
        path = write_report(args.out, grid_from_records(records), datasets=args.datasets,
                            losses=args.losses, epsilons=args.epsilons, folds=args.folds or 10,
                            runs=args.runs or 5, elapsed=elapsed, quick=False, notes=notes)
        print(f"report: {path}")
        return
    path = reproduce(args.out, quick=args.quick, folds=args.folds, runs=args.runs,
                     datasets=args.datasets, losses=args.losses, epsilons=args.epsilons,
                     data_home=args.data_home, sweeps=args.sweeps)
    print(f"report: {path}")


if __name__ == "__main__":
    main()
