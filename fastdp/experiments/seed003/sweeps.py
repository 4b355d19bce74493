"""The Fig. 1 / Fig. 2 sweeps (R2, R3) and the amplification ablation (R5) of seed 003."""

import math
from pathlib import Path

import numpy as np

from fastdp.experiments import runner
from fastdp.privacy.filters import AMPLIFICATIONS
from fastdp.solvers import line_search as LS
from fastdp.experiments.seed003.protocol import (
    DELTA,
    FIG2_EPSILON,
    MU,
    SWEEPS,
    SWEEP_EPSILONS,
    fold_indices,
    load_paper_dataset,
)
from fastdp.experiments.seed003.claims_report import (
    _epsilon_header,
    _fmt,
)


# --------------------------------------------------------------------------
# Fig. 1 / Fig. 2 sweeps (R2, R3) and the amplification ablation (R5)
# --------------------------------------------------------------------------
#: spec 003 §6.3 [DECISION] x-axis values of Fig. 1, plus the §8 A1 ablation


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
