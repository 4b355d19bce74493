"""Shared machinery of the DP linear estimators: parameters, checks, solver
choice, privacy planning and ledger charge, fitting, and the classifier base.
"""

import dataclasses
import math
import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from fastdp._mapped_rows import rows_for_solver
from fastdp._validation import (
    check_batch_size,
    check_labels,
    check_positive,
    check_privacy_params,
    check_random_state,
    check_real,
    check_sparse_structure,
    check_X,
)
from fastdp.defaults import (default_alpha, dpsgd_defaults, line_search_options,
                             perturbation_alpha, solver_defaults)
from fastdp.exceptions import ValidationError, WeakPrivacyWarning
from fastdp.linear_model._run_size import _check_run_size
from fastdp.preprocessing import RowMap
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.calibration import calibrate
from fastdp.privacy.events import NonPrivateEvent, SelfComposedEvent
from fastdp.privacy.ledger_entries import settle_reservation
from fastdp.solvers.registry import EstimatorSolver, get_estimator_solver
from fastdp.solvers.settings import SolverProblem


_DEFAULT_BATCH_SIZE = 1000
_DEFAULT_EPOCHS = 10
_NORMALIZE_VALUES = {True: "normalize", False: "reject", "normalize": "normalize",
                     "clip": "clip", "reject": "reject"}


def default_delta(n_samples):
    """The default delta: ``min(1e-5, 1 / (10 n))``, always below ``1/n``.

    A delta of order ``1/n`` permits releasing one whole example; fastdp's
    default stays an order of magnitude below that.

    Raises
    ------
    ValidationError
        If ``n_samples < 1`` (empty data).
    """
    if not n_samples >= 1:
        raise ValidationError(f"the data has {n_samples} examples; training needs at least one.")
    return min(1e-5, 1.0 / (10.0 * n_samples))


def _overrides_noise_for_budget(solver):
    return type(solver).noise_for_budget is not EstimatorSolver.noise_for_budget


class _DPLinearModel(BaseEstimator):
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
        accountant="rdp",
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

    # ---------------------------------------------------------------- checks
    def _private(self):
        """True unless the user asked for a non-private fit (epsilon=inf)."""
        if self.noise_multiplier is not None:
            return float(self.noise_multiplier) > 0.0
        return not (isinstance(self.epsilon, numbers.Real) and math.isinf(self.epsilon)
                    and self.epsilon > 0)

    def _row_map(self):
        """The :class:`~fastdp.preprocessing.RowMap` this estimator's settings describe."""
        key = self.normalize
        if isinstance(key, (bool, np.bool_)):
            key = bool(key)
        if isinstance(key, str) and key == "auto":
            bound = self._default_bound
        elif isinstance(key, (bool, str)) and key in _NORMALIZE_VALUES:
            bound = _NORMALIZE_VALUES[key]
        else:
            raise ValidationError(
                f"normalize must be 'auto', True ('normalize'), 'clip' or False ('reject'); "
                f"got {self.normalize!r}.")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValidationError(f"fit_intercept must be True or False; got {self.fit_intercept!r}.")
        return RowMap(bound=bound, fit_intercept=bool(self.fit_intercept),
                      intercept_scaling=self.intercept_scaling)

    def _check_public_params(self):
        """Checks that read no data (run before anything touches X)."""
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValidationError(
                f"solver_options must be a dict or None; got {type(self.solver_options).__name__}.")
        if self.noise_multiplier is not None:
            nm = check_real("noise_multiplier", self.noise_multiplier)
            if not (0.0 <= nm < math.inf):
                raise ValidationError(
                    f"noise_multiplier must be a finite number >= 0 or None; got {nm!r}.")
        if not (isinstance(self.alpha, str) and self.alpha == "auto"):
            check_positive("alpha", self.alpha)
        if not (isinstance(self.epochs, str) and self.epochs == "auto"):
            check_positive("epochs", self.epochs)
        if isinstance(self.clip, str) and self.clip != "auto":
            raise ValidationError(f"clip must be a number > 0, None or 'auto'; got {self.clip!r}.")
        if self.clip is not None and not isinstance(self.clip, str):
            check_positive("clip", self.clip, allow_inf=True)
        if self.callback is not None and not callable(self.callback):
            raise ValidationError("callback must be callable (it receives a dict per epoch) or None.")
        if not isinstance(self.lazy_noise, (bool, np.bool_)):
            raise ValidationError(f"lazy_noise must be True or False; got {self.lazy_noise!r}.")
        if self.noise_multiplier is not None and not (
                isinstance(self.epsilon, numbers.Real) and self.epsilon == 1.0):
            warnings.warn(
                f"noise_multiplier={self.noise_multiplier!r} is used as given and epsilon="
                f"{self.epsilon!r} is ignored; epsilon_ reports the epsilon of that noise.",
                UserWarning, stacklevel=3)
        return self._row_map()

    def _check_params(self, n_samples):
        delta = default_delta(n_samples) if self.delta is None else self.delta
        _, delta = check_privacy_params(self.epsilon, delta, allow_inf_epsilon=True)
        if self._private() and delta >= 1.0 / n_samples:
            warnings.warn(
                f"delta = {delta:g} is >= 1/n = {1.0 / n_samples:g}: a guarantee this weak "
                "permits releasing one whole example; use delta well below 1/n (the default is "
                "min(1e-5, 1/(10 n))).", WeakPrivacyWarning, stacklevel=3)
        return float(delta)

    def _validate_X(self, X, y="no_validation", *, reset, max_row_norm=None):
        """scikit-learn's checks (feature names and counts, messages), then fastdp's.

        ``validate_data`` keeps CSR float32/float64 input as it is; fastdp's
        :func:`~fastdp._validation.check_X` then canonicalises the indices.
        Errors are re-raised as :class:`~fastdp.exceptions.ValidationError`.
        """
        kwargs = dict(reset=reset, accept_sparse="csr", dtype=[np.float64, np.float32],
                      accept_large_sparse=True)
        # before scikit-learn converts a sparse matrix: scipy trusts its index arrays
        check_sparse_structure(X)
        try:
            if isinstance(y, str) and y == "no_validation":
                X = validate_data(self, X, **kwargs)
            else:
                X, y = validate_data(self, X, y, y_numeric=self._task == "regression", **kwargs)
                if self._task != "regression":
                    check_classification_targets(y)
        except ValidationError:
            raise
        except ValueError as exc:
            message = str(exc)
            if "NaN" in message or "infinity" in message:
                # scikit-learn appends advice about other estimators; keep its first line
                message = (message.splitlines()[0] + " fastdp trains on finite values only: "
                           "drop or impute those entries first.")
            raise ValidationError(message) from exc
        X = check_X(X, max_row_norm=max_row_norm)
        return X if isinstance(y, str) and y == "no_validation" else (X, y)

    def _targets(self, y, n_samples):
        """``(targets, classes, n_fits, loss)`` of the problem the solver sees.

        Regression: real targets, one fit.  Two classes: -1/+1, one fit.
        K > 2 classes: class indices and one multinomial fit (logistic loss
        with DP-SGD or the exact solver), or K one-vs-rest -1/+1 fits.
        """
        if self._task == "regression":
            y, _ = check_labels(y, "regression", n_samples=n_samples)
            return y, None, 1, self._loss
        y = np.asarray(y)
        classes = np.unique(y)
        if classes.shape[0] < 2:
            raise ValidationError(
                f"{type(self).__name__} needs at least two classes in y; got 1 class: {classes.tolist()}.")
        if classes.shape[0] == 2:
            y, classes = check_labels(y, "binary", n_samples=n_samples)
            return y, classes, 1, self._loss
        index = np.searchsorted(classes, y).astype(np.int64)
        return index, classes, classes.shape[0], self._loss

    def _resolve_solver(self, private, multiclass):
        """The registered solver to run, and whether multiclass is one multinomial fit."""
        name = self.solver
        if not isinstance(name, str):
            raise ValidationError(f"solver must be a string; got {name!r}.")
        if name == "auto":
            name = "dpsgd" if private else "exact"
        multinomial = (multiclass and self._loss == "logistic" and name in ("dpsgd", "sgd", "exact"))
        if multinomial and name in ("dpsgd", "sgd"):
            from fastdp.solvers import multinomial as mn

            solver = mn.ESTIMATOR_SOLVERS["multinomial_dpsgd" if name == "dpsgd" else
                                          "multinomial_sgd"]
            return name, solver, True
        solver = get_estimator_solver(name)
        if self._loss not in solver.losses:
            raise ValidationError(
                f"solver {name!r} does not support the {self._loss} loss of "
                f"{type(self).__name__}; it supports {list(solver.losses)}.")
        return name, solver, multinomial

    @staticmethod
    def _settle_clip(config, rule, solver, n_samples, loss):
        """Make a clip left at ``"auto"`` by the solver's public defaults concrete, in place.

        The DP-SGD rule's clip when the run has one, else the solver's own default;
        both read public quantities only.  Used by ``fit`` and by the data-parallel engine.
        """
        if isinstance(config["clip"], str):
            config["clip"] = (rule["clip"] if rule is not None else
                              float(solver.default_clip(n_samples, config, loss)))

    def _solver_config(self, name, solver, n_samples, n_features, private, n_classes=2):
        """The resolved settings (``config``) of the run: every ``"auto"`` made concrete.

        ``n_classes`` (public) is K of a multinomial fit, 2 otherwise."""
        options = {} if self.solver_options is None else dict(self.solver_options)
        solver.check_options(options)
        rule = dpsgd_defaults(n_samples, self.epsilon if private else math.inf,
                              "multinomial" if n_classes > 2 else self._loss, n_classes) \
            if name in ("dpsgd", "sgd") else None
        family = solver_defaults(name, self._loss, self.epsilon if private else math.inf)
        if self.batch_size is not None:
            batch_size = check_batch_size(self.batch_size, n_samples)
        elif rule is not None:
            batch_size = rule["batch_size"]
        else:
            batch_size = min(_DEFAULT_BATCH_SIZE, n_samples)
        if isinstance(self.epochs, str):
            epochs = rule["epochs"] if rule is not None else family.get("epochs", _DEFAULT_EPOCHS)
        else:
            epochs = self.epochs
        if not isinstance(self.alpha, str):
            alpha = float(self.alpha)
        elif name in ("output", "objective"):
            alpha = perturbation_alpha(n_samples, n_features, self.epsilon if private
                                       else math.inf, name)
        else:
            alpha = default_alpha(n_samples)
        for key, value in line_search_options(name, self._loss, alpha, options).items():
            options.setdefault(key, value)    # DP-AGD / DP-BLGD step grid (public rule)
        if rule is not None and "learning_rate" in solver.options:
            # the rule's step, kept below 1 / (2 lam) so the decay stays in (1/2, 1)
            options.setdefault("learning_rate", min(rule["learning_rate"], 0.5 / alpha))
        return {
            "lam": alpha,
            "batch_size": int(batch_size),
            "epochs": epochs,
            "clip": family.get("clip", self.clip) if isinstance(self.clip, str) else self.clip,
            "sampler": solver.default_sampler if self.sampler is None else self.sampler,
            "lazy_noise": self.lazy_noise,
            "num_threads": self.num_threads,
            "record_history": self.record_history,
            "callback": self.callback,
            "options": options,
        }, rule

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
        delta = self._check_params(n_samples)
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
                        max(n_classes, 1) if multinomial else 1, config)
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
        noise, one_event, planned_event = self._plan(solver, n_samples, config, private, delta,
                                                     accountant, n_fits)
        reservation = None
        if self.ledger is not None:
            # Reserved before training: a fit over budget raises here and releases nothing.
            reservation = self.ledger.reserve(planned_event, label=type(self).__name__)
        released_states = []
        if config.get("callback") is not None:
            user_callback = config["callback"]

            def callback(state):
                # the user sees the released state as the fitted model will show it
                released_states.append(state["epoch"])
                state = dict(state)
                coef, intercept = row_map.split_coef(
                    np.asarray(state["coef"]).reshape(-1, Xm.shape[1]))
                state["coef"] = self._shape_coef(coef)
                state["intercept"] = self._shape_intercept(intercept)
                user_callback(state)

            config["callback"] = callback
        try:
            # Interrupted by the user: unless a callback already saw a released
            # (noisy) state, nothing was released, so nothing is charged.  Any
            # other failure may depend on the private data: the charge stays.
            with settle_reservation(reservation, "fit",
                                    released=lambda: bool(released_states)):
                results = self._run_fits(solver, Xm, y, loss, noise, config, n_fits,
                                         one_event, multinomial)
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
        if self.verbose:
            print(self._describe())
        return self

    def _set_fitted(self, theta, *, row_map, classes, solver_name, solver, multi_class, config,
                    noise, delta, private, accountant, event, sampler, sample_rate, n_iter,
                    history, solver_result, charged, started):
        """Set the fitted attributes from the run's released ``theta`` (``fit`` and the engine).

        ``theta`` has one row per fitted model (mapped-row coordinates, intercept
        column last); it is checked to be finite before the estimator holds any
        of it.  ``epsilon_`` is the accountant's epsilon of ``event``, the event
        that was planned and charged, never the target.
        """
        theta = np.asarray(theta, dtype=np.float64)
        if not np.all(np.isfinite(theta)):  # checked before the estimator holds any of it
            error = ValidationError(
                "the fit produced non-finite coefficients (the noise or the steps overflowed); "
                "lower clip, noise_multiplier or the learning rate.")
            if charged:
                error.add_note("fastdp: the privacy ledger keeps this fit's charge (the data "
                               "were read).")
            raise error
        coef, intercept = row_map.split_coef(theta)
        self.row_map_ = row_map
        self.coef_ = self._shape_coef(coef)
        self.intercept_ = self._shape_intercept(intercept)
        if classes is not None:
            self.classes_ = classes
        self.solver_ = solver_name
        self.multi_class_ = multi_class
        self.alpha_ = config["lam"]
        self.batch_size_ = config["batch_size"]
        self.epochs_ = config["epochs"]
        self.learning_rate_ = config["options"].get("learning_rate")
        self.noise_multiplier_ = noise
        self.noise_name_ = solver.noise_name
        self.delta_ = delta if private else 0.0
        self.epsilon_ = accountant.epsilon(event, delta) if private else math.inf
        self.privacy_event_ = event
        self.privacy_report_ = accountant.report(event, delta) if private else None
        self.sampler_ = sampler
        self.sample_rate_ = sample_rate
        self.clip_ = config["clip"]
        self.n_iter_ = n_iter
        self.history_ = history
        self.solver_result_ = solver_result
        self.fit_time_ = time.perf_counter() - started

    def _plan(self, solver, n_samples, config, private, delta, accountant, n_fits):
        """``(noise, event of one fit, event of the whole fit)``, before anything runs.

        K one-vs-rest fits each read every example: the whole fit is their
        composition ``SelfComposedEvent(event, K)``, and the noise is
        calibrated for that composition (solvers with a closed-form budget
        rule get ``epsilon / K, delta / K`` each, basic composition, and the
        accountant's epsilon of the composition is what is reported).
        """
        if not private:
            if n_fits > 1:
                return 0.0, NonPrivateEvent(), NonPrivateEvent()
            return 0.0, NonPrivateEvent(), NonPrivateEvent()
        epsilon = float(self.epsilon)
        if self.noise_multiplier is not None:
            noise = float(self.noise_multiplier)
        elif n_fits == 1:
            noise = solver.noise_for_budget(n_samples, config, epsilon, delta, accountant)
        elif _overrides_noise_for_budget(solver):
            noise = solver.noise_for_budget(n_samples, config, epsilon / n_fits, delta / n_fits,
                                            accountant)
        else:
            noise = float(calibrate(
                lambda s: SelfComposedEvent(solver.event(n_samples, config, s), n_fits),
                epsilon, delta, accountant=accountant))
        one_event = solver.event(n_samples, config, noise)
        whole = one_event if n_fits == 1 else SelfComposedEvent(one_event, n_fits)
        planned = accountant.epsilon(whole, delta)  # before anything runs (a given noise too)
        if self.noise_multiplier is None and planned > epsilon * (1.0 + 1e-9):
            raise ValidationError(
                f"could not fit {n_fits} one-vs-rest models within epsilon = {epsilon}; "
                "use solver='dpsgd' or a larger epsilon.")
        return noise, one_event, whole

    def _run_fits(self, solver, Xm, y, loss, noise, config, n_fits, one_event, multinomial):
        """Run the solver once (binary, regression, multinomial) or once per class (OvR)."""
        rng = check_random_state(self.random_state)
        Xm = rows_for_solver(Xm, solver, config)  # read on the fly, or written out once
        if n_fits == 1:
            runs = [(y, rng)]
        else:
            seeds = rng.spawn(n_fits)
            runs = [(np.where(y == k, 1.0, -1.0), seeds[k]) for k in range(n_fits)]
        settings = solver.settings(config, noise)  # typed, the same for every fit
        results = []
        for target, random_state in runs:
            result = solver.solve(SolverProblem(Xm, target, loss), settings, random_state)
            if result.event != one_event:  # internal consistency guard
                raise RuntimeError("the solver ran a different mechanism from the one accounted for.")
            results.append(result)
        return results

    def _bounded_scores(self, X):
        """``b(X) @ coef_`` (``coef_.T`` for classifiers): the prediction-time rows bounded
        exactly as in ``fit`` (sparse X block by block, without a copy: ``RowMap.bounded_dot``)."""
        check_is_fitted(self, "coef_")
        X = self._validate_X(X, reset=False)
        return self.row_map_.bounded_dot(X, self.coef_ if self.coef_.ndim == 1 else self.coef_.T)

    def _describe(self):
        eps = "inf (not private)" if math.isinf(self.epsilon_) else f"{self.epsilon_:.6g}"
        return (f"{type(self).__name__}: solver={self.solver_}, sampler={self.sampler_}, "
                f"sigma={self.noise_multiplier_:.6g}, T={self.n_iter_}, q={self.sample_rate_:.4g}, "
                f"epsilon={eps}, delta={self.delta_:.3g}, time={self.fit_time_:.3f}s")


class _DPLinearClassifier(LinearClassifierMixin, _DPLinearModel):
    _task = "classification"

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
