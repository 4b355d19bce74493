"""Reproduction of seed 002 (Kuru et al., DP accelerated optimisation): Figs. 1-4.

Run ``python -m fastdp.experiments.seed002 --out DIR`` (full grid: 20 runs
per cell, run in lock step, m ∈ {1000, 100000}, T ∈ {100, 200, 500, 1000},
c ∈ {0.1, 1}, both noise conventions; the -opt variants at m = 1000 with the
subsampling-aware horizon rule; the claims on 3 further data seeds; about
25 minutes on one free core, much longer on a loaded machine) or
``--quick`` (T = 100, 2 runs, under a minute).  Writes ``seed002.md``
(tables: ours next to the numbers spec 002 transcribes from the published
figures [FIG] and from its own replication [REPL]), ``seed002.json`` (every
number) and PNG figures when matplotlib is installed.  One unit per grid cell (and per
extra data seed; :func:`plan_units`, run by :mod:`fastdp.experiments.runner`):
``OUT/seed002_units.jsonl`` keeps the finished units, ``--resume`` continues
it, ``--budget-min M`` starts no unit after M minutes and ``--report-only``
rewrites the report from it.

The data are the paper's synthetic logistic problem (spec 002, section 5.3):
U = ``RandomState(1).rand(d, n).T`` (MATLAB's ``rng(1); rand(n, d)``), rows in
the L1 ball of radius 20 (S1 = 40), labels sign(U w) with the calibrated
``w = default_rng(74).standard_normal(d)`` (F(x_0) − F* = 28.90), the
objective (1/n) Σ log(1 + exp(−z uᵀx)) + λ‖x‖² with λ = 0.01 (fastdp's
``lam = 2λ = μ``), L = λ_max(UᵀU/n) + 2λ as in the paper (an over-estimate,
spec C10), x_0 = 10·1.  The -opt horizon T' uses the authors' bound
constants under both noise conventions, as the spec's replication does.

Privacy: the runs are private with respect to the synthetic records
(replace-one, pure ε; ``noise_convention="reference_code"`` runs have the
realized ε of their smaller noise, reported in the tables).  The error
curves F(x_k) − F* read the whole dataset: they are non-private
diagnostics, as in the paper.
"""

import json
import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.solvers.accelerated import (
    HORIZON_RULES,
    GLMProblem,
    fig1_log_bound,
    log_bound_coefficients,
    masg_schedule,
    plan_gd,
    plan_heavy_ball,
    plan_masg,
    plan_nesterov,
    rho_hb,
    rho_nag_reference,
    run_plan,
    run_plan_replicas,
)

__all__ = [
    "ALGORITHMS",
    "make_synthetic_logreg",
    "Section5Problem",
    "DATA_SEEDS",
    "GAP_MATCHED_SEEDS",
    "gap_matched_seeds",
    "run_algorithm",
    "run_cell",
    "grid_plan",
    "run_grid",
    "run_data_seeds",
    "plan_units",
    "run_unit",
    "parts_from_units",
    "data_summary",
    "horizon_rule_table",
    "check_claims",
    "fig1_table",
    "fig2_profiles",
    "write_report",
    "reproduce",
    "main",
]

ALGORITHMS = ("DP-GD", "DP-NAG", "DP-MASG", "DP-HB", "DP-NAG-opt", "DP-MASG-opt")
HORIZONS = (100, 200, 500, 1000)
CONVENTIONS = ("reference_code", "paper")

# spec 002, section 5.6: the spec author's replication, final error at t = T (or T')
REPL = {
    ("reference_code", 100000, 1.0): {
        "DP-GD": [12.5, 4.87, 0.0507, 0.18], "DP-NAG": [0.012, 0.0518, 0.321, 1.28],
        "DP-MASG": [0.01, 0.0187, 0.0385, 0.0761], "DP-HB": [0.0133, 0.0632, 0.234, 1.19],
        "DP-NAG-opt": [0.00453, 0.00643, 0.00493, 0.00629],
        "DP-MASG-opt": [0.00593, 0.0066, 0.00495, 0.00519]},
    ("reference_code", 1000, 1.0): {
        "DP-GD": [12.4, 4.92, 0.0552, 0.17], "DP-NAG": [0.022, 0.0591, 0.336, 1.38],
        "DP-MASG": [0.0247, 0.0236, 0.0416, 0.089], "DP-HB": [0.0256, 0.105, 0.44, 1.83],
        "DP-NAG-opt": [0.0156, 0.0148, 0.017, 0.0174],
        "DP-MASG-opt": [0.0161, 0.0162, 0.0134, 0.0141]},
    ("reference_code", 100000, 0.1): {
        "DP-GD": [26.6, 24.5, 19, 12.5], "DP-NAG": [3.52, 0.0512, 0.097, 0.459],
        "DP-MASG": [5.21, 3.89, 2.14, 1.43], "DP-HB": [3.43, 0.0968, 0.0828, 0.347],
        "DP-NAG-opt": [3.64, 0.0524, 0.022, 0.0202], "DP-MASG-opt": [5.12, 5.17, 5.2, 5.16]},
    ("reference_code", 1000, 0.1): {
        "DP-GD": [26.6, 24.5, 19, 12.4], "DP-NAG": [3.51, 0.0639, 0.111, 0.431],
        "DP-MASG": [5.13, 3.75, 2.1, 1.49], "DP-HB": [3.47, 0.111, 0.123, 0.419],
        "DP-NAG-opt": [3.54, 0.0662, 0.03, 0.0223], "DP-MASG-opt": [5.18, 5.18, 5.18, 5.17]},
    ("paper", 100000, 1.0): {
        "DP-GD": [12.5, 4.86, 0.101, 0.368], "DP-NAG": [0.024, 0.104, 0.649, 2.58],
        "DP-MASG": [0.0201, 0.0378, 0.0775, 0.155], "DP-HB": [0.026, 0.127, 0.476, 2.35],
        "DP-NAG-opt": [0.00916, 0.0129, 0.00995, 0.0126],
        "DP-MASG-opt": [0.0119, 0.0133, 0.00991, 0.0103]},
    ("paper", 1000, 1.0): {
        "DP-GD": [12.4, 4.93, 0.11, 0.349], "DP-NAG": [0.0441, 0.12, 0.7, 2.77],
        "DP-MASG": [0.0492, 0.0478, 0.084, 0.181], "DP-HB": [0.0506, 0.21, 0.909, 3.63],
        "DP-NAG-opt": [0.0311, 0.0296, 0.034, 0.0349],
        "DP-MASG-opt": [0.0325, 0.0326, 0.0268, 0.0282]},
}

# spec 002, section 5.5: read off the published figures (reference-code noise), t = T or T'
FIG = {
    (100000, 1.0): {
        "DP-GD": ["—", "—", "0.044", "0.15"], "DP-NAG": ["0.013", "≈0.045", "0.26", "1.0–1.45"],
        "DP-MASG": ["0.0115", "≈0.017", "0.042", "0.072"],
        "DP-HB": ["0.013", "≈0.045", "0.3–0.39", "1.1–1.45"],
        "DP-NAG-opt": ["0.0058", "≈0.0065", "≈0.0065", "0.006"],
        "DP-MASG-opt": ["≈0.006"] * 4},
    (1000, 1.0): {
        "DP-GD": ["—", "—", "0.051", "0.17"], "DP-NAG": ["0.026", "≈0.09", "0.39", "1.2–1.6"],
        "DP-MASG": ["0.024", "≈0.027", "0.052", "0.089"],
        "DP-HB": ["0.030", "≈0.08", "0.385", "1.2–1.45"],
        "DP-NAG-opt": ["0.017", "≈0.018", "≈0.018", "0.016"], "DP-MASG-opt": ["≈0.011"] * 4},
    (100000, 0.1): {
        "DP-GD": ["", "", "", "12.5"], "DP-NAG": ["", "0.025–0.08", "0.10", "0.385"],
        "DP-MASG": ["≈5 (t=89)", "", "≈2.2", "1.2"], "DP-HB": ["", "≥0.025", "0.106", "0.385"],
        "DP-NAG-opt": ["", "≈0.05", "0.017–0.024", "0.017–0.024"], "DP-MASG-opt": ["≈5"] * 4},
    (1000, 0.1): {
        "DP-GD": ["", "", "", "12.3"], "DP-NAG": ["3.8", "", "0.12", "0.46"],
        "DP-MASG": ["", "", "2.2", "1.16"], "DP-HB": ["", "", "0.13", "0.46"],
        "DP-NAG-opt": ["", "", "0.028–0.030", "0.028–0.030"], "DP-MASG-opt": ["≈5"] * 4},
}


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def make_synthetic_logreg(n=100_000, d=20, radius=20.0, seed=1, w_seed=74):
    """The authors' generator (spec 002, section 5.3) with seedable numpy RNGs.

    ``U = RandomState(seed).rand(d, n).T`` (believed bit-identical to MATLAB's
    ``rng(seed); rand(n, d)``), rows above the L1 radius rescaled onto the
    ball (never happens for d <= radius), ``w = default_rng(w_seed)
    .standard_normal(d)`` and ``z = sign(U w)`` (0 mapped to +1).
    ``w_seed=74`` is the calibrated preset of spec C9.
    """
    U = np.random.RandomState(seed).rand(d, n).T.copy()
    norms = np.abs(U).sum(axis=1)
    over = norms > radius
    U[over] *= (radius / norms[over])[:, None]
    w = np.random.default_rng(w_seed).standard_normal(d)
    z = np.where(U @ w >= 0, 1.0, -1.0)
    return U, z


class Section5Problem:
    """The section-5 objective with its constants, x*, and the error along iterates.

    Attributes
    ----------
    problem : GLMProblem
        Logistic loss, ``lam = 2λ``, row L1 bound R (S1 = 2R).
    smoothness, strong_convexity : float
        L = λ_max(UᵀU/n) + 2λ (the paper's constant) and μ = 2λ.
    x0, x_star : ndarray
    f_star : float
    """

    def __init__(self, U, z, reg=0.01, radius=20.0, x0_value=10.0):
        self.U, self.z = U, z
        self._Uz = U * z[:, None]
        n, d = U.shape
        self.reg = reg
        self.problem = GLMProblem(U, z, loss="logistic", lam=2.0 * reg, row_l1_bound=radius)
        self.smoothness = float(np.linalg.eigvalsh(U.T @ U / n)[-1]) + 2.0 * reg
        self.strong_convexity = 2.0 * reg
        self.x0 = np.full(d, float(x0_value))
        res = minimize(self.objective, self.x0, jac=self.problem.gradient, method="L-BFGS-B",
                       options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 10_000})
        self.x_star = res.x
        self.f_star = self.objective(self.x_star)

    def objective(self, x):
        """F(x) = mean log(1 + exp(−z uᵀx)) + λ‖x‖² (non-private diagnostic)."""
        return float(np.mean(np.logaddexp(0.0, -self.z * (self.U @ x))) + self.reg * x @ x)

    def errors(self, iterates, chunk=128):
        """F(x_k) − F* for every row x_k of ``iterates`` (any leading shape, last axis d)."""
        iterates = np.asarray(iterates, dtype=np.float64)
        flat = iterates.reshape(-1, iterates.shape[-1])
        out = np.empty(len(flat))
        for start in range(0, len(flat), chunk):
            block = flat[start:start + chunk]
            margins = self._Uz @ block.T
            np.negative(margins, out=margins)
            np.logaddexp(0.0, margins, out=margins)
            out[start:start + chunk] = (margins.mean(axis=0)
                                        + self.reg * np.sum(block * block, axis=1))
        return (out - self.f_star).reshape(iterates.shape[:-1])


# ---------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------


def _plan(name, sec, *, T, m, c, epsilon, convention, constants, horizon_rule="paper"):
    n, d = sec.U.shape
    L, mu = sec.smoothness, sec.strong_convexity
    S = sec.problem.sensitivity
    common = dict(n_samples=n, sensitivity=S, epsilon=epsilon, n_iter=T, batch_size=m,
                  noise_convention=convention)
    opt = dict(allocation="prop42", n_features=d, bound_constants=constants, initial_error=10.0,
               horizon_rule=horizon_rule)
    if name == "DP-GD":
        return plan_gd(step_size=c / L, **common)
    if name == "DP-HB":
        return plan_heavy_ball(step_size=c / L, strong_convexity=mu, **common)
    if name == "DP-NAG":
        return plan_nesterov(step_size=c / L, strong_convexity=mu, **common)
    if name == "DP-NAG-opt":
        return plan_nesterov(step_size=c / L, strong_convexity=mu, smoothness=L, **opt, **common)
    if name == "DP-MASG":
        return plan_masg(smoothness=L, strong_convexity=mu, step_multiplier=c, **common)
    if name == "DP-MASG-opt":
        return plan_masg(smoothness=L, strong_convexity=mu, step_multiplier=c, **opt, **common)
    raise ValueError(f"unknown algorithm {name!r}")


def evaluation_steps(horizon, every=1):
    """1-based iterations at which F is evaluated: k <= 10, every ``every``-th, and T'."""
    k = np.arange(1, horizon + 1)
    return k[(k <= 10) | (k % every == 0) | (k == horizon)]


def run_algorithm(name, sec, *, T, m, c, seed, epsilon=1.0, convention="paper",
                  constants="reference_code", eval_every=1, horizon_rule="paper"):
    """One run; returns (steps k, errors F(x_k) − F* at those k, the plan)."""
    plan = _plan(name, sec, T=T, m=m, c=c, epsilon=epsilon, convention=convention,
                 constants=constants, horizon_rule=horizon_rule)
    result = run_plan(sec.problem, plan, x0=sec.x0, random_state=seed, record_iterates=True)
    steps = evaluation_steps(plan.horizon, eval_every)
    return steps, sec.errors(result.extra["iterates"][steps - 1]), plan


def run_cell(name, sec, *, T, m, c, runs, seed=0, epsilon=1.0, convention="paper",
             constants="reference_code", eval_every=1, horizon_rule="paper"):
    """``runs`` runs of one cell in lock step (:func:`run_plan_replicas`).

    Run r uses ``SeedSequence([seed, r])``, so it is the same run as
    ``run_algorithm(..., seed=SeedSequence([seed, r]))`` (up to summation
    order in the full-batch gradient).  Returns the grid entry (see
    :func:`run_grid`).
    """
    plan = _plan(name, sec, T=T, m=m, c=c, epsilon=epsilon, convention=convention,
                 constants=constants, horizon_rule=horizon_rule)
    seeds = [np.random.SeedSequence([seed, r]) for r in range(runs)]
    out = run_plan_replicas(sec.problem, plan, random_states=seeds, x0=sec.x0)
    steps = evaluation_steps(plan.horizon, eval_every)
    curves = sec.errors(out["iterates"][:, steps - 1])
    return {
        "steps": steps,
        "mean": curves.mean(axis=0),
        "q10": np.quantile(curves, 0.1, axis=0),
        "q90": np.quantile(curves, 0.9, axis=0),
        "final": float(curves[:, -1].mean()),
        "finals": curves[:, -1].copy(),
        "horizon": plan.horizon,
        "epsilon": plan.epsilon,
    }


def grid_plan(*, batch_sizes, horizons=HORIZONS, multipliers=(0.1, 1.0),
              conventions=CONVENTIONS, algorithms=ALGORITHMS):
    """Cell keys ``(convention, m, c, algorithm, T)`` of a grid, in execution order."""
    return [(convention, m, c, name, T) for convention in conventions for m in batch_sizes
            for c in multipliers for name in algorithms for T in horizons]


def run_grid(sec, *, batch_sizes, horizons=HORIZONS, multipliers=(0.1, 1.0), runs=20,
             conventions=CONVENTIONS, algorithms=ALGORITHMS, seed=0, eval_every=1,
             horizon_rule="paper"):
    """Mean error curves over ``runs`` runs for every cell of the grid.

    Returns a dict keyed by (convention, m, c, algorithm, T) with ``steps``
    (the k at which F was evaluated, see :func:`evaluation_steps`), ``mean``
    (curve at those k), ``q10``/``q90`` (bands across runs), ``final``
    (mean error at t = T'), ``finals`` (every run's), ``horizon`` T' and
    ``epsilon`` (realized pure ε of one run).  Seeds: run r of every cell
    uses ``SeedSequence([seed, r])`` children, so cells are comparable and
    each run is reproducible.
    """
    keys = grid_plan(batch_sizes=batch_sizes, horizons=horizons, multipliers=multipliers,
                     conventions=conventions, algorithms=algorithms)
    return {key: run_cell(key[3], sec, T=key[4], m=key[1], c=key[2], runs=runs, seed=seed,
                          convention=key[0], eval_every=eval_every, horizon_rule=horizon_rule)
            for key in keys}


def _final(grid, conv, m, c, name, T):
    cell = grid.get((conv, m, c, name, T))
    return None if cell is None else cell["final"]


def check_claims(grid, n):
    """The qualitative claims of spec 002, section 5.4 / 6.5 that the grid can decide.

    Returns a list of (claim, holds) for every claim whose cells ran.
    """
    checks = []

    def add(text, values, test):
        if all(v is not None for v in values):
            checks.append((text, bool(test(*values))))

    for conv in CONVENTIONS:
        tag = f"[{conv}]"
        for m in (n, 1000):
            opt = [_final(grid, conv, m, 1.0, a, T) for a in ("DP-NAG-opt", "DP-MASG-opt")
                   for T in HORIZONS]
            others = [_final(grid, conv, m, 1.0, a, T) for a in ("DP-GD", "DP-NAG", "DP-MASG", "DP-HB")
                      for T in HORIZONS]
            add(f"{tag} m={m}, c=1: every -opt final error < every non-opt final error",
                [max((v for v in opt if v is not None), default=None),
                 min((v for v in others if v is not None), default=None)],
                lambda a, b: a < b)
        if conv == "reference_code":
            add(f"{tag} m=n, c=1: DP-NAG-opt and DP-MASG-opt final errors < 0.01 at every T",
                [_final(grid, conv, n, 1.0, a, T) for a in ("DP-NAG-opt", "DP-MASG-opt")
                 for T in HORIZONS], lambda *finals: max(finals) < 0.01)
        add(f"{tag} c=1, m=n, T=1000: DP-GD < DP-NAG and DP-GD < DP-HB",
            [_final(grid, conv, n, 1.0, a, 1000) for a in ("DP-GD", "DP-NAG", "DP-HB")],
            lambda g, a, h: g < a and g < h)
        best = {a: [_final(grid, conv, n, 1.0, a, T) for T in HORIZONS] for a in ("DP-HB", "DP-GD")}
        if all(v is not None for vs in best.values() for v in vs):
            checks.append((f"{tag} c=1, m=n: best-over-T DP-HB < best-over-T DP-GD",
                           min(best["DP-HB"]) < min(best["DP-GD"])))
        add(f"{tag} c=0.1, m=n: DP-GD at T=1000 still > 10",
            [_final(grid, conv, n, 0.1, "DP-GD", 1000)], lambda g: g > 10)
        add(f"{tag} c=0.1, m=n: DP-NAG and DP-HB at T=200 < 0.5, DP-GD even at T=1000 > 10x that",
            [_final(grid, conv, n, 0.1, a, T) for a, T in
             (("DP-NAG", 200), ("DP-HB", 200), ("DP-GD", 1000))],
            lambda a, h, g: max(a, h) < 0.5 and g > 10 * max(a, h))
        add(f"{tag} c=0.1, m=n: DP-NAG-opt (T=1000) beats DP-MASG-opt (more robust to small c)",
            [_final(grid, conv, n, 0.1, a, 1000) for a in ("DP-NAG-opt", "DP-MASG-opt")],
            lambda a, b: a < b)
        add(f"{tag} c=0.1: DP-MASG-opt stays ≈ 5 (between 2 and 10)",
            [_final(grid, conv, n, 0.1, "DP-MASG-opt", 100)], lambda v: 2 < v < 10)
        add(f"{tag} c=1, m=n: DP-NAG final error increases with T (100 < 500 < 1000)",
            [_final(grid, conv, n, 1.0, "DP-NAG", T) for T in (100, 500, 1000)],
            lambda a, b, c: a < b < c)
        add(f"{tag} c=1, m=n, T=100: DP-NAG-opt < DP-NAG",
            [_final(grid, conv, n, 1.0, a, 100) for a in ("DP-NAG-opt", "DP-NAG")],
            lambda a, b: a < b)
        add(f"{tag} c=0.1 → 1 helps DP-MASG (T=1000)",
            [_final(grid, conv, n, c, "DP-MASG", 1000) for c in (1.0, 0.1)], lambda a, b: a < b)
        for a in ("DP-NAG-opt", "DP-MASG-opt"):
            add(f"{tag} c=1, T=100: {a} with m=n beats m=1000 by < 10x",
                [_final(grid, conv, m, 1.0, a, 100) for m in (n, 1000)],
                lambda full, sub: full < sub < 10 * full)
    return checks


# ---------------------------------------------------------------------------
# robustness over data seeds (spec C9) and the subsampling-aware horizon (spec A5)
# ---------------------------------------------------------------------------

#: (U seed, w seed) of the extra data sets: the generator of spec 5.3 with other draws,
#: unselected.  With nonnegative features the label balance follows w: these have 58-79%
#: negative labels and F(x0) − F* = 78-99, far from the published ≈ 29.
DATA_SEEDS = ((2, 2), (3, 3), (4, 4))
#: Draws selected only by the published starting gap (:func:`gap_matched_seeds`):
#: F(x0) − F* in [20, 40] like the figures' F(x1) − F* ≈ 29; found with U seeds 2, 3, 4.
GAP_MATCHED_SEEDS = ((2, 9), (3, 12), (4, 13))


def gap_matched_seeds(count=3, low=20.0, high=40.0, n=100_000):
    """The rule behind :data:`GAP_MATCHED_SEEDS` (spec C9 with the paper's starting error).

    For U seed 2, 3, 4, ... in turn, scan w seeds upward from the last one
    taken (starting at 0) and keep the first draw whose F(x0) − F* lies in
    [low, high]; to save time only draws with 3-20% negative labels are
    solved (the published data have about 10%).  Selection uses the
    outcome-free starting gap only, never the algorithms' errors.
    """
    found, w = [], 0
    while len(found) < count:
        useed = 2 + len(found)
        U, z = make_synthetic_logreg(n=n, seed=useed, w_seed=w)
        if 0.03 <= np.mean(z < 0) <= 0.2:
            sec = Section5Problem(U, z)
            if low <= sec.objective(sec.x0) - sec.f_star <= high:
                found.append((useed, w))
        w += 1
    return tuple(found)


def data_summary(sec):
    """Public-facing facts of a data set: share of negative labels, F*, F(x0) − F*, L."""
    return {"negatives": float(np.mean(sec.z < 0)), "f_star": sec.f_star,
            "initial_gap": sec.objective(sec.x0) - sec.f_star, "smoothness": sec.smoothness}


def run_data_seeds(data_seeds=DATA_SEEDS, *, n=100_000, runs=5, horizons=HORIZONS,
                   conventions=("paper",), batch_sizes=None, seed=0, selection="unselected"):
    """The grid on other draws of the synthetic data, and which claims hold there.

    Spec C9: the labels of the published data cannot be regenerated, so the
    conclusions are checked on ``len(data_seeds) >= 3`` further data sets
    ``make_synthetic_logreg(n, seed=s, w_seed=w)``.  Only the final errors
    are evaluated (F at k <= 10 and at T').  Returns one dict per data set
    with its :func:`data_summary`, ``selection`` (the label given),
    ``claims`` (:func:`check_claims`) and ``finals`` {(convention, m, c,
    algorithm, T): mean final error}.
    """
    results = []
    for useed, wseed in data_seeds:
        sec = Section5Problem(*make_synthetic_logreg(n=n, seed=useed, w_seed=wseed))
        grid = run_grid(sec, batch_sizes=batch_sizes or (n, 1000), horizons=horizons,
                        runs=runs, conventions=conventions, seed=seed, eval_every=10 ** 9)
        results.append({"seed": useed, "w_seed": wseed, "selection": selection,
                        **data_summary(sec),
                        "claims": check_claims(grid, n),
                        "finals": {key: cell["final"] for key, cell in grid.items()}})
    return results


def horizon_rule_table(sec, horizons=HORIZONS, multipliers=(1.0, 0.1), batch_sizes=None):
    """T' of DP-NAG-opt and DP-MASG-opt under both horizon rules (public planning only)."""
    n = sec.U.shape[0]
    rows = []
    for m in batch_sizes or (n, 1000):
        for c in multipliers:
            for name in ("DP-NAG-opt", "DP-MASG-opt"):
                for rule in HORIZON_RULES:
                    rows.append({"m": m, "c": c, "algorithm": name, "rule": rule, "horizons": [
                        _plan(name, sec, T=T, m=m, c=c, epsilon=1.0, convention="paper",
                              constants="reference_code", horizon_rule=rule).horizon
                        for T in horizons]})
    return rows


# ---------------------------------------------------------------------------
# theory figures
# ---------------------------------------------------------------------------


def fig1_table():
    """Min over T ∈ 1..250 of Fig. 1's log-bound ([CODE]'s ρ and eq. 3.18's)."""
    horizons = np.arange(1, 251)
    rows = []
    for cw in (1e-4, 1e-2):
        for alpha in (0.1, 0.5, 1.0):
            beta_opt = (1 - math.sqrt(alpha * 0.1)) / (1 + math.sqrt(alpha * 0.1))
            for beta in (0.0, 0.3, 0.7, beta_opt):
                entry = {"c_w": cw, "alpha": alpha, "beta": beta}
                for rate in ("nag_reference", "hb"):
                    curve = fig1_log_bound(horizons, alpha, beta, cw, rate=rate)
                    k = int(np.argmin(curve))
                    entry[rate] = (float(curve[k]), int(horizons[k]))
                rows.append(entry)
    return rows


def fig2_profiles(stage_counting="reference_fig2"):
    """b_t n ε / S1 of DP-MASG-opt for K = 2..5 stages (μ = 1, L = 20, n1 = 13, C = 10)."""
    from scipy.special import logsumexp

    profiles = {}
    for K in (2, 3, 4, 5):
        s = masg_schedule(10_000, 20.0, 1.0, n1_rounding="floor")
        T = int(s["stage_ends"][K - 1])
        log_a, _ = log_bound_coefficients(s["step_sizes"][:T], s["stages"][:T], 20.0, 1.0,
                                              "reference_code", s["stage_ends"][:K],
                                              stage_counting)
        profiles[K] = np.exp(logsumexp(log_a / 3.0) - log_a / 3.0)
    return profiles


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------


def _fmt(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return f"{v:.3g}"


def write_report(out_dir, grid, sec, *, runs, horizons, batch_sizes, elapsed, quick,
                 seed_results=None, subsampled=None, seed_runs=None, figures=True, notes=()):
    """Write ``seed002.md``, ``seed002.json`` and PNG figures (when matplotlib is available).

    ``seed_results`` (:func:`run_data_seeds`) and ``subsampled`` (a grid of
    the -opt variants with ``horizon_rule="subsampled"``) add sections;
    ``notes`` are extra paragraphs placed after the header.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n = sec.U.shape[0]
    lines = [
        "# Seed 002 reproduction (DP accelerated methods)",
        "",
        f"Mode: {'quick' if quick else 'full'}; {runs} runs per cell; run time {elapsed:.0f} s "
        "(sum over the units).",
        f"Data: n = {n}, d = {sec.U.shape[1]}, L = {sec.smoothness:.6f}, μ = {sec.strong_convexity},",
        f"F* = {sec.f_star:.6f}, F(x0) − F* = {sec.objective(sec.x0) - sec.f_star:.2f}; ε = 1 (nominal).",
        "",
        "Cells: mean final error F(x_T) − F* (x_T' for -opt) over the runs; in brackets [REPL] the",
        "spec's replication (section 5.6) and {FIG} the published figures (section 5.5).",
        "The -opt horizon uses the authors' bound constants in both conventions.",
        "",
    ]
    for note in notes:
        lines += [note, ""]
    conventions = sorted({k[0] for k in grid}, key=CONVENTIONS.index)
    multipliers = sorted({k[2] for k in grid}, reverse=True)
    for conv in conventions:
        for m in batch_sizes:
            for c in multipliers:
                lines += [f"## noise_convention = {conv}, m = {m}, c = {c}", "",
                          "| algorithm | " + " | ".join(f"T={T}" for T in horizons)
                          + f" | T' | realized ε (T={horizons[-1]}) |",
                          "|---|" + "---|" * (len(horizons) + 2)]
                for name in ALGORITHMS:
                    cells, horizon, eps = [], "", ""
                    for T in horizons:
                        cell = grid.get((conv, m, c, name, T))
                        if cell is None:
                            cells.append("")
                            continue
                        j = HORIZONS.index(T)
                        repl = REPL.get((conv, m, c), {}).get(name)
                        fig = FIG.get((m, c), {}).get(name) if conv == "reference_code" else None
                        text = _fmt(cell["final"])
                        if repl:
                            text += f" [{_fmt(repl[j])}]"
                        if fig and fig[j]:
                            text += f" {{{fig[j]}}}"
                        cells.append(text)
                        horizon = str(cell["horizon"]) if "opt" in name else ""
                        eps = f"{cell['epsilon']:.4f}"
                    lines.append(f"| {name} | " + " | ".join(cells) + f" | {horizon} | {eps} |")
                lines.append("")
    lines += ["## Claims of section 5.4 (decidable from the cells that ran)", ""]
    lines += runner.claims_table(check_claims(grid, n), ("claim", "held"), yes="PASS", no="FAIL")
    lines += ["", "## Fig. 1: min over T of the log-bound (value @ T)", "",
              "| c_w | α | β | [CODE] ρ | eq. 3.18 ρ |", "|---|---|---|---|---|"]
    for row in fig1_table():
        a, b = row["nag_reference"], row["hb"]
        lines.append(f"| {row['c_w']:g} | {row['alpha']:g} | {row['beta']:.4f} | "
                     f"{a[0]:.2f} @ {a[1]} | {b[0]:.2f} @ {b[1]} |")
    lines += ["", "## Fig. 2: b_t n ε / S1 (authors' stage counting)", "",
              "| K | T | b_1 | b_13 | b_14 | b_T | min |", "|---|---|---|---|---|---|---|"]
    for K, b in fig2_profiles().items():
        lines.append(f"| {K} | {b.size} | {b[0]:.1f} | {b[12]:.1f} | {b[13]:.1f} | {b[-1]:.1f} | "
                     f"{b.min():.1f} |")
    lines += _horizon_rule_lines(sec, horizons, batch_sizes, subsampled, grid)
    if seed_results:
        lines += _data_seed_lines(seed_results, seed_runs)
    written = _write_figures(out_dir, grid, n) if figures else []
    if written:
        lines += ["", "Figures: " + ", ".join(written)]
    elif not figures:
        lines += ["", "Figures: not requested."]
    else:
        lines += ["", "Figures: not written (matplotlib is not installed; `pip install fastdp[plot]`)."]
    path = out_dir / "seed002.md"
    path.write_text("\n".join(lines) + "\n")
    _write_json(out_dir / "seed002.json", grid, sec, runs=runs, elapsed=elapsed, quick=quick,
                seed_results=seed_results, subsampled=subsampled, seed_runs=seed_runs)
    return path


def _horizon_rule_lines(sec, horizons, batch_sizes, subsampled, grid):
    lines = ["", "## Horizon rule for the -opt variants (spec A5)", "",
             "T' for T = " + ", ".join(str(T) for T in horizons) + " under the paper's rule "
             "(eq. 4.6: n instead of m, no subsampling term; the default) and the "
             "subsampling-aware extension `horizon_rule=\"subsampled\"` (exact subsampled b_t "
             "and the σ_s²/2 Σ a_t term; authors' bound constants).", "",
             "| m | c | algorithm | paper rule | subsampled rule |", "|---|---|---|---|---|"]
    table = horizon_rule_table(sec, horizons, batch_sizes=batch_sizes)
    for paper, sub in zip(table[0::2], table[1::2]):
        lines.append(f"| {paper['m']} | {paper['c']} | {paper['algorithm']} | "
                     f"{', '.join(map(str, paper['horizons']))} | "
                     f"{', '.join(map(str, sub['horizons']))} |")
    if subsampled:
        lines += ["", "Mean final error with each rule (m = 1000; the subsampled rule's T' in "
                  "brackets):", "", "| convention | c | algorithm | T | paper rule | subsampled rule |",
                  "|---|---|---|---|---|---|"]
        for (conv, m, c, name, T), cell in sorted(subsampled.items()):
            base = grid.get((conv, m, c, name, T))
            lines.append(f"| {conv} | {c} | {name} | {T} | "
                         f"{_fmt(base['final']) if base else ''} [{base['horizon'] if base else ''}] | "
                         f"{_fmt(cell['final'])} [{cell['horizon']}] |")
    return lines


def _data_seed_lines(seed_results, seed_runs):
    lines = ["", "## Other data seeds (spec C9)", "",
             f"The generator of section 5.3 with other draws (U from RandomState(seed), w from "
             f"default_rng(w_seed)); {seed_runs} runs per cell, final errors only.", "",
             "| seed, w_seed | selection | negatives | F* | F(x0) − F* | L | claims held |",
             "|---|---|---|---|---|---|---|"]
    for res in seed_results:
        held = sum(h for _, h in res["claims"])
        lines.append(f"| {res['seed']}, {res['w_seed']} | {res.get('selection', '')} | "
                     f"{100 * res['negatives']:.2f}% | "
                     f"{res['f_star']:.4f} | {res['initial_gap']:.2f} | {res['smoothness']:.4f} | "
                     f"{held}/{len(res['claims'])} |")
    texts = [t for t, _ in seed_results[0]["claims"]]
    lines += ["", "| claim | " + " | ".join(f"{r['seed']},{r['w_seed']}" for r in seed_results)
              + " |", "|---|" + "---|" * len(seed_results)]
    for i, text in enumerate(texts):
        lines.append(f"| {text} | " + " | ".join(
            "PASS" if r["claims"][i][1] else "FAIL" for r in seed_results) + " |")
    return lines


def _cell_json(cell):
    """A grid cell as JSON: arrays as lists, curves to 6 significant digits."""
    return {k: ([float(f"{x:.6g}") for x in v.tolist()] if isinstance(v, np.ndarray)
                and v.dtype.kind == "f" else v.tolist() if isinstance(v, np.ndarray) else v)
            for k, v in cell.items()}


def _key(key):
    return "|".join(str(part) for part in key)


def _write_json(path, grid, sec, *, runs, elapsed, quick, seed_results, subsampled, seed_runs):
    payload = {
        "spec": "002", "mode": "quick" if quick else "full", "runs": runs,
        "elapsed_seconds": elapsed, "data": {"n": int(sec.U.shape[0]), "d": int(sec.U.shape[1]),
                                             **data_summary(sec)},
        "cells": {_key(k): _cell_json(v) for k, v in grid.items()},
        "claims": [{"claim": t, "holds": h} for t, h in check_claims(grid, sec.U.shape[0])],
        "horizon_rules": horizon_rule_table(sec),
        "subsampled_horizon_cells": {_key(k): _cell_json(v) for k, v in (subsampled or {}).items()},
        "data_seeds": [{**{k: v for k, v in r.items() if k != "finals"},
                        "claims": [{"claim": t, "holds": h} for t, h in r["claims"]],
                        "finals": {_key(k): v for k, v in r["finals"].items()}}
                       for r in seed_results or []],
        "data_seed_runs": seed_runs,
    }
    path.write_text(json.dumps(payload, indent=1, allow_nan=False))


def _write_figures(out_dir, grid, n):
    plt = runner.pyplot()
    if plt is None:
        return []
    written = []
    colours = {100: "green", 200: "black", 500: "blue", 1000: "red"}
    for conv in sorted({k[0] for k in grid}):
        for m in sorted({k[1] for k in grid}, reverse=True):
            multipliers = sorted({k[2] for k in grid if k[0] == conv and k[1] == m})
            fig, axes = plt.subplots(2 * len(multipliers), 3,
                                     figsize=(12, 3.2 * 2 * len(multipliers)), squeeze=False)
            order = ("DP-GD", "DP-NAG", "DP-MASG", "DP-HB", "DP-NAG-opt", "DP-MASG-opt")
            for h, c in enumerate(multipliers):
                for i, name in enumerate(order):
                    ax = axes[2 * h + i // 3, i % 3]
                    for T, colour in colours.items():
                        cell = grid.get((conv, m, c, name, T))
                        if cell is None:
                            continue
                        t = cell["steps"]
                        ax.semilogy(t, np.maximum(cell["mean"], 1e-12), color=colour, label=f"T={T}")
                    ax.set_title(f"{name}, c={c}", fontsize=9)
                    ax.set_ylim(1e-3, 1e2)
                    ax.grid(True, which="major", alpha=0.3)
                    if i == 0 and h == 0 and ax.get_legend_handles_labels()[0]:
                        ax.legend(fontsize=7)
            fig.suptitle(f"F(x_t) − F*, m = {m} ({'Fig. 3' if m == n else 'Fig. 4'}), "
                         f"noise_convention = {conv}")
            name = f"seed002_fig{'3' if m == n else '4'}_{conv}.png"
            runner.save_figure(fig, out_dir / name, dpi=90)
            written.append(name)
    fig, ax = plt.subplots(figsize=(7, 4))
    for K, b in fig2_profiles().items():
        ax.plot(np.arange(1, b.size + 1), b, label=f"K={K}")
    ax.set_xlabel("t")
    ax.set_ylabel("b_t n ε / S1")
    ax.legend()
    ax.set_title("Fig. 2: optimal noise scales of DP-MASG-opt")
    runner.save_figure(fig, out_dir / "seed002_fig2.png", dpi=90)
    written.append("seed002_fig2.png")
    fig, axes = plt.subplots(3, 3, figsize=(12, 9))
    betas = np.arange(0.0, 1.0, 0.01)
    horizons = np.arange(1, 251)
    for j, alpha in enumerate((0.1, 0.5, 1.0)):
        axes[0, j].plot(betas, [rho_nag_reference(alpha, b, 0.1, 1.0) for b in betas], label="[CODE] ρ")
        axes[0, j].plot(betas, [rho_hb(alpha, b, 0.1, 1.0) for b in betas], "--", label="eq. 3.18")
        axes[0, j].set_title(f"ρ vs β, α={alpha}", fontsize=9)
        axes[0, j].legend(fontsize=7)
        beta_opt = (1 - math.sqrt(alpha * 0.1)) / (1 + math.sqrt(alpha * 0.1))
        for row, cw in ((1, 1e-4), (2, 1e-2)):
            for beta in (0.0, 0.3, 0.7, beta_opt):
                axes[row, j].plot(horizons, fig1_log_bound(horizons, alpha, beta, cw),
                                  label=f"β={beta:.3g}")
            axes[row, j].set_ylim(-10, 10)
            axes[row, j].set_title(f"log-bound, α={alpha}, c_w={cw:g}", fontsize=9)
            axes[row, j].legend(fontsize=7)
    runner.save_figure(fig, out_dir / "seed002_fig1.png", dpi=90)
    written.append("seed002_fig1.png")
    return written


CHECKPOINT_NAME = "seed002_units.jsonl"


def plan_units(*, n, quick=False, data_seeds=0, subsampled_horizon=False):
    """Unit keys in execution order.

    ``("grid", convention, m, c, algorithm, T)``: one cell of the main grid;
    ``("subsampled", ...)``: one -opt cell at m = 1000 with the subsampling-aware
    horizon rule; ``("data_seed", selection, U seed, w seed)``: the grid on
    another draw of the data (spec C9).
    """
    horizons = (100,) if quick else HORIZONS
    keys = [("grid",) + key for key in grid_plan(batch_sizes=(n, 1000), horizons=horizons)]
    if subsampled_horizon:
        keys += [("subsampled",) + key for key in grid_plan(
            batch_sizes=(1000,), horizons=horizons, algorithms=("DP-NAG-opt", "DP-MASG-opt"))]
    keys += [("data_seed", "unselected") + pair for pair in DATA_SEEDS[:data_seeds]]
    keys += [("data_seed", "gap-matched") + pair for pair in GAP_MATCHED_SEEDS[:data_seeds]]
    return keys


def _cell_from_record(cell):
    """A grid cell from its JSON record (arrays rebuilt; floats are exact in JSON)."""
    out = dict(cell)
    out["steps"] = np.asarray(cell["steps"], dtype=np.int64)
    for name in ("mean", "q10", "q90", "finals"):
        out[name] = np.asarray(cell[name], dtype=np.float64)
    return out


def _seed_result_from_record(result):
    out = dict(result)
    out["claims"] = [tuple(c) for c in result["claims"]]
    out["finals"] = {tuple(key): value for key, value in result["finals"]}
    return out


def run_unit(key, sec, *, runs, n, horizons, eval_every, seed_runs):
    """The JSON record of one unit (see :func:`plan_units`)."""
    record = {}
    if key[0] in ("grid", "subsampled"):
        conv, m, c, name, T = key[1:]
        cell = run_cell(name, sec, T=T, m=m, c=c, runs=runs, convention=conv,
                        eval_every=eval_every,
                        horizon_rule="subsampled" if key[0] == "subsampled" else "paper")
        record["cell"] = runner.jsonable(cell)
    else:
        result = run_data_seeds([tuple(key[2:])], n=n, runs=seed_runs, horizons=horizons,
                                selection=key[1])[0]
        result["finals"] = [[list(k), v] for k, v in result["finals"].items()]
        record["result"] = runner.jsonable(result)
    return record


def _describe(key):
    if key[0] == "data_seed":
        return f"data seed {key[2]}, {key[3]} ({key[1]})"
    conv, m, c, name, T = key[1:]
    return f"{key[0]} {conv} m={m} c={c} {name} T={T}"


def _summarize(record):
    if "cell" in record:
        return f"T'={record['cell']['horizon']} final={record['cell']['final']:.4g}"
    held = sum(h for _, h in record["result"]["claims"])
    return f"{held}/{len(record['result']['claims'])} claims hold"


def parts_from_units(units):
    """``(grid, subsampled, seed_results)`` for :func:`write_report` from unit records."""
    grid, subsampled, seed_results = {}, {}, []
    for key, record in units.items():
        if key[0] == "grid":
            grid[key[1:]] = _cell_from_record(record["cell"])
        elif key[0] == "subsampled":
            subsampled[key[1:]] = _cell_from_record(record["cell"])
        else:
            seed_results.append(_seed_result_from_record(record["result"]))
    return grid, subsampled or None, seed_results or None


def main(argv=None):
    """Command line: ``python -m fastdp.experiments.seed002 [--quick] [--out DIR]``; returns 0."""
    parser = runner.base_parser(__doc__.splitlines()[0], name="seed002",
                                quick_help="T = 100 only, 2 runs (under a minute)")
    parser.add_argument("--runs", type=int, default=None, help="runs per cell (default 20; quick 2)")
    parser.add_argument("--n", type=int, default=100_000, help="number of records")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="evaluate F every k-th iterate (default 10, as the spec's replication)")
    parser.add_argument("--data-seeds", type=int, default=None,
                        help="extra data seeds per set (unselected, gap-matched) to check the "
                             "claims on (0-3; default 3; quick 0)")
    parser.add_argument("--seed-runs", type=int, default=5, help="runs per cell on the extra seeds")
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    args = parser.parse_args(argv)
    try:
        reproduce(args.out, quick=args.quick, runs=args.runs, n=args.n,
                  eval_every=args.eval_every, data_seeds=args.data_seeds,
                  seed_runs=args.seed_runs, figures=not args.no_figures, verbose=True,
                  resume=args.resume, budget_min=args.budget_min,
                  checkpoint=runner.checkpoint_path(args, "seed002"),
                  report_only=args.report_only)
    except ValidationError as exc:
        parser.error(str(exc))
    return 0


def _single_threaded_blas():
    """Limit BLAS to one thread (the runs are many small products; threads only contend)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def reproduce(out, *, quick=False, runs=None, n=100_000, eval_every=None, section=None,
              data_seeds=None, seed_runs=5, subsampled_horizon=None, figures=True, verbose=False,
              resume=False, budget_min=None, checkpoint=None, report_only=False):
    """Run the units (:func:`plan_units`) into the checkpoint and write the report; returns the grid.

    ``quick``: T = 100 only, 2 runs, F every 10th step, no extra data
    seeds.  Full: T ∈ {100, 200, 500, 1000}, 20 runs, F at k <= 10, every
    ``eval_every``-th (default 10) k and T'; ``data_seeds`` (default 3) more
    data sets from :data:`DATA_SEEDS` and as many from
    :data:`GAP_MATCHED_SEEDS`, with ``seed_runs`` runs per cell (spec C9); and the -opt
    variants at m = 1000 with the subsampling-aware horizon rule
    (``subsampled_horizon``, default on in full mode; spec A5).
    ``section`` reuses a :class:`Section5Problem` (built from
    :func:`make_synthetic_logreg` when None); ``figures=False`` skips the
    PNGs. The checkpoint (default ``OUT/seed002_units.jsonl``) keeps every
    finished unit: ``resume`` continues it, ``budget_min`` starts no unit
    after that many minutes (the report then holds the cells that ran) and
    ``report_only`` writes the report from it without running anything.
    """
    if section is None:
        section = Section5Problem(*make_synthetic_logreg(n=n))
    n = section.U.shape[0]
    horizons = (100,) if quick else HORIZONS
    runs = runs or (2 if quick else 20)
    if data_seeds is None:
        data_seeds = 0 if quick else 3
    if not 0 <= data_seeds <= len(DATA_SEEDS):
        raise ValidationError(f"data_seeds must be between 0 and {len(DATA_SEEDS)}; got {data_seeds}")
    if subsampled_horizon is None:
        subsampled_horizon = not quick
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    settings = dict(quick=bool(quick), runs=runs, n=n, eval_every=eval_every or 10,
                    data_seeds=data_seeds, seed_runs=seed_runs,
                    subsampled_horizon=bool(subsampled_horizon))
    plan = plan_units(n=n, quick=quick, data_seeds=data_seeds,
                      subsampled_horizon=subsampled_horizon)
    if report_only:
        if runner.read_settings(checkpoint) != runner.jsonable(settings):
            raise ValidationError(f"{checkpoint} holds no units of these settings ({settings}): "
                                  "run them first, or pass the options of the run")
        found = runner.read_units(checkpoint, runner.unit_key, label="seed002 unit")
        units = {key: found[key] for key in plan if key in found}
    else:
        with _single_threaded_blas():
            _, units = runner.run_units(
                checkpoint, plan,
                lambda key, done: run_unit(key, section, runs=runs, n=n, horizons=horizons,
                                           eval_every=eval_every or 10, seed_runs=seed_runs),
                resume=resume, budget_min=budget_min, settings=settings,
                describe=_describe, summarize=_summarize, log=runner.log_line if verbose else None,
                label="seed002 unit")
    grid, subsampled, seed_results = parts_from_units(units)
    path = write_report(out, grid, section, runs=runs, horizons=horizons,
                        batch_sizes=(n, 1000),
                        elapsed=sum(r["seconds"] for r in units.values()),
                        quick=quick, seed_results=seed_results, subsampled=subsampled,
                        seed_runs=seed_runs, figures=figures)
    if verbose:
        print(f"wrote {path}")
    return grid


if __name__ == "__main__":
    main()
