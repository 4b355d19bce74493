"""scikit-learn estimators for differentially private linear models.

:class:`DPRidge`, :class:`DPLogisticRegression` and :class:`DPLinearSVC`
minimise the 1/N-averaged, L2-regularised objective

    P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (alpha/2) ||theta||^2

with a differentially private solver chosen by ``solver=`` and release
``coef_`` only.

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
* Requirement: every row has L2 norm <= 1.  Rows above are rejected unless
  ``normalize=True``, which rescales each row to norm 1 (per example, so it
  costs no privacy).
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

import dataclasses
import math
import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from fastdp._validation import (
    check_batch_size,
    check_labels,
    check_positive,
    check_privacy_params,
    check_random_state,
    check_real,
    check_X,
)
from fastdp.exceptions import ValidationError
from fastdp.preprocessing import normalize_rows
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.events import NonPrivateEvent
from fastdp.solvers.registry import get_estimator_solver

__all__ = ["DPRidge", "DPLogisticRegression", "DPLinearSVC"]

_DEFAULT_BATCH_SIZE = 1000


def default_delta(n_samples):
    """The default delta: ``min(1e-5, 1 / (10 n))``, always below ``1/n``.

    A delta of order ``1/n`` permits releasing one whole example; fastdp's
    default stays an order of magnitude below that.
    """
    return min(1e-5, 1.0 / (10.0 * n_samples))


class _DPLinearModel(BaseEstimator):
    """Shared fitting logic of the DP linear estimators (not public)."""

    _loss = None

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        alpha=1e-4,
        solver="dpscd",
        batch_size=None,
        clip="auto",
        epochs=10,
        sampler=None,
        accountant="rdp",
        noise_multiplier=None,
        solver_options=None,
        normalize=False,
        ledger=None,
        record_history=False,
        callback=None,
        lazy_noise=True,
        num_threads=None,
        random_state=None,
        verbose=0,
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
        self.ledger = ledger
        self.record_history = record_history
        self.callback = callback
        self.lazy_noise = lazy_noise
        self.num_threads = num_threads
        self.random_state = random_state
        self.verbose = verbose

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

    def _check_params(self, n_samples):
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValidationError(
                f"solver_options must be a dict or None; got {type(self.solver_options).__name__}.")
        delta = default_delta(n_samples) if self.delta is None else self.delta
        _, delta = check_privacy_params(self.epsilon, delta, allow_inf_epsilon=True)
        if self.noise_multiplier is not None:
            nm = check_real("noise_multiplier", self.noise_multiplier)
            if not (0.0 <= nm < math.inf):
                raise ValidationError(
                    f"noise_multiplier must be a finite number >= 0 or None; got {nm!r}.")
        check_positive("alpha", self.alpha)
        if self.batch_size is None:
            batch_size = min(_DEFAULT_BATCH_SIZE, n_samples)
        else:
            batch_size = check_batch_size(self.batch_size, n_samples)
        return float(delta), int(batch_size)

    def _validate_X(self, X, y="no_validation", *, reset, max_row_norm=None):
        """scikit-learn's checks (feature names and counts, messages), then fastdp's.

        ``validate_data`` keeps CSR float32/float64 input as it is; fastdp's
        :func:`~fastdp._validation.check_X` then canonicalises the indices.
        Errors are re-raised as :class:`~fastdp.exceptions.ValidationError`.
        """
        kwargs = dict(reset=reset, accept_sparse="csr", dtype=[np.float64, np.float32],
                      accept_large_sparse=True)
        try:
            if isinstance(y, str) and y == "no_validation":
                X = validate_data(self, X, **kwargs)
            else:
                X, y = validate_data(self, X, y, y_numeric=self._task == "regression", **kwargs)
                if self._task == "binary":
                    check_classification_targets(y)
        except ValidationError:
            raise
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
        X = check_X(X, max_row_norm=max_row_norm)
        return X if isinstance(y, str) and y == "no_validation" else (X, y)

    # ------------------------------------------------------------------- fit
    def fit(self, X, y):
        """Train the model with differential privacy.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training examples (rows).  CSR float32/float64 with int32/int64
            indices is used without a copy.  Rows must have L2 norm <= 1
            unless ``normalize=True``.
        y : array-like of shape (n_samples,)
            Targets (regression) or two class labels (classification).

        Returns
        -------
        self
        """
        started = time.perf_counter()
        private = self._private()
        # one pass of fastdp's checks, with the row-norm bound the proofs need
        # unless the rows are normalised here (per example: private-safe)
        max_row_norm = 1.0 if private and not self.normalize else None
        X, y = self._validate_X(X, y, reset=True, max_row_norm=max_row_norm)
        y, classes = check_labels(y, self._task, n_samples=X.shape[0])
        n_samples = X.shape[0]
        delta, batch_size = self._check_params(n_samples)
        if self.normalize:
            X = normalize_rows(X)

        solver = get_estimator_solver(self.solver)
        if self._loss not in solver.losses:
            raise ValidationError(
                f"solver {self.solver!r} does not support the {self._loss} loss of "
                f"{type(self).__name__}; it supports {list(solver.losses)}.")
        config = self._solver_config(solver, batch_size)
        if self.callback is not None and not callable(self.callback):
            raise ValidationError("callback must be callable (it receives a dict per epoch) or None.")
        if self.callback is not None and not solver.supports_callback:
            raise ValidationError(f"solver {self.solver!r} does not take a per-epoch callback.")
        progress = None
        if self.verbose and solver.supports_callback:
            from fastdp.progress import EpochProgress

            progress = EpochProgress(total=math.ceil(self.epochs), desc=f"{self.solver} epochs",
                                     callback=self.callback)
            config["callback"] = progress
        config["n_features"] = int(X.shape[1])  # public (part of the data's schema)
        config["loss"] = self._loss
        if isinstance(self.clip, str):
            if self.clip != "auto":
                raise ValidationError(f"clip must be a number > 0, None or 'auto'; got {self.clip!r}.")
            config["clip"] = float(solver.default_clip(n_samples, config, self._loss))
        accountant = get_accountant(self.accountant)
        if private:
            if self.noise_multiplier is not None:
                noise = float(self.noise_multiplier)
            else:
                noise = solver.noise_for_budget(n_samples, config, float(self.epsilon), delta,
                                                accountant)
            planned_event = solver.event(n_samples, config, noise)
        else:
            noise = 0.0
            planned_event = NonPrivateEvent()
        reservation = None
        if self.ledger is not None:
            # Reserved before training: a fit over budget raises here and releases nothing.
            reservation = self.ledger.reserve(planned_event, label=type(self).__name__)
        released_states = []
        if config.get("callback") is not None:
            user_callback = config["callback"]

            def callback(state):
                released_states.append(state["epoch"])
                user_callback(state)

            config["callback"] = callback
        try:
            result = solver.run(X, y, loss=self._loss, noise=noise, config=config,
                                random_state=check_random_state(self.random_state))
            if result.event != planned_event:  # internal consistency guard
                raise RuntimeError("the solver ran a different mechanism from the one accounted for.")
        except KeyboardInterrupt as exc:
            # Interrupted by the user: unless a callback already saw a released
            # (noisy) state, nothing was released, so nothing is charged.
            if reservation is not None:
                if released_states:
                    reservation.commit()
                    exc.add_note("fastdp: the privacy ledger keeps this fit's charge: the "
                                 "callback already received released states.")
                else:
                    reservation.cancel()
            raise
        except BaseException as exc:
            # Any other failure may depend on the private data: the charge stays.
            if reservation is not None:
                reservation.commit()
                exc.add_note("fastdp: the privacy ledger keeps this fit's charge (a failure "
                             "during training can depend on the private data).")
            raise
        finally:
            if progress is not None:
                progress.close()
        if reservation is not None:
            reservation.commit()

        self.coef_ = self._shape_coef(result.coef)
        self.intercept_ = self._shape_intercept()
        if classes is not None:
            self.classes_ = classes
        self.noise_multiplier_ = noise
        self.noise_name_ = solver.noise_name
        self.delta_ = delta if private else 0.0
        self.epsilon_ = accountant.epsilon(result.event, delta) if private else math.inf
        self.privacy_event_ = result.event
        self.privacy_report_ = accountant.report(result.event, delta) if private else None
        self.sampler_ = result.sampler
        self.sample_rate_ = result.sample_rate
        self.clip_ = config["clip"]
        self.n_iter_ = result.n_iter
        self.history_ = result.history
        # alpha (internal dual state) is not released: its noisy coordinates
        # reveal which examples were sampled, which the event does not cover.
        self.solver_result_ = dataclasses.replace(result, alpha=None) if hasattr(
            result, "alpha") else result
        self.fit_time_ = time.perf_counter() - started
        if self.verbose:
            print(self._describe())
        return self

    def _solver_config(self, solver, batch_size):
        options = {} if self.solver_options is None else dict(self.solver_options)
        solver.check_options(options)
        return {
            "lam": float(self.alpha),
            "batch_size": batch_size,
            "epochs": self.epochs,
            "clip": self.clip,
            "sampler": solver.default_sampler if self.sampler is None else self.sampler,
            "lazy_noise": self.lazy_noise,
            "num_threads": self.num_threads,
            "record_history": self.record_history,
            "callback": self.callback,
            "options": options,
        }

    def _describe(self):
        eps = "inf (not private)" if math.isinf(self.epsilon_) else f"{self.epsilon_:.6g}"
        return (f"{type(self).__name__}: solver={self.solver}, sampler={self.sampler_}, "
                f"sigma={self.noise_multiplier_:.6g}, T={self.n_iter_}, q={self.sample_rate_:.4g}, "
                f"epsilon={eps}, delta={self.delta_:.3g}, time={self.fit_time_:.3f}s")


class DPRidge(RegressorMixin, _DPLinearModel):
    """Ridge regression trained with differential privacy (DP-SCD by default).

    Minimises ``(1/N) sum_i (x_i^T theta - y_i)^2 / 2 + (alpha/2) ||theta||^2``
    without intercept.  Each dual coordinate update is scaled to at most
    ``clip`` in absolute value, which bounds the sensitivity whatever the
    targets, so targets need no bound; still, centre and scale them with
    public knowledge for good utility.

    Parameters
    ----------
    epsilon : float, default=1.0
        Target privacy budget (> 0).  ``np.inf`` trains without privacy.
    delta : float or None, default=None
        Target delta in (0, 1); ``None`` means ``min(1e-5, 1/(10 N))``.
    alpha : float, default=1e-4
        L2 strength lambda of the 1/N-averaged objective (as in ``SGDRegressor``).
    solver : str, default="dpscd"
        ``"dpscd"``: dual DP-SCD (spec 000 Algorithm 1); ``"seq_dpscd"``:
        seqDP-SCD (Algorithm 3); further solvers are listed in
        :data:`fastdp.solvers.registry.ESTIMATOR_SOLVER_NAMES`.
    batch_size : int or None, default=None
        Expected mini-batch size L (``None``: ``min(1000, N)``).
    clip : float or "auto", default="auto"
        Bound C on each update (DP-SCD: each coordinate step; DP-SGD: each
        per-example gradient).  ``"auto"`` lets the solver choose from public
        quantities only (DP-SCD: ``lam N / L``, capped at 1 for classifiers).
    epochs : float, default=10
        Passes over the data; ``T = floor(epochs N / L)`` steps.
    sampler : {"poisson", "fixed", "shuffle"} or None, default=None
        Mini-batch sampler; each is accounted for by its own event.  ``None``
        picks the solver's default: ``"poisson"`` (add/remove adjacency, exact
        accounting) for DP-SCD, ``"fixed"`` for seqDP-SCD (whose sensitivity
        needs bounded batches).
    accountant : {"rdp", "pld", "moments"} or accountant, default="rdp"
        Accountant used to calibrate sigma and to report ``epsilon_``.
    noise_multiplier : float or None, default=None
        Bypass calibration and use this noise parameter (``epsilon_`` is then
        computed for it).
    solver_options : dict or None, default=None
        Solver-specific settings (e.g. ``{"box_eps": 1e-4}`` for DP-SCD,
        ``{"seq_sensitivity": "repo"}`` for seqDP-SCD); unknown keys are rejected.
    normalize : bool, default=False
        Rescale every row to unit L2 norm before training (per example,
        private-safe).  Otherwise rows with norm > 1 are rejected.
    ledger : fastdp.privacy.ledger.PrivacyLedger or None
        Charged with the fit's event before training; refuses fits over budget.
    record_history : bool, default=False
        Record per-epoch objectives in ``history_`` (non-private diagnostics).
    callback : callable or None, default=None
        Called after every epoch with a dict of the released state (``epoch``,
        ``n_iter``, ``coef``); for solvers that support it (DP-SCD, DP-SGD).
        It sees only what the mechanism releases, so it costs no privacy.
    lazy_noise : bool, default=True
        Lazy (exact) noise in the kernel; ``False`` uses the eager path.
    num_threads : int or None, default=None
        OpenMP threads; results are identical for any value.
    random_state : int, numpy Generator or None, default=None
        Seed of the sampling and noise streams.
    verbose : int, default=0
        Show a per-epoch progress bar (on a terminal) and print a privacy
        report after fitting.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        Always 0.0 (no intercept; append a constant feature if needed).
    noise_multiplier_, epsilon_, delta_ : float
        Noise parameter used (its meaning in ``noise_name_``); epsilon computed
        by the accountant for the event that ran; delta.
    privacy_event_ : fastdp.privacy.events.DpEvent
    privacy_report_ : EpsilonReport or None
    n_iter_ : int
        Mini-batch iterations T.
    history_ : list of dict or None
    """

    _loss = "squared"
    _task = "regression"

    def _shape_coef(self, coef):
        return np.asarray(coef, dtype=np.float64)

    def _shape_intercept(self):
        return 0.0

    def predict(self, X):
        """Predict ``X @ coef_``."""
        check_is_fitted(self, "coef_")
        X = self._validate_X(X, reset=False)
        return np.asarray(X @ self.coef_).ravel()


class _DPLinearClassifier(LinearClassifierMixin, _DPLinearModel):
    _task = "binary"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _shape_coef(self, coef):
        return np.asarray(coef, dtype=np.float64).reshape(1, -1)

    def _shape_intercept(self):
        return np.zeros(1)

    def decision_function(self, X):
        """Signed score ``X @ coef_`` (positive means ``classes_[1]``)."""
        check_is_fitted(self, "coef_")
        X = self._validate_X(X, reset=False)
        return np.asarray(X @ self.coef_[0]).ravel()


class DPLogisticRegression(_DPLinearClassifier):
    """Binary logistic regression trained with differential privacy.

    Minimises ``(1/N) sum_i log(1 + exp(-y_i x_i^T theta)) + (alpha/2)||theta||^2``
    (labels mapped to -1/+1; ``classes_[1]`` is +1).  Parameters and
    attributes as :class:`DPRidge`, plus ``classes_``.
    """

    _loss = "logistic"

    def predict_proba(self, X):
        """Probabilities of ``classes_`` from the logistic model."""
        scores = self.decision_function(X)
        p1 = 0.5 * (1.0 + np.tanh(0.5 * scores))
        return np.column_stack([1.0 - p1, p1])

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        scores = self.decision_function(X)
        return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])


class DPLinearSVC(_DPLinearClassifier):
    """Binary linear SVM (hinge loss) trained with differential privacy.

    Minimises ``(1/N) sum_i max(0, 1 - y_i x_i^T theta) + (alpha/2)||theta||^2``.
    The hinge loss is not smooth, so spec 000's convergence theory does not
    cover it; the privacy guarantee does.  Parameters and attributes as
    :class:`DPRidge`, plus ``classes_``.
    """

    _loss = "hinge"
