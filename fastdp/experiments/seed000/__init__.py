"""Reproduction of seed 000 (Damaskinos et al., DP stochastic coordinate descent), spec 000 §6.

Run ``python -m fastdp.experiments.seed000 --out DIR`` (or ``fastdp reproduce
seed000``): the paper's protocol with its grids (DP-SCD and seqDP-SCD tuned
over 12 L × 13 C, DP-SGD over 12 L × 13 C × 13 η, SGD over 12 |ξ| × 13 η;
every configuration run with 10 seeds; days on two cores), or ``--quick``:
small grids (L ∈ {10, 100, 1000}, C ∈ {1e-4, ..., 1}, η ∈ {1, 10}),
configurations compared on the median over 2 seeds (``--tuning-seeds``), then
the selected one run with all 10 seeds (minutes). Writes ``seed000.md`` (tables, the σ
table of spec §3.6, which of the paper's claims held), ``seed000.json`` (every
number) and PNG figures (``fastdp[plot]``).

Units (:func:`plan_units`, run by :mod:`fastdp.experiments.runner`): the σ
table, one tuning selection per (dataset, method, ε) and one anchor unit per
dataset (non-private optimum, trivial predictor, convergence curves). Each
finished unit is saved to ``OUT/seed000_units.jsonl``; ``--resume`` continues
a checkpoint, ``--budget-min M`` starts no unit after M minutes (the report
then holds the complete datasets) and ``--report-only`` rewrites the report
from the checkpoint. One progress line per unit estimates the time left.

What is run (spec 000 §5.4, §6):

* Datasets, preprocessed as in the paper (max-abs scaling fitted on the
  training set, then every row scaled to unit L2 norm; ridge labels centred
  by the training mean; this preprocessing reads the data and is NOT private,
  as in the paper, see :func:`fastdp.preprocessing.paper_preprocess`):

  - phishing (LIBSVM), logistic regression, λ = 1e-4, 10 epochs; 25 % test
    split (``random_state=42``) as in the authors' code;
  - UCI Adult (adult.data / adult.test), SVM (hinge), λ = 1e-5, 10 epochs;
    fnlwgt and education dropped, the five integer columns standardised with
    the training statistics, categorical columns one-hot over the UCI
    category list (88 columns; the paper drops the first category of each
    of the 7 categorical attributes and has 81);
  - **YearPredictionMSD is not available** here, so ridge regression runs on
    two stand-ins with the same preprocessing, λ = 1e-4 and 50 epochs as for
    MSD: cal_housing (target in units of $100 000) and cpusmall (LIBSVM), each
    with a 25 % test split (``random_state=42``).

  For each seed s, 25 % of the training part is held out for validation
  (``train_test_split(random_state=s)``); N is the remaining 75 % (phishing
  6218 and Adult 24420, the paper's sizes).
* Methods: SCD (SDCA, L = 1, non-private), SGD (non-private, tuned {η, |ξ|}),
  DP-SCD (Algorithm 1, tuned {L, C}), seqDP-SCD (Algorithm 3, tuned {L, C}),
  DP-SGD (tuned {η, L, C}); ε ∈ {0.1, 0.5, 1, 2}, δ = 1e-3.
* Selection: the configuration with the best median validation metric
  (accuracy, or MSE for ridge); reported: the median test metric over the
  10 seeds of that configuration (spec §5.4 [REC]).
* Privacy (fastdp's corrected defaults, not the paper's): DP-SCD and DP-SGD
  sample Poisson batches (add/remove adjacency; the paper shuffled and
  accounted as if Poisson), seqDP-SCD fixed-size batches (replace-one); σ is
  the smallest noise multiplier whose fastdp RDP ε for the event that runs is
  at most the target. The paper chose σ with the moments accountant; the σ
  table puts the paper's accountant (exact and the authors' arithmetic) next
  to fastdp's. Hyperparameter tuning and the data-dependent preprocessing
  are outside the privacy accounting, as in the paper (spec §3.5).
"""

from fastdp.experiments.seed000.protocol import (  # noqa: F401
    DATASETS,
    DELTA,
    EPSILONS,
    Grids,
    PAPER_GRIDS,
    QUICK_GRIDS,
    anchors,
    configurations,
    convergence_curves,
    fit,
    load_paper_dataset,
    noise_multiplier,
    trivial_baseline,
    utility,
)
from fastdp.experiments.seed000.units import (  # noqa: F401
    plan_units,
    run_unit,
    runs_from_units,
    sigma_table,
)
from fastdp.experiments.seed000.claims_report import (  # noqa: F401
    check_claims,
    write_report,
)
from fastdp.experiments.seed000.cli import (  # noqa: F401
    main,
    make_grids,
    report_from_units,
    reproduce,
)

__all__ = ["DATASETS", "EPSILONS", "DELTA", "Grids", "PAPER_GRIDS", "QUICK_GRIDS",
           "load_paper_dataset", "make_grids", "plan_units", "run_unit", "runs_from_units",
           "sigma_table", "check_claims", "write_report", "report_from_units", "reproduce", "main",
           "configurations", "noise_multiplier", "utility", "fit", "anchors", "trivial_baseline",
           "convergence_curves"]
