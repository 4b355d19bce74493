"""Development runs of the accounted search's split/score settings (issue 17).

Runs ``DPHyperparameterSearch`` on compare_utility.py's shared rows with a few
variants of (split_accounting, score_share, validation_fraction, E[K]) and
appends one JSON line per (variant, dataset, ε, seed) to
benchmarks/results/search_variants.jsonl (already present lines are skipped).

    python3 benchmarks/search_variants.py --datasets phishing,mushrooms --eps 0.1,1,8 \
        --variants old,parallel_f20,parallel_auto --seeds 3
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_utility as cu  # noqa: E402

from fastdp.model_selection import DPHyperparameterSearch  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "search_variants.jsonl"

VARIANTS = {
    "old": dict(split_accounting="composed", score_share=0.25, validation_fraction=0.2),
    "parallel_f20": dict(split_accounting="parallel", score_share="auto", validation_fraction=0.2),
    "parallel_f10": dict(split_accounting="parallel", score_share="auto", validation_fraction=0.1),
    "parallel_f05": dict(split_accounting="parallel", score_share="auto", validation_fraction=0.05),
    "parallel_f02": dict(split_accounting="parallel", score_share="auto", validation_fraction=0.02),
    "parallel_f05_k2": dict(split_accounting="parallel", score_share="auto",
                            validation_fraction=0.05, expected_repetitions=2.0),
    "parallel_f05_eta08": dict(split_accounting="parallel", score_share="auto",
                               validation_fraction=0.05, eta=-0.8),
    "parallel_f05_rw50": dict(split_accounting="parallel", score_share="auto",
                              validation_fraction=0.05, rule_weight=0.5),
    "parallel_f05_rw50_k2": dict(split_accounting="parallel", score_share="auto",
                                 validation_fraction=0.05, rule_weight=0.5,
                                 expected_repetitions=2.0),
    "parallel_f05_rw70_k2": dict(split_accounting="parallel", score_share="auto",
                                 validation_fraction=0.05, rule_weight=0.7,
                                 expected_repetitions=2.0),
    "parallel_f05_rw50_k2_eta08": dict(split_accounting="parallel", score_share="auto",
                                       validation_fraction=0.05, rule_weight=0.5,
                                       expected_repetitions=2.0, eta=-0.8),
    "parallel_auto": dict(split_accounting="parallel", score_share="auto",
                          validation_fraction="auto"),
    "parallel_auto_k2": dict(split_accounting="parallel", score_share="auto",
                             validation_fraction="auto", expected_repetitions=2.0),
    "parallel_auto_k5": dict(split_accounting="parallel", score_share="auto",
                             validation_fraction="auto", expected_repetitions=5.0),
}


# the settings before issue 17's parallel-composition follow-up, pinned so that a variant
# keeps its meaning whatever the current defaults are
_FORMER = dict(expected_repetitions=3.0, rule_weight=None, eta=-0.5)
for _v in VARIANTS.values():
    for _k, _x in _FORMER.items():
        _v.setdefault(_k, _x)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", default="phishing,mushrooms")
    ap.add_argument("--eps", default="0.1,1,8")
    ap.add_argument("--variants", default="old,parallel_f20,parallel_auto")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    done = set()
    if OUT.exists():
        for line in OUT.read_text().splitlines():
            r = json.loads(line)
            done.add((r["variant"], r["dataset"], r["eps"], r["seed"]))
    for name in args.datasets.split(","):
        task = cu.DATASETS[name][1]
        Est = cu.fastdp_estimator(task)
        Xtr, ytr, Xte, yte, _ = cu.shared_rows(name, *cu.load_raw(name))
        for eps in [float(e) for e in args.eps.split(",")]:
            for variant in args.variants.split(","):
                for seed in range(args.seeds):
                    key = (variant, name, eps, seed)
                    if key in done:
                        continue
                    t0 = time.time()
                    search = DPHyperparameterSearch(Est(), epsilon=eps, delta=cu.DELTA,
                                                    random_state=seed, **VARIANTS[variant])
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        search.fit(Xtr, ytr)
                    s = cu.score(task, yte, np.asarray(search.predict(Xte), float))
                    rec = dict(variant=variant, dataset=name, eps=eps, seed=seed, score=s,
                               epsilon_=search.epsilon_, eps_c=search.candidate_epsilon_,
                               sigma_score=search.score_noise_multiplier_,
                               fraction=search.validation_fraction_, k=search.n_candidates_,
                               best=str(search.best_params_), seconds=round(time.time() - t0, 1))
                    with OUT.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    print(rec, flush=True)


if __name__ == "__main__":
    main()
