"""The seed-000 run as resumable units (the sigma table, one tuning selection per cell, the anchors)."""

import dataclasses
import functools
import math

from fastdp.experiments.seed000.protocol import (
    DATASETS,
    DELTA,
    DP_METHODS,
    EPSILONS,
    NON_PRIVATE,
    PAPER_SIZES,
    SPEC_SIGMA,
    _Evaluations,
    _select,
    anchors,
    configurations,
    convergence_curves,
    load_paper_dataset,
    trivial_baseline,
)


# ---------------------------------------------------------------------------
# units: the σ table, one tuning selection per (dataset, method, ε), the anchors
# ---------------------------------------------------------------------------
CHECKPOINT_NAME = "seed000_units.jsonl"


def plan_units(datasets=tuple(DATASETS), epsilons=EPSILONS):
    """Unit keys in execution order.

    ``("sigma",)``: the σ table; ``("select", dataset, method, ε)``: one tuning
    selection (ε None for the non-private methods); ``("anchor", dataset)``:
    the non-private optimum, the trivial predictor and (ridge) the
    convergence curves of the selected configurations, after the selections
    of its dataset.
    """
    keys = [("sigma",)]
    for name in datasets:
        keys += [("select", name, method, None) for method in NON_PRIVATE]
        keys += [("select", name, method, float(e)) for e in epsilons for method in DP_METHODS]
        keys.append(("anchor", name))
    return keys


def _unit_cost(grids):
    """Relative cost of a unit for the estimate of the time left (fits it runs)."""
    def cost(key):                 # the σ table takes about as long as 100 fits
        if key[0] != "select":
            return 100.0 if key[0] == "sigma" else 10.0
        extra = grids.report_seeds - grids.tuning_seeds
        return len(configurations(key[2], grids)) * grids.tuning_seeds + extra
    return cost


def _describe(key):
    if key[0] == "select":
        where = "non-private" if key[3] is None else f"ε={key[3]:g}"
        return f"{key[1]} {key[2]} {where}"
    return " ".join(map(str, key))


def _summarize(record):
    if "entry" in record:
        entry = record["entry"]
        return (f"{DATASETS[record['unit'][1]].metric} {entry['test_median']:.4g}, config "
                f"{entry['config']}, σ {entry['sigma']:.4g}")
    if "anchor" in record:
        return f"non-private optimum: test {record['anchor']['test']:.4g}"
    return f"{len(record['table'])} cells"


def _loader(grids, data_home):
    """``name -> (data, {seed: split})``, loading each dataset once."""
    @functools.lru_cache(maxsize=None)
    def load(name):
        data = load_paper_dataset(name, data_home)
        return data, {s: data.split(s) for s in range(1, grids.report_seeds + 1)}
    return load


def _results(units, name):
    """``{"non_private" or ε: {method: entry}}`` of a dataset's selection records, in order."""
    results = {"non_private": {}}
    for key, record in units.items():
        if key[0] == "select" and key[1] == name:
            results.setdefault("non_private" if key[3] is None else key[3], {})[key[2]] = \
                record["entry"]
    return results


def run_unit(key, units, *, grids, epsilons, datasets):
    """The record of one unit (see :func:`plan_units`); ``datasets`` loads the data."""
    record = {}
    if key[0] == "sigma":
        record["table"] = sigma_table(epsilons=epsilons)
    elif key[0] == "select":
        _, name, method, eps = key
        data, splits = datasets(name)
        evaluate = _Evaluations(data, splits)
        record["entry"] = _select(evaluate, data.spec, method, eps, grids)
        record["fits"] = len(evaluate.cache)
    else:
        name = key[1]
        data, _ = datasets(name)
        anchor = anchors(data)
        anchor["trivial"] = trivial_baseline(data)
        results = _results(units, name)
        record.update(n_train=data.n_train, n_test=int(data.X_test.shape[0]),
                      n_features=int(data.X.shape[1]),
                      anchor={k: v for k, v in anchor.items() if k != "coef"},
                      curves=convergence_curves(data, results)
                      if data.spec.loss == "squared" else None)
    return record


def runs_from_units(units):
    """``(runs, table)`` for :func:`write_report` from the unit records.

    A dataset is reported when its anchor unit (its last) is present; the σ
    table is empty when its unit is missing.
    """
    runs = {}
    for key, record in units.items():
        if key[0] != "anchor":
            continue
        name = key[1]
        selects = [r for k, r in units.items() if k[0] == "select" and k[1] == name]
        runs[name] = {"spec": dataclasses.asdict(DATASETS[name]), "n_train": record["n_train"],
                      "n_test": record["n_test"], "n_features": record["n_features"],
                      "results": _results(units, name), "anchor": record["anchor"],
                      "curves": record["curves"], "fits": sum(r["fits"] for r in selects),
                      "seconds": sum(r["seconds"] for r in selects) + record["seconds"]}
    table = units.get(("sigma",), {}).get("table", [])
    return runs, table


# ---------------------------------------------------------------------------
# the sigma table (spec 000 section 3.6)
# ---------------------------------------------------------------------------
def sigma_table(rows=(("phishing", 1), ("phishing", 10), ("phishing", 100), ("phishing", 1000),
                      ("adult", 1), ("adult", 10), ("adult", 100), ("adult", 1000),
                      ("msd", 1), ("msd", 100), ("msd", 1000)), epsilons=EPSILONS, delta=DELTA):
    """sigma of the paper's accountant (exact, authors' search) and fastdp's (RDP), with the spec."""
    from fastdp.privacy import calibrate_noise_multiplier
    from fastdp.privacy.moments import calibrate_moments_sigma, legacy_sigma_search

    table = []
    cells = [(name, L, eps) for name, L in rows for eps in epsilons]
    for name, L, eps in cells:
        n, epochs = PAPER_SIZES[name]
        q, steps = L / n, int(epochs * n // L)
        spec = SPEC_SIGMA.get((name, L), {}) if eps in EPSILONS else {}
        k = EPSILONS.index(eps) if eps in EPSILONS else 0
        table.append({
            "dataset": name, "L": L, "q": q, "T": steps, "epsilon": eps,
            "exact_ma": calibrate_moments_sigma(eps, delta, q, steps),
            "repo": legacy_sigma_search(eps, delta, q, steps),
            "fastdp_rdp": float(calibrate_noise_multiplier(eps, delta, q, steps)),
            "spec_exact": spec.get("exact", (None,) * 4)[k],
            "spec_repo": spec.get("repo", (None,) * 4)[k],
            "spec_improved": spec.get("improved", (None,) * 4)[k],
        })
    return table


def _same_digits(a, b, digits):
    if a is None or b is None:
        return None
    return float(f"{a:.{digits}g}") == float(f"{b:.{digits}g}") or abs(a - b) <= 10 ** (
        math.floor(math.log10(abs(b))) - digits + 1) * 0.5000001
