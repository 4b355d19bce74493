"""The record every fastdp solver returns."""

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

__all__ = ["SolverResult", "DetailsView", "FLATTEN"]


#: Metadata of a details field that holds an optional sub-record (a dataclass or
#: None): the view shows the sub-record's fields in its place, or nothing for None.
FLATTEN = {"flatten": True}


def _view_fields(details):
    """``(name, holder)`` of every key of the view of ``details``, in field order."""
    for f in dataclasses.fields(details):
        if f.metadata.get("flatten"):
            part = getattr(details, f.name)
            if part is not None:
                yield from _view_fields(part)
        else:
            yield f.name, details


class DetailsView(Mapping):
    """A read-only mapping of a typed details dataclass: field name -> value.

    What ``SolverResult.extra`` is for a family that reports typed
    ``details`` (so readers of ``result.extra["key"]`` keep working).  A field
    declared with ``metadata=FLATTEN`` holds an optional sub-record (e.g. what
    a privacy filter consumed, present only under that filter): its fields
    appear in its place, and none when it is None.
    """

    def __init__(self, details):
        self._details = details
        self._holders = {}
        for name, holder in _view_fields(details):
            if name in self._holders:
                raise ValueError(f"two fields of {type(details).__name__} are named {name!r}")
            self._holders[name] = holder

    def __getitem__(self, key):
        holder = self._holders[key]
        return getattr(holder, key)

    def __iter__(self):
        return iter(self._holders)

    def __len__(self):
        return len(self._holders)

    def __repr__(self):
        return f"DetailsView({self._details!r})"


@dataclass
class SolverResult:
    """Outcome of one solver run: the released model, the state, and what was spent.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
        The released primal model (for the dual SCD family ``v / (lam N)``,
        built from the noisy ``v``, never from ``X^T alpha``).
    alpha : ndarray of shape (n_samples,) or None
        Final (noisy) dual variables: **internal state, not covered by
        ``event``**.  Its changed coordinates reveal which examples were
        sampled, which the sampled accounting needs to keep secret; use it for
        diagnostics (duality gap), do not publish it.
    v : ndarray or None
        Final (noisy) auxiliary vector (``n_features`` for the dual family).
    n_iter : int
        Number of mini-batch iterations T that ran (= mechanism invocations).
    epochs : float
        Epochs requested; ``T = floor(epochs * n / batch_size)``.
    algorithm : str
        ``"dual_dpscd"``, ``"seq_dpscd"``, ``"scd"`` or ``"primal_dpscd"``.
    loss : str
        Canonical loss name.
    lam : float
        L2 regularisation strength lambda.
    noise_multiplier : float
        sigma: noise std = sigma x sensitivity.  0 for non-private runs.
    sensitivity : float
        L2 sensitivity of one step under ``adjacency`` (0 when not private).
    noise_std : float
        Per-coordinate Gaussian std actually added (``noise_multiplier * sensitivity``).
    clip : float
        Scaling bound C of each coordinate update (``inf``: none).
    batch_size : float
        (Expected) mini-batch size L.
    sample_rate : float
        Probability that an example is in a given batch (L / n).
    sampler : str
        Name of the sampler that drew the batches.
    adjacency : str
        Neighbouring relation of the privacy analysis (``"add_remove"`` or
        ``"replace_one"``).
    event : object
        Privacy event (``fastdp.privacy.events``) of everything released.
        Accountants turn it into epsilon.
    lazy_noise : bool
        Whether v-noise was drawn lazily (same output distribution).
    diagnostics : dict
        **Non-private** run details, e.g. ``n_noise_draws`` (with lazy noise
        it depends on the sparsity of the sampled rows).  Never publish.
    num_threads : int
        OpenMP threads used for the margins (results do not depend on it).
    history : list of dict or None
        Per-epoch objectives when ``record_history=True``.  **Non-private
        diagnostics**: computing them reads the whole training set, so they
        must not be published as part of the private output.
    details : dataclass or None
        The family-specific part of the result, typed (a small frozen
        dataclass per family, e.g.
        :class:`~fastdp.solvers.accelerated.settings.AcceleratedDetails`,
        :class:`~fastdp.solvers.line_search.adaptive.AdaptiveDetails`);
        None for the families that still report a free ``extra`` dict.
    extra : mapping
        Algorithm-specific details (e.g. ``sigma_prime``, ``seq_sensitivity``);
        for a family with typed ``details``, a read-only view of them.
    """

    coef: np.ndarray
    n_iter: int
    epochs: float
    algorithm: str
    loss: str
    lam: float
    noise_multiplier: float
    sensitivity: float
    noise_std: float
    clip: float
    batch_size: float
    sample_rate: float
    sampler: str
    adjacency: str
    event: Any
    diagnostics: dict = field(default_factory=dict)
    num_threads: int = 1
    history: Optional[list] = None
    alpha: Optional[np.ndarray] = None
    v: Optional[np.ndarray] = None
    lazy_noise: bool = False
    details: Any = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.details is not None:
            if self.extra and not isinstance(self.extra, DetailsView):
                raise ValueError("a SolverResult has typed details or a free extra dict, not both")
            self.extra = DetailsView(self.details)

    def with_details(self, **parts):
        """This result with ``parts`` (fields of its typed ``details``) replaced: a new
        result of the same run (the details are frozen)."""
        return dataclasses.replace(self, details=dataclasses.replace(self.details, **parts))

    @property
    def private(self):
        """True when noise was added (noise_multiplier > 0)."""
        return self.noise_multiplier > 0
