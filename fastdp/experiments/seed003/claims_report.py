"""Which of the paper's claims held, and the Markdown report and figures of the seed-003 grid."""

import math
from pathlib import Path

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.experiments.seed003.protocol import (
    DELTA,
    MODERATE_EPSILON,
    PRIVATE,
    TABLE1_MAJORITY,
)
from fastdp.experiments.seed003.units import (
    grid_axes,
    grid_from_units,
    merge_units,
)


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
