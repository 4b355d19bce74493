"""scikit-learn estimators for differentially private linear models.

:class:`DPRidge`, :class:`DPLogisticRegression` and :class:`DPLinearSVC`
minimise the 1/N-averaged, L2-regularised objective

    P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (alpha/2) ||theta||^2

over rows mapped by :class:`~fastdp.preprocessing.RowMap` (bounded to norm
<= 1, plus a constant intercept column), with a differentially private solver
chosen by ``solver=`` (``"auto"``: DP-SGD with the defaults of
:mod:`fastdp.defaults`; the exact optimum at ``epsilon=np.inf``), and release
``coef_`` and ``intercept_`` only.

=================  ==========================  =====================  ========================
``solver``         algorithm (spec)            losses                 noise parameter, event
=================  ==========================  =====================  ========================
``"dpscd"``        dual DP-SCD (000, Alg. 1)   squared/logistic/hinge sigma; sampled Gaussian
``"seq_dpscd"``    seqDP-SCD (000, Alg. 3)     squared/logistic/hinge sigma; sampled Gaussian
``"dpsgd"``        DP-SGD (000, section 2.6)   squared/logistic/hinge sigma; sampled Gaussian
``"sgd"``          SGD, not private            squared/logistic/hinge none (epsilon=inf only)
``"output"``       output perturbation (CMS11) logistic               scale; pure epsilon
``"objective"``    objective perturbation      logistic               scale; pure epsilon
``"dp_gd_laplace"`` DP-GD, Laplace (002)       squared/logistic       per-step epsilon; pure
``"dp_heavy_ball"`` DP heavy ball (002)        squared/logistic       per-step epsilon; pure
``"dp_nesterov"``  DP Nesterov (002)           squared/logistic       per-step epsilon; pure
``"dp_masg"``      multistage DP-MASG (002)    squared/logistic       per-step epsilon; pure
``"dp_blsgd"``     DP-SGD + noisy line search  squared/logistic/hinge sigma; Gaussian + SVT
                   (003)
``"dp_blsgd_       DP-BLSGD with CHEB budget   squared/logistic/hinge rho cap; zCDP filter
adaptive"``        adaptation (003)
``"dp_blsgd_ac"``  DP-BLSGD-AC (003)           squared/logistic/hinge rho cap; zCDP filter
``"dp_blgd"``      full-batch DP-BLGD (003)    squared/logistic/hinge rho cap; zCDP filter
``"dpagd"``        DP-AGD baseline (003)       squared/logistic/hinge rho cap; zCDP filter
=================  ==========================  =====================  ========================

The four adaptive solvers decide during the run how many private queries they
make; their planned event is a privacy filter (``PrivacyFilterEvent.zcdp``):
the run stops before any query that would exceed the cap, so it is rho-zCDP
under add/remove adjacency, and the ledger is charged the cap.

Modules (as in scikit-learn's ``linear_model``): ``_base`` holds the shared
estimator base (``_DPLinearModel``: parameters and ``fit``; the classifier
base), assembled from one mixin per idea: ``_params`` (checks of the public
parameters, delta), ``_rows`` (the row map, X, the targets),
``_solver_choice`` (the solver and its settings), ``_privacy_plan`` (noise,
planned event, ledger reservation) and ``_fitted`` (fitted attributes,
callback states, scores); ``_ridge``, ``_logistic`` and ``_svc`` one
estimator each, ``_docs`` their shared docstring sections, ``_run_size`` the
refusal of runs that cannot finish.

Solver-specific settings go in ``solver_options`` (each solver lists the
keys it accepts in its ``options`` attribute, see
:func:`fastdp.solvers.registry.get_estimator_solver`).

Privacy
-------
* Private: the training examples ``(x_i, y_i)``.  The number of examples N and
  the number of features are treated as public (they fix the sampling rate
  and the default delta).
* Adjacency: add/remove one example for ``sampler="poisson"`` (the default,
  and the only sampler whose accounting is exact); replace-one for
  ``"fixed"`` (sampling without replacement) and ``"shuffle"`` (the paper's
  per-epoch shuffle, accounted *without* amplification, since no tight
  analysis exists; the Poisson what-if is reported separately, labelled).
* Requirement: every row the solver sees has L2 norm <= 1.  The estimators
  make it so with a per-example map of public parameters
  (:class:`~fastdp.preprocessing.RowMap`: normalise or clip each row, append
  the intercept column, scale), which costs no privacy and is applied again
  at prediction; ``normalize=False`` instead refuses rows above 1.
* Released: ``coef_`` (and ``solver_result_.v``, the noisy transcript that the
  same event covers).  DP-SCD's dual variables alpha are not released: their
  noisy coordinates would reveal which examples each batch sampled.  ``history_`` (when ``record_history=True``) reads the data and is a
  **non-private** diagnostic.
* Spent: the noise multiplier is calibrated so that the chosen accountant's
  epsilon for the exact event that runs is at most ``epsilon`` at ``delta``.
  ``epsilon_`` is that accountant's epsilon for the event that ran, never the
  target.  A ``ledger`` is charged before anything is trained; a fit that would
  exceed the ledger's budget raises :class:`~fastdp.exceptions.BudgetExceededError`
  and trains nothing.
"""

from fastdp.linear_model._base import default_delta  # noqa: F401
from fastdp.linear_model._logistic import DPLogisticRegression
from fastdp.linear_model._ridge import DPRidge
from fastdp.linear_model._run_size import MAX_STEPS, _available_memory  # noqa: F401
from fastdp.linear_model._svc import DPLinearSVC

__all__ = ["DPRidge", "DPLogisticRegression", "DPLinearSVC"]

# Pickles name a class by its ``__module__``: keep the public path, as before the
# split, so models pickled now and earlier load whatever module holds the class.
for _cls in (DPRidge, DPLogisticRegression, DPLinearSVC):
    _cls.__module__ = __name__
del _cls
