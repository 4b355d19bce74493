"""Reproduction of seed 001 (Han, Topcu, Pappas 2014): Figs. 1-3 and an epsilon sweep.

Run ``python -m fastdp.experiments.seed001 --out DIR`` (spec 001 section 4.2
defaults: d = 10, m = 20, c = 1, b_max = 1, eps = 0.1, 1000 runs per point,
Metropolis 5000 steps with covariance 0.1 c I started at the centre, DP
subgradient k = 100 with constant steps R/(G sqrt(k)) from the centre; a few
minutes on two cores) or ``--quick`` (100 runs, small grids, well under a
minute). Writes ``seed001.md`` (tables R1-R4, the spec's pilot numbers next
to ours, and which of the paper's claims held), ``seed001.json`` (every
number and the configuration) and PNG figures when matplotlib is installed.
One unit per point of a sweep (:func:`plan_units`, run by
:mod:`fastdp.experiments.runner`): ``OUT/seed001_units.jsonl`` keeps the
finished points, ``--resume`` continues it (the random stream included, so
the numbers are those of an uninterrupted run), ``--budget-min M`` stops
starting points after M minutes and ``--report-only`` rewrites the report.

The paper gives no numbers, only qualitative claims (spec 001, section 4.1);
the instance is the spec's: ``rng = default_rng(0)``, A = rng.standard_normal((200, d)),
b = rng.standard_normal(200), first m rows, box [-c, c]^d.

Privacy: each run of each mechanism is an epsilon-DP release of b; the
objective values reported here read b (non-private diagnostics, as in the
paper). Data-independent baselines (f at the centre, B3, and the subgradient
method with uniform selection, B4) are reported next to every mechanism.
"""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.solvers.piecewise_affine import (
    Box,
    PiecewiseAffineProblem,
    bounds,
    dp_subgradient,
    exponential_mechanism,
    importance_estimates,
    offset_perturbation,
    rejection_sample,
    solution_perturbation,
    subgradient_method,
)

__all__ = [
    "Config",
    "quick_config",
    "make_problem",
    "evaluate_point",
    "sweep_c",
    "sweep_m",
    "sweep_k",
    "sweep_epsilon",
    "plan_units",
    "results_from_units",
    "report_from_units",
    "check_claims",
    "pilot_agreement",
    "run_all",
    "write_report",
    "main",
]

#: spec 001 section 4.4 pilot numbers (mean objective, 1000 runs; NOT from the paper).
PILOT_C = {  # c: (f_opt, f0, M_P, M_S raw, M_S proj, M_E MCMC, M_E exact, DP-SG last, DP-SG avg, eps->0)
    0.1: (1.240, 2.125, 2.025, 352, 2.134, 2.121, 2.124, 1.680, 1.761, 1.677),
    0.2: (0.662, 2.125, 2.084, 705, 2.222, 2.132, None, 1.472, 1.446, 1.467),
    0.5: (0.200, 2.125, 2.833, 1762, 3.234, 2.402, 2.395, 1.957, 1.772, 1.996),
    1.0: (-0.190, 2.125, 4.969, 3524, 5.771, 3.465, 3.467, 3.056, 2.627, 3.122),
    2.0: (-0.329, 2.125, 9.828, 7049, 11.35, 6.266, 6.254, 5.557, 4.482, 5.620),
    5.0: (-0.654, 2.125, 25.11, 17620, 28.47, 14.56, 14.86, 13.37, 10.32, 13.48),
    10.0: (-1.117, 2.125, 50.37, 35250, 57.12, 27.70, 27.86, 26.59, 20.20, 26.74),
}
PILOT_M = {
    5: (-2.022, 0.419, 4.103, 2112, 2.857, 1.406, 1.415, 1.134, 1.148, 1.122),
    10: (-1.342, 0.419, 4.736, 2955, 4.011, 2.031, None, 1.429, 0.738, 1.326),
    20: (-0.190, 2.125, 4.969, 3524, 5.771, 3.465, 3.467, 3.056, 2.627, 3.122),
    50: (1.206, 2.125, 7.312, 4562, 7.573, 4.675, None, 4.865, 3.976, 4.830),
    100: (1.562, 2.125, 7.917, 4863, 8.065, 5.004, None, 4.865, 3.820, 4.864),
    200: (1.781, 2.221, 9.060, 5342, 9.012, 5.596, 5.612, 6.027, 4.580, 5.991),
}
PILOT_COLUMNS = ("f_opt", "center", "M_P", "M_S_raw", "M_S_proj", "M_E_mcmc", "M_E_exact",
                 "DPSG_last", "DPSG_avg", "uniform_last")


@dataclasses.dataclass
class Config:
    """Every setting of the reproduction (spec 001 section 4.2 defaults)."""

    d: int = 10
    m: int = 20
    c: float = 1.0
    b_max: float = 1.0
    epsilon: float = 0.1
    n_runs: int = 1000
    n_steps: int = 5000
    eta: float = 0.1
    proposal_scale: str = "paper_cov"
    n_iter: int = 100
    pool: int = 200
    instance_seed: int = 0
    seed: int = 2014
    n_importance: int = 400_000
    max_exact_C: float = 1e4
    max_independence_W: float = 1e3
    independence_delta: float = 1e-10
    c_grid: tuple = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
    m_grid: tuple = (5, 10, 20, 50, 100, 200)
    k_grid: tuple = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    eps_grid: tuple = (0.01, 0.1, 1.0, 10.0)


def quick_config(**overrides):
    """Small settings for smoke runs and tests."""
    base = dict(n_runs=100, n_importance=50_000, c_grid=(0.1, 1.0, 10.0), m_grid=(5, 20, 200),
                k_grid=(10, 100, 1000), eps_grid=(0.1, 10.0))
    base.update(overrides)
    return Config(**base)


def make_problem(cfg, m=None, c=None):
    """The spec's fixed instance: first m pieces of a 200-piece pool from default_rng(seed)."""
    m = cfg.m if m is None else m
    c = cfg.c if c is None else c
    rng = np.random.default_rng(cfg.instance_seed)
    A = rng.standard_normal((cfg.pool, cfg.d))
    b = rng.standard_normal(cfg.pool)
    return PiecewiseAffineProblem(A[:m], b[:m], cfg.b_max, Box.cube(cfg.d, c))


def _stats(values):
    values = np.asarray(values, dtype=np.float64)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return {"mean": float(values.mean()), "std": std, "sem": std / math.sqrt(values.size)}


def evaluate_point(cfg, prob, epsilon, rng, *, exact=True):
    """Mean objective (and std, SEM) of every mechanism and baseline at one setting.

    Returns a dict name -> {"mean", "std", "sem"} plus scalar entries
    ``f_opt``, ``G``, ``C0`` (importance sampling), ``acceptance``.
    """
    n = cfg.n_runs
    f_opt = prob.solve()[1]
    out = {"f_opt": f_opt, "G": prob.lipschitz, "center": float(prob.value(prob.center()))}
    value = prob.value
    res = offset_perturbation(prob, epsilon, n_runs=n, random_state=rng)
    out["M_P"] = _stats(value(res.x))
    out["M_P_noise_sup"] = _stats(res.diagnostics["noise_sup_norm_nonprivate"])
    for name, kw in (("M_S_raw", dict(paper_sqrt_d=True)),
                     ("M_S_proj", dict(paper_sqrt_d=True, project=True)),
                     ("M_S_tight_proj", dict(project=True))):
        res = solution_perturbation(prob, epsilon, n_runs=n, random_state=rng, **kw)
        out[name] = _stats(value(res.x))
    # the paper's sampler, asked for by name: its output carries no privacy guarantee
    # (NoGuaranteeEvent); it is run to reproduce the paper's numbers, never released
    res = exponential_mechanism(prob, epsilon, sampler="metropolis", n_steps=cfg.n_steps,
                                eta=cfg.eta, proposal_scale=cfg.proposal_scale, n_runs=n,
                                random_state=rng)
    out["M_E_mcmc"] = _stats(value(res.x))
    out["acceptance"] = float(res.diagnostics["acceptance_rate_nonprivate"].mean())
    beta = epsilon / (2 * cfg.b_max)
    est = importance_estimates(prob, beta, cfg.n_importance, rng)
    out["C0"], out["C0_se"] = est["C0"], est["C0_se"]
    out["M_E_importance"] = {"mean": est["mean_f"], "std": math.nan, "sem": est["mean_f_se"]}
    out["M_E_exact"] = None
    if exact and est["C0"] < cfg.max_exact_C:
        X, _ = rejection_sample(prob, beta, n, rng)
        out["M_E_exact"] = _stats(value(X))
    # independence Metropolis: fixed running time and a public delta bound,
    # run where the public weight bound W = exp(beta G R) keeps it cheap
    out["M_E_indep"], out["M_E_indep_delta"], out["M_E_indep_steps"] = None, None, None
    if math.exp(min(700.0, beta * prob.lipschitz * prob.diameter())) <= cfg.max_independence_W:
        res = exponential_mechanism(prob, epsilon, sampler="independence",
                                    target_delta=cfg.independence_delta, n_runs=n,
                                    max_expected_proposals=cfg.max_independence_W, random_state=rng)
        out["M_E_indep"] = _stats(value(res.x))
        out["M_E_indep_delta"] = res.delta / n
        out["M_E_indep_steps"] = res.params["n_steps"]
    for output in ("last", "average"):
        res = dp_subgradient(prob, epsilon, n_iter=cfg.n_iter, output=output, n_runs=n,
                             random_state=rng)
        key = "DPSG_last" if output == "last" else "DPSG_avg"
        out[key] = _stats(value(res.x))
        base = res.baselines["uniform_subgradient"]
        out["uniform_last" if output == "last" else "uniform_avg"] = _stats(value(base))
    return out


def point_c(cfg, c, rng):
    """One point of R2 (Fig. 2): every mechanism at box size ``c`` (m fixed)."""
    return evaluate_point(cfg, make_problem(cfg, c=c), cfg.epsilon, rng)


def point_m(cfg, m, rng):
    """One point of R3 (Fig. 3): every mechanism with the first ``m`` pieces (c fixed)."""
    return evaluate_point(cfg, make_problem(cfg, m=m), cfg.epsilon, rng)


def point_epsilon(cfg, eps, rng):
    """One point of R4: mean gaps against the utility bounds at ``eps`` (c, m fixed)."""
    prob = make_problem(cfg)
    d, m, R, G = cfg.d, prob.n_pieces, prob.diameter(), prob.lipschitz
    point = evaluate_point(cfg, prob, eps, rng)
    f_opt = point["f_opt"]
    steps = np.full(cfg.n_iter, R / (G * math.sqrt(cfg.n_iter)))
    C0 = point["C0"]
    point["bounds"] = {
        "thm17_M_S": bounds.solution_perturbation_bound(G, d, R, eps, paper_sqrt_d=True),
        "thm21_M_E": bounds.exponential_mechanism_bound(C0, cfg.b_max, eps),
        "D2_M_E": bounds.exponential_mechanism_log_bound(C0, cfg.b_max, eps),
        "D1_M_E": bounds.exponential_mechanism_dimension_bound(d, cfg.b_max, eps),
        "thm24_DPSG": bounds.subgradient_bound(R, G, steps, cfg.b_max, math.log(m), eps),
        "D3_M_P": bounds.offset_perturbation_bound(m, cfg.b_max, eps),
    }
    point["gaps"] = {k: point[k]["mean"] - f_opt
                     for k in ("M_P", "M_S_raw", "M_S_proj", "M_E_mcmc", "DPSG_avg", "DPSG_last")}
    if point["M_E_exact"] is not None:
        point["gaps"]["M_E_exact"] = point["M_E_exact"]["mean"] - f_opt
    return point


def point_k(cfg, k, rng):
    """One row of R1 (Fig. 1): DP and regular subgradient methods with ``k`` iterations."""
    prob = make_problem(cfg)
    R, G = prob.diameter(), prob.lipschitz
    start = np.tile(prob.center(), (cfg.n_runs, 1))
    rules = {"constant": lambda k: np.full(k, R / (G * math.sqrt(k))),
             "inverse": lambda k: (R / G) / np.arange(1, k + 1),
             "inverse_sqrt": lambda k: (R / G) / np.sqrt(np.arange(1, k + 1))}
    row = {}
    for rule, make_steps in rules.items():
        steps = make_steps(k)
        res = dp_subgradient(prob, cfg.epsilon, n_iter=k, step=steps, output="last",
                             n_runs=cfg.n_runs, random_state=rng)
        row[f"DPSG_last_{rule}"] = _stats(prob.value(res.x))
        last, _, traj = subgradient_method(prob, beta=math.inf, n_iter=k, steps=steps,
                                           x1=start[:1], project=True, rng=rng,
                                           keep_trajectory=True)
        row[f"regular_last_{rule}"] = float(prob.value(last)[0])
        row[f"regular_best_{rule}"] = float(prob.value(traj[0]).min())
    row["k_star_D5"] = bounds.subgradient_optimal_iterations(
        R, G, cfg.b_max, math.log(prob.n_pieces), cfg.epsilon)
    return row


#: sweep name -> (grid field of Config, function of one point)
SWEEPS = {"k": ("k_grid", point_k), "c": ("c_grid", point_c), "m": ("m_grid", point_m),
          "eps": ("eps_grid", point_epsilon)}


def _sweep(name, cfg, rng):
    field, point = SWEEPS[name]
    return {value: point(cfg, value, rng) for value in getattr(cfg, field)}


def sweep_c(cfg, rng):
    """R2 (Fig. 2): objective against the box size c (m fixed)."""
    return _sweep("c", cfg, rng)


def sweep_m(cfg, rng):
    """R3 (Fig. 3): objective against the number of pieces m (nested pieces, c fixed)."""
    return _sweep("m", cfg, rng)


def sweep_epsilon(cfg, rng):
    """R4: mean gaps against the utility bounds for several epsilon (c, m fixed)."""
    return _sweep("eps", cfg, rng)


def sweep_k(cfg, rng):
    """R1 (Fig. 1): DP and regular subgradient methods against the iteration count k."""
    return _sweep("k", cfg, rng)


def _mean(point, key):
    entry = point.get(key)
    return None if entry is None else entry["mean"]


def _claim(text, held, detail):
    return {"claim": text, "held": bool(held), "detail": detail}


def pilot_agreement(results, n_se=3.0):
    """Spec R2/R3: our means against the spec's pilot numbers (section 4.4).

    A value agrees when |ours - pilot| <= n_se * sqrt(2) * SEM (two
    independent estimates with about equal SEM; the pilot's own SEM is not
    stored). Deterministic columns (f_opt, f(0)) must match to 3 decimals.
    Returns (n_agree, n_total, list of disagreements).
    """
    agree, total, misses = 0, 0, []
    for name, pilot in (("c", PILOT_C), ("m", PILOT_M)):
        for key, point in (results.get(name) or {}).items():
            if key not in pilot:
                continue
            row = pilot[key]
            for col, ref in (("f_opt", row[0]), ("center", row[1])):
                total += 1
                if abs(point[col] - ref) <= 6e-4:
                    agree += 1
                else:
                    misses.append(f"{name}={key:g} {col}: {point[col]:.4f} vs {ref}")
            for col, ref in zip(PILOT_COLUMNS[2:], row[2:]):
                ours = point.get(col)
                if ref is None or ours is None:
                    continue
                total += 1
                if abs(ours["mean"] - ref) <= n_se * math.sqrt(2) * ours["sem"]:
                    agree += 1
                else:
                    misses.append(f"{name}={key:g} {col}: {ours['mean']:.4g} ± {2 * ours['sem']:.2g} "
                                  f"vs pilot {ref:g}")
    return agree, total, misses


def check_claims(results):
    """Which of the paper's claims (spec 001 section 4.1/4.3) held in these runs."""
    claims = []
    rc, rm, rk = results.get("c"), results.get("m"), results.get("k")
    private = ("M_P", "M_S_proj", "M_E_mcmc", "DPSG_last")
    if rc:
        cs = sorted(rc)
        f_opts = [rc[c]["f_opt"] for c in cs]
        claims.append(_claim("f_opt is non-increasing in c (exact)",
                             all(a >= b - 1e-9 for a, b in zip(f_opts, f_opts[1:])),
                             ", ".join(f"{v:.3f}" for v in f_opts)))
        for key in private:
            vals = [_mean(rc[c], key) for c in cs]
            claims.append(_claim(f"{key}: mean objective eventually grows with c",
                                 vals[-1] > min(vals), ", ".join(f"{v:.3g}" for v in vals)))
        for key in ("DPSG_last", "M_E_mcmc"):
            a, b = rc[cs[0]][key], rc[cs[1]][key]
            claims.append(_claim(f"{key}: initial decrease in c",
                                 a["mean"] - b["mean"] > 2 * math.hypot(a["sem"], b["sem"]),
                                 f"c={cs[0]}: {a['mean']:.3f}, c={cs[1]}: {b['mean']:.3f}"))
        lowest = [all(rc[c]["DPSG_last"]["mean"] <= rc[c][k]["mean"] for k in private) for c in cs]
        claims.append(_claim("DP-SG has the lowest mean objective at every c", all(lowest),
                             f"lowest at {sum(lowest)} of {len(cs)} c values"))
        beats = [c for c in cs if all(rc[c]["center"] <= rc[c][k]["mean"] for k in private)]
        claims.append(_claim("[pilot] the 0-DP centre f(0) beats every private mechanism for c >= 1",
                             all(c in beats for c in cs if c >= 1), f"beats all at c in {beats}"))
    if rm:
        ms = sorted(rm)
        f_opts = [rm[m]["f_opt"] for m in ms]
        claims.append(_claim("f_opt is non-decreasing in m for nested pieces (exact)",
                             all(a <= b + 1e-9 for a, b in zip(f_opts, f_opts[1:])),
                             ", ".join(f"{v:.3f}" for v in f_opts)))
        for key in private:
            vals = [rm[m][key]["mean"] for m in ms]
            sems = [rm[m][key]["sem"] for m in ms]
            ok = all(b >= a - 2 * math.hypot(sa, sb)
                     for a, b, sa, sb in zip(vals, vals[1:], sems, sems[1:]))
            claims.append(_claim(f"{key}: monotone in m (within 2 SE)", ok,
                                 ", ".join(f"{v:.3g}" for v in vals)))
        best = [all(rm[m]["DPSG_last"]["mean"] <= rm[m][k]["mean"] for k in private) for m in ms]
        claims.append(_claim("DP-SG best at every m", all(best), f"best at {sum(best)} of {len(ms)}"))
    if rc or rm:
        points = list((rc or {}).values()) + list((rm or {}).values())
        same = [abs(p["DPSG_last"]["mean"] - p["uniform_last"]["mean"])
                <= 3 * math.hypot(p["DPSG_last"]["sem"], p["uniform_last"]["sem"]) for p in points]
        claims.append(_claim("[pilot] DP-SG at eps = 0.1 is indistinguishable from eps -> 0 "
                             "(uniform selection; within 3 SE)", all(same),
                             f"{sum(same)} of {len(points)} settings"))
    if rk:
        ks = sorted(rk)
        vals = [rk[k]["DPSG_last_constant"]["mean"] for k in ks]
        spread = (max(vals) - min(vals)) / abs(np.mean(vals))
        claims.append(_claim("DP-SG objective is robust in k (relative spread < 50%)", spread < 0.5,
                             ", ".join(f"k={k}: {v:.3f}" for k, v in zip(ks, vals))))
        reg = [rk[k]["regular_best_constant"] for k in ks]
        claims.append(_claim("regular SG (best iterate) decreases with k",
                             all(b <= a + 1e-9 for a, b in zip(reg[:-1], reg[1:])) or reg[-1] < reg[0],
                             ", ".join(f"{v:.3f}" for v in reg)))
    if rc or rm:
        agree, total, misses = pilot_agreement(results)
        claims.append(_claim("[spec R2/R3] the spec's pilot numbers are reproduced within 3 SE",
                             agree == total,
                             f"{agree} of {total} values agree"
                             + (f"; differ: {'; '.join(misses)}" if misses else "")))
        points = list((rc or {}).values()) + list((rm or {}).values())
        both = [p for p in points if p.get("M_E_exact") and p.get("M_E_mcmc")]
        same = [abs(p["M_E_mcmc"]["mean"] - p["M_E_exact"]["mean"])
                <= 3 * math.hypot(p["M_E_mcmc"]["sem"], p["M_E_exact"]["sem"]) for p in both]
        claims.append(_claim("[pilot] Metropolis (5000 steps) agrees with the exact sampler "
                             "(mean objective within 3 SE)", all(same),
                             f"{sum(same)} of {len(both)} settings"))
    if results.get("eps"):
        ok = []
        for eps, p in results["eps"].items():
            g, bnd = p["gaps"], p["bounds"]
            ok.append(g["M_S_raw"] <= bnd["thm17_M_S"] and g["M_P"] <= bnd["D3_M_P"]
                      and g["DPSG_avg"] <= bnd["thm24_DPSG"]
                      and g.get("M_E_exact", g["M_E_mcmc"]) <= min(bnd["D1_M_E"], bnd["D2_M_E"]))
        claims.append(_claim("empirical mean gaps respect Thm 17, D3, Thm 24 and D1/D2", all(ok),
                             f"{sum(ok)} of {len(ok)} epsilon values"))
    return claims


CHECKPOINT_NAME = "seed001_units.jsonl"


def plan_units(cfg, which=("k", "c", "m", "eps")):
    """Unit keys ``(sweep, value)`` in execution order: the points of each sweep in ``which``."""
    return [(name, value) for name in which for value in getattr(cfg, SWEEPS[name][0])]


def _summarize(record):
    point = record["point"]
    if "DPSG_last" in point:
        return f"DP-SG {point['DPSG_last']['mean']:.4g}, f_opt {point['f_opt']:.4g}"
    return f"DP-SG (constant steps) {point['DPSG_last_constant']['mean']:.4g}"


def _settings(cfg, which):
    return {"config": runner.jsonable(dataclasses.asdict(cfg)), "which": list(which)}


def _config(settings):
    return Config(**{k: tuple(v) if isinstance(v, list) else v
                     for k, v in settings["config"].items()})


def results_from_units(units, cfg, which=("k", "c", "m", "eps")):
    """``{sweep: {value: point}}`` of the complete sweeps, plus ``claims`` (:func:`check_claims`).

    A sweep some of whose points are missing (a run stopped by its time
    budget) is left out.
    """
    results = {}
    for name in which:
        keys = plan_units(cfg, (name,))
        if all(key in units for key in keys):
            results[name] = {key[1]: units[key]["point"] for key in keys}
    results["claims"] = check_claims(results)
    return results


def run_all(cfg, *, which=("k", "c", "m", "eps"), checkpoint=None, resume=False,
            budget_min=None, log=None):
    """Every point of the sweeps in ``which``, one unit each; returns the results.

    One random stream (``default_rng(cfg.seed)``) runs through the points in
    order. Each record keeps the stream's state after its point, so a resumed
    run (``checkpoint``, ``resume``; :func:`fastdp.experiments.runner.run_units`)
    continues the stream exactly where the checkpoint left it and gives the
    numbers of an uninterrupted run.
    """
    rng = np.random.default_rng(cfg.seed)
    plan = plan_units(cfg, which)
    previous = dict(zip(plan[1:], plan[:-1]))

    def run_unit(key, units):
        if key in previous and previous[key] in units:
            rng.bit_generator.state = units[previous[key]]["rng_state"]
        point = SWEEPS[key[0]][1](cfg, key[1], rng)
        return {"point": point, "rng_state": rng.bit_generator.state}

    _, units = runner.run_units(checkpoint, plan, run_unit, resume=resume,
                                budget_min=budget_min, settings=_settings(cfg, which),
                                describe=lambda key: f"{key[0]} = {key[1]:g}",
                                summarize=_summarize, log=log, label="seed001 unit")
    return results_from_units(units, cfg, which)


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
def _fmt(entry, digits=3):
    if entry is None:
        return "-"
    if isinstance(entry, dict):
        return f"{entry['mean']:.{digits}g} ± {2 * entry['sem']:.2g}"
    if isinstance(entry, (int, np.integer)):
        return str(entry)
    return f"{entry:.{digits}g}"


_TABLE_COLUMNS = ("f_opt", "center", "M_P", "M_S_raw", "M_S_proj", "M_S_tight_proj", "M_E_mcmc",
                  "M_E_exact", "M_E_indep", "M_E_indep_steps", "M_E_importance", "C0", "acceptance",
                  "DPSG_last", "DPSG_avg", "uniform_last", "uniform_avg")

_PRIVACY_NOTES = [
    "Privacy of the columns (each run is one release of b; adjacency ||b - b'||_inf <= b_max):",
    "",
    "* `M_P`, `M_S_*`, `DPSG_*`: pure eps-DP per run.",
    "* `M_E_mcmc` (the paper's sampler, random-walk Metropolis, 5000 steps): **no privacy "
    "guarantee**. It is only approximately the exponential mechanism, so (eps, (1 + e^eps) TV)-DP "
    "with an **unquantified** TV: the spec gives no way to bound it and no public bound on the "
    "random walk's distance to its target is known that is not astronomically loose; agreement "
    "with the exact sampler (below) is evidence on this instance, not a guarantee. fastdp records "
    "these runs as `NoGuaranteeEvent` (accountants refuse it) and runs them only when asked for "
    "by name (`sampler=\"metropolis\"`), as here, to reproduce the paper.",
    "* `M_E_exact`: rejection sampler, exactly the exponential mechanism (pure eps-DP; its running "
    "time depends on the data).",
    "* `M_E_indep`: independence Metropolis with uniform proposals for `M_E_indep_steps` steps: "
    "(eps, delta)-DP per run with the public bound delta = (1 + e^eps)(1 - e^(-beta G R))^T "
    "<= `independence_delta` of the configuration; run where exp(beta G R) <= "
    "`max_independence_W`.",
    "* `center`, `uniform_*`: data-independent baselines (0-DP). `f_opt`, `C0`, `acceptance` and "
    "`M_E_importance` read b (non-private diagnostics).",
    "",
]


def _sweep_table(sweep, label, pilot):
    lines = [f"| {label} | " + " | ".join(_TABLE_COLUMNS) + " |",
             "|" + "---|" * (len(_TABLE_COLUMNS) + 1)]
    for key in sorted(sweep):
        p = sweep[key]
        lines.append(f"| {key:g} | " + " | ".join(_fmt(p.get(c), 4) for c in _TABLE_COLUMNS) + " |")
    lines.append("")
    lines.append(f"Spec 001 pilot numbers (section 4.4; {', '.join(PILOT_COLUMNS)}):")
    lines.append("")
    for key in sorted(sweep):
        if key in pilot:
            lines.append(f"* {label} = {key:g}: " + ", ".join(
                "-" if v is None else f"{v:g}" for v in pilot[key]))
    return lines


def write_report(results, cfg, out_dir, *, figures=True):
    """Write seed001.md, seed001.json and (if matplotlib is available) PNG figures."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = ["# Seed 001 reproduction (DP piecewise affine minimisation)", "",
          "Mean objective ± 2 SEM over runs (spec A6); `center` = f(0) (B3, 0-DP); "
          "`uniform_*` = subgradient method with uniform selection (B4, eps -> 0). "
          "Objective values read b: non-private diagnostics.", "",
          "Configuration: `" + json.dumps(dataclasses.asdict(cfg)) + "`", ""] + _PRIVACY_NOTES
    if "k" in results:
        md += ["## R1 (Fig. 1): objective against k (c = %g, m = %d)" % (cfg.c, cfg.m), ""]
        rules = ("constant", "inverse", "inverse_sqrt")
        md.append("| k | " + " | ".join(f"DP-SG {r}" for r in rules) + " | "
                  + " | ".join(f"regular last {r} | regular best {r}" for r in rules) + " | k* (D5) |")
        md.append("|" + "---|" * (2 + 3 * len(rules)))
        for k in sorted(results["k"]):
            row = results["k"][k]
            md.append(f"| {k} | " + " | ".join(_fmt(row[f"DPSG_last_{r}"]) for r in rules) + " | "
                      + " | ".join(f"{row[f'regular_last_{r}']:.3f} | {row[f'regular_best_{r}']:.3f}"
                                   for r in rules) + f" | {row['k_star_D5']} |")
        md.append("")
    if "c" in results:
        md += ["## R2 (Fig. 2): objective against c (m = %d)" % cfg.m, ""]
        md += _sweep_table(results["c"], "c", PILOT_C) + [""]
    if "m" in results:
        md += ["## R3 (Fig. 3): objective against m (nested pieces, c = %g)" % cfg.c, ""]
        md += _sweep_table(results["m"], "m", PILOT_M) + [""]
    if "eps" in results:
        md += ["## R4: mean gaps f - f_opt against the bounds (c = %g, m = %d)" % (cfg.c, cfg.m), ""]
        md.append("| eps | gaps | bounds |")
        md.append("|---|---|---|")
        for eps in sorted(results["eps"]):
            p = results["eps"][eps]
            md.append(f"| {eps:g} | " + ", ".join(f"{k} {v:.4g}" for k, v in p["gaps"].items())
                      + " | " + ", ".join(f"{k} {v:.4g}" for k, v in p["bounds"].items()) + " |")
        md.append("")
    md += ["## Claims", ""]
    md += runner.claims_table([(c["claim"], c["held"], c["detail"]) for c in results["claims"]])
    (out / "seed001.md").write_text("\n".join(md) + "\n")
    (out / "seed001.json").write_text(json.dumps(
        {"config": dataclasses.asdict(cfg), "results": runner.jsonable(results)}, indent=1))
    if figures:
        _figures(results, out)
    return out / "seed001.md"


def _figures(results, out):
    plt = runner.pyplot()
    if plt is None:  # pragma: no cover - optional dependency
        return
    series = (("M_P", "M_P"), ("M_S_proj", "M_S (projected)"), ("M_E_mcmc", "M_E (MCMC)"),
              ("DPSG_last", "DP-SG (last)"), ("DPSG_avg", "DP-SG (average)"),
              ("uniform_last", "eps -> 0 (B4)"))
    for name, xlabel in (("c", "c"), ("m", "m")):
        if name not in results:
            continue
        sweep = results[name]
        xs = sorted(sweep)
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in series:
            ax.errorbar(xs, [sweep[x][key]["mean"] for x in xs],
                        yerr=[2 * sweep[x][key]["sem"] for x in xs], label=label, capsize=2)
        ax.plot(xs, [sweep[x]["center"] for x in xs], "k:", label="f(0) (B3)")
        ax.plot(xs, [sweep[x]["f_opt"] for x in xs], "m--", label="true optimum")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("objective")
        ax.legend(fontsize=7)
        runner.save_figure(fig, out / f"seed001_fig_{name}.png", dpi=120)
    if "k" in results:
        rk = results["k"]
        ks = sorted(rk)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.errorbar(ks, [rk[k]["DPSG_last_constant"]["mean"] for k in ks],
                    yerr=[2 * rk[k]["DPSG_last_constant"]["sem"] for k in ks], color="k",
                    label="DP subgradient (last)")
        ax.plot(ks, [rk[k]["regular_last_constant"] for k in ks], "b-", label="regular (last)")
        ax.plot(ks, [rk[k]["regular_best_constant"] for k in ks], "b--", label="regular (best)")
        ax.set_xscale("log")
        ax.set_xlabel("iterations k")
        ax.set_ylabel("objective")
        ax.legend(fontsize=7)
        runner.save_figure(fig, out / "seed001_fig_k.png", dpi=120)


def report_from_units(out, checkpoint, *, figures=True):
    """Write the report from a checkpoint (its settings line gives the configuration)."""
    settings, units = runner.read_checkpoint(checkpoint, label="seed001 unit")
    cfg = _config(settings)
    results = results_from_units(units, cfg, settings["which"])
    return write_report(results, cfg, out, figures=figures)


def main(argv=None):
    """``python -m fastdp.experiments.seed001 [--quick] [--out DIR] ...``; returns 0."""
    parser = runner.base_parser(__doc__.splitlines()[0], name="seed001",
                                quick_help="100 runs, small grids")
    parser.add_argument("--runs", type=int, default=None, help="runs per point")
    parser.add_argument("--only", default="k,c,m,eps", help="comma-separated subset of k,c,m,eps")
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args(argv)
    cfg = quick_config() if args.quick else Config()
    if args.runs:
        cfg.n_runs = args.runs
    which = tuple(w for w in args.only.split(",") if w)
    if any(w not in SWEEPS for w in which):
        parser.error(f"--only takes a comma-separated subset of {','.join(SWEEPS)}")
    checkpoint = runner.checkpoint_path(args, "seed001")
    try:
        if args.report_only:
            path = report_from_units(args.out, checkpoint, figures=not args.no_figures)
        else:
            results = run_all(cfg, which=which, checkpoint=checkpoint, resume=args.resume,
                              budget_min=args.budget_min, log=runner.log_line)
            path = write_report(results, cfg, args.out, figures=not args.no_figures)
    except ValidationError as exc:
        parser.error(str(exc))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    main()
