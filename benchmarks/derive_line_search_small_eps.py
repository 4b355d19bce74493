"""DP-AGD / DP-BLGD defaults at small epsilon: candidate clip / epoch rules, many seeds.

Fits ``DPLogisticRegression(solver=S, epsilon=eps, delta=1e-5)`` with the
candidate settings spelled out as estimator arguments (``clip``, ``epochs``),
on raw rows (the estimator's own row map), through
``benchmarks/solver_defaults.py``'s ``fit_one`` and the fixed splits of
``benchmarks/derive_highd_defaults.py``.  Records go to
``benchmarks/results/line_search_small_eps.jsonl`` (one JSON line per fit,
keyed by task, solver, epsilon, label, seed and ``--rev``); ``--table``
prints median-of-seeds tables.

Development tasks: a9a, phishing, mushrooms, w8a (the cells of issue 17).
The adopted rule (fastdp.defaults.solver_defaults, s < 50) resolves to ``c03e100``
(DP-AGD) and ``c03e40`` (DP-BLGD) in the noise-dominated regime, to ``old`` above it.
Held out: ``adult`` (UCI originals, one-hot, official test file), ``bank``
(DP-AGD's BANK), ``ipums`` (DP-AGD's IPUMS-BR, never copied), ``n20.oddeven``
(news20 odd/even classes), and subsamples of 4000 training rows
(``adult.4k``, ``ipums.4k``, ``bank.4k``, ``n20.oddeven.4k``) that put them
in the small-n regime of phishing and mushrooms.

Usage::

    python benchmarks/derive_line_search_small_eps.py --tasks phishing --eps 0.1 \
        --labels old,c03e40 --seeds 0-9
    python benchmarks/derive_line_search_small_eps.py --table --labels old,new
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fastdp.privacy.zcdp import bun_steinke_rho

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from derive_highd_defaults import DATA_HOME, _split, load_task  # noqa: E402
from solver_defaults import fit_one  # noqa: E402

OUT = HERE / "results" / "line_search_small_eps.jsonl"
SOLVERS = ("dpagd", "dp_blgd")
EPSILONS = (0.1, 0.5, 1.0, 2.0, 8.0)

#: candidate settings (estimator keyword arguments); "default" is whatever the code resolves
CANDIDATES = {
    "default": {},
    "old": {"clip": 1.0, "epochs": 100},
    "c03e100": {"clip": 0.3, "epochs": 100},
    "c03e40": {"clip": 0.3, "epochs": 40},
    "c05e100": {"clip": 0.5, "epochs": 100},
    "c1e40": {"clip": 1.0, "epochs": 40},
    "c03e20": {"clip": 0.3, "epochs": 20},
}
_SUB = 4000


def _subsample(Xtr, ytr, k=_SUB):
    keep = np.sort(np.random.default_rng(1).permutation(Xtr.shape[0])[:k])
    return Xtr[keep], ytr[keep]


def load(task):
    """(Xtr, ytr, Xte, yte) of a task: raw rows, the fixed split (test rows never subsampled)."""
    small = task.endswith(".4k")
    base = task[:-3] if small else task
    if base in ("a9a", "phishing", "mushrooms", "w8a", "n20.oddeven"):
        Xtr, ytr, Xte, yte = load_task(base)
    else:
        from fastdp.datasets import load_dataset

        source = {"ipums": "ipums_br"}.get(base, base)
        if source == "adult":
            Xtr, ytr = load_dataset("adult", data_home=DATA_HOME, subset="train")
            Xte, yte = load_dataset("adult", data_home=DATA_HOME, subset="test")
            Xtr, Xte = (sp.csr_matrix(np.asarray(Z.toarray() if sp.issparse(Z) else Z, float))
                        for Z in (Xtr, Xte))
            ytr, yte = np.asarray(ytr, float), np.asarray(yte, float)
        else:
            X, y = load_dataset(source, data_home=DATA_HOME)
            X = sp.csr_matrix(np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64))
            tr, te = _split(X.shape[0])
            Xtr, ytr, Xte, yte = X[tr], np.asarray(y, float)[tr], X[te], np.asarray(y, float)[te]
    if small:
        Xtr, ytr = _subsample(Xtr, ytr)
    return Xtr, ytr, Xte, yte


def _seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _records(rev=None):
    if not OUT.exists():
        return []
    recs = [json.loads(line) for line in OUT.read_text().splitlines() if line.strip()]
    return [r for r in recs if rev is None or r.get("rev", "") == rev]


def run(args):
    done = {(r["task"], r["solver"], r["eps"], r["label"], r["seed"], r.get("rev", ""))
            for r in _records()}
    with open(OUT, "a") as out:
        for task in args.tasks:
            Xtr, ytr, Xte, yte = load(task)
            for eps in args.eps:
                for solver in args.solvers:
                    for label in args.labels:
                        for seed in args.seeds:
                            key = (task, solver, eps, label, seed, args.rev)
                            if key in done:
                                continue
                            kw = CANDIDATES[label]
                            acc, cpu, info = fit_one(Xtr, ytr, Xte, yte, solver, eps, seed, kw)
                            rec = dict(task=task, solver=solver, eps=eps, label=label, seed=seed,
                                       rev=args.rev, acc=acc, cpu_s=cpu, config=kw,
                                       n=int(Xtr.shape[0]), d=int(Xtr.shape[1]), **info)
                            out.write(json.dumps(rec, default=str) + "\n")
                            out.flush()
                            done.add(key)
                            print(f"{task} {solver} eps={eps} {label} seed={seed}: {acc}",
                                  flush=True)


def medians(recs, min_seeds):
    """{(task, solver, eps, label): (median, n_seeds)} over records with >= min_seeds seeds."""
    by = {}
    for r in recs:
        if r["acc"] is not None:
            by.setdefault((r["task"], r["solver"], r["eps"], r["label"]), {})[r["seed"]] = r["acc"]
    return {k: (float(np.median(list(v.values()))), len(v)) for k, v in by.items()
            if len(v) >= min_seeds}


def table(args):
    med = medians(_records(args.rev), args.min_seeds)
    print("| solver | data | label | " + " | ".join(f"ε = {e:g}" for e in args.eps) + " |")
    print("|---|---|---|" + "---|" * len(args.eps))
    for solver in args.solvers:
        for task in args.tasks:
            for label in args.labels:
                cells = [med.get((task, solver, e, label)) for e in args.eps]
                if all(c is None for c in cells):
                    continue
                print(f"| `{solver}` | {task} | {label} | " + " | ".join(
                    "—" if c is None else f"{c[0]:.1f} ({c[1]})" for c in cells) + " |")


def _rule_label(solver, task, eps, n, d):
    """The candidate the adopted rule resolves to (s < 50: clip 0.3; DP-BLGD 40 epochs)."""
    from fastdp.defaults import NOISE_INDEX_THRESHOLD, full_batch_noise_index

    if full_batch_noise_index(n, d + 1, bun_steinke_rho(eps, 1e-5)) >= NOISE_INDEX_THRESHOLD:
        return "old"
    return "c03e100" if solver == "dpagd" else "c03e40"


def report(args):
    """Before/after per cell: medians of ``old`` and of the rule's candidate (rev ``--rev``,
    >= ``--min-seeds`` seeds); cells the rule leaves alone fall back to the 3-seed rev-a3
    records of benchmarks/results/solver_defaults.jsonl (marked †); tuned as there (rev a2)."""
    import solver_defaults as sd
    from fastdp.defaults import full_batch_noise_index

    med = medians(_records(args.rev), args.min_seeds)
    old_recs = sd._records()
    print("| solver | data | s at ε = 0.1 | " + " | ".join(f"ε = {e:g}" for e in args.eps) + " |")
    print("|---|---|---|" + "---|" * len(args.eps))
    f = (lambda v: "—" if v is None else f"{v:.1f}")
    for solver in args.solvers:
        for task in args.tasks:
            Xtr = load(task)[0]
            n, d = Xtr.shape
            cells = []
            for eps in args.eps:
                label = _rule_label(solver, task, eps, n, d)
                before = med.get((task, solver, eps, "old"))
                after = med.get((task, solver, eps, label))
                mark = ""
                if before is None:
                    before = (sd._median(old_recs, task, solver, eps, "a3", "E=100"), 3)
                    mark = "†"
                if label == "old":
                    after = before
                seed0 = {r["label"]: r["acc"] for r in old_recs if (
                    r["task"], r["solver"], r["eps"], r.get("rev", ""), r["seed"]) == (
                    task, solver, eps, "a2", 0) and r["acc"] is not None}
                best = max(seed0, key=seed0.get) if seed0 else None
                tuned = None if best is None else sd._median(old_recs, task, solver, eps, "a2", best)
                arrow = "=" if label == "old" else "→"
                cells.append(f"{f(before[0])}{mark} {arrow} **{f(after[0] if after else None)}**"
                             f" ({f(tuned)})")
            s = full_batch_noise_index(n, d + 1, bun_steinke_rho(0.1, 1e-5))
            print(f"| `{solver}` | {task} | {s:.1f} | " + " | ".join(cells) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=lambda s: s.split(","),
                    default=["a9a", "phishing", "mushrooms", "w8a"])
    ap.add_argument("--solvers", type=lambda s: s.split(","), default=list(SOLVERS))
    ap.add_argument("--eps", type=lambda s: [float(x) for x in s.split(",")],
                    default=list(EPSILONS))
    ap.add_argument("--labels", type=lambda s: s.split(","), default=["old"])
    ap.add_argument("--seeds", type=_seeds, default=_seeds("0-4"))
    ap.add_argument("--rev", default="s1")
    ap.add_argument("--min-seeds", type=int, default=5)
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--report", action="store_true",
                    help="before -> after (tuned) per cell under the adopted rule")
    args = ap.parse_args(argv)
    if args.report:
        return report(args)
    return table(args) if args.table else run(args)


if __name__ == "__main__":
    sys.exit(main())
