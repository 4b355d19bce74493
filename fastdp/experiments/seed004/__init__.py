"""Reproduction of seed 004 (Liu, Johansson, Shi: distributed ERM with DP), Figs. 1-4.

Run ``python -m fastdp.experiments.seed004 --out DIR`` (the full grid on a9a
and news20: Figs. 1-4, both calibrations, float32-message re-runs) or
``--quick`` (a9a, 1 epoch, ε ∈ {0.2, 1.0}, seed 0; about 3 CPU minutes;
``--datasets a9a,news20`` adds news20, ~30 CPU s a run). Writes
``seed004.md`` (tables and the claims checked), ``seed004.json`` and PNG
figures when matplotlib is installed.

Units (:func:`plan_units`, run by :mod:`fastdp.experiments.runner`): F* of
each (dataset, penalty), then every run of every dataset in priority order
(the paper's Fig. 1/3 configurations, noiseless references, the paper's
calibration over the ε grid, fastdp's calibration, float32 re-runs;
:func:`_tasks`), so a time-boxed session (``--budget-min M``) gives every
dataset its most informative runs. ``OUT/seed004_units.jsonl`` keeps every
finished unit and the report is built from all of them: ``--resume``
continues it (with more datasets, or ``--calibrations accountant,paper`` to
put fastdp's calibration first), ``--float32-only`` (with
``--float32-penalties``) adds only the float32-message comparisons and
``--report-only`` rewrites the report (from ``seed004.json`` when there is no
checkpoint, as for reports made before it).

Setup (spec 004 §5): 20 agents on the complete graph, 1 or 2 random disjoint
edges per round (ι = 0.1, 0.2), Metropolis weights, 3 epochs
(T = 3q/ι rounds; the baseline [19] has every agent active, exact averaging,
T = 3q), hinge loss, L = 1 (rows normalised to unit norm), δ0 = 0.01,
ε ∈ {0.2, 0.4, 0.6, 0.8, 1.0}. ℓ2: h = (μ/2)‖x‖², μ = 5e-4, a_t = t,
γ_t = 20. ℓ1: h = ϕ‖x‖₁, ϕ = 5e-4, a_t = 1, γ_t = 0.01√t.

Data: the paper's epsilon and rcv1 are not available here. a9a (32561 × 123)
and news20 made binary (classes 1-10 against 11-20; 15935 × 62061, sparse) are
used instead; news20 is the high-dimensional stand-in for rcv1. Rows are
normalised to unit L2 norm (per example: no privacy cost). a9a is evaluated on
a9a.t; news20 holds out 20 % of its rows (fixed seed) for accuracy.

Every run is reported with the three ε of :mod:`fastdp.distributed.privacy`:
the paper's nominal ε, the corrected paper argument and fastdp's accountant
(RDP, activation public) on the event that ran. Runs are made both with the
paper's σ ("paper" calibration, to reproduce the figures) and with the σ that
fastdp's accountant needs for the same ε ("accountant").

Privacy: suboptimality and accuracy read the whole dataset: they are
non-private diagnostics, as in the paper.
"""

from fastdp.experiments.seed004.protocol import (  # noqa: F401
    EPSILONS,
    METHODS,
    check_claims,
    ground_truth,
    load_problem,
    run_grid,
    run_one,
    _tasks,
)
from fastdp.experiments.seed004.report import (  # noqa: F401
    write_report,
)
from fastdp.experiments.seed004.units import (  # noqa: F401
    CHECKPOINT_NAME,
    plan_units,
    reproduce,
    results_from_units,
    _settings,
)
from fastdp.experiments.seed004.cli import (  # noqa: F401
    main,
)

__all__ = ["load_problem", "ground_truth", "run_one", "run_grid", "check_claims",
           "write_report", "main", "EPSILONS", "METHODS"]
