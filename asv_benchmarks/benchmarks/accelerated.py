"""asv benchmarks of the spec-002 accelerated solvers (fastdp.solvers.accelerated).

The paper's section-5 problem (n = 100000, d = 20 dense rows held as CSR,
logistic loss): time per run of T = 100 DP-NAG steps with full batches and
with m = 1000, 20 such runs in lock step, the -opt plan (horizon rule + Prop. 4.2 allocation) alone, and
the numerical allocation of problem (4.4).
"""

import numpy as np

from fastdp.experiments.seed002 import make_synthetic_logreg
from fastdp.solvers.accelerated import schedules as sch
from fastdp.solvers.accelerated import GLMProblem
from fastdp.solvers.accelerated import (
    dp_heavy_ball,
    dp_masg,
    dp_nesterov,
    plan_nesterov,
    run_plan_replicas,
)

L5, MU5 = 5.100080706735987, 0.02


class Section5Run:
    """100 noisy steps on the section-5 data."""

    params = ([100_000, 1000], ["dp_nesterov", "dp_heavy_ball", "dp_masg"])
    param_names = ["batch_size", "solver"]

    def setup(self, batch_size, solver):
        U, z = make_synthetic_logreg()
        self.problem = GLMProblem(U, z, loss="logistic", lam=0.02, row_l1_bound=20.0)
        self.x0 = np.full(20, 10.0)

    def time_100_steps(self, batch_size, solver):
        common = dict(epsilon=1.0, n_iter=100, batch_size=batch_size, x0=self.x0, random_state=0)
        if solver == "dp_nesterov":
            dp_nesterov(self.problem, step_size=1 / L5, strong_convexity=MU5, **common)
        elif solver == "dp_heavy_ball":
            dp_heavy_ball(self.problem, step_size=1 / L5, strong_convexity=MU5, **common)
        else:
            dp_masg(self.problem, smoothness=L5, strong_convexity=MU5, **common)


class Section5Replicas:
    """20 runs of 100 DP-NAG steps in lock step (``run_plan_replicas``), as in the figures."""

    params = [100_000, 1000]
    param_names = ["batch_size"]

    def setup(self, batch_size):
        U, z = make_synthetic_logreg()
        self.problem = GLMProblem(U, z, loss="logistic", lam=0.02, row_l1_bound=20.0)
        self.plan = plan_nesterov(n_samples=100_000, sensitivity=40.0, epsilon=1.0, n_iter=100,
                                  step_size=1 / L5, strong_convexity=MU5, batch_size=batch_size)
        self.seeds = list(range(20))

    def time_20_runs_of_100_steps(self, batch_size):
        run_plan_replicas(self.problem, self.plan, random_states=self.seeds,
                          x0=np.full(20, 10.0), record_iterates=False)


class OptPlan:
    """Horizon rule over T = 1000 and Prop. 4.2 budgets (no data touched)."""

    def time_nag_opt_plan(self):
        plan_nesterov(n_samples=100_000, sensitivity=40.0, epsilon=1.0, n_iter=1000,
                      step_size=1 / L5, strong_convexity=MU5, smoothness=L5, n_features=20,
                      batch_size=1000, allocation="prop42")

    def time_numerical_allocation(self):
        log_a, _ = sch.log_bound_coefficients(np.full(136, 1 / L5), None, L5, MU5)
        sch.numerical_allocation(log_a, 40.0, 100_000, 1000, 1.0)


class GradientStep:
    """One mini-batch clipped-gradient evaluation of the accelerated methods' oracle
    (``GLMProblem.gradient``) on the synthetic sparse problem, batch 1000 and full."""

    params = (["batch", "full"], [1, 2])
    param_names = ["rows", "num_threads"]
    timeout = 600
    processes = 1

    def setup_cache(self):
        from . import common

        return common.synthetic(common.LARGEST)

    def setup(self, data, rows, num_threads):
        X, y = data
        self.problem = GLMProblem(X, y, loss="logistic", lam=1e-4, clip=1.0,
                                  num_threads=num_threads)
        rng = np.random.default_rng(0)
        self.rows = (np.sort(rng.choice(X.shape[0], 1000, replace=False)) if rows == "batch"
                     else None)
        self.theta = rng.standard_normal(X.shape[1]) * 0.01

    def time_gradient(self, data, rows, num_threads):
        self.problem.gradient(self.theta, self.rows)
