"""The solver an estimator runs and its resolved settings (every ``"auto"`` made
concrete from public quantities only).

:class:`_SolverChoice` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`.
"""

import math

from fastdp._validation import check_batch_size
from fastdp.defaults import (default_alpha, dpsgd_defaults, dual_scd_defaults,
                             line_search_options, perturbation_alpha, solver_defaults)
from fastdp.exceptions import ValidationError
from fastdp.linear_model._params import default_delta
from fastdp.privacy.zcdp import bun_steinke_rho
from fastdp.solvers.registry import get_estimator_solver


_DEFAULT_BATCH_SIZE = 1000
_DEFAULT_EPOCHS = 10


class _SolverChoice:
    """Solver resolution and its configuration (a mixin of ``_DPLinearModel``)."""

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
                              "multinomial" if n_classes > 2 else self._loss, n_classes,
                              n_features) \
            if name in ("dpsgd", "sgd") else None
        delta = default_delta(n_samples) if self.delta is None else float(self.delta)
        epsilon = self.epsilon if private else math.inf
        rho = bun_steinke_rho(epsilon, delta) if math.isfinite(epsilon) else None
        family = solver_defaults(name, self._loss, epsilon, n_samples, n_features, rho)
        if name in ("dpscd", "seq_dpscd"):
            # the DP-SCD rule (fastdp.defaults.dual_scd_defaults): lam and C follow the
            # user's L and E when set
            scd = dual_scd_defaults(
                name, n_samples, epsilon,
                None if self.batch_size is None else check_batch_size(self.batch_size, n_samples),
                None if isinstance(self.epochs, str) else self.epochs)
            rule_alpha = scd["alpha"]
            family = {"epochs": scd["epochs"], "batch_size": scd["batch_size"]}
            if name == "seq_dpscd":
                family["clip"] = scd["clip"]   # dual DP-SCD: C = lam n / L (default_clip)
        else:
            rule_alpha = None
        if self.batch_size is not None:
            batch_size = check_batch_size(self.batch_size, n_samples)
        elif rule is not None:
            batch_size = rule["batch_size"]
        elif "batch_size" in family:
            batch_size = family["batch_size"]
        else:
            batch_size = min(_DEFAULT_BATCH_SIZE, n_samples)
        if isinstance(self.epochs, str):
            epochs = rule["epochs"] if rule is not None else family.get("epochs", _DEFAULT_EPOCHS)
        else:
            epochs = self.epochs
        if not isinstance(self.alpha, str):
            alpha = float(self.alpha)
        elif rule_alpha is not None:
            alpha = rule_alpha
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
