"""Seed 004 as units of :mod:`fastdp.experiments.runner`: F* of each (dataset,
penalty), then every run of every dataset in priority order; checkpoint, resume and
the report from the finished units.
"""

import functools
import json
from pathlib import Path

from fastdp.experiments import runner
from fastdp.experiments.seed004.protocol import (
    EPSILONS,
    _describe_task,
    _finish_runs,
    _load_problem_meta,
    _methods_for,
    _rank,
    _summarize,
    _tasks,
    _truth,
    ground_truth,
    load_problem,
    run_task,
)
from fastdp.experiments.seed004.report import write_report


# ---------------------------------------------------------------------------
# units: F* per (dataset, penalty), then the runs of every dataset in priority order
# ---------------------------------------------------------------------------
CHECKPOINT_NAME = "seed004_units.jsonl"
PENALTIES = ("l2", "l1")


def float32_configs(curve_eps):
    """The configurations re-run with float32 messages: noiseless and the paper's at the curve ε."""
    return [("l2", "Alg1 iota=0.1", "none", 0.0), ("l2", "Alg1 iota=0.1", "paper", curve_eps["l2"]),
            ("l1", "Alg1 iota=0.1", "none", 0.0), ("l1", "Alg1 iota=0.1", "paper", curve_eps["l1"])]


def plan_units(datasets, settings, calibrations=None, float32_only=False,
               float32_penalties=PENALTIES):
    """Unit keys in execution order.

    ``("truth", dataset, penalty)``: the scikit-learn optimum F* (and the data
    sizes); ``("run", dataset) + task``: one run of :func:`_tasks`. The truths
    come first, then the runs of all datasets by priority (:func:`_rank`),
    so a time-boxed session gives every dataset its most informative runs.
    ``calibrations`` orders the calibrations (the first has priority;
    default: ``settings``' order); ``float32_only`` plans only the float32
    re-runs, and ``float32_penalties`` the penalties whose float32 re-runs are
    planned.
    """
    calibrations = tuple(calibrations or settings["calibrations"])
    seeds, curve_eps = tuple(settings["seeds"]), settings["curve_eps"]
    float32 = [tuple(c) for c in settings["float32"]]
    keys = [("truth", name, p) for name in datasets for p in PENALTIES]
    runs = []
    for index, name in enumerate(datasets):
        tasks = _tasks(PENALTIES, _methods_for(PENALTIES), calibrations,
                       tuple(settings["epsilons"]), seeds, float32, curve_eps)
        tasks = [t for t in tasks if (t[5] == "float32" and t[0] in float32_penalties)
                 or (t[5] == "float64" and not float32_only)]
        for task in tasks:
            rank = _rank(task, calibrations, seeds, curve_eps, PENALTIES)
            runs.append((rank[:3] + (index,) + rank[3:], ("run", name) + task))
    return keys + [key for _, key in sorted(runs, key=lambda pair: pair[0])]


def results_from_units(units, settings):
    """``{dataset: result}`` for :func:`write_report` from unit records.

    A dataset is reported when its truths are present; ``skipped`` lists
    the planned runs not in the records (a time-boxed session).
    """
    results = {}
    names = [key[1] for key in units if key[0] == "truth"]
    for name in dict.fromkeys(names):
        truths = {key[2]: r for key, r in units.items() if key[:2] == ("truth", name)}
        if set(truths) != set(PENALTIES):
            continue
        records = [r for key, r in units.items() if key[:2] == ("run", name)]
        truth = _truth({p: truths[p]["f_star"] for p in PENALTIES}, records)
        planned = [key[2:] for key in plan_units([name], settings) if key[0] == "run"]
        present = {key[2:] for key in units if key[:2] == ("run", name)}
        results[name] = {"truth": truth, "runs": _finish_runs(records, truth),
                         "skipped": [list(t) for t in planned if t not in present],
                         **truths[PENALTIES[0]]["meta"],
                         "elapsed": sum(r["seconds"] for key, r in units.items()
                                        if key[1] == name)}
    return results


def run_unit(key, units, *, settings, datasets, coefs):
    """The record of one unit (see :func:`plan_units`)."""
    data = datasets(key[1])
    if key[0] == "truth":
        return {"f_star": ground_truth(data[0], data[1], key[2])[0],
                "meta": _load_problem_meta(key[1], data)}
    task = key[2:]
    reference = units.get(("run", key[1]) + task[:5] + ("float64",))
    record = run_task(data, task, epochs=settings["epochs"], first_seed=settings["seeds"][0],
                      curve_eps=settings["curve_eps"],
                      float32=[tuple(c) for c in settings["float32"]],
                      coefs=coefs.setdefault(key[1], {}), reference=reference)
    return record


def _settings(quick, seeds):
    epsilons = (0.2, 1.0) if quick else EPSILONS
    curve_eps = {"l2": 0.8 if 0.8 in epsilons else epsilons[-1],
                 "l1": 0.4 if 0.4 in epsilons else epsilons[0]}
    return {"epochs": 1.0 if quick else 3.0, "seeds": list(seeds), "epsilons": list(epsilons),
            "calibrations": ["paper", "accountant"], "curve_eps": curve_eps,
            "float32": [list(c) for c in float32_configs(curve_eps)]}


def reproduce(out, *, quick=False, datasets=("a9a", "news20"), seeds=None, data_home=None,
              resume=False, budget_min=None, checkpoint=None, calibrations=None,
              float32_only=False, float32_penalties=PENALTIES, command="", log=runner.log_line):
    """Run the units (:func:`plan_units`) into the checkpoint and write the report.

    ``quick``: 1 epoch, ε ∈ {0.2, 1.0}, seed 0 only. ``seeds``: number of
    seeds of the private runs (default 2; quick 1). The checkpoint (default
    ``OUT/seed004_units.jsonl``) keeps every finished unit of every dataset
    and the report is built from all of them: ``resume`` continues it (e.g.
    with more datasets), ``budget_min`` starts no unit after that many
    minutes. Returns the report path (None when the budget ran out before any unit).
    """
    seeds = tuple(range(1 if quick else (seeds or 2)))
    settings = _settings(quick, seeds)
    checkpoint = Path(out) / CHECKPOINT_NAME if checkpoint is None else Path(checkpoint)
    plan = plan_units(datasets, settings, calibrations, float32_only, float32_penalties)
    loader = functools.lru_cache(maxsize=None)(lambda name: load_problem(name, data_home))
    coefs = {}
    _, units = runner.run_units(checkpoint, plan,
                     lambda key, units: run_unit(key, units, settings=settings,
                                                 datasets=loader, coefs=coefs),
                     resume=resume, budget_min=budget_min, settings=settings,
                     describe=lambda key: f"{key[1]} " + (f"F* {key[2]}" if key[0] == "truth"
                                                          else _describe_task(key[2:])),
                     summarize=lambda r: f"F* {r['f_star']:.6g}" if "f_star" in r
                     else _summarize(r), log=log, label="seed004 unit")
    if not units:
        return None                     # the budget ended the session before any unit
    return report_from_units(out, checkpoint, command=command)


def report_from_units(out, checkpoint, *, command=""):
    """Write the report from every unit of a checkpoint (the summary of an existing
    ``OUT/seed004.json`` is kept)."""
    settings, units = runner.read_checkpoint(checkpoint, label="seed004 unit")
    saved = Path(out) / "seed004.json"
    summary = json.loads(saved.read_text()).get("summary", ()) if saved.exists() else ()
    return write_report(out, results_from_units(units, settings), epochs=settings["epochs"],
                        seeds=settings["seeds"], command=command, summary=summary)
