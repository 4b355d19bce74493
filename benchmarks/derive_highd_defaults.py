"""Evidence for the high-dimensional default rule (d > n): grids on development tasks.

The default rule of :mod:`fastdp.defaults` was derived on a9a, phishing,
mushrooms and w8a (d <= 300). High-dimensional sparse text (news20: 62k
features, more than the training rows) needs other settings. This script runs
``DPLogisticRegression`` on binary (and 20-class) tasks built from the LIBSVM
news20 set and on the low-dimensional development sets, and appends one JSON
line per fit to ``benchmarks/results/highd_defaults.jsonl``; ``--summary``
prints the tables of docs/defaults.md from that file.

Tasks (all from ``shared/data``, fixed 80/20 split with ``default_rng(0)``):

* ``n20.oddeven`` (development): news20 classes odd vs even, 12.7k training rows.
* ``n20.oddeven.4k`` (development): the same, 4,000 training rows (d/n = 15.5).
* ``n20.halves`` (held out: the benchmark's ``news20.binary``): classes 1-10 vs 11-20.
* ``n20.halves.2k`` (held out): the same, 2,000 training rows (d/n = 31).
* ``n20.multi`` (held out): the 20 classes (multinomial).
* ``a9a``, ``phishing``, ``mushrooms``, ``w8a`` (d < n: the rule must not change them).

The rows are passed raw: the estimator's own row map (unit norm, private
intercept) applies, as for a user. Usage::

    python benchmarks/derive_highd_defaults.py --tasks n20.oddeven --eps 0.1,1,8 \
        --grid dpsgd --seeds 0
    python benchmarks/derive_highd_defaults.py --summary
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "highd_defaults.jsonl"
CACHE = Path(os.environ.get("FASTDP_BENCH_CACHE", Path.home() / ".cache" / "fastdp-bench"))
DATA_HOME = os.environ.get("FASTDP_DATA", "/work/shared/data")

TASKS = {
    # name: (source, labels, n_train subsample or None, role)
    "n20.oddeven": ("news20", "oddeven", None, "development"),
    "n20.oddeven.4k": ("news20", "oddeven", 4000, "development"),
    "n20.halves": ("news20", "halves", None, "held out"),
    "n20.halves.2k": ("news20", "halves", 2000, "held out"),
    "n20.multi": ("news20", "multi", None, "held out"),
    "n20.k5": ("news20", "k5", None, "multiclass held out"),
    "n20.k10": ("news20", "k10", None, "multiclass held out"),
    "abalone.sex": ("abalone", "sex", None, "multiclass held out"),
    "synth.k10": ("synthetic", "k10", None, "multiclass development"),
    "synth.k4": ("synthetic", "k4", None, "multiclass development"),
    # held out for issue 17's small-budget cells (low d, small n: n eps < 1000 at eps = 0.1)
    "adult.4k": ("adult", None, 4000, "held out"),
    "bank.4k": ("bank", None, 4000, "held out"),
    "ipums.4k": ("ipums_br", None, 4000, "held out"),
    "abalone.bin": ("abalone", "rings10", None, "held out"),
    "cal.bin.4k": ("cal_housing", "value2e5", 4000, "held out"),
    "a9a": ("a9a", None, None, "low-d"),
    "phishing": ("phishing", None, None, "low-d"),
    "mushrooms": ("mushrooms", None, None, "low-d"),
    "w8a": ("w8a", None, None, "low-d"),
}


def _split(n):
    perm = np.random.default_rng(0).permutation(n)
    cut = int(round(0.8 * n))
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def _load_source(source):
    """(X, y[, Xte, yte]) of a source, cached as npz outside the repository."""
    path = CACHE / "utility-data" / f"{source}_raw.npz"
    if not path.exists():
        from fastdp.datasets import load_dataset

        X, y = load_dataset(source, data_home=DATA_HOME, subset="train")
        extra = {}
        if source == "a9a":
            Xt, yt = load_dataset(source, data_home=DATA_HOME, subset="test")
            Xt = sp.csr_matrix(Xt, dtype=np.float64)
            extra = dict(te_data=Xt.data, te_indices=Xt.indices, te_indptr=Xt.indptr,
                         te_shape=Xt.shape, yte=np.asarray(yt, float))
        X = sp.csr_matrix(X, dtype=np.float64)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr, shape=X.shape,
                 y=np.asarray(y, float), **extra)
    z = np.load(path)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    if "te_data" in z:
        Xt = sp.csr_matrix((z["te_data"], z["te_indices"], z["te_indptr"]),
                           shape=tuple(z["te_shape"]))
        return X, z["y"], Xt, z["yte"]
    return X, z["y"]


def _synthetic(n_classes, n=25000, d=100, seed=0):
    """A Gaussian mixture: K class means of norm 3 on random directions, N(0, I_d) noise."""
    rng = np.random.default_rng(1000 + n_classes)
    means = rng.standard_normal((n_classes, d))
    means *= 3.0 / np.linalg.norm(means, axis=1, keepdims=True)
    y = rng.integers(0, n_classes, n)
    X = means[y] + rng.standard_normal((n, d))
    return sp.csr_matrix(X), y.astype(float) + 1.0


def _dense_task(source, labels, n_sub):
    """A held-out dense task: columns scaled to [-1, 1] by their largest magnitude over the
    whole file (benchmark preparation, outside the private fit), then the estimator's row map."""
    from fastdp.datasets import load_dataset

    X, y = load_dataset(source, data_home=DATA_HOME)
    if source == "adult":
        Xt, yt = load_dataset(source, data_home=DATA_HOME, subset="test")
        scale = np.maximum(np.abs(np.vstack([X, Xt])).max(axis=0), 1e-12)
        Xtr, ytr, Xte, yte = X / scale, y, Xt / scale, yt
    else:
        if labels == "rings10":          # abalone: rings >= 10 (its median) vs fewer
            y = np.where(y >= 10, 1.0, -1.0)
        elif labels == "value2e5":       # California housing: value above $200,000
            y = np.where(y > 2e5, 1.0, -1.0)
        X = X / np.maximum(np.abs(X).max(axis=0), 1e-12)
        tr, te = _split(X.shape[0])
        Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
    if n_sub is not None:
        keep = np.sort(np.random.default_rng(1).permutation(Xtr.shape[0])[:n_sub])
        Xtr, ytr = Xtr[keep], ytr[keep]
    return sp.csr_matrix(Xtr), ytr, sp.csr_matrix(Xte), yte


def load_task(name):
    """(Xtr, ytr, Xte, yte): raw rows, fixed split, labels of the task."""
    source, labels, n_sub, _ = TASKS[name]
    if source == "synthetic":
        X, y = _synthetic(int(labels[1:]))
        tr, te = _split(X.shape[0])
        return X[tr], y[tr], X[te], y[te]
    if source == "abalone" and labels == "sex":
        from fastdp.datasets import load_dataset

        A, _ = load_dataset("abalone", data_home=DATA_HOME)
        X, y = sp.csr_matrix(A[:, 3:]), np.argmax(A[:, :3], axis=1).astype(float)
        tr, te = _split(X.shape[0])
        return X[tr], y[tr], X[te], y[te]
    if source in ("adult", "bank", "ipums_br", "abalone", "cal_housing"):
        return _dense_task(source, labels, n_sub)
    got = _load_source(source)
    if len(got) == 4:
        return got
    X, y = got
    tr, te = _split(X.shape[0])
    Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
    if labels == "oddeven":
        ytr, yte = np.where(ytr % 2 == 1, 1.0, -1.0), np.where(yte % 2 == 1, 1.0, -1.0)
    elif labels == "halves":
        ytr, yte = np.where(ytr <= 10, 1.0, -1.0), np.where(yte <= 10, 1.0, -1.0)
    elif labels in ("k5", "k10"):
        K = int(labels[1:])
        ktr, kte = ytr <= K, yte <= K
        Xtr, ytr, Xte, yte = Xtr[ktr], ytr[ktr], Xte[kte], yte[kte]
    if n_sub is not None:
        keep = np.sort(np.random.default_rng(1).permutation(Xtr.shape[0])[:n_sub])
        Xtr, ytr = Xtr[keep], ytr[keep]
    return Xtr, ytr, Xte, yte


def grid(kind, eps, n, d, n_classes=2):
    """[(label, kwargs)] of a named grid at ``eps`` (public quantities only)."""
    from fastdp.defaults import dpsgd_defaults

    out = [("default", {})]
    if kind in ("default", "defaults"):
        return out
    if kind == "dpsgd":
        for B, C, m in itertools.product([256, 1024, 4096], [1.0, 0.3, 0.1],
                                         [0.3, 1.0, 3.0, 10.0]):
            rule = dpsgd_defaults(n, eps, "logistic")
            E = rule["epochs"]
            # effective step eta*C is m times the rule's uncapped step at this batch
            eta = m * 0.3 * eps * B / E / C
            out.append((f"sgd,B={B},C={C:g},m={m:g},E={E:g}",
                        dict(solver="dpsgd", batch_size=B, clip=C, epochs=E,
                             solver_options={"learning_rate": eta})))
    elif kind == "r2":
        # around (C = 0.3, eta = the rule's uncapped step at the batch): batch, clip, step
        for B, C, k in itertools.product([256, 1024, "n/4"], [0.3, 0.15], [1.0, 0.3, 3.0]):
            L = max(1, n // 4) if B == "n/4" else B
            E = dpsgd_defaults(n, eps, "logistic")["epochs"]
            out.append((f"sgd,B={B},C={C:g},k={k:g}",
                        dict(solver="dpsgd", batch_size=L, clip=C, epochs=E,
                             solver_options={"learning_rate": k * 0.3 * eps * L / E})))
    elif kind in ("r3low", "r3high"):
        # candidate rules (3 seeds): the clip 0.3 at the rule's effective step (low d);
        # the high-d rule: large lots, clip 0.3, uncapped step 0.3 eps L / E
        rule = dpsgd_defaults(n, eps, "logistic")
        E = rule["epochs"]
        s = rule["learning_rate"] * rule["clip"]     # the rule's step eta * C
        if kind == "r3low":
            for name, f in (("C.3", 1.0), ("C.3x2", 2.0)):
                out.append((name, dict(solver="dpsgd", clip=0.3, batch_size=rule["batch_size"],
                                       solver_options={"learning_rate": f * s / 0.3})))
        else:
            for name, L in (("hd", min(n // 4, 4096)), ("hd1024", min(n // 4, 1024))):
                out.append((name, dict(solver="dpsgd", batch_size=L, clip=0.3, epochs=E,
                                       solver_options={"learning_rate": 0.3 * eps * L / E})))
            out.append(("C.3", dict(solver="dpsgd", clip=0.3, batch_size=rule["batch_size"],
                                    solver_options={"learning_rate": s / 0.3})))
    elif kind == "r4":
        # the clip-0.3 rule with twice the step fraction (0.6 eps L / E), capped at eta_max
        rule = dpsgd_defaults(n, eps, "logistic")
        E, L = rule["epochs"], rule["batch_size"]
        s = min(0.6 * eps * L / E, 8.0)
        out.append(("C.3x2cap", dict(solver="dpsgd", clip=0.3, batch_size=L, epochs=E,
                                     solver_options={"learning_rate": s / 0.3})))
    elif kind == "r5":
        # the rule (C = 0.3) with the step halved, and at a lot of 1024 (linear scaling)
        rule = dpsgd_defaults(n, eps, "logistic")
        E, L = rule["epochs"], rule["batch_size"]
        s = rule["learning_rate"] * rule["clip"]
        out.append(("C.3 s/2", dict(solver="dpsgd", clip=0.3, batch_size=L, epochs=E,
                                    solver_options={"learning_rate": 0.5 * s / 0.3})))
        out.append(("C.3 L=1024", dict(solver="dpsgd", clip=0.3, batch_size=min(1024, n // 4),
                                       epochs=E, solver_options={
                                           "learning_rate": s * min(1024, n // 4) / L / 0.3})))
    elif kind == "mc":
        # multiclass: the lot and the step (multiplier m of 0.3 eps L / E, uncapped)
        E = dpsgd_defaults(n, eps, "logistic")["epochs"]
        for L, m in itertools.product([256, 1024, 4096], [0.25, 0.5, 1.0]):
            L = min(L, max(1, n // 4))
            out.append((f"mc,L={L},m={m:g}",
                        dict(solver="dpsgd", batch_size=L, clip=0.3, epochs=E,
                             solver_options={"learning_rate": m * 0.3 * eps * L / E / 0.3})))
    elif kind in ("mcrule", "mcpair"):
        # candidate multiclass rules (K = number of classes, public), with ablations:
        # "pair": lot 128 K (a class pair sees 2/K of each lot: 128 K keeps the binary
        #         rule's lot of 256 per pair) and the H-rule at eps / (2 sqrt(ln K))
        #         (a pair's margin noise is sqrt(2) x, the argmax over K scores
        #         sqrt(2 ln K) x, that of the binary problem);
        # "lot": the lot only; "kappa": the effective epsilon only.
        # "old": the rule before the multiclass rule (binary lot 256 and epsilon), spelled out.
        K = int(n_classes)
        kappa = 2.0 * math.sqrt(math.log(K))
        out = []           # the estimator default is the "pair" rule once adopted
        for name, L, e_eff in (("old", min(256, max(1, n // 4)), eps),
                               ("pair", min(128 * K, max(1, n // 4)), eps / kappa),
                               ("lot", min(128 * K, max(1, n // 4)), eps),
                               ("kappa", min(256, max(1, n // 4)), eps / kappa)):
            if kind == "mcpair" and name not in ("old", "pair"):
                continue          # "mcpair": the rule against the old one only (held out)
            E = float(min(80, max(5, round(20.0 * e_eff))))
            step = min(0.3 * e_eff * L / E, 8.0 if name == "old" else 0.5 * K * 8.0)
            out.append((name, dict(solver="dpsgd", batch_size=L, clip=0.3, epochs=E,
                                   solver_options={"learning_rate": step / 0.3})))
    elif kind in ("avg", "hfloor"):
        # issue 17 (mushrooms at eps = 0.1): the binary rule's step times m, with tail
        # averaging of the iterates ("avg"; the solvers' average= option of commit f40ec92,
        # reverted in the next commit because it did not help: run it from that commit),
        # or the total step H = s T raised to a floor H_min ("hfloor": s >= H_min / T, T the
        # floored step count, within 1 % of the adopted rule's H_min L / (E n)); the step
        # capped at eta_max = 8 as the rule caps it
        rule = dpsgd_defaults(n, eps, "logistic")
        E, L, C = rule["epochs"], rule["batch_size"], rule["clip"]
        s = rule["learning_rate"] * C
        T = math.floor(E * n / L)
        if kind == "avg":
            for m, a in itertools.product([1.0, 2.0, 3.0], [0.0, 0.5, 0.25]):
                out.append((f"m={m:g},avg={a:g}", dict(
                    solver="dpsgd", clip=C, batch_size=L, epochs=E,
                    solver_options={"learning_rate": min(m * s, 8.0) / C, "average": a})))
        else:
            for h in (300.0, 600.0):
                out.append((f"Hmin={h:g}", dict(
                    solver="dpsgd", clip=C, batch_size=L, epochs=E,
                    solver_options={"learning_rate": min(max(s, h / T), 8.0) / C})))
            for h in (0.0, 300.0):      # a smaller clip at the same step s = eta C
                out.append((f"C=0.1,Hmin={h:g}", dict(
                    solver="dpsgd", clip=0.1, batch_size=L, epochs=E,
                    solver_options={"learning_rate": min(max(s, h / T), 8.0) / 0.1})))
    elif kind == "mcx":
        # issue 17 (news20 20-class at eps = 0.5 / 1): the class-pair rule with tail averaging
        # (the average= option of commit f40ec92, reverted: run the averaged points from it),
        # a larger step under averaging, the lot n/4 (step m times 0.3 e L / E), twice the epochs
        from fastdp.defaults import multiclass_noise_factor
        K = int(n_classes)
        rule = dpsgd_defaults(n, eps, "multinomial", K)
        E, L, C = rule["epochs"], rule["batch_size"], rule["clip"]
        s = rule["learning_rate"] * C
        e = eps / multiclass_noise_factor(K)
        cap = 0.5 * K * 8.0
        opts = lambda lr, **kw: dict(solver="dpsgd", clip=C, batch_size=kw.pop("L", L),
                                     epochs=kw.pop("E", E),
                                     solver_options=dict({"learning_rate": lr / C}, **kw))
        out = [("pair", opts(s))]
        for a in (0.5, 0.25):
            out.append((f"pair,avg={a:g}", opts(s, average=a)))
        for m in (1.5, 2.0):
            out.append((f"pair,s*{m:g},avg=0.5", opts(min(m * s, cap), average=0.5)))
        Lq = max(1, n // 4)
        for m in (0.25, 0.5, 1.0):
            out.append((f"L=n/4,m={m:g}", opts(min(m * 0.3 * e * Lq / E, cap), L=Lq)))
        out.append(("pair,E*2", opts(s / 2, E=2 * E)))
    elif kind == "floorcmp":
        # the rule with the small-budget floor (the estimator's default, "new") against
        # the same rule without it ("old": its step passed explicitly)
        K = int(n_classes)
        loss = "multinomial" if K > 2 else "logistic"
        old = dpsgd_defaults(n, eps, loss, K)
        out = [("new", {}), ("old", dict(solver_options={"learning_rate": old["learning_rate"]}))]
    elif kind == "mcE":
        # the class-pair rule ("pair") against the same rule with the binary rule's epochs
        # at eps itself, E = clip(round(20 eps), 5, 80), and the same nominal total step
        # H = 0.3 (eps / kappa_K) n ("pairE": s = 0.3 e L / E, capped at (K/2) eta_max)
        from fastdp.defaults import multiclass_noise_factor
        K = int(n_classes)
        rule = dpsgd_defaults(n, eps, "multinomial", K)
        L, C = rule["batch_size"], rule["clip"]
        e = eps / multiclass_noise_factor(K)
        E = float(min(80, max(5, round(20.0 * eps))))
        out = [("pair", dict(solver="dpsgd", clip=C, batch_size=L, epochs=rule["epochs"],
                             solver_options={"learning_rate": rule["learning_rate"]})),
               ("pairE", dict(solver="dpsgd", clip=C, batch_size=L, epochs=E,
                              solver_options={"learning_rate":
                                              min(0.3 * e * L / E, 4.0 * K) / C}))]
    elif kind == "mce":
        # the class-pair rule's lot (or 1024), epochs times f, total step H times h
        # (s = h 0.3 e L / (f E), capped at (K/2) eta_max)
        from fastdp.defaults import multiclass_noise_factor
        K = int(n_classes)
        rule = dpsgd_defaults(n, eps, "multinomial", K)
        E0, L0, C = rule["epochs"], rule["batch_size"], rule["clip"]
        e = eps / multiclass_noise_factor(K)
        out = []
        for Ln, f, h in itertools.product(["rule", 1024], [1, 2, 4], [1.0, 2.0]):
            L = L0 if Ln == "rule" else min(1024, max(1, n // 4))
            E = f * E0
            step = min(h * 0.3 * e * L / E, 0.5 * K * 8.0)
            out.append((f"L={Ln},E*{f},H*{h:g}", dict(
                solver="dpsgd", clip=C, batch_size=L, epochs=E,
                solver_options={"learning_rate": step / C})))
    elif kind == "dpscd":
        for B, E, a in itertools.product([100, 1000], [20, 50], [0.1, 1.0]):
            out.append((f"scd,B={B},E={E},alpha={a:g}/n",
                        dict(solver="dpscd", batch_size=B, epochs=E, alpha=a / n)))
    elif kind.startswith("file:"):
        for line in Path(kind[5:]).read_text().splitlines():
            if line.strip():
                label, kw = line.split("\t")
                out.append((label, json.loads(kw)))
    else:
        raise SystemExit(f"unknown grid {kind}")
    return out


def done_keys():
    keys = set()
    if OUT.exists():
        for line in OUT.read_text().splitlines():
            r = json.loads(line)
            keys.add((r["task"], r["eps"], r["label"], r["seed"], r.get("rev", "")))
    return keys


def run(args):
    from fastdp.linear_model import DPLogisticRegression

    rev = args.rev
    done = done_keys()
    with open(OUT, "a") as out:
        for task in args.tasks:
            Xtr, ytr, Xte, yte = load_task(task)
            n, d = Xtr.shape
            for eps in args.eps:
                for label, kw in grid(args.grid, eps, n, d, len(np.unique(ytr))):
                    for seed in args.seeds:
                        if (task, eps, label, seed, rev) in done:
                            continue
                        t0 = time.process_time()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            try:
                                m = DPLogisticRegression(epsilon=eps, delta=1e-5,
                                                         random_state=seed, **kw).fit(Xtr, ytr)
                                acc = 100.0 * float(np.mean(m.predict(Xte) == yte))
                                info = {k: getattr(m, k + "_") for k in
                                        ("solver", "batch_size", "epochs", "clip",
                                         "learning_rate", "noise_multiplier")}
                            except Exception as exc:  # noqa: BLE001 - recorded
                                acc, info = None, {"error": f"{type(exc).__name__}: {exc}"[:200]}
                        rec = dict(task=task, n=n, d=d, eps=eps, label=label, seed=seed,
                                   rev=rev, acc=acc, cpu_s=round(time.process_time() - t0, 2),
                                   **{k: (v.item() if isinstance(v, np.generic) else v)
                                      for k, v in info.items()})
                        out.write(json.dumps(rec, default=str) + "\n")
                        out.flush()
                        print(f"{task} eps={eps} {label} seed={seed}: {acc}", flush=True)


def summary(args):
    rows = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if args.rev is not None and r.get("rev", "") != args.rev:
            continue
        rows.setdefault((r["task"], r["label"], r.get("rev", "")), {}).setdefault(
            r["eps"], []).append(r["acc"])
    eps_all = sorted({e for v in rows.values() for e in v})
    for task in TASKS:
        keys = [k for k in rows if k[0] == task]
        if not keys:
            continue
        print(f"\n## {task}\n")
        print("| setting | rev | " + " | ".join(f"ε={e:g}" for e in eps_all) + " |")
        best = {e: max((float(np.median(rows[k][e])) for k in keys if e in rows[k]
                        and None not in rows[k][e]), default=None) for e in eps_all}
        scored = sorted(keys, key=lambda k: -np.mean([
            float(np.median(rows[k][e])) for e in eps_all if e in rows[k]
            and None not in rows[k][e]] or [0]))
        for k in scored[:args.top]:
            cells = []
            for e in eps_all:
                v = rows[k].get(e)
                if not v or None in v:
                    cells.append("—")
                else:
                    s = f"{np.median(v):.1f}" + (f" ({len(v)})" if len(v) != 3 else "")
                    cells.append(f"**{s}**" if best[e] is not None and
                                 float(np.median(v)) >= best[e] else s)
            print(f"| {k[1]} | {k[2]} | " + " | ".join(cells) + " |")


def mc_table(args):
    """The multiclass table of docs/defaults.md: old rule, the rule and its halves (rev mc3)."""
    rows = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if r.get("rev") == (args.rev or "mc3") and r["acc"] is not None:
            rows.setdefault((r["task"], r["label"]), {}).setdefault(r["eps"], []).append(r["acc"])
    names = {"old": "before (binary-shaped)", "pair": "**the rule**", "lot": "lot half only",
             "kappa": "ε/κ half only"}
    eps_all = [0.1, 0.5, 1.0, 2.0, 8.0]
    print("| task | K | role | rule | " + " | ".join(f"ε = {e:g}" for e in eps_all) + " |")
    print("|---|---|---|---|" + "---|" * len(eps_all))
    for task, K, role in (("synth.k4", 4, "development"), ("synth.k10", 10, "development"),
                          ("n20.multi", 20, "development"),
                          ("n20.k5", 5, "held out"), ("n20.k10", 10, "held out"),
                          ("abalone.sex", 3, "held out")):
        for label in ("old", "pair", "lot", "kappa"):
            got = rows.get((task, label))
            if not got:
                continue
            cells = []
            for e in eps_all:
                v = got.get(e)
                cells.append("—" if not v else f"{np.median(v):.1f}" +
                             ("" if len(v) == 3 else f" ({len(v)})"))
            print(f"| {task} | {K} | {role} | {names[label]} | " + " | ".join(cells) + " |")


def _cells(revs):
    """{(task, eps, label, rev): [acc, ...]} of the records of ``revs``."""
    rows = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if r.get("rev") in revs and r["acc"] is not None:
            rows.setdefault((r["task"], r["eps"], r["label"], r["rev"]), []).append(r["acc"])
    return rows


def floor_table(args):
    """The tables of docs/defaults.md, "The small-budget floor" (revs fl1, hf2, hf3, avg1)."""
    from fastdp.defaults import dpsgd_defaults

    rows = _cells({"fl1", "hf2", "hf3", "avg1", "mcx1"})
    med = lambda k: (f"{np.median(rows[k]):.1f}" if k in rows else "—")
    print("| task | role | n | d | ε | step × | without the floor | **with the floor** | seeds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for task, role in (("mushrooms", "development"), ("phishing", "development"),
                       ("adult.4k", "held out"), ("abalone.bin", "held out"),
                       ("cal.bin.4k", "held out"), ("ipums.4k", "held out"),
                       ("bank.4k", "held out")):
        Xtr = load_task(task)[0]
        n, d = Xtr.shape
        for eps in (0.1, 0.25):
            old, new = (task, eps, "old", "fl1"), (task, eps, "new", "fl1")
            if old not in rows:
                continue
            f = (dpsgd_defaults(n, eps, "logistic", 2, d + 1)["learning_rate"]
                 / dpsgd_defaults(n, eps, "logistic")["learning_rate"])
            if f == 1.0:
                continue
            print(f"| {task} | {role} | {n} | {d + 1} | {eps:g} | {f:.2f} | {med(old)} | "
                  f"**{med(new)}** | {len(rows[new])} |")
    print()
    print("| alternative (vs reference) | task | ε | reference | alternative | seeds |")
    print("|---|---|---|---|---|---|")
    alts = [("floor 300 at every d (vs no floor)", t, 0.1, (t, 0.1, "default", "hf2"),
             (t, 0.1, "Hmin=300", "hf2")) for t in ("n20.halves.2k", "n20.oddeven.4k")]
    alts += [("floor 600 (vs floor 300)", t, 0.1, (t, 0.1, "Hmin=300", "hf2"),
              (t, 0.1, "Hmin=600", "hf2"))
             for t in ("mushrooms", "adult.4k", "ipums.4k", "bank.4k")]
    alts += [("clip 0.1, same step (vs clip 0.3)", t, 0.1, (t, 0.1, "default", "hf2"),
              (t, 0.1, "C=0.1,Hmin=0", "hf2")) for t in ("mushrooms", "adult.4k")]
    alts += [("floor on the multinomial loss (vs none)", t, 0.1, (t, 0.1, "pair", "hf3"),
              (t, 0.1, "default", "hf3")) for t in ("abalone.sex", "synth.k4", "synth.k10")]
    alts += [("tail average, last half (vs last iterate)", t, 0.1, (t, 0.1, "m=1,avg=0", "avg1"),
              (t, 0.1, "m=1,avg=0.5", "avg1")) for t in ("mushrooms", "n20.halves")]
    alts += [("step × 2 + tail average (vs step × 2)", t, 0.1, (t, 0.1, "m=2,avg=0", "avg1"),
              (t, 0.1, "m=2,avg=0.5", "avg1")) for t in ("mushrooms", "n20.halves")]
    alts += [("tail average, last half (vs last iterate)", "n20.multi", 0.5,
              ("n20.multi", 0.5, "pair", "mcx1"),
              ("n20.multi", 0.5, "pair,avg=0.5", "mcx1"))]
    for name, task, eps, a, b in alts:
        if a in rows and b in rows:
            print(f"| {name} | {task} | {eps:g} | {med(a)} | {med(b)} | "
                  f"{min(len(rows[a]), len(rows[b]))} |")


def mc_epochs_table(args):
    """The table of docs/defaults.md, "The epochs of the class-pair rule" (rev mcE1)."""
    rows = _cells({"mcE1"})
    eps_all = (0.5, 1.0, 2.0, 8.0)
    print("| task | K | role | epochs | " + " | ".join(f"ε = {e:g}" for e in eps_all) + " |")
    print("|---|---|---|---|" + "---|" * len(eps_all))
    for task, K, role in (("n20.multi", 20, "development"), ("synth.k10", 10, "development"),
                          ("synth.k4", 4, "development"), ("n20.k5", 5, "held out"),
                          ("n20.k10", 10, "held out"), ("abalone.sex", 3, "held out")):
        for label, name in (("pair", "round(20 ε/κ_K) (before)"), ("pairE", "**round(20 ε)**")):
            cells = []
            for e in eps_all:
                v = rows.get((task, e, label, "mcE1"))
                cells.append("—" if not v else f"{np.median(v):.1f}" +
                             ("" if len(v) == 8 else f" ({len(v)})"))
            print(f"| {task} | {K} | {role} | {name} | " + " | ".join(cells) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=lambda s: s.split(","), default=["n20.oddeven"])
    ap.add_argument("--eps", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.1, 1.0, 8.0])
    ap.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0])
    ap.add_argument("--grid", default="default")
    ap.add_argument("--rev", default="", help="tag of the code state (e.g. 'rule2')")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--mc-table", action="store_true", help="print the multiclass table")
    ap.add_argument("--floor-table", action="store_true",
                    help="print the tables of the small-budget floor (docs/defaults.md)")
    ap.add_argument("--mc-epochs-table", action="store_true",
                    help="print the table of the class-pair rule's epochs (docs/defaults.md)")
    args = ap.parse_args(argv)
    if args.mc_epochs_table:
        return mc_epochs_table(args)
    if args.floor_table:
        return floor_table(args)
    if args.mc_table:
        return mc_table(args)
    if args.summary:
        if args.rev == "":
            args.rev = None
        return summary(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
