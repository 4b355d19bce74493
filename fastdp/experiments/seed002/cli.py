"""Resumable units, the command line and the one-call entry point of the seed-002 reproduction."""

from pathlib import Path

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.experiments.seed002.protocol import (
    HORIZONS,
    Section5Problem,
    grid_plan,
    make_synthetic_logreg,
    run_cell,
)
from fastdp.experiments.seed002.robustness import (
    DATA_SEEDS,
    GAP_MATCHED_SEEDS,
    run_data_seeds,
)
from fastdp.experiments.seed002.report import (
    write_report,
)


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
