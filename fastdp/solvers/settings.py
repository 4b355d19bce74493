"""Typed settings of the registered solvers, and the one call convention.

The estimators of :mod:`fastdp.linear_model` resolve their public parameters
into a ``config`` dict (see :mod:`fastdp.solvers.registry`) with the
solver-specific ``solver_options`` nested under ``"options"``.  A solver
family that has moved to typed settings declares a frozen dataclass, a
subclass of :class:`SolverSettings` whose extra fields are its
``solver_options`` (one name per concept: the L2 strength is ``alpha``
throughout, as on the estimators), and
:meth:`SolverSettings.from_config` is the one place where the dict becomes
that dataclass.  The family is then run as::

    result = solver.solve(SolverProblem(X, y, loss), settings, rng)

and returns a :class:`~fastdp.solvers._result.SolverResult` whose
family-specific data is a typed ``details`` dataclass.

Privacy: settings are public hyper-parameters only; nothing here reads data.
"""

import dataclasses
from typing import Any, Optional

__all__ = ["SolverProblem", "SolverSettings"]


@dataclasses.dataclass(frozen=True)
class SolverProblem:
    """The private training data of one run, and the loss it is fitted with.

    Attributes
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : str
        Canonical loss name (``"squared"``, ``"logistic"``, ``"hinge"``).
    """

    X: Any
    y: Any
    loss: str

    @property
    def n_samples(self):
        """N (public)."""
        return int(self.X.shape[0])


# config key -> field of SolverSettings (the estimators' config says "lam" for alpha)
_CONFIG_FIELDS = {"lam": "alpha", "batch_size": "batch_size", "epochs": "epochs", "clip": "clip",
                  "sampler": "sampler", "lazy_noise": "lazy_noise", "num_threads": "num_threads",
                  "record_history": "record_history", "callback": "callback",
                  "n_features": "n_features", "n_classes": "n_classes", "loss": "loss"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """Settings every registered solver reads (a family's subclass adds its options).

    Attributes
    ----------
    alpha : float
        L2 strength of the 1/n-averaged objective (the estimator's ``alpha``).
    batch_size : int
        (Expected) mini-batch size L.
    epochs : float
        Passes over the data.
    clip : float or None
        Clipping (or scaling) bound C; None: none.
    sampler : str
        Name of the batch sampler.
    noise_parameter : float
        The solver's noise parameter (its ``noise_name``); 0 runs without noise.
    lazy_noise, num_threads, record_history, callback
        As on the estimators.
    n_features, n_classes : int or None
        Public schema of the data (None when not known).
    loss : str or None
        Canonical loss name.
    """

    alpha: Optional[float] = None
    batch_size: Optional[int] = None
    epochs: Optional[float] = None
    clip: Optional[float] = None
    sampler: Optional[str] = None
    noise_parameter: float = 0.0
    lazy_noise: bool = True
    num_threads: Optional[int] = None
    record_history: bool = False
    callback: Any = None
    n_features: Optional[int] = None
    n_classes: Optional[int] = None
    loss: Optional[str] = None

    @classmethod
    def option_names(cls):
        """The family's ``solver_options`` keys: the fields a subclass adds."""
        common = {f.name for f in dataclasses.fields(SolverSettings)}
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in common)

    @classmethod
    def from_config(cls, config, noise=0.0):
        """The settings of an estimator's resolved ``config`` dict, with noise parameter ``noise``.

        Keys absent from ``config`` keep the field defaults; a common field
        (e.g. ``n_features``) given both in ``config`` and in its
        ``"options"`` takes the config's value.  The values are not checked
        here: :meth:`~fastdp.solvers.registry.EstimatorSolver.check_params`
        checks them (before any privacy is spent), and the solver's own
        checks run again when it runs.
        """
        values = {field: config[key] for key, field in _CONFIG_FIELDS.items() if key in config}
        options = config.get("options") or {}
        names = set(cls.option_names()) | {f.name for f in dataclasses.fields(SolverSettings)}
        for key, value in options.items():
            if key in names and key not in values:
                values[key] = value
        return cls(noise_parameter=float(noise), **values)

    def options(self):
        """The family's options as a dict (field name -> value)."""
        return {name: getattr(self, name) for name in self.option_names()}
