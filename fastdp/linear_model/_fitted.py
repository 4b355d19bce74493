"""The released model: the fitted attributes set once from the run's theta, the
states a per-epoch callback sees, prediction-time scores and the one-line summary.

:class:`_FittedModel` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`; the estimator class gives
``_shape_coef`` and ``_shape_intercept`` (the public shapes of ``coef_`` and
``intercept_``).
"""

import math
import time

import numpy as np
from sklearn.utils.validation import check_is_fitted

from fastdp._validation import check_rows_as_read
from fastdp.exceptions import ValidationError


def _label_text(values, limit=6):
    shown = ", ".join(f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)
                      for v in values[:limit])
    return "{" + shown + (", ..." if len(values) > limit else "") + "}"


def check_known_labels(classes, y, where="y"):
    """Raise a ValidationError when ``y`` holds a label that is not in ``classes``.

    Such labels follow another convention than the training labels (e.g.
    -1/+1 against 0/1): an accuracy computed on them would be meaningless.

    Parameters
    ----------
    classes : ndarray
        The model's classes (``classes_``).
    y : array-like
        Labels of the data to score.
    where : str, default="y"
        The labels' name, for the message.
    """
    labels = np.unique(np.asarray(y))
    if np.setdiff1d(labels, classes).size:
        raise ValidationError(
            f"{where} has labels {_label_text(labels)} but the model's classes are "
            f"{_label_text(np.asarray(classes))}: the labels follow another convention "
            "(e.g. -1/+1 against 0/1), so an accuracy would be meaningless; map them to the "
            "model's classes.")


class _FittedModel:
    """Release and prediction (a mixin of ``_DPLinearModel``)."""

    def _released_callback(self, user_callback, row_map, width, released_states):
        """The per-epoch callback the solver calls: it records that a (noisy) state was
        released (in ``released_states``) and shows ``user_callback`` the state as the
        fitted model will show it (``width``: columns of the mapped rows)."""

        def callback(state):
            # the user sees the released state as the fitted model will show it
            released_states.append(state["epoch"])
            state = dict(state)
            coef, intercept = row_map.split_coef(
                np.asarray(state["coef"]).reshape(-1, width))
            state["coef"] = self._shape_coef(coef)
            state["intercept"] = self._shape_intercept(intercept)
            user_callback(state)

        return callback

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

    def _bounded_scores(self, X):
        """``b(X) @ coef_`` (``coef_.T`` for classifiers): the prediction-time rows bounded
        exactly as in ``fit`` (sparse X block by block, without a copy: ``RowMap.bounded_dot``)."""
        check_is_fitted(self, "coef_")
        X = self._validate_X(X, reset=False)
        check_rows_as_read(X, f"{type(self).__name__} prediction")  # a trusted binary CSR
        return self.row_map_.bounded_dot(X, self.coef_ if self.coef_.ndim == 1 else self.coef_.T)

    def _describe(self):
        eps = "inf (not private)" if math.isinf(self.epsilon_) else f"{self.epsilon_:.6g}"
        return (f"{type(self).__name__}: solver={self.solver_}, sampler={self.sampler_}, "
                f"sigma={self.noise_multiplier_:.6g}, T={self.n_iter_}, q={self.sample_rate_:.4g}, "
                f"epsilon={eps}, delta={self.delta_:.3g}, time={self.fit_time_:.3f}s")
