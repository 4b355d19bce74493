"""Progress bars and per-epoch callbacks around the fits.

Every iterative fastdp solver accepts ``callback=``: a callable invoked once
per epoch with a dict of the *released* state (at least ``"epoch"`` and
``"n_iter"``, usually ``"coef"``).  This module turns that hook into progress
bars and composes several hooks:

* :func:`progress_bar` wraps an iterable in a tqdm bar that is **silent when
  stderr is not a terminal** (``disable=None``), so logs, pipes and CI stay
  clean; ``enabled=True``/``False`` forces it on or off.
* :class:`EpochProgress` is a solver callback that advances a bar by one
  epoch per call (``with EpochProgress(total=10) as cb: dual_dpscd(..., callback=cb)``).
* :class:`RecordCoefficients` is a callback that keeps a copy of every
  per-epoch model (for convergence plots).
* :func:`chain_callbacks` calls several callbacks in order.

Privacy: the callbacks only see what the solver passes to them, which is the
flushed, released state that the solver's privacy event already covers
(see each solver's docstring).  Reading the training data inside a callback
(e.g. computing the objective) is a non-private diagnostic, exactly like
``record_history=True``: do not publish its output.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable, Optional

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["progress_bar", "EpochProgress", "RecordCoefficients", "chain_callbacks"]


def _disable_flag(enabled: Optional[bool]) -> Optional[bool]:
    """tqdm's ``disable``: None = auto (off unless stderr is a TTY)."""
    if enabled is None:
        return None
    if not isinstance(enabled, (bool, np.bool_)):
        raise ValidationError(f"enabled must be True, False or None (auto); got {enabled!r}.")
    return not bool(enabled)


def progress_bar(iterable: Optional[Iterable] = None, *, total: Optional[int] = None,
                 desc: Optional[str] = None, unit: str = "it", enabled: Optional[bool] = None,
                 leave: bool = False, file=None, unit_scale: bool = False):
    """A tqdm progress bar that stays silent when nobody is watching.

    Parameters
    ----------
    iterable : iterable, optional
        Wrapped and yielded unchanged; ``None`` gives a manual bar (call
        ``update``).
    total : int, optional
        Number of items (defaults to ``len(iterable)`` when it has one).
    desc, unit : str
        Label and unit shown on the bar.
    enabled : bool or None, default None
        ``None``: shown only when ``file`` (stderr) is a terminal;
        ``True``/``False`` force it.
    leave : bool, default False
        Keep the finished bar on screen.
    file : file object, default ``sys.stderr``
    unit_scale : bool, default False
        Show counts with SI prefixes (e.g. ``12.3MB`` for ``unit="B"``).

    Returns
    -------
    tqdm.tqdm
        Iterate it, or use it as a context manager.
    """
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=_disable_flag(enabled),
                leave=leave, file=sys.stderr if file is None else file, dynamic_ncols=True,
                unit_scale=unit_scale)


class EpochProgress:
    """Solver callback that advances a progress bar by one epoch per call.

    Parameters
    ----------
    total : int or float, optional
        Expected number of epochs (``ceil`` of the solver's ``epochs``).
    desc : str, default "epochs"
    enabled : bool or None, default None
        As :func:`progress_bar` (auto: only on a terminal).
    callback : callable, optional
        Called after the bar is updated, with the same dict (to chain).
    leave : bool, default False
        Keep the finished bar on screen.
    file : file object, default ``sys.stderr``
    lines : bool, default False
        When the bar is not drawn (``file`` is not a terminal, e.g. a log or
        CI), print one plain line per epoch instead (``desc: epoch k/total,
        T=...``), so progress still reaches the log.

    Attributes
    ----------
    calls : int
        Number of epochs seen.
    last : dict or None
        The last dict received (the released state; do not modify it).

    Examples
    --------
    >>> with EpochProgress(total=10, desc="DP-SCD") as progress:   # doctest: +SKIP
    ...     result = dual_dpscd(X, y, ..., epochs=10, callback=progress)
    """

    def __init__(self, total=None, desc: str = "epochs", *, enabled: Optional[bool] = None,
                 callback: Optional[Callable[[dict], Any]] = None, leave: bool = False,
                 file=None, lines: bool = False):
        if callback is not None and not callable(callback):
            raise ValidationError(f"callback must be callable or None; got {callback!r}.")
        if total is not None:
            total = int(np.ceil(float(total)))
        self.total = total
        self.callback = callback
        self.calls = 0
        self.last = None
        self._bar = progress_bar(total=total, desc=desc, unit="epoch", enabled=enabled,
                                 leave=leave, file=file)
        self._desc = desc
        self._file = file
        self._lines = bool(lines) and bool(getattr(self._bar, "disable", False))

    def __call__(self, state: dict) -> None:
        self.calls += 1
        self.last = state
        self._bar.update(1)
        if "epoch" in state:
            self._bar.set_postfix_str(f"T={state.get('n_iter', '?')}", refresh=False)
        if self._lines:
            total = "?" if self.total is None else self.total
            print(f"{self._desc}: epoch {self.calls}/{total}, T={state.get('n_iter', '?')}",
                  file=self._file if self._file is not None else sys.stderr, flush=True)
        if self.callback is not None:
            self.callback(state)

    def close(self) -> None:
        """Close the bar (idempotent)."""
        self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class RecordCoefficients:
    """Solver callback that keeps a copy of the model after every epoch.

    Attributes
    ----------
    epochs : list of int
    n_iter : list of int
    coefs : list of ndarray
        ``state["coef"]`` copied at each call (the released iterate).

    Notes
    -----
    The copies are released outputs (covered by the solver's event).  Any
    objective computed from them on the training data is a non-private
    diagnostic.
    """

    def __init__(self):
        self.epochs = []
        self.n_iter = []
        self.coefs = []

    def __call__(self, state: dict) -> None:
        if "coef" not in state:
            raise ValidationError("RecordCoefficients needs a callback dict with a 'coef' entry.")
        self.epochs.append(int(state.get("epoch", len(self.epochs) + 1)))
        self.n_iter.append(int(state.get("n_iter", -1)))
        self.coefs.append(np.array(state["coef"], dtype=np.float64, copy=True))

    def __len__(self):
        return len(self.coefs)


def chain_callbacks(*callbacks: Optional[Callable[[dict], Any]]) -> Optional[Callable[[dict], None]]:
    """One callback that calls each non-None callback in order (None if there are none)."""
    active = [cb for cb in callbacks if cb is not None]
    for cb in active:
        if not callable(cb):
            raise ValidationError(f"callbacks must be callable; got {cb!r}.")
    if not active:
        return None
    if len(active) == 1:
        return active[0]

    def chained(state):
        for cb in active:
            cb(state)

    return chained
