"""Reproduction of seed 002 (Kuru et al., DP accelerated optimisation): Figs. 1-4.

Run ``python -m fastdp.experiments.seed002 --out DIR`` (full grid: 20 runs
per cell, run in lock step, m ∈ {1000, 100000}, T ∈ {100, 200, 500, 1000},
c ∈ {0.1, 1}, both noise conventions; the -opt variants at m = 1000 with the
subsampling-aware horizon rule; the claims on 3 further data seeds; about
25 minutes on one free core, much longer on a loaded machine) or
``--quick`` (T = 100, 2 runs, under a minute).  Writes ``seed002.md``
(tables: ours next to the numbers spec 002 transcribes from the published
figures [FIG] and from its own replication [REPL]), ``seed002.json`` (every
number) and PNG figures when matplotlib is installed.  One unit per grid cell (and per
extra data seed; :func:`plan_units`, run by :mod:`fastdp.experiments.runner`):
``OUT/seed002_units.jsonl`` keeps the finished units, ``--resume`` continues
it, ``--budget-min M`` starts no unit after M minutes and ``--report-only``
rewrites the report from it.

The data are the paper's synthetic logistic problem (spec 002, section 5.3):
U = ``RandomState(1).rand(d, n).T`` (MATLAB's ``rng(1); rand(n, d)``), rows in
the L1 ball of radius 20 (S1 = 40), labels sign(U w) with the calibrated
``w = default_rng(74).standard_normal(d)`` (F(x_0) − F* = 28.90), the
objective (1/n) Σ log(1 + exp(−z uᵀx)) + λ‖x‖² with λ = 0.01 (fastdp's
``lam = 2λ = μ``), L = λ_max(UᵀU/n) + 2λ as in the paper (an over-estimate,
spec C10), x_0 = 10·1.  The -opt horizon T' uses the authors' bound
constants under both noise conventions, as the spec's replication does.

Privacy: the runs are private with respect to the synthetic records
(replace-one, pure ε; ``noise_convention="reference_code"`` runs have the
realized ε of their smaller noise, reported in the tables).  The error
curves F(x_k) − F* read the whole dataset: they are non-private
diagnostics, as in the paper.
"""

from fastdp.experiments.seed002.protocol import (  # noqa: F401
    ALGORITHMS,
    CONVENTIONS,
    FIG,
    HORIZONS,
    REPL,
    Section5Problem,
    check_claims,
    grid_plan,
    make_synthetic_logreg,
    run_algorithm,
    run_cell,
    run_grid,
)
from fastdp.experiments.seed002.robustness import (  # noqa: F401
    DATA_SEEDS,
    GAP_MATCHED_SEEDS,
    data_summary,
    fig1_table,
    fig2_profiles,
    gap_matched_seeds,
    horizon_rule_table,
    run_data_seeds,
)
from fastdp.experiments.seed002.report import (  # noqa: F401
    write_report,
)
from fastdp.experiments.seed002.cli import (  # noqa: F401
    main,
    parts_from_units,
    plan_units,
    reproduce,
    run_unit,
)

__all__ = [
    "ALGORITHMS",
    "make_synthetic_logreg",
    "Section5Problem",
    "DATA_SEEDS",
    "GAP_MATCHED_SEEDS",
    "gap_matched_seeds",
    "run_algorithm",
    "run_cell",
    "grid_plan",
    "run_grid",
    "run_data_seeds",
    "plan_units",
    "run_unit",
    "parts_from_units",
    "data_summary",
    "horizon_rule_table",
    "check_claims",
    "fig1_table",
    "fig2_profiles",
    "write_report",
    "reproduce",
    "main",
    "CONVENTIONS",
    "FIG",
    "HORIZONS",
    "REPL",
]
