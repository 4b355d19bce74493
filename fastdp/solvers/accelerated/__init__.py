"""DP accelerated gradient methods with Laplace noise (spec 002, Kuru et al. 2022).

This package's ``__init__`` lists the family's public names; its modules hold
one idea each:

===============  ============================================================
module           what it holds
===============  ============================================================
``plan``         :class:`AcceleratedPlan` and the ``plan_*`` builders (the
                 public schedule and privacy event, before any data is read)
``run``          the one momentum loop: :func:`run_plan`, :func:`run_plan_replicas`
``drivers``      the four solver functions of the table below
``estimator``    ``ESTIMATOR_SOLVERS`` for :mod:`fastdp.linear_model`
``oracle``       :class:`GLMProblem` and the L1 sensitivity of GLM gradients
``schedules``    momenta, MASG stages, the horizon rule, budget allocations
``accounting``   noise conventions and utility bounds (the ε: ``fastdp.privacy``)
``theory``       the paper's rates and bounds (figures and tests)
===============  ============================================================

==================  =========================================================
function            algorithm
==================  =========================================================
:func:`dp_gd`       DP-GD / DP-SGD (Algorithm 1): x_k = x_{k−1} − α g̃(x_{k−1})
:func:`dp_heavy_ball`  DP heavy ball (Algorithm 2), momentum or the
                    equivalent gradient-smoothing form (eqs. 3.6-3.7)
:func:`dp_nesterov` DP-NAG (Algorithm 3); ``allocation="prop42"`` with the
                    horizon rule is DP-NAG-opt (Algorithm 4)
:func:`dp_masg`     multistage DP-MASG with momentum restarts (Algorithm 5);
                    ``allocation="prop42"`` is DP-MASG-opt
==================  =========================================================

Each step k = 1..T evaluates one (mini-batch) gradient g_k at a public point,
adds i.i.d. Laplace noise of scale b_k to every coordinate, and moves; the
iterates x_1..x_T are released (spec 002, section 2.0).

Privacy
-------
* Private: the n records of the problem (rows and labels); n is public.
* Adjacency: replace-one record (spec 002, Def. A.2).
* Sensitivity: the problem's ``sensitivity`` S1 bounds the L1 distance of
  two records' gradients (a bounded data domain, Assumption 3.2; no
  clipping is needed for logistic regression with ``||x||_1 <= R``,
  S1 = 2R).  A batch of m records drawn uniformly *without replacement*
  has mean-gradient sensitivity S1/m.
* Noise and accounting: step k is ``ε_step(S1, b_k, n, m) = log(1 + (m/n)
  (e^{S1/(b_k m)} − 1))``-DP (Laplace mechanism + amplification by
  subsampling without replacement, eq. 3.3); the run is ``Σ_k ε_step``-DP
  by basic composition, δ = 0.  The default uniform schedule makes every
  step cost ε/T (Prop. 3.1); the ``"prop42"`` allocation splits ε unevenly
  (Prop. 4.2) and may stop at T' <= T (Remark 4.1).  The returned ``event``
  records the Laplace scales actually drawn.
* Released: every iterate (``result.coef`` is the last one).
* Noise convention: ``"paper"`` (default) draws scale b, as the proof
  needs; ``"reference_code"`` draws b/√2 like the authors' code (spec 002,
  section 7, A1): its event, and so its ε, is that of the smaller noise,
  about 1.41-1.66 for a nominal ε = 1.  ``result.details.noise_convention``
  says which ran.

Randomness: one ``numpy.random.Generator`` from ``random_state``, split into
a batch-sampling stream and a noise stream.

Estimators: ``ESTIMATOR_SOLVERS`` provides ``"dp_gd_laplace"``,
``"dp_heavy_ball"``, ``"dp_nesterov"`` and ``"dp_masg"`` for
:mod:`fastdp.linear_model` (``solver_options`` select the -opt allocation,
the noise convention, ...; see :mod:`.estimator`).
Every run builds an :class:`AcceleratedPlan` from public parameters first
(its ``event`` can be charged to a ledger before any data is read) and
:func:`run_plan` then executes it with the gradient oracle.
"""

from fastdp.privacy.laplace_schedule import (
    b_for_eps,
    eps0_uniform,
    eps_step,
    laplace_schedule_event,
    total_epsilon,
)
from fastdp.solvers.accelerated.accounting import noise_second_moment, subsampling_variance_bound
from fastdp.solvers.accelerated.drivers import dp_gd, dp_heavy_ball, dp_masg, dp_nesterov
from fastdp.solvers.accelerated.estimator import ESTIMATOR_SOLVERS
from fastdp.solvers.accelerated.oracle import GLMProblem, glm_l1_sensitivity, sensitivity_logreg
from fastdp.solvers.accelerated.plan import (
    AcceleratedPlan,
    plan_gd,
    plan_heavy_ball,
    plan_masg,
    plan_nesterov,
)
from fastdp.solvers.accelerated.run import run_plan, run_plan_replicas
from fastdp.solvers.accelerated.schedules import (
    HORIZON_RULES,
    choose_horizon,
    horizon_bounds,
    log_bound_coefficients,
    masg_schedule,
    nag_momentum,
    numerical_allocation,
    polyak_heavy_ball_parameters,
    prop42_allocation,
)
from fastdp.solvers.accelerated.theory import (
    fig1_log_bound,
    hb_quadratic_bound,
    hb_stationary_trace,
    lmi_min_eigenvalue,
    prop34_bound,
    rho_hb,
    rho_nag_reference,
)

__all__ = [
    "dp_gd",
    "dp_heavy_ball",
    "dp_nesterov",
    "dp_masg",
    "AcceleratedPlan",
    "plan_gd",
    "plan_heavy_ball",
    "plan_nesterov",
    "plan_masg",
    "run_plan",
    "run_plan_replicas",
    "ESTIMATOR_SOLVERS",
    # problem and accounting
    "GLMProblem", "glm_l1_sensitivity", "sensitivity_logreg",
    "eps_step", "b_for_eps", "eps0_uniform", "total_epsilon", "laplace_schedule_event",
    "subsampling_variance_bound", "noise_second_moment",
    # schedules and budget allocation
    "nag_momentum", "polyak_heavy_ball_parameters", "masg_schedule", "log_bound_coefficients",
    "horizon_bounds", "choose_horizon", "prop42_allocation", "numerical_allocation",
    "HORIZON_RULES",
    # theory
    "rho_hb", "rho_nag_reference", "hb_stationary_trace", "hb_quadratic_bound",
    "lmi_min_eigenvalue", "prop34_bound", "fig1_log_bound",
]
