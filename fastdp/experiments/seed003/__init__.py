"""Reproduction of seed 003 (Chen & Lee, DP stochastic adaptive line search): Figs. 3–4.

Run ``python -m fastdp.experiments.seed003 --out DIR`` (paper protocol:
10-fold cross-validation × 5 runs, ε ∈ {0.05, 0.1, 0.2, 0.4, 0.8, 1.6},
logistic regression and SVM on Adult, Bank and IPUMS-BR; hours on two
cores) or ``--quick`` (fold 0 of the 10, 1 run, ε ∈ {0.05, 0.2, 0.8, 1.6}:
every claim keeps a small, moderate and large ε; about 3 CPU minutes). Writes
``seed003.md`` (accuracy and objective tables, run statistics, which of the
paper's qualitative claims held) and PNG figures when matplotlib is installed.
``--sweeps`` adds the Fig. 1 hyper-parameter sweeps (Adult, logistic,
ε ∈ {0.05, 0.2}), the Fig. 2 evaluation counts against q (ε = 0.4) and the
amplification ablation of spec 003 §8 A1 (the q sweep and the counts under
each of the three amplification bounds, and which reproduces C4/C5), i.e.
R2, R3 and R5, over the same folds × runs as the grid.

Resumable, splittable runs. One *unit* is one fit: (dataset, loss,
algorithm, ε, fold, run), seeded ``random_state = 1000·fold + run`` on fold
``fold`` of the shuffled 10-fold split (seed 0), exactly as the in-memory
:func:`run_grid`, so cells are bit-identical to it. Each finished unit is
appended (flushed, fsync'ed) as a JSON line to ``OUT/seed003_units.jsonl``
(``--checkpoint`` to change), so a killed process loses at most the fit in
flight; units run run-major (all folds of run 0 first). Options:

* ``--resume``: skip the units already in the checkpoint (without it an
  existing checkpoint is an error, never overwritten);
* ``--fold-range START STOP`` / ``--folds N`` and ``--run-range START STOP`` /
  ``--runs N``: the subset of folds (0–9) and runs to run;
* ``--budget-min M``: start no fit after M minutes, then write the report;
* ``--report-only`` (+ ``--units FILE ...``): write the report from the
  checkpoint and other checkpoints (e.g. one per fold range), running nothing;
  ``--archive-units`` also writes every merged unit to
  ``OUT/seed003_units.jsonl.gz`` (sorted, gzip'ed, byte-reproducible), the
  per-fit records published beside the report: ``--units`` reads archives, so
  ``--report-only --checkpoint reproductions/seed003_units.jsonl.gz`` rebuilds
  the committed report and any fit can be re-run and compared.

The report is always built from every unit present and states how many
folds × runs each cell averages ("Fits per cell" tables when cells differ).
The whole protocol (12,600 private fits, ~2 CPU-hours of fits here), as
the committed report was made (two processes, then the sweeps)::

    mkdir -p seed003_full
    nohup nice -n 5 python -m fastdp.experiments.seed003 --out seed003_full \\
        --resume --run-range 0 3 > seed003_full/log_A.txt 2>&1 &
    nohup nice -n 5 python -m fastdp.experiments.seed003 --out seed003_full \\
        --resume --run-range 3 5 --checkpoint seed003_full/units_r34.jsonl \\
        > seed003_full/log_B.txt 2>&1 &
    # --budget-min M stops early; rerun the same commands to continue
    cat seed003_full/seed003_units.jsonl seed003_full/units_r34.jsonl \\
        > seed003_full/merged.jsonl
    python -m fastdp.experiments.seed003 --out reproductions --resume --runs 1 \\
        --checkpoint seed003_full/merged.jsonl --sweeps
    python -m fastdp.experiments.seed003 --out reproductions --report-only \\
        --checkpoint seed003_full/merged.jsonl --notes NOTES.md --archive-units

Two processes must not share a checkpoint: split with ``--run-range`` (or
``--fold-range``) into two ``--checkpoint`` files and merge them with
``--report-only --units`` (or concatenate them). ``--from-json FILE`` still
rebuilds a report from saved cell grids (``--folds``/``--runs`` describe
grids without per-cell fold/run indices).

Data (spec 003 §6.1), read from ``../shared/data`` (or ``FASTDP_DATA``):

* Adult: LIBSVM a9a ∪ a9a.t (48,842 × 123 binary) plus a bias column (124).
* Bank: DP-AGD's BANK.dat (45,211 × 32), min-max scaled to [0, 1] over the
  whole file as in the DP-AGD loader, plus a bias column (33).
* IPUMS-BR: DP-AGD's IPUMS-BR.dat (38,000 × 52), same preprocessing (53).
* IPUMS-US is **not available** (spec 003 §8 A19; not in ``shared/data``):
  its column of the paper's figures is not reproduced.

The per-feature min-max scaling of Bank/IPUMS-BR uses the data (the
paper's protocol, not private); Adult's features are binary.

Algorithms (spec 003 §5.4 settings: δ = 1e-8, C_grad = 3, C_obj = 1,
μ = 1e-3, q = 0.1, α = 0.5, β = 0.8, ξ = 0.3, ε_iter = ε/100, η0 = 1,
max_it = 10): DP-BLSGD, DP-BLSGD-AC (ζ = 0.05), DP-BLGD, DP-AGD, DP-SGD
(the DP-AGD harness: σ = 4, batch √n + 10, step 0.05, the largest
number of steps ≤ 20000 within ε by the RDP accountant), objective and output perturbation
(Chaudhuri et al. 2011, rows scaled to norm ≤ 1 per example, the SVM with
the Huberized hinge h = 0.5), NON-PRIVATE (trust-region Newton on the
regularised logistic / Huberized hinge objective) and MAJORITY. The paper's
OUTPERT-RSGD and OUTPERT-GD are replaced by Chaudhuri's output perturbation
(the one fastdp provides); PRIVGENE is not run.

Privacy: each private run is private with respect to the training fold
(add/remove for the gradient methods, replace-one for the perturbation
baselines). The reported test accuracy and training objective read the data:
they are non-private evaluation numbers, as in the paper.
"""

from fastdp.privacy.filters import AMPLIFICATIONS  # noqa: F401
from fastdp.experiments.seed003.protocol import (  # noqa: F401
    ALGORITHMS,
    DATASETS,
    DELTA,
    EPSILONS,
    LOSSES,
    PRIVATE,
    QUICK_EPSILONS,
    SWEEPS,
    TABLE1_MAJORITY,
    _with_bias,
    dpsgd_schedule,
    fold_indices,
    load_paper_dataset,
    run_algorithm,
)
from fastdp.experiments.seed003.units import (  # noqa: F401
    ARCHIVE_NAME,
    CHECKPOINT_NAME,
    SWEEPS_NAME,
    grid_from_units,
    plan_units,
    read_units,
    run_grid,
    run_units,
    write_unit_archive,
)
from fastdp.experiments.seed003.claims_report import (  # noqa: F401
    _fits,
    check_claims,
    coverage,
    grid_from_records,
    grid_to_records,
    present_cells,
    report_from_units,
    write_report,
)
from fastdp.experiments.seed003.sweeps import (  # noqa: F401
    ablation_report,
    load_sweeps,
    run_amplification_ablation,
    run_sweeps,
    save_sweeps,
    sweep_report,
)
from fastdp.experiments.seed003.cli import (  # noqa: F401
    _selection,
    main,
    reproduce,
)

__all__ = [
    "DATASETS",
    "ALGORITHMS",
    "EPSILONS",
    "QUICK_EPSILONS",
    "load_paper_dataset",
    "fold_indices",
    "run_algorithm",
    "run_grid",
    "plan_units",
    "run_units",
    "read_units",
    "grid_from_units",
    "report_from_units",
    "coverage",
    "ablation_report",
    "run_amplification_ablation",
    "run_sweeps",
    "sweep_report",
    "check_claims",
    "present_cells",
    "grid_to_records",
    "grid_from_records",
    "write_report",
    "reproduce",
    "main",
]
