"""Differentially private minimisation of piecewise affine objectives (spec 001).

Han, Topcu, Pappas (2014): minimise f(x; b) = max_i (a_i . x + b_i) over a
public bounded polytope P when only the offsets b are private.

Privacy model (all mechanisms)
------------------------------
* **Private**: the offsets b (for the structured problems, the responses y).
* **Public**: the slopes a_i, P, m, d, epsilon, ``b_max`` and every setting
  (step sizes, starting points, proposal scales, iteration counts).
* **Adjacency** (eq. 4): b ~ b' iff max_i |b_i - b'_i| <= b_max; all offsets
  may move at once. Any record-level relation under which neighbouring data
  sets satisfy this bound inherits the guarantees; the event label
  (``problem.adjacency``) names that record-level relation.
* **Sensitivities**: the score -f(x; b) has sensitivity exactly b_max
  (Lemma 18); the piece score a_i . x + b_i of Algorithm 1 has sensitivity
  b_max; b has L2 sensitivity sqrt(m) b_max; any minimiser in P has L2
  sensitivity at most diam(P).

Mechanisms (each pure epsilon-DP per released output)
------------------------------------------------------
* :func:`offset_perturbation` (M_P): b + vector-Laplace noise, then the LP.
* :func:`solution_perturbation` (M_S): x_opt + vector-Laplace noise.
* :func:`exponential_mechanism` (M_E): a sample of pi(x) ∝ exp(-eps f(x)/(2 b_max))
  on P (``sampler="auto"``: an exact sampler, pure eps-DP; independence
  Metropolis with a public delta bound on request; the paper's random-walk
  Metropolis and hit-and-run only when asked for by name, and then recorded
  as a ``NoGuaranteeEvent``: their distance to the mechanism is not
  quantified, so they carry no privacy guarantee).
* :func:`private_subgradient` (Algorithm 1) and :func:`dp_subgradient`
  (Algorithm 2, the DP subgradient method).
* :func:`dp_minimize`: one entry point for all of them.

The package's modules, one idea each: ``problem`` and ``constraints`` (the
objective and the polytope P), ``adapters`` (the structured problems of the
paper), ``perturbation`` (M_P, M_S), ``exponential`` (M_E), ``samplers``
(its samplers), ``subgradient`` (Algorithms 1-2), ``iterations`` (the
subgradient iterations and the baselines that cost no privacy), ``checks``,
``result`` (:class:`PiecewiseAffineResult`), ``minimize`` (:func:`dp_minimize`)
and ``bounds`` (the paper's utility bounds).

Every result carries the privacy event of what it released, data-independent
baseline outputs (the centre of P and the subgradient method with epsilon -> 0,
which cost no privacy), and says which of the paper's conventions ran.
Where the paper is wrong (spec 001, section 6) the correct version is the
default and a named switch reproduces the paper: ``paper_sign`` (E1),
``paper_sqrt_d`` (E2), ``project`` (E3), ``output`` (E4).
"""

from fastdp.solvers.piecewise_affine import bounds
from fastdp.solvers.piecewise_affine.adapters import (
    chebyshev_regression_problem,
    lad_regression_problem,
    minimax_lp_problem,
    quantile_regression_problem,
    resource_allocation_problem,
    resource_allocation_utility,
)
from fastdp.solvers.piecewise_affine.constraints import Box, Polytope
from fastdp.solvers.piecewise_affine.exponential import exponential_mechanism
from fastdp.solvers.piecewise_affine.iterations import data_independent_baselines, subgradient_method
from fastdp.solvers.piecewise_affine.minimize import METHODS, dp_minimize, evaluate
from fastdp.solvers.piecewise_affine.perturbation import offset_perturbation, solution_perturbation
from fastdp.solvers.piecewise_affine.problem import PiecewiseAffineProblem, SumOfPinballProblem
from fastdp.solvers.piecewise_affine.result import PiecewiseAffineResult
from fastdp.solvers.piecewise_affine.samplers import (
    importance_estimates,
    metropolis_sample,
    rejection_sample,
)
from fastdp.solvers.piecewise_affine.subgradient import dp_subgradient, private_subgradient

__all__ = [
    "Box",
    "Polytope",
    "PiecewiseAffineProblem",
    "SumOfPinballProblem",
    "PiecewiseAffineResult",
    "offset_perturbation",
    "solution_perturbation",
    "exponential_mechanism",
    "private_subgradient",
    "dp_subgradient",
    "subgradient_method",
    "data_independent_baselines",
    "dp_minimize",
    "evaluate",
    "importance_estimates",
    "rejection_sample",
    "metropolis_sample",
    "METHODS",
    "bounds",
    "chebyshev_regression_problem",
    "quantile_regression_problem",
    "lad_regression_problem",
    "minimax_lp_problem",
    "resource_allocation_problem",
    "resource_allocation_utility",
]
