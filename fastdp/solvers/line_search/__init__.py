"""DP stochastic line search (spec 003): DP-BLSGD, DP-BLSGD-AC, DP-BLGD, fixed split, DP-AGD.

Chen & Lee, "Stochastic Adaptive Line Search for Differentially Private
Optimization". DP-BLSGD is DP-SGD whose step size comes from a private Armijo
backtracking search (NOISYBTLS, :mod:`.search`): a sparse
vector (AboveThreshold) run over the candidates η0·β^k on the same Poisson
batch as the gradient, paying privacy once per search.

==========================  ==================================================
function                    algorithm
==========================  ==================================================
:func:`dp_blsgd`            Algorithm 2 with CHEB (Algorithm 3), η0 adaptation;
                            ``adaptive_clipping=True`` is DP-BLSGD-AC
:func:`dp_blgd`             full batch (q = 1) with DP-AGD's gradient
                            averaging on a failed search (spec 003 §3.7)
:func:`dp_blsgd_fixed`      NN-mode fixed split (§3.8): ρ_iter per iteration,
                            90 % gradient / 10 % Gaussian NOISYBTLS, T fixed
:func:`dp_agd`              the DP-AGD baseline (Lee & Kifer 2018, §3.10 B3)
==========================  ==================================================

The package's modules, one idea each: ``adaptive`` (DP-BLSGD, DP-BLGD),
``fixed_split`` (the NN-mode split), ``agd`` (DP-AGD), ``releases`` (the
Gaussian gradient releases and the run's record), ``search`` (NOISYBTLS),
``adapt`` (CHEB and the η0 rule: post-processing), ``settings``
(:class:`BlsgdSettings`), ``oracle`` (the batch oracle) and ``estimator``
(``ESTIMATOR_SOLVERS`` for :mod:`fastdp.linear_model`).

Problem: ``min_w (1/n) Σ_i loss(x_i·w, y_i) + (μ/2)‖w‖²`` for the logistic,
hinge (plain) or squared loss, over CSR or dense data; labels ±1 for the
classification losses.

Privacy
-------
* Private: the training records (x_i, y_i). n and d are public.
* Adjacency: add/remove one record (spec 003 §1.2), the one under which the
  Poisson amplification bounds hold.
* Gradient query: Σ_{i∈B} clip(∇loss_i(w), C_grad), L2 sensitivity C_grad,
  plus N(0, C_grad²/(2ρ_grad)·I): a ``GaussianEvent(1/sqrt(2ρ_grad))``; the
  released gradient is that noisy sum divided by the public m = q·n, plus the
  data-independent μ·w.
* Line-search query: sensitivity C_obj (clipped losses in [0, C_obj]); a
  ``LineSearchEvent`` per call (:mod:`.search`).
* Released: every noisy gradient, every released step index and the final
  model (the whole transcript). No row-norm bound is needed: clipping bounds
  each record's contribution.
* Budget: the adaptive algorithms (dp_blsgd, dp_blgd, dp_agd) run until a
  running per-order RDP budget (:class:`~fastdp.privacy.filters.RdpBudgetFilter`)
  cannot afford the next call; ``result.event`` is the composition of every
  call that ran, and ``result.extra["epsilon_spent"] ≤ epsilon`` (classic
  RDP → DP conversion, integer orders 2..500). The guarantee rests on
  composition with a budget filter; the paper's "∃ order" check is standard
  practice but not covered by the fixed-order filter theorem (use
  ``fixed_order=`` for the strict mode). The ``amplification="zw_tight_all"``
  ablation is not a guarantee.
* ``budget_filter="zcdp"`` (and the estimator solvers ``"dp_blsgd_adaptive"``,
  ``"dp_blsgd_ac"``, ``"dp_blgd"``, ``"dpagd"``) instead run under a sound zCDP
  privacy filter (:class:`~fastdp.privacy.filters.ZcdpFilter`, Feldman & Zrnic 2021):
  every call charged its unsampled zCDP cost, the run halted before the cap
  ρ would be exceeded; ``result.event`` is the cap
  (``PrivacyFilterEvent.zcdp(ρ)``, planned before the run) and
  ``result.extra["rho_consumed"] ≤ ρ`` what was used.
* :func:`dp_blsgd_fixed` is not adaptive: its event is known before the run.
* Every run reports typed details (:class:`AdaptiveDetails`,
  :class:`AgdDetails`, :class:`FixedSplitDetails`; :class:`FilterReport` under
  a zCDP filter) in ``result.details``; ``result.extra`` is their read-only view.
* Not covered: ``record_history=True`` objectives (they read all data; a
  non-private diagnostic).
"""

from fastdp.solvers.line_search.adaptive import AdaptiveDetails, dp_blgd, dp_blsgd
from fastdp.solvers.line_search.agd import AgdDetails, RunningBudgetReport, dp_agd, zcdp_rho_for
from fastdp.solvers.line_search.estimator import ESTIMATOR_SOLVERS
from fastdp.solvers.line_search.fixed_split import (
    FixedSplitDetails,
    dp_blsgd_fixed,
    fixed_split_event,
)
from fastdp.solvers.line_search.oracle import GlmBatchOracle
from fastdp.solvers.line_search.releases import FilterReport, average_releases
from fastdp.solvers.line_search.settings import BlsgdSettings

__all__ = [
    "BlsgdSettings",
    "dp_blsgd",
    "dp_blgd",
    "dp_blsgd_fixed",
    "dp_agd",
    "fixed_split_event",
    "average_releases",
    "zcdp_rho_for",
    "GlmBatchOracle",
    "ESTIMATOR_SOLVERS",
    "AdaptiveDetails",
    "AgdDetails",
    "FixedSplitDetails",
    "FilterReport",
    "RunningBudgetReport",
]
