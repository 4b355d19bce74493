"""Robustness of the seed-002 results over data seeds (spec C9), the subsampling-aware horizon (A5), and the theory figures."""

import functools
import math

import numpy as np

from fastdp.experiments.seed002.protocol import (
    HORIZONS,
    Section5Problem,
    _plan,
    check_claims,
    make_synthetic_logreg,
    run_grid,
)
from fastdp.solvers.accelerated import (
    HORIZON_RULES,
    fig1_log_bound,
    log_bound_coefficients,
    masg_schedule,
)


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
    """Min over T ∈ 1..250 of Fig. 1's log-bound ([CODE]'s ρ and eq. 3.18's).

    The table depends on constants only: computed once per process, a fresh
    copy of its rows returned on each call.
    """
    return [dict(row) for row in _fig1_rows()]


@functools.lru_cache(maxsize=1)
def _fig1_rows():
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
    return tuple(rows)


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
