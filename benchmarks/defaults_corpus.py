"""The development corpus of the defaults and its leave-one-dataset-out protocol (issue 32).

For every classification set of ``$FASTDP_DATA`` (MANIFEST.md) and a few synthetic
families for shapes no real set covers, and every epsilon in {0.1, 1, 8}
(delta = 1e-5), this measures

* the default: ``DPLogisticRegression(epsilon=eps)`` on the raw rows (the
  estimator's own row map and intercept), test accuracy, median over seeds;
* "best tuned": the best point of a stated grid of fastdp's own DP-SGD and
  objective perturbation (:func:`grid`), **chosen on a validation split**
  (20 % of the training rows, seed 0, *unaccounted*: an optimistic reference a
  private user cannot reach for free), then refitted on the whole training
  part and scored on the test part, median over seeds;
* rule variants (``--variants``): the default with one rule's constant
  changed, for the leave-one-dataset-out choice of that constant (:func:`loo`).

Peers (Opacus, diffprivlib) are not installed on the machine this was written
on; they are left out (``compare_utility.py`` runs them in their own venv).

Records are cached one per line in ``benchmarks/results/defaults_corpus.jsonl``
(key: set, epsilon, label, seed, rev), so a re-run only computes what is missing.

Usage::

    nice -n 10 python3 benchmarks/defaults_corpus.py --quick          # default + grid
    python3 benchmarks/defaults_corpus.py --report                    # the LOO table
"""

import argparse
import bz2
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
sys.path.insert(0, str(HERE.parent))

from fastdp.defaults import dpsgd_defaults, perturbation_alpha  # noqa: E402
from fastdp.io.libsvm import load_libsvm  # noqa: E402
from fastdp.linear_model import DPLogisticRegression  # noqa: E402

RESULTS = HERE / "results" / "defaults_corpus.jsonl"
DATA_HOME = Path(os.environ.get("FASTDP_DATA", "/work/shared/data"))
EPSILONS = (0.1, 1.0, 8.0)
DELTA = 1e-5
SEEDS = (0, 1, 2)

#: name -> (train file, n_features, test file or None).  LIBSVM classification sets.
LIBSVM_SETS = {
    "a9a": ("a9a/a9a.bz2", 123, "a9a/a9a.t.bz2"),
    "phishing": ("phishing/phishing.bz2", 68, None),
    "mushrooms": ("mushrooms/mushrooms.bz2", 112, None),
    "w8a": ("w8a/w8a.bz2", 300, None),
    "australian": ("australian/australian.bz2", 14, None),
    "heart": ("heart/heart_scale.bz2", 13, None),
    "german": ("german_numer/german.numer.bz2", 24, None),
    "fourclass": ("fourclass/fourclass.bz2", 2, None),
    "sonar": ("sonar/sonar_scale.bz2", 60, None),
    "ionosphere": ("ionosphere/ionosphere_scale.bz2", 34, None),
    "splice": ("splice/splice_train_then_test.bz2", 60, None),
    "pendigits": ("pendigits/pendigits.bz2", 16, "pendigits/pendigits.t.bz2"),
    "satimage": ("satimage/satimage.scale.bz2", 36, "satimage/satimage.scale.t.bz2"),
    "vowel": ("vowel/vowel.scale.bz2", 10, None),
    "vehicle": ("vehicle/vehicle.scale.bz2", 18, None),
    "wine": ("wine/wine.scale.bz2", 13, None),
    "news20": ("news20/news20.bz2", 62061, None),
    "sector": ("sector/sector.scale.bz2", 55197, "sector/sector.t.scale.bz2"),
}
#: DP-AGD's dense .dat sets (last column the 0/1 label)
DAT_SETS = {"bank": "bank/BANK.dat.bz2", "ipums_br": "ipums_br/IPUMS-BR.dat.bz2"}
#: synthetic families: name -> generator of (X, y)
SYNTHETIC = ("syn_k50", "syn_d2", "syn_n300", "syn_imb1", "syn_k3_d180")
#: the --quick subset (cheap to fit: every shape family, no 50k-feature text)
QUICK = ("phishing", "mushrooms", "australian", "heart", "german", "fourclass", "sonar",
         "ionosphere", "splice", "pendigits", "satimage", "vowel", "vehicle", "wine",
         "bank", "syn_k50", "syn_d2", "syn_n300", "syn_imb1", "syn_k3_d180")


# ------------------------------------------------------------------------------- data
def _synthetic(name):
    """Public synthetic families (fixed seeds): shapes no corpus set has."""
    rng = np.random.default_rng(12345)
    if name == "syn_k50":        # 50 classes, 16 dense features, 10,000 rows
        K, d, n = 50, 16, 10000
        means = rng.normal(size=(K, d)) * 1.5
        y = rng.integers(K, size=n)
        return means[y] + rng.normal(size=(n, d)), y.astype(float)
    if name == "syn_d2":         # 2 raw features on a large offset scale, affine boundary
        n = 3000
        X = rng.normal(size=(n, 2)) * [30.0, 5.0] + [100.0, 40.0]
        score = (X[:, 0] - 100.0) / 30.0 + (X[:, 1] - 40.0) / 5.0 + rng.logistic(size=n) * 0.5
        return X, np.where(score > 0.3, 1.0, -1.0)
    if name == "syn_n300":       # few rows: n = 300 (240 to train), d = 10
        n, d = 300, 10
        w = rng.normal(size=d)
        X = rng.normal(size=(n, d))
        return X, np.where(X @ w + rng.logistic(size=n) > 0, 1.0, -1.0)
    if name == "syn_imb1":       # heavy imbalance: 1 % positives, n = 20,000, d = 20
        n, d = 20000, 20
        w = rng.normal(size=d)
        X = rng.normal(size=(n, d))
        s = X @ w
        y = np.where(s > np.quantile(s, 0.99) - 0.5 * rng.logistic(size=n), 1.0, -1.0)
        return X, y
    if name == "syn_k3_d180":    # 3 classes, 2,000 rows, 180 one-hot features (60 positions x 3)
        n, positions, K = 2000, 60, 3
        y = rng.integers(K, size=n)
        prefs = 0.9 / 3 + 0.1 * rng.dirichlet(np.ones(3) * 0.5, size=(K, positions))  # weak signal
        X = np.zeros((n, 3 * positions))
        for i in range(n):
            letters = [rng.choice(3, p=prefs[y[i], j]) for j in range(positions)]
            X[i, 3 * np.arange(positions) + letters] = 1.0
        return X, y.astype(float)
    raise KeyError(name)


def _split(n, frac, seed):
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(round(frac * n))
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def load(name):
    """``(X_train, y_train, X_test, y_test)``: official test split where one exists, else 80/20."""
    Xte = yte = None
    if name in LIBSVM_SETS:
        train, d, test = LIBSVM_SETS[name]
        X, y = load_libsvm(DATA_HOME / train, n_features=d)
        if test is not None:
            Xte, yte = load_libsvm(DATA_HOME / test, n_features=d)
        if X.shape[1] <= 200:
            X = X.toarray()
            Xte = None if Xte is None else Xte.toarray()
    elif name in DAT_SETS:
        Z = np.loadtxt(bz2.open(DATA_HOME / DAT_SETS[name], "rt"))
        X, y = Z[:, :-1], Z[:, -1]
    else:
        X, y = _synthetic(name)
    if Xte is None:
        tr, te = _split(X.shape[0], 0.8, 0)
        X, Xte, y, yte = X[tr], X[te], np.asarray(y)[tr], np.asarray(y)[te]
    return X, np.asarray(y, float), Xte, np.asarray(yte, float)


def shape_of(Xtr, ytr):
    """Public shape facts of a training part: n, d, K, minority share (reported only)."""
    classes, counts = np.unique(ytr, return_counts=True)
    return {"n": int(Xtr.shape[0]), "d": int(Xtr.shape[1]), "K": int(classes.size),
            "minority": float(counts.min() / counts.sum())}


# ------------------------------------------------------------------------------- grid
def grid(n, d, K, eps):
    """The tuned grid at (n, d, K, eps): ``[(label, params), ...]``, stated relative to the rule.

    DP-SGD: total step ``H`` times {1/3, 1, 3} x lot size times {1, 4} x epochs
    times {1/4, 1} (the step s = eta C adjusted so that each point has its H),
    clip 0.3 (the rule's), plus clip 1 at the rule's H; objective perturbation
    at alpha times {0.1, 1, 10} of its rule.  22 points.
    """
    loss = "multinomial" if K > 2 else "logistic"
    rule = dpsgd_defaults(n, eps, loss, K, d + 1)
    L0, E0, C0 = rule["batch_size"], rule["epochs"], rule["clip"]
    H0 = rule["learning_rate"] * C0 * E0 * n / L0          # the rule's nominal total step
    out = []
    for fh in (1 / 3, 1.0, 3.0):
        for fb in (1, 4):
            for fe in (0.25, 1.0):
                L = int(max(1, min(L0 * fb, n // 2)))
                E = max(1.0, round(E0 * fe))
                s = fh * H0 * L / (E * n)
                out.append((f"sgd:H{fh:.2g},L{fb},E{fe:g}",
                            dict(batch_size=L, epochs=E, clip=C0,
                                 solver_options={"learning_rate": s / C0})))
    s = H0 * L0 / (E0 * n)
    out.append(("sgd:C1", dict(batch_size=L0, epochs=E0, clip=1.0,
                               solver_options={"learning_rate": s})))
    if K == 2:
        a0 = perturbation_alpha(n, d + 1, eps, "objective")
        for fa in (0.1, 1.0, 10.0):
            out.append((f"obj:a{fa:g}", dict(solver="objective", alpha=fa * a0)))
    return out


# ------------------------------------------------------------------------------- fits
def fit_score(params, eps, seed, Xtr, ytr, Xte, yte):
    """Test accuracy (%) of ``DPLogisticRegression(epsilon=eps, **params)``, or of the
    default accounted search at total ``eps`` when ``params == {"search": True}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if params.get("search"):
            from fastdp.model_selection import DPHyperparameterSearch

            est = DPHyperparameterSearch(DPLogisticRegression(), epsilon=eps, delta=DELTA,
                                         random_state=seed)
        else:
            est = DPLogisticRegression(epsilon=eps, delta=DELTA, random_state=seed, **params)
        est.fit(Xtr, ytr)
        return 100.0 * float(est.score(Xte, yte))


class Cache:
    """The JSONL records, keyed by (set, eps, label, seed, rev, part)."""

    def __init__(self, path=RESULTS):
        self.path = path
        self.rows = {}
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                self.rows[self._key(r)] = r

    @staticmethod
    def _key(r):
        return (r["set"], r["eps"], r["label"], r["seed"], r["rev"], r["part"])

    def get(self, **k):
        return self.rows.get(self._key(k))

    def put(self, rec):
        self.rows[self._key(rec)] = rec
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def _run(cache, name, eps, label, params, seed, rev, part, data):
    hit = cache.get(set=name, eps=eps, label=label, seed=seed, rev=rev, part=part)
    if hit is not None:
        return hit["acc"]
    t = time.perf_counter()
    acc = fit_score(params, eps, seed, *data)
    cache.put({"set": name, "eps": eps, "label": label, "seed": seed, "rev": rev,
               "part": part, "acc": acc, "time": round(time.perf_counter() - t, 3)})
    return acc


def _rule_params(n, d, K, eps, noise_power=0.0, floor=None, step_factor=1.0, clip=None):
    """Explicit DP-SGD settings of the rule with one constant changed (for the LOO choice).

    Written from the rule's closed form, independently of ``fastdp.defaults``
    beyond the lot, epochs and clip: ``noise_power`` p: the multinomial total
    step is the binary rule's at ``eps / kappa_K ** p`` (p = 1: the rule of
    issue 17; p = 0: issue 32's); ``floor``: the binary small-budget floor H_min
    (None: the current rule's).
    """
    from fastdp.defaults import MAX_LEARNING_RATE, dpsgd_defaults, min_total_step

    loss = "multinomial" if K > 2 else "logistic"
    r = dpsgd_defaults(n, eps, loss, K, d + 1)
    L, E, C = r["batch_size"], r["epochs"], (r["clip"] if clip is None else clip)
    s = 0.3 * eps * L / E
    cap = MAX_LEARNING_RATE[loss] * (K / 2 if K > 2 else 1)
    if K > 2:
        s /= (2.0 * math.sqrt(math.log(K))) ** noise_power
    else:
        h_min = min_total_step(n, d + 1, loss) if floor is None else floor * min(1, n / (d + 1))
        s = max(s, h_min * L / (E * n)) * step_factor
    return dict(batch_size=L, epochs=E, clip=C,
                solver_options={"learning_rate": min(min(s, cap) / C, 5.0 * n)})


#: rule variants measured for the LOO choice: label -> (applies to K > 2?, params(n, d, K, eps))
VARIANTS = {
    "default": (None, None),
    "mc_p1": (True, lambda n, d, K, e: _rule_params(n, d, K, e, noise_power=1.0)),
    "mc_p0.5": (True, lambda n, d, K, e: _rule_params(n, d, K, e, noise_power=0.5)),
    "mc_p0": (True, lambda n, d, K, e: _rule_params(n, d, K, e, noise_power=0.0)),
    "mc_pdn": (True, lambda n, d, K, e: _rule_params(n, d, K, e,
                                                     noise_power=min(1.0, (d + 1) / n))),
    "fl100": (False, lambda n, d, K, e: _rule_params(n, d, K, e, floor=100.0)),
    "fl0": (False, lambda n, d, K, e: _rule_params(n, d, K, e, floor=0.0)),
    "fl300": (False, lambda n, d, K, e: _rule_params(n, d, K, e, floor=300.0)),
    "sf3": (False, lambda n, d, K, e: _rule_params(n, d, K, e, step_factor=3.0)),
    "c1_lowd": (False, lambda n, d, K, e: _rule_params(
        n, d, K, e, clip=1.0 if 10 * (d + 1) <= n else None)),
    "c1": (False, lambda n, d, K, e: _rule_params(n, d, K, e, clip=1.0)),
    "sf3_lowd": (False, lambda n, d, K, e: _rule_params(
        n, d, K, e, step_factor=3.0 if 10 * (d + 1) <= n else 1.0)),
}


VARIANTS["range"] = (None, None)
#: the default accounted search (fastdp.model_selection) at the whole epsilon
VARIANTS["search"] = (None, lambda n, d, K, e: {"search": True})


def ranged(Xtr, ytr, Xte, yte):
    """The option for few features: each feature's range mapped onto [-1, 1] / sqrt(d).

    The ranges are the training part's min and max, *treated as declared public
    bounds* (optimistic: a user declares measurement ranges, which are wider).
    """
    from fastdp.preprocessing import scale_features_range

    lo, hi = Xtr.min(0), Xtr.max(0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    return (scale_features_range(Xtr, lo, hi), ytr, scale_features_range(Xte, lo, hi), yte)


def seeds_for(n, seeds):
    """More seeds for small sets (their test sets are small, so one seed is noisy)."""
    return range(max(len(seeds), 7)) if n < 2000 else seeds


def run_set(cache, name, eps_list, seeds, rev, tuned=True, variants=("default",)):
    Xtr, ytr, Xte, yte = load(name)
    shp = shape_of(Xtr, ytr)
    print(f"{name}: {shp}", flush=True)
    seeds = seeds_for(shp["n"], seeds)
    for eps in eps_list:
        for v in variants:
            multi, make = VARIANTS[v]
            if multi is not None and multi != (shp["K"] > 2):
                continue
            if v == "range":
                if sp.issparse(Xtr):
                    continue
                for seed in seeds:
                    _run(cache, name, eps, v, {"normalize": "clip"}, seed, rev, "test",
                         ranged(Xtr, ytr, Xte, yte))
                continue
            params = {} if make is None else make(shp["n"], shp["d"], shp["K"], eps)
            for seed in seeds:
                _run(cache, name, eps, v, params, seed, rev, "test", (Xtr, ytr, Xte, yte))
        if not tuned:
            continue
        tr, va = _split(Xtr.shape[0], 0.8, 1)
        val_data = (Xtr[tr], ytr[tr], Xtr[va], ytr[va])
        pts = grid(tr.size, shp["d"], shp["K"], eps)
        val_seeds = (0,) if shp["n"] >= 2000 else (0, 1, 2)
        vals = {lab: np.mean([_run(cache, name, eps, lab, p, s, "g1", "val", val_data)
                              for s in val_seeds]) for lab, p in pts}
        best = max(vals, key=vals.get)
        cache.put({"set": name, "eps": eps, "label": "selected", "seed": 0, "rev": "g2",
                   "part": "sel", "acc": float(vals[best]), "best": best})
        # the chosen point re-resolved at the full training size (the same relative setting)
        params = dict(grid(Xtr.shape[0], shp["d"], shp["K"], eps))[best]
        for seed in seeds:
            _run(cache, name, eps, "tuned:" + best, params, seed, "g1", "test",
                 (Xtr, ytr, Xte, yte))
        print(f"  eps={eps}: best {best} (val {vals[best]:.1f})", flush=True)


# ----------------------------------------------------------------------------- report
#: variants equal to the rule before issue 32 (rev r0's "default"), read from those records
OLD_RULE_ALIASES = ("mc_p1", "fl300")


#: variants equal to the rule of issue 32 (rev r1's "default")
NEW_RULE_ALIASES = ("mc_p0", "fl100")


def cell(cache, name, eps, label, rev, seeds=range(7)):
    missing = cache.get(set=name, eps=eps, label=label, seed=0, rev=rev, part="test") is None
    if label in OLD_RULE_ALIASES and missing:
        label, rev = "default", "r0"
    elif label in NEW_RULE_ALIASES and missing:
        label, rev = "default", "r1"
    accs = [cache.get(set=name, eps=eps, label=label, seed=s, rev=rev, part="test")
            for s in seeds]
    accs = [a["acc"] for a in accs if a is not None]
    return float(np.median(accs)) if accs else None


def tuned_cell(cache, name, eps):
    sel = cache.get(set=name, eps=eps, label="selected", seed=0, rev="g2", part="sel")
    if sel is None:
        return None, None
    lab = "tuned:" + sel["best"]
    return lab[6:], cell(cache, name, eps, lab, "g1")


def gaps(cache, names, variant, rev, eps_list=EPSILONS):
    """{(set, eps): default - best tuned} of ``variant``; best tuned = max(tuned, every variant)."""
    out = {}
    for name in names:
        for eps in eps_list:
            _, t = tuned_cell(cache, name, eps)
            v = cell(cache, name, eps, variant, rev)
            if t is None or v is None:
                continue
            out[(name, eps)] = (v, t)
    return out


def loo(cache, names, candidates, rev, eps_list=EPSILONS):
    """Leave-one-dataset-out choice among rule ``candidates`` (variant labels).

    For each held-out set: the candidate with the smallest mean shortfall
    ``max(0, reference - variant)`` over the *other* sets (ties: the first listed,
    the simplest), scored on the held-out set.  The reference is the best tuned
    grid point, or, where no grid was run (news20, sector: too slow here), the best
    candidate.  A candidate that does not apply to a set is the first candidate
    there.  Returns {set: (chosen, {eps: variant - reference})}.
    """
    values = {}
    for name in names:
        for eps in eps_list:
            row = {c: cell(cache, name, eps, c, rev) for c in candidates}
            row = {c: (row[candidates[0]] if v is None else v) for c, v in row.items()}
            if any(v is None for v in row.values()):
                continue
            ref = tuned_cell(cache, name, eps)[1]
            values[(name, eps)] = (row, max(row.values()) if ref is None else ref)
    out = {}
    for held in names:
        def loss(c):
            vals = [max(0.0, ref - row[c]) for (s, e), (row, ref) in values.items() if s != held]
            return np.mean(vals) if vals else math.inf
        chosen = min(candidates, key=loss)
        out[held] = (chosen, {e: row[chosen] - ref for (s, e), (row, ref) in values.items()
                              if s == held})
    return out


def report(cache, names, rev, candidates):
    base = gaps(cache, names, "default", rev)
    print("| set (n × d, K) | default ε = 0.1 / 1 / 8 | best tuned | default − tuned | tuned point at ε = 1 |")
    print("|---|---|---|---|---|")
    shapes = {}
    for name in names:
        if not any(s == name for s, _ in base):
            continue
        Xtr, ytr, _, _ = load(name)
        shp = shapes[name] = shape_of(Xtr, ytr)
        d = [base.get((name, e), (None, None)) for e in EPSILONS]
        f = lambda x: "—" if x is None else f"{x:.1f}"  # noqa: E731
        print(f"| {name} ({shp['n']} × {shp['d']}, {shp['K']}) | "
              f"{' / '.join(f(v) for v, _ in d)} | {' / '.join(f(t) for _, t in d)} | "
              f"{' / '.join('—' if v is None else f'{v - t:+.1f}' for v, t in d)} | "
              f"{tuned_cell(cache, name, 1.0)[0]} |")
    cells = list(base.values())
    within = sum(v - t >= -1.0 for v, t in cells)
    drops = [(n, a, b, x - y) for n in names for a, b in zip(EPSILONS, EPSILONS[1:])
             for x, y in [(base.get((n, a), (None,))[0], base.get((n, b), (None,))[0])]
             if x is not None and y is not None and x - y > 0.3]
    print(f"\ndrops > 0.3 as eps grows: {drops}")
    print(f"cells: {len(cells)}; within 1.0 point: {within} ({100 * within / max(1, len(cells)):.0f} %);"
          f" worst {min(v - t for v, t in cells):+.1f}")
    if len(candidates) > 1:
        res = loo(cache, names, candidates, "r0")
        print("\nLOO:")
        allg = []
        for name, (c, g) in res.items():
            allg += list(g.values())
            print(f"  {name}: {c}  " + " ".join(f"{e}:{x:+.1f}" for e, x in sorted(g.items())))
        print(f"  LOO cells within 1.0: {sum(x >= -1 for x in allg)}/{len(allg)}; "
              f"worst {min(allg):+.1f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the QUICK subset of sets")
    p.add_argument("--sets", default=None, help="comma-separated set names")
    p.add_argument("--eps", default=",".join(str(e) for e in EPSILONS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--rev", default="r0", help="label of the code revision of the default")
    p.add_argument("--no-tuned", action="store_true")
    p.add_argument("--variants", default="default")
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    all_sets = list(LIBSVM_SETS) + list(DAT_SETS) + list(SYNTHETIC)
    names = args.sets.split(",") if args.sets else (list(QUICK) if args.quick else all_sets)
    cache = Cache()
    variants = args.variants.split(",")
    if args.report:
        report(cache, names, args.rev, variants)
        return 0
    for name in names:
        run_set(cache, name, [float(e) for e in args.eps.split(",")], range(args.seeds),
                args.rev, tuned=not args.no_tuned, variants=variants)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
