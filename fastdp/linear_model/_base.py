"""Shared machinery of the DP linear estimators: the estimator base class, its fit,
and the classifier base.

:class:`_DPLinearModel` holds the parameters (``__init__``) and ``fit``; each
other idea is a mixin in a module of its own:

====================  ===================  =============================================
mixin                 module               what it holds
====================  ===================  =============================================
``_ParameterChecks``  ``_params.py``       checks of the public parameters, delta
``_RowsAndTargets``   ``_rows.py``         the row map (bound, intercept), X, targets
``_SolverChoice``     ``_solver_choice``   the solver and its resolved settings
``_PrivacyPlan``      ``_privacy_plan``    calibrated noise, planned event, ledger
``_FittedModel``      ``_fitted.py``       fitted attributes, callback states, scores
====================  ===================  =============================================
"""

import contextlib
import dataclasses
import math
import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.validation import check_is_fitted

from fastdp._mapped_rows import rows_for_solver
from fastdp._validation import check_random_state
from fastdp.exceptions import ValidationError
from fastdp.linear_model._fitted import _FittedModel, check_known_labels
from fastdp.linear_model._params import _ParameterChecks, default_delta  # noqa: F401
from fastdp.linear_model._privacy_plan import _PrivacyPlan
from fastdp.linear_model._rows import _RowsAndTargets
from fastdp.linear_model._run_size import _check_noise_scale, _check_run_size
from fastdp.linear_model._solver_choice import _SolverChoice
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.ledger_entries import cancel_on_failure, settle_reservation
from fastdp.solvers.settings import SolverProblem


@contextlib.contextmanager
def _public_arithmetic():
    """Turn an overflow or a division by zero while planning a fit into a ValidationError.

    Planning reads only public settings and shapes (nothing is reserved or
    released yet), so such an error means a setting outside the range fastdp
    can compute with (``epsilon=1e308``, a smoothness of ``1e308``, ``xi=0``).
    """
    try:
        yield
    except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
        raise ValidationError(
            f"a setting of this fit is outside the range fastdp can compute with "
            f"({type(exc).__name__}: {exc}); use values nearer 1 (epsilon, solver_options, "
            "noise).") from exc


class _DPLinearModel(_ParameterChecks, _RowsAndTargets, _SolverChoice, _PrivacyPlan,
                     _FittedModel, BaseEstimator):
    """Shared fitting logic of the DP linear estimators (not public)."""

    _loss = None
    _default_bound = "normalize"

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        alpha="auto",
        solver="auto",
        batch_size=None,
        clip="auto",
        epochs="auto",
        sampler=None,
        accountant="auto",
        noise_multiplier=None,
        solver_options=None,
        normalize="auto",
        fit_intercept=True,
        intercept_scaling=0.5,
        ledger=None,
        record_history=False,
        callback=None,
        lazy_noise=True,
        num_threads=None,
        random_state=None,
        verbose=0,
        engine=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.solver = solver
        self.batch_size = batch_size
        self.clip = clip
        self.epochs = epochs
        self.sampler = sampler
        self.accountant = accountant
        self.noise_multiplier = noise_multiplier
        self.solver_options = solver_options
        self.normalize = normalize
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.ledger = ledger
        self.record_history = record_history
        self.callback = callback
        self.lazy_noise = lazy_noise
        self.num_threads = num_threads
        self.random_state = random_state
        self.verbose = verbose
        self.engine = engine

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------- fit
    def fit(self, X, y):
        """Train the model with differential privacy.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training examples (rows), any finite values: each row is bounded
            by the row map (``normalize``) before training.  CSR
            float32/float64 (also memory-mapped) is validated once and trained
            on without a copy: the kernels apply the row map as they read each
            row (O(n) extra memory, the bits of a mapped copy).  Dense X and
            the data-parallel engine's block-keyed sampler get one mapped copy
            (docs/large-data.md, "Memory of an estimator fit").
        y : array-like of shape (n_samples,)
            Targets (regression) or class labels (two or more classes).

        Returns
        -------
        self
        """
        if self.engine is not None:   # data-parallel: the rows are cut into the engine's shards
            from fastdp.distributed.data_parallel.api import fit_in_memory

            fit_in_memory(self, X, y)
            if self.verbose:
                print(self._describe())
            return self
        started = time.perf_counter()
        row_map = self._check_public_params()
        private = self._private()
        # the proofs need ||row|| <= 1: "reject" checks the raw rows; the
        # other bounds make it so (per example: no privacy cost)
        max_row_norm = 1.0 if private and row_map.bound == "reject" else None
        X, y = self._validate_X(X, y, reset=True, max_row_norm=max_row_norm)
        n_samples = X.shape[0]
        y, classes, n_classes, loss = self._targets(y, n_samples)
        # public arithmetic only (no budget reserved yet): an overflow is a bad setting
        with _public_arithmetic():
            delta = self._check_params(n_samples)
            target_plan = self._target_plan(n_samples, private)  # DPRidge: the targets' map
            name, solver, multinomial = self._resolve_solver(private, n_classes > 2)
            n_fits = 1 if (n_classes <= 2 or multinomial) else n_classes
            config, rule = self._solver_config(name, solver, n_samples,
                                               X.shape[1] + int(row_map.fit_intercept), private,
                                               n_classes if multinomial else 2)
            if self.callback is not None and not solver.supports_callback:
                raise ValidationError(f"solver {name!r} does not take a per-epoch callback.")
            if self.callback is not None and n_fits > 1:
                raise ValidationError("a per-epoch callback is not supported with one-vs-rest "
                                      "multiclass fits; use solver='dpsgd' (multinomial).")
            _check_run_size(n_samples, X.shape[1] + int(row_map.fit_intercept),
                            max(n_classes, 1) if multinomial else 1, config, n_fits)
            Xm = row_map.map_rows(X)  # sparse X: O(n) numbers, no copy (fastdp._mapped_rows)
            config["n_features"] = int(Xm.shape[1])  # public (part of the data's schema)
            config["loss"] = loss
            if multinomial:
                config["n_classes"] = int(n_classes)
            self._settle_clip(config, rule, solver, n_samples, loss)
            # every public setting the run reads, before any noise is calibrated or budget reserved
            solver.check_params(n_samples, config, private=private)
            progress = None
            if self.verbose and solver.supports_callback and n_fits == 1:
                from fastdp.progress import EpochProgress

                progress = EpochProgress(total=math.ceil(config["epochs"]), desc=f"{name} epochs",
                                         callback=self.callback, lines=True)
                config["callback"] = progress
            accountant = get_accountant(self.accountant)
            noise, one_event, planned_event = self._plan(
                solver, n_samples, config, private, delta, accountant, n_fits,
                prefix=getattr(target_plan, "event", None))
            _check_noise_scale(noise, config, int(Xm.shape[1]))
            released_states = []
            if config.get("callback") is not None:
                config["callback"] = self._released_callback(config["callback"], row_map,
                                                             Xm.shape[1], released_states)
            settings = solver.settings(config, noise)  # typed, the same for every fit
        # Reserved before training: a fit over budget raises here and releases nothing.
        reservation = self._reserve(planned_event, delta, accountant)
        try:
            # Nothing private has run yet: a failure here (e.g. no memory for
            # the solver's copy of the rows) releases the reservation.
            with cancel_on_failure(reservation, "fit"):
                Xm = rows_for_solver(Xm, solver, config)  # read on the fly, or written out once
            # Interrupted by the user: unless a callback already saw a released
            # (noisy) state, nothing was released, so nothing is charged.  Any
            # other failure may depend on the private data: the charge stays.
            with settle_reservation(reservation, "fit",
                                    released=lambda: bool(released_states)):
                target_scale = self._scale_of_targets(target_plan, y)
                if target_scale is not None:
                    y = target_scale.apply(y)
                results = self._run_fits(solver, Xm, y, loss, settings, n_fits, one_event)
        finally:
            if progress is not None:
                progress.close()

        theta = np.vstack([np.asarray(r.coef, dtype=np.float64).reshape(-1, Xm.shape[1])
                           for r in results])
        result = results[0]
        # alpha (internal dual state) is not released: its noisy coordinates
        # reveal which examples were sampled, which the event does not cover.
        self._set_fitted(
            theta, row_map=row_map, classes=classes, solver_name=name, solver=solver,
            multi_class=("multinomial" if multinomial else "ovr") if n_classes > 2 else None,
            config=config, noise=noise, delta=delta, private=private, accountant=accountant,
            event=planned_event, sampler=result.sampler, sample_rate=result.sample_rate,
            n_iter=result.n_iter, history=result.history,
            solver_result=dataclasses.replace(result, alpha=None) if hasattr(
                result, "alpha") else result,
            charged=reservation is not None, started=started)
        self._unscale_targets(target_scale)
        if self.verbose:
            print(self._describe())
        return self

    def _target_plan(self, n_samples, private):
        """The map of the regression targets (None: the targets are used as they are)."""
        return None

    def _scale_of_targets(self, target_plan, y):
        """The :class:`~fastdp.linear_model._target_scale.TargetScale` of the fit, or None."""
        return None

    def _unscale_targets(self, target_scale):
        """Express the fitted model in the targets' units (regression)."""

    def _run_fits(self, solver, Xm, y, loss, settings, n_fits, one_event):
        """Run the solver once (binary, regression, multinomial) or once per class (OvR)."""
        rng = check_random_state(self.random_state)  # checked in _check_public_params
        if n_fits == 1:
            runs = [(y, rng)]
        else:
            seeds = rng.spawn(n_fits)
            runs = [(np.where(y == k, 1.0, -1.0), seeds[k]) for k in range(n_fits)]
        results = []
        for target, random_state in runs:
            result = solver.solve(SolverProblem(Xm, target, loss), settings, random_state)
            if result.event != one_event:  # internal consistency guard
                raise RuntimeError("the solver ran a different mechanism from the one accounted for.")
            results.append(result)
        return results


class _DPLinearClassifier(LinearClassifierMixin, _DPLinearModel):
    _task = "classification"

    def score(self, X, y, sample_weight=None):
        """Mean accuracy on ``(X, y)``; labels outside ``classes_`` are an error.

        A label the model never saw means ``y`` follows another label
        convention (e.g. -1/+1 against the 0/1 of training): refused with a
        ValidationError instead of a meaningless accuracy.
        """
        check_is_fitted(self, "classes_")
        check_known_labels(self.classes_, y)
        return super().score(X, y, sample_weight=sample_weight)

    def _shape_coef(self, coef):
        return np.asarray(coef, dtype=np.float64).reshape(-1, coef.shape[-1])

    def _shape_intercept(self, intercept):
        return np.asarray(intercept, dtype=np.float64).reshape(-1)

    def decision_function(self, X):
        """Scores ``b(X) @ coef_.T + intercept_`` (rows bounded as in ``fit``).

        Two classes: shape (n,), positive means ``classes_[1]``.  K > 2:
        shape (n, K).
        """
        scores = np.asarray(self._bounded_scores(X)) + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores
