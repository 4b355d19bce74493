"""Command line and one-call entry point of the seed-000 reproduction."""

import dataclasses
import sys
from pathlib import Path

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.experiments.seed000.protocol import (
    DATASETS,
    EPSILONS,
    Grids,
    PAPER_GRIDS,
    QUICK_GRIDS,
)
from fastdp.experiments.seed000.units import (
    CHECKPOINT_NAME,
    _describe,
    _loader,
    _summarize,
    _unit_cost,
    plan_units,
    run_unit,
    runs_from_units,
)
from fastdp.experiments.seed000.claims_report import (
    write_report,
)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def make_grids(quick=False, seeds=None, tuning_seeds=None):
    """The tuning grids of a run: quick or the paper's, with the seed counts overridden.

    ``seeds``: seeds per reported configuration (default 10); ``tuning_seeds``:
    seeds whose median validation metric ranks the configurations (default 2
    in quick mode, 10 otherwise; at most ``seeds``).
    """
    grids = QUICK_GRIDS if quick else PAPER_GRIDS
    if seeds is not None:
        grids = dataclasses.replace(grids, report_seeds=seeds)
    if tuning_seeds is not None:
        grids = dataclasses.replace(grids, tuning_seeds=tuning_seeds)
    return dataclasses.replace(grids, tuning_seeds=min(grids.tuning_seeds, grids.report_seeds))


def _settings(quick, grids, datasets, epsilons):
    return {"quick": bool(quick), "grids": dataclasses.asdict(grids), "datasets": list(datasets),
            "epsilons": [float(e) for e in epsilons]}


def report_from_units(out, checkpoint, *, figures=True, command=None):
    """Write the report from a checkpoint (its settings line says grids and quick)."""
    settings, units = runner.read_checkpoint(checkpoint, label="seed000 unit")
    plan = plan_units(settings["datasets"], settings["epsilons"])
    units = {key: units[key] for key in plan if key in units}
    grids = Grids(**{k: tuple(v) if isinstance(v, list) else v
                     for k, v in settings["grids"].items()})
    runs, table = runs_from_units(units)
    return write_report(out, runs, table, grids=grids, quick=settings["quick"],
                        elapsed=sum(r["seconds"] for r in units.values()), figures=figures,
                        command=command)


def reproduce(out, *, quick=False, datasets=tuple(DATASETS), epsilons=EPSILONS, seeds=None,
              tuning_seeds=None, data_home=None, figures=True, log=runner.log_line, command=None,
              resume=False, budget_min=None, checkpoint=None):
    """Run the units (:func:`plan_units`) into the checkpoint and write the report.

    ``seeds``, ``tuning_seeds``: see :func:`make_grids`. The checkpoint
    (default ``OUT/seed000_units.jsonl``) keeps every finished unit;
    ``resume`` continues it and ``budget_min`` stops starting units after
    that many minutes (see :func:`fastdp.experiments.runner.run_units`).
    Returns the report path (None when the budget ended the session before
    any dataset was complete).
    """
    grids = make_grids(quick, seeds, tuning_seeds)
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    epsilons = tuple(float(e) for e in epsilons)
    load = _loader(grids, data_home)
    status, units = runner.run_units(
        checkpoint, plan_units(datasets, epsilons),
        lambda key, done: run_unit(key, done, grids=grids, epsilons=epsilons,
                                   datasets=load),
        resume=resume, budget_min=budget_min,
        settings=_settings(quick, grids, datasets, epsilons), describe=_describe,
        summarize=_summarize, cost=_unit_cost(grids), log=log, label="seed000 unit")
    runs, table = runs_from_units(units)
    if not runs:
        return None
    return write_report(out, runs, table, grids=grids, quick=quick,
                        elapsed=sum(r["seconds"] for r in units.values()), figures=figures,
                        command=command)


def main(argv=None):
    """``python -m fastdp.experiments.seed000 [--quick] [--out DIR] ...``."""
    parser = runner.base_parser(__doc__.splitlines()[0], name="seed000",
                                quick_help="small grids, tuning on 2 seeds")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per reported configuration (default 10)")
    parser.add_argument("--tuning-seeds", type=int, default=None,
                        help="seeds that rank the configurations (default 2 quick, 10 full)")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        parser.error("--seeds must be >= 1")
    if args.tuning_seeds is not None and args.tuning_seeds < 1:
        parser.error("--tuning-seeds must be >= 1")
    if any(not e > 0 for e in args.epsilons):
        parser.error("--epsilons must be > 0")
    command = " ".join(["python -m fastdp.experiments.seed000",
                        *(sys.argv[1:] if argv is None else argv)])
    checkpoint = runner.checkpoint_path(args, "seed000")
    try:
        if args.report_only:
            path = report_from_units(args.out, checkpoint, figures=not args.no_figures,
                                     command=command)
        else:
            path = reproduce(args.out, quick=args.quick, datasets=tuple(args.datasets),
                             epsilons=tuple(args.epsilons), seeds=args.seeds,
                             tuning_seeds=args.tuning_seeds, data_home=args.data_home,
                             command=command, figures=not args.no_figures,
                             resume=args.resume, budget_min=args.budget_min,
                             checkpoint=checkpoint)
    except ValidationError as exc:
        parser.error(str(exc))
    if path is None:
        print("no report: the time budget ran out before a dataset was complete "
              "(rerun with --resume)")
    else:
        print(f"wrote {path}")
    return 0
