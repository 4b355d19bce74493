"""The Markdown report, JSON record and figures of the seed-002 reproduction."""

import json
import math
from pathlib import Path

import numpy as np

from fastdp.experiments import runner
from fastdp.experiments.seed002.protocol import (
    ALGORITHMS,
    CONVENTIONS,
    FIG,
    HORIZONS,
    REPL,
    check_claims,
)
from fastdp.experiments.seed002.robustness import (
    data_summary,
    fig1_table,
    fig2_profiles,
    horizon_rule_table,
)
from fastdp.solvers.accelerated import (
    fig1_log_bound,
    rho_hb,
    rho_nag_reference,
)


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
