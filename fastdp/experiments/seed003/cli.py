"""Command line and one-call entry point of the seed-003 reproduction."""

import time
from pathlib import Path

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.experiments.seed003.protocol import (
    ALGORITHMS,
    DATASETS,
    EPSILONS,
    LOSSES,
    QUICK_EPSILONS,
)
from fastdp.experiments.seed003.units import (
    ARCHIVE_NAME,
    CHECKPOINT_NAME,
    N_FOLDS,
    SWEEPS_NAME,
    merge_units,
    read_units,
    run_units,
    write_unit_archive,
)
from fastdp.experiments.seed003.claims_report import (
    grid_from_records,
    report_from_units,
    write_report,
)
from fastdp.experiments.seed003.sweeps import (
    load_sweeps,
    run_amplification_ablation,
    run_sweeps,
    save_sweeps,
    sweep_lines,
)


def _selection(quick, folds, runs, fold_range, run_range):
    """(fold indices, run indices) from the CLI/API options."""
    if fold_range is not None and folds is not None:
        raise ValidationError("give either folds (the first N folds) or fold_range, not both")
    if run_range is not None and runs is not None:
        raise ValidationError("give either runs (the first N runs) or run_range, not both")
    fold_range = fold_range or (0, (1 if quick else N_FOLDS) if folds is None else folds)
    run_range = run_range or (0, (1 if quick else 5) if runs is None else runs)
    start, stop = fold_range
    if not 0 <= start < stop <= N_FOLDS:
        raise ValidationError(f"fold range [{start}, {stop}) must satisfy 0 ≤ START < STOP ≤ "
                              f"{N_FOLDS}")
    if not 0 <= run_range[0] < run_range[1]:
        raise ValidationError(f"run range [{run_range[0]}, {run_range[1]}) must satisfy "
                              "0 ≤ START < STOP")
    return range(start, stop), range(*run_range)


def reproduce(out, *, quick=False, folds=None, runs=None, fold_range=None, run_range=None,
              datasets=DATASETS, losses=LOSSES, epsilons=None, algorithms=ALGORITHMS,
              data_home=None, data=None, sweeps=False, resume=False, budget_min=None,
              checkpoint=None, extra_units=(), notes=(), log=runner.log_line, clock=time.monotonic,
              after_unit=None):
    """Run the selected units into the checkpoint and write the report from all units there.

    ``folds``/``runs`` select the first N folds/runs, ``fold_range``/``run_range``
    a ``(start, stop)`` slice (defaults: the paper's 10 folds × 5 runs, ``quick``
    1 × 1); ``epsilons`` defaults to :data:`EPSILONS` (``quick``:
    :data:`QUICK_EPSILONS`). The checkpoint defaults to ``OUT/seed003_units.jsonl``;
    ``extra_units`` are more checkpoint files merged into the report. Returns
    ``(report path, status)`` with ``status`` as in :func:`run_units`; the path
    is None when the budget ran out before any unit existed.
    """
    fold_sel, run_sel = _selection(quick, folds, runs, fold_range, run_range)
    if epsilons is None:
        epsilons = QUICK_EPSILONS if quick else EPSILONS
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    status = run_units(checkpoint, datasets=datasets, losses=losses, algorithms=algorithms,
                       epsilons=epsilons, folds=fold_sel, runs=run_sel, resume=resume,
                       budget_min=budget_min, data_home=data_home, data=data, log=log,
                       clock=clock, after_unit=after_unit)
    extra = []
    if sweeps and not status["stopped"]:
        fig1, fig2 = run_sweeps(folds=len(fold_sel), runs=len(run_sel), data_home=data_home,
                                log=log)
        ablation = run_amplification_ablation(folds=len(fold_sel), runs=len(run_sel),
                                              data_home=data_home, log=log)
        Path(out).mkdir(parents=True, exist_ok=True)
        save_sweeps(Path(out) / SWEEPS_NAME, fig1, fig2, ablation, folds=len(fold_sel),
                    runs=len(run_sel))
        extra = sweep_lines(fig1, fig2, ablation, folds=len(fold_sel), runs=len(run_sel))
    if status["stopped"] and not status["ran"] and not status["skipped"] and not extra_units \
            and not read_units(checkpoint):
        return None, status                 # the budget ended the session before any fit
    path = report_from_units(out, [checkpoint, *extra_units], notes=notes, extra_lines=extra)
    return path, status


def main(argv=None):
    parser = runner.base_parser(__doc__.splitlines()[0], name="seed003",
                                quick_help="fold 0, 1 run, ε ∈ {0.05, 0.2, 0.8, 1.6}")
    parser.add_argument("--folds", type=int, default=None, help="the first N of the 10 folds")
    parser.add_argument("--fold-range", type=int, nargs=2, default=None, metavar=("START", "STOP"),
                        help="folds START..STOP-1 (0-based, of the shuffled 10-fold split)")
    parser.add_argument("--runs", type=int, default=None, help="the first N runs (default 5)")
    parser.add_argument("--run-range", type=int, nargs=2, default=None, metavar=("START", "STOP"),
                        help="runs START..STOP-1 (run r of fold f uses seed 1000·f + r)")
    parser.add_argument("--units", nargs="+", default=(), metavar="FILE",
                        help="more unit checkpoints to merge into the report")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--epsilons", nargs="+", type=float, default=None,
                        help=f"default {list(EPSILONS)} (--quick: {list(QUICK_EPSILONS)})")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--sweeps", action="store_true",
                        help="also run the Fig. 1 sweeps, Fig. 2 counts and the amplification "
                             "ablation (in memory, not checkpointed)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="write the report from saved grids (seed003.json files or lists of "
                             "cell records) instead of running; --folds/--runs describe them")
    parser.add_argument("--notes", default=None, help="markdown file appended under the protocol")
    parser.add_argument("--archive-units", action="store_true",
                        help=f"with --report-only: also write every merged unit to "
                             f"OUT/{ARCHIVE_NAME} (gzip'ed, sorted; readable by --units)")
    args = parser.parse_args(argv)
    notes = Path(args.notes).read_text().splitlines() if args.notes else ()
    if args.from_json:
        import json

        records, elapsed = [], 0.0
        for name in args.from_json:
            data = json.loads(Path(name).read_text())
            records += data["grid"] if "grid" in data else data["cells"]
            elapsed += float(data.get("elapsed", data.get("protocol", {}).get("elapsed_seconds", 0)))
        path = write_report(args.out, grid_from_records(records), datasets=args.datasets,
                            losses=args.losses, epsilons=args.epsilons or list(EPSILONS),
                            folds=args.folds or 10,
                            runs=args.runs or 5, elapsed=elapsed, quick=False, notes=notes)
        print(f"report: {path}")
        return 0
    checkpoint = runner.checkpoint_path(args, "seed003")
    if args.report_only:
        sweeps = Path(args.out) / SWEEPS_NAME
        extra = ()
        if sweeps.exists():
            fig1, fig2, ablation, sweep_folds, sweep_runs = load_sweeps(sweeps)
            extra = sweep_lines(fig1, fig2, ablation, folds=sweep_folds, runs=sweep_runs)
        path = report_from_units(args.out, [checkpoint, *args.units], notes=notes,
                                 extra_lines=extra)
        print(f"report: {path}" + (f" (+ sweeps from {sweeps})" if extra else ""))
        if args.archive_units:
            units = merge_units([checkpoint, *args.units])
            print(f"units: {write_unit_archive(Path(args.out) / ARCHIVE_NAME, units)} "
                  f"({len(units)} fits)")
        return 0
    try:
        path, status = reproduce(
            args.out, quick=args.quick, folds=args.folds, runs=args.runs,
            fold_range=tuple(args.fold_range) if args.fold_range else None,
            run_range=tuple(args.run_range) if args.run_range else None,
            datasets=args.datasets, losses=args.losses, epsilons=args.epsilons,
            data_home=args.data_home, sweeps=args.sweeps, resume=args.resume,
            budget_min=args.budget_min, checkpoint=checkpoint, extra_units=args.units,
            notes=notes)
    except ValidationError as exc:
        parser.error(str(exc))
    if path is None:
        print(f"no report: the time budget ran out before the first fit ({status['remaining']} "
              "left; rerun with --resume)")
        return 0
    print(f"report: {path} ({status['ran']} fit(s) run, {status['skipped']} already in "
          f"{checkpoint}" + (f"; budget reached, {status['remaining']} left: rerun with --resume"
                             if status["stopped"] else "") + ")")
    return 0

