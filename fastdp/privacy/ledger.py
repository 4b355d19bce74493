"""A privacy budget shared by many fits: record, compose, refuse, persist.

:class:`PrivacyLedger` holds one (ε, δ) budget and the events of every release
charged against it.  The spent ε is the ε of the *composition* of all recorded
events under one accountant (by default ``"auto"``: the smaller of fastdp's own
PLD bound and the RDP bound of the whole composition, both sound; several fits
compose far more tightly than by adding their ε).  A charge that would take the composition
over the budget raises :class:`~fastdp.exceptions.BudgetExceededError` before
anything is recorded; the estimators charge before they release anything, so a
refused fit has spent nothing.

Reservations
------------
A fit that may be interrupted reserves its event first
(:meth:`PrivacyLedger.reserve`), trains, and then commits the reservation
(it becomes an ordinary entry) or cancels it (it disappears, as if nothing
had been asked).  A pending reservation counts as spent: it is checked against
the budget when it is made and every later charge or reservation, in this or
any other process sharing the file, sees it.  Cancel only when nothing was
released: fastdp's estimators cancel when the user interrupts training
(``KeyboardInterrupt``) and keep the charge for every other failure, whose
occurrence may depend on the private data.  A process killed while its
reservation is pending leaves it in the file, where it stays counted as spent
(nobody can tell whether it released something); :meth:`PrivacyLedger.pending`
lists such reservations.

Persistence
-----------
With ``path`` the ledger lives in a JSON file, replaced atomically on every
charge (a crash leaves the previous or the new ledger, never a torn one) under
an exclusive lock shared by every process that charges it, so concurrent
charges never jointly exceed the budget and no charge is lost; reading takes no
lock.  The details (``os.replace`` and ``fsync``, the resolved path, the
``flock`` side file, hard links) are in :mod:`fastdp.privacy._ledger_files`.

The file is an append-only log of records linked by a SHA-256 hash chain;
reading verifies it, so a hand edit (an entry removed, the budget raised, the
last entries cut off) is refused with a
:class:`~fastdp.exceptions.ValidationError` naming the file.  Evidence against
accidents and casual edits, not a security boundary.  The chain and the file
format (version 3; versions 1 and 2 are converted once by
:meth:`PrivacyLedger.upgrade`) are in :mod:`fastdp.privacy._ledger_chain`.

Releases without a guarantee
----------------------------
An event containing a :class:`~fastdp.privacy.events.NoGuaranteeEvent` (an
approximate sampler whose distance to the mechanism it targets is not
quantified, e.g. random-walk Metropolis for spec 001's exponential mechanism)
has no ε: no accountant computes one.  :meth:`PrivacyLedger.charge` (and
``reserve``, ``check``) refuse it with
:class:`~fastdp.exceptions.PrivacyAnalysisError` unless the caller passes
``allow_no_guarantee=True``.  Then the entry is recorded (so the ledger stays
a true log of what was released) but contributes nothing to :meth:`spent`,
which from then on is the ε of the releases *with* a guarantee only and does
not bound the privacy loss of the whole: :meth:`no_guarantee_entries` lists
them, and ``repr``, :meth:`summary` and ``fastdp ledger show`` say
"no guarantee".

Copies and pickling
-------------------
A ledger is a live budget, never duplicated: ``copy.copy`` and
``copy.deepcopy`` (hence ``sklearn.base.clone``, ``GridSearchCV``,
``cross_val_score`` of an estimator holding it) return the ledger itself, so
every fit of every clone charges the one budget.  A file-backed ledger
pickles as a reference to its file (absolute path, budget, accountant); the
unpickled ledger, in this or another process, charges that same file (its
locks are made when it is used).  An in-memory ledger (no ``path``) cannot be
shared: the copy would be a second, independent budget.  It pickles as a
stand-in that refuses every charge with a clear error, so a fit sent to a
worker process (``cross_val_score(..., n_jobs=2)``) is refused before anything
runs; use a file-backed ledger to share a budget between processes.  Under
scikit-learn's default ``error_score=nan`` a refused fold (over budget, or a
detached ledger) scores NaN with a ``FitFailedWarning`` that quotes the
refusal; pass ``error_score="raise"`` to stop at the first refusal.

Which ε is charged
------------------
The ledger composes every event under its own accountant at its own δ
(:meth:`PrivacyLedger.epsilon_of_event` for one event alone).  A fit reports
``epsilon_`` under the estimator's accountant at the fit's δ, a search under
RDP at the search's δ.  Both are upper bounds on the same release; when the
ledger's is the larger (e.g. a PLD fit on an RDP ledger, or a ledger δ smaller
than the fit's), the fit warns before reserving
(:class:`~fastdp.privacy.ledger_entries.LedgerAccountingWarning`) with both
numbers.  With the same accountant and δ they are equal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import uuid

from fastdp.exceptions import BudgetExceededError, PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy._ledger_chain import (
    _BUDGET_KEYS,
    _LEGACY_VERSIONS,
    LEDGER_FORMAT,
    LEDGER_VERSION,
    _budget_of,
    _check_budget,
    _check_header,
    _describe,
    _file_payload,
    _new_record,
    _read_state,
    _replay,
)
from fastdp.privacy._ledger_files import (_atomic_write_json, _exclusive_lock, _read_json,
                                          _refuse_vanished)
from fastdp.privacy.ledger_entries import (
    COMMITTED,
    RESERVED,
    LedgerEntry,
    Reservation,
    event_from_dict,
    event_to_dict,
    settle_reservation,
)

__all__ = [
    "PrivacyLedger",
    "LedgerEntry",
    "Reservation",
    "settle_reservation",
    "event_to_dict",
    "event_from_dict",
    "LEDGER_FORMAT",
    "LEDGER_VERSION",
]


def _default_accountant(path, options):
    """(name, options) of a ledger opened without an accountant: those an existing
    file records (options given must then be None), else ``"auto"``."""
    if path is not None and os.path.exists(os.fspath(path)):
        budget = _read_state(os.fspath(path), os.path.realpath(os.fspath(path))).budget
        return budget["accountant"], budget["accountant_options"] if options is None else options
    return "auto", options


class PrivacyLedger:
    """One (ε, δ) privacy budget, charged by any number of fits.

    What is private: the records of the dataset(s) the charged releases read,
    under the adjacency of the recorded events (all entries must share one
    adjacency, as in any composition).  What is tracked: the ε at the ledger's
    δ of the composition of every recorded event, computed by ``accountant``,
    and (:meth:`spent_delta`) the δ that approximate-DP events
    (:class:`~fastdp.privacy.events.ApproxDpEvent`) state themselves, which
    must fit in the budget δ (the accountant gets only the rest as slack).
    Approximate-DP events need ``accountant="auto"``, ``"pld_own"``, ``"pld"`` or
    ``"pure"``.

    Parameters
    ----------
    epsilon : float
        Total ε budget (>= 0).
    delta : float
        δ at which the budget is stated, in [0, 1).  δ = 0 needs a pure-DP
        accountant (``accountant="pure"`` with basic composition).
    accountant : str or accountant, optional
        Name for :func:`fastdp.privacy.accountants.get_accountant` (``"auto"``,
        ``"rdp"``, ``"pld_own"``, ``"pld"``, ``"pure"``, ``"moments"``) or an
        accountant instance (not allowed with ``path``, since the file must name
        its accountant).  Default: the accountant an existing ``path`` records,
        else ``"auto"`` -- the smaller of the own-PLD and RDP bounds of the
        composition of every recorded event (both are sound upper bounds, so a
        charge that RDP alone would refuse but the PLD bound allows is allowed;
        one whose smaller bound exceeds the budget is refused).
    path : str or os.PathLike, optional
        JSON file backing the ledger (see the module docstring: atomic
        replacement, locking, hash chain).  If it exists it is verified and
        must state the same budget, accountant and options (otherwise
        :class:`~fastdp.exceptions.ValidationError`, unless ``change_budget``);
        if not, it is created.
    accountant_options : dict, optional
        Keyword arguments for the accountant (e.g.
        ``{"value_discretization_interval": 1e-4}`` for PLD); stored in the file.
    tolerance : float, default 1e-12
        Relative slack on the budget comparison, absorbing floating-point
        rounding only (e.g. ten charges of ε/10 summing to 1.0000000000000002·ε).
    change_budget : bool, default False
        With an existing ``path`` whose budget differs from the one given
        here: record the new budget (a ``budget`` record in the hash chain)
        instead of refusing the file.  The entries already recorded keep
        counting against the new budget.  Also accepts a file whose header
        was edited by hand to this budget.

    Notes
    -----
    ``copy.copy``, ``copy.deepcopy`` and ``sklearn.base.clone`` return the
    ledger itself (one budget is never duplicated); a file-backed ledger
    pickles as a reference to its file; an in-memory one cannot be pickled.

    Examples
    --------
    >>> ledger = PrivacyLedger(epsilon=1.0, delta=1e-5)           # doctest: +SKIP
    >>> ledger.charge(event, label="DPLogisticRegression.fit")      # doctest: +SKIP
    >>> ledger.spent(), ledger.remaining()                          # doctest: +SKIP
    """

    def __init__(self, epsilon, delta, accountant=None, path=None, *,
                 accountant_options=None, tolerance=1e-12, change_budget=False):
        self._epsilon, self._delta = _check_budget(epsilon, delta)
        if accountant is None:
            accountant, accountant_options = _default_accountant(path, accountant_options)
        if accountant_options is not None and not isinstance(accountant_options, dict):
            raise ValidationError("accountant_options must be a dict of keyword arguments")
        options = dict(accountant_options or {})
        if isinstance(accountant, str):
            self._accountant_name = accountant.lower()
        else:
            if path is not None:
                raise ValidationError(
                    "a ledger with a path must name its accountant ('rdp', 'pld', 'pure', "
                    "'moments') so that the file can be reloaded; pass the name and "
                    "accountant_options instead of an instance")
            if options:
                raise ValidationError("accountant_options only go with an accountant name")
            self._accountant_name = getattr(accountant, "name", type(accountant).__name__)
        self._accountant_options = options
        if self._delta == 0.0 and self._accountant_name != "pure":
            raise ValidationError(
                "a budget with delta=0 is pure epsilon-DP: use accountant='pure' (the "
                f"{self._accountant_name!r} accountant gives infinite epsilon at delta=0)")
        tolerance = float(tolerance)
        if not (0.0 <= tolerance < 1e-6):
            raise ValidationError(f"tolerance must lie in [0, 1e-6); got {tolerance!r}")
        self._tolerance = tolerance
        self._entries = ()
        self._thread_lock = threading.RLock()
        self._path = None if path is None else os.fspath(path)
        self._abspath = None if path is None else os.path.abspath(self._path)
        state = None
        if self._path is not None and os.path.exists(self._path):
            # refuses a damaged file or one with another budget before anything else
            state = _read_state(self._path, self._real_path())
            self._adopt(state, change_budget)
        self._accountant = self._make_accountant(accountant, options)
        if self._path is not None and (
                state is None or (change_budget and self._budget_record_needed(state))):
            self._create_or_update_file(change_budget)  # reading an existing file needs no lock

    # -- construction helpers ---------------------------------------------------
    @staticmethod
    def _make_accountant(accountant, options):
        from fastdp.privacy.accountants import get_accountant

        try:
            return get_accountant(accountant, **options)
        except TypeError as exc:
            raise ValidationError(
                f"accountant_options {options!r} do not fit accountant {accountant!r}: {exc}"
            ) from exc

    def _budget(self):
        return {"epsilon": self._epsilon, "delta": self._delta,
                "accountant": self._accountant_name,
                "accountant_options": self._accountant_options}

    def _real_path(self):
        """The file itself: symbolic links and relative parts resolved (every time)."""
        return os.path.realpath(self._abspath)

    def _adopt(self, state, change_budget=False):
        """Check a verified file against this ledger's budget; keep its entries."""
        mine = self._budget()
        if not change_budget:
            _check_header(self._path, state)
        if state.budget != mine and not change_budget:
            differing = [k for k in _BUDGET_KEYS if state.budget[k] != mine[k]]
            raise ValidationError(
                f"refusing ledger file {self._path}: it records "
                f"{_describe(state.budget, differing)} but this ledger was opened with "
                f"{_describe(mine, differing)}. Open it with PrivacyLedger.load(path) to use "
                "its own budget, pass change_budget=True to record the new budget in it, or "
                "choose another path.")
        self._entries = state.entries

    def _budget_record_needed(self, state):
        return state.budget != self._budget() or not state.header_matches

    def _create_or_update_file(self, change_budget):
        with self._thread_lock, self._write_lock():
            real = self._real_path()
            if os.path.exists(real):  # another process may have just created it
                state = _read_state(self._path, real)
                self._adopt(state, change_budget)
                if change_budget and self._budget_record_needed(state):
                    records = state.records + [_new_record(
                        state.records, "budget", **self._budget(), timestamp=time.time())]
                    _atomic_write_json(real, _file_payload(self._budget(), records), state.mode)
            else:
                _refuse_vanished(self._path, real)  # a ledger was here: rollback, not a start
                records = [_new_record([], "open", **self._budget(), nonce=uuid.uuid4().hex,
                                       timestamp=time.time())]
                _atomic_write_json(real, _file_payload(self._budget(), records))
                self._entries = ()

    @contextlib.contextmanager
    def _write_lock(self):
        try:
            with _exclusive_lock(self._real_path() + ".lock"):
                yield
        except PermissionError as exc:
            raise ValidationError(
                f"cannot write privacy ledger {self._path}: {exc.strerror} ({exc.filename}); "
                "charging a ledger needs write access to its directory") from None

    @classmethod
    def load(cls, path, epsilon=None, delta=None, accountant=None, *,
             accountant_options=None, tolerance=1e-12, change_budget=False):
        """Open an existing ledger file with the budget it records.

        Any of ``epsilon``, ``delta``, ``accountant``, ``accountant_options``
        that is given must equal the file's value, otherwise the file is
        refused with :class:`~fastdp.exceptions.ValidationError`; with
        ``change_budget=True`` the given values become the new budget
        (recorded in the file's hash chain).  The whole file is verified
        first (see "Tamper evidence" in the module docstring).  Reading needs
        no write access.
        """
        path = os.fspath(path)
        if not os.path.exists(path):
            raise ValidationError(f"no privacy ledger at {path}; create one with "
                                  "PrivacyLedger(epsilon, delta, path=...)")
        state = _read_state(path, os.path.realpath(path))
        if not change_budget:
            _check_header(path, state)
        wanted = {"epsilon": epsilon, "delta": delta,
                  "accountant": None if accountant is None else str(accountant).lower(),
                  "accountant_options": accountant_options}
        try:
            wanted = {k: (float(v) if k in ("epsilon", "delta") and v is not None else v)
                      for k, v in wanted.items()}
        except (TypeError, ValueError):
            raise ValidationError(
                f"the budget needs numbers; got epsilon={epsilon!r}, delta={delta!r}") from None
        differing = {k: v for k, v in wanted.items() if v is not None and v != state.budget[k]}
        if differing and not change_budget:
            raise ValidationError(
                f"refusing ledger file {path}: it records "
                + ", ".join(f"{k}={state.budget[k]!r}" for k in differing)
                + " but the caller expected "
                + ", ".join(f"{k}={v!r}" for k, v in differing.items())
                + " (pass change_budget=True to record a new budget in it)")
        budget = {k: (wanted[k] if wanted[k] is not None else state.budget[k])
                  for k in _BUDGET_KEYS}
        return cls(budget["epsilon"], budget["delta"], budget["accountant"], path,
                   accountant_options=budget["accountant_options"], tolerance=tolerance,
                   change_budget=change_budget)

    @classmethod
    def upgrade(cls, path, *, tolerance=1e-12):
        """Convert a version-1 or -2 ledger file (no tamper evidence) to version 3, in place.

        Every entry is kept (committed entries become ``charge`` records, pending
        reservations ``reserve`` records with their ids), the budget becomes the
        chain's ``open`` record, and the hash chain is computed.  Call it only
        for a file whose content you trust: an old file carries no evidence of
        edits.  A version-3 file is left as it is.

        Returns
        -------
        PrivacyLedger
            The upgraded ledger, opened with the budget it records.
        """
        path = os.fspath(path)
        real = os.path.realpath(path)
        with _exclusive_lock(real + ".lock"):
            data, mode = _read_json(path, real)
            if not (isinstance(data, dict) and data.get("format") == LEDGER_FORMAT
                    and data.get("version") in _LEGACY_VERSIONS):
                _replay(path, data)  # a valid version-3 file passes; anything else raises
            else:
                required = {"format", "version", "entries"} | set(_BUDGET_KEYS)
                if not required <= set(data):
                    raise ValidationError(f"{path} is not a fastdp privacy ledger file")
                try:
                    budget = _budget_of(data)
                    entries = [LedgerEntry.from_dict(item) for item in data["entries"]]
                except (ValidationError, ValueError, TypeError, KeyError) as exc:
                    raise ValidationError(
                        f"cannot upgrade privacy ledger {path}: {exc}") from None
                records = [_new_record([], "open", **budget, nonce=uuid.uuid4().hex,
                                       timestamp=time.time())]
                for entry in entries:
                    fields = {"event": event_to_dict(entry.event), "label": entry.label,
                              "timestamp": entry.timestamp}
                    if entry.pending:
                        records.append(_new_record(records, "reserve", id=entry.reservation_id,
                                                   **fields))
                    else:
                        records.append(_new_record(records, "charge", **fields))
                _atomic_write_json(real, _file_payload(budget, records), mode)
        return cls.load(path, tolerance=tolerance)

    # -- copies and pickling ----------------------------------------------------
    def __copy__(self):
        return self  # one budget: a copy must charge it, not a fork of it

    def __deepcopy__(self, memo):
        memo[id(self)] = self
        return self

    def __reduce__(self):
        if self._path is None:
            # a copy would be a second, independent budget: what arrives in the
            # other process (e.g. a joblib worker of cross_val_score(n_jobs=2))
            # refuses every charge with a clear error instead
            return (_DetachedLedger, ())
        return (_ledger_from_state, (type(self), self.__getstate__()))

    def __reduce_ex__(self, protocol):
        return self.__reduce__()

    def __getstate__(self):
        return {"path": self._path, "abspath": self._abspath, "epsilon": self._epsilon,
                "delta": self._delta, "accountant": self._accountant_name,
                "accountant_options": self._accountant_options, "tolerance": self._tolerance}

    def __setstate__(self, state):
        self._path = state["path"]
        self._abspath = state["abspath"]
        self._epsilon, self._delta = _check_budget(state["epsilon"], state["delta"])
        self._accountant_name = state["accountant"]
        self._accountant_options = dict(state["accountant_options"])
        self._tolerance = float(state["tolerance"])
        self._entries = ()
        self._thread_lock = threading.RLock()  # locks are made here, files on use
        self._accountant = self._make_accountant(self._accountant_name,
                                                 self._accountant_options)

    # -- properties -------------------------------------------------------------
    @property
    def epsilon(self):
        """The ε budget."""
        return self._epsilon

    @property
    def delta(self):
        """The δ of the budget."""
        return self._delta

    @property
    def accountant(self):
        """The accountant instance that composes the entries."""
        return self._accountant

    @property
    def accountant_name(self):
        return self._accountant_name

    @property
    def path(self):
        """The backing file as given, or None."""
        return self._path

    @property
    def entries(self):
        """Recorded entries, oldest first (re-read from the file when there is one)."""
        self.refresh()
        return self._entries

    def __len__(self):
        return len(self.entries)

    def __repr__(self):
        where = f", path={self._path!r}" if self._path else ""
        missing = sum(1 for e in self._entries if ev.no_guarantee_events(e.event))
        flag = f", no_guarantee={missing} (not in spent epsilon)" if missing else ""
        return (f"PrivacyLedger(epsilon={self._epsilon!r}, delta={self._delta!r}, "
                f"accountant={self._accountant_name!r}{where}, entries={len(self._entries)}"
                f"{flag})")

    # -- accounting -------------------------------------------------------------
    def refresh(self):
        """Re-read and verify the backing file (no-op without a path).

        Needs no lock and no write access: the file is only ever replaced
        atomically, so a reader sees a whole version of it.
        """
        if self._path is None:
            return
        with self._thread_lock:
            self._adopt(_read_state(self._path, self._real_path()))

    def composed_event(self):
        """All recorded events as one ``ComposedEvent`` (None if nothing is recorded)."""
        entries = self.entries
        if not entries:
            return None
        return ev.ComposedEvent(tuple(entry.event for entry in entries))

    def _epsilon_of(self, entries, extra=None):
        events = [entry.event for entry in entries]
        if extra is not None:
            events.append(extra)
        # releases recorded with allow_no_guarantee=True have no epsilon: left out
        events = [part for part in map(ev.guaranteed_part, events) if part is not None]
        if not events:
            return 0.0
        return float(self._accountant.epsilon(ev.ComposedEvent(tuple(events)), self._delta))

    def epsilon_of_event(self, event):
        """ε this ledger counts for ``event`` alone: its accountant's ε at its δ.

        A fit reports its own ε (its accountant, its δ); the ledger charges the
        event and composes it under *its* accountant at *its* δ.  Both are
        upper bounds on the privacy loss of the same release; they agree when
        the accountant and δ agree (see :func:`~fastdp.privacy.ledger_entries.note_ledger_epsilon`).
        """
        return self._epsilon_of((), event)

    def _bound_used(self, entries):
        """``"; bound: pld_own"`` for an "auto" ledger (which bound gave the spent ε)."""
        used = getattr(self._accountant, "used", None)
        events = [part for part in map(ev.guaranteed_part, (e.event for e in entries))
                  if part is not None]
        if used is None or not events:
            return ""
        try:
            return f"; bound: {used(ev.ComposedEvent(tuple(events)), self._delta)}"
        except PrivacyAnalysisError:
            return ""

    def spent(self):
        """ε spent so far: the accountant's ε of all recorded events at the ledger's δ.

        Releases recorded with ``allow_no_guarantee=True`` (see
        :meth:`no_guarantee_entries`) have no ε and are left out: with any of
        them, this is the ε of the other releases only, not a bound on the
        privacy loss of everything recorded (:meth:`summary` says so).
        """
        return self._epsilon_of(self.entries)

    def no_guarantee_entries(self):
        """Entries whose release carries no privacy guarantee (recorded with
        ``allow_no_guarantee=True``); their privacy loss is not in :meth:`spent`."""
        return tuple(e for e in self.entries if ev.no_guarantee_events(e.event))

    def summary(self):
        """One line: budget, spent, remaining, entries, and any releases without a guarantee."""
        entries = self.entries
        spent = self._epsilon_of(entries)
        line = (f"spent epsilon {spent:.6g} of {self._epsilon:g} at delta {self._delta:g} "
                f"(remaining {max(0.0, self._epsilon - spent):.6g}; {len(entries)} entries"
                f"{self._bound_used(entries)})")
        missing = sum(1 for e in entries if ev.no_guarantee_events(e.event))
        if missing:
            line += (f"; plus {missing} release(s) with NO GUARANTEE, not in the spent epsilon: "
                     "the privacy loss of everything recorded is not bounded")
        return line

    def spent_delta(self):
        """δ the recorded events state themselves: Σ δ_i of their approximate-DP
        members (:func:`fastdp.privacy.events.event_delta`; 0 for pure, Gaussian,
        ... events).  It is charged against the budget δ, never above it; the
        accountant's own slack is the rest of the budget δ."""
        event = self.composed_event()
        return 0.0 if event is None else float(ev.event_delta(event))

    def remaining(self):
        """ε still available: ``max(0, epsilon - spent())``."""
        return max(0.0, self._epsilon - self.spent())

    def _within_budget(self, value):
        return value <= self._epsilon * (1.0 + self._tolerance)

    def _checked(self, entries, event, label, allow_no_guarantee=False):
        if not isinstance(event, ev.DpEvent):
            raise ValidationError(f"expected a fastdp DpEvent, got {type(event).__name__}")
        if ev.no_guarantee_events(event) and allow_no_guarantee is not True:
            what = f" ({label})" if label else ""
            raise PrivacyAnalysisError(
                f"this release{what} carries no privacy guarantee, so the ledger cannot charge "
                f"an epsilon for it: {ev.no_guarantee_events(event)[0]!r}. Use a sampler with a "
                "guarantee, or pass allow_no_guarantee=True to record it anyway (it is then "
                "left out of the spent epsilon, which every report flags).")
        own_delta = ev.event_delta(ev.ComposedEvent(tuple(e.event for e in entries) + (event,)))
        if own_delta > self._delta:
            what = f" ({label})" if label else ""
            raise BudgetExceededError(
                f"privacy budget exceeded: this release{what} would raise the delta stated by "
                f"the recorded approximate-DP events to {own_delta:.6g}, above the budget "
                f"delta={self._delta:g}. Nothing was released or recorded; use a smaller "
                "per-release delta (e.g. target_delta) or a new budget.")
        after = self._epsilon_of(entries, event)  # may raise PrivacyAnalysisError
        if not self._within_budget(after):
            before = self._epsilon_of(entries)
            what = f" ({label})" if label else ""
            raise BudgetExceededError(
                f"privacy budget exceeded: this release{what} would raise the spent epsilon "
                f"from {before:.6g} to {after:.6g} (accountant {self._accountant_name!r}, "
                f"delta={self._delta:g}), above the budget epsilon={self._epsilon:g}. "
                "Nothing was released or recorded; use more noise, fewer steps, a smaller "
                "sampling rate, or a new budget.")
        return after

    def check(self, event, label="", *, allow_no_guarantee=False):
        """ε that would be spent after charging ``event``; records nothing.

        Raises
        ------
        BudgetExceededError
            If charging ``event`` would exceed the budget.
        PrivacyAnalysisError
            If the accountant cannot compose ``event`` with the recorded events
            (e.g. a replace-one event on an add/remove ledger), or ``event``
            carries no guarantee and ``allow_no_guarantee`` is not True.
        """
        return self._checked(self.entries, event, label, allow_no_guarantee)

    def charge(self, event, label="", *, allow_no_guarantee=False):
        """Record ``event`` if the budget allows it; call BEFORE releasing anything.

        With a backing file this is atomic across processes: lock, reload and
        verify, check, append, write, unlock.

        ``allow_no_guarantee=True`` records an event that carries no privacy
        guarantee (a :class:`~fastdp.privacy.events.NoGuaranteeEvent`), which
        is otherwise refused; it is left out of :meth:`spent` (module docstring).

        Returns
        -------
        LedgerEntry
            The recorded entry.

        Raises
        ------
        BudgetExceededError
            If the composition would exceed the budget; nothing is recorded.
        PrivacyAnalysisError
            If ``event`` cannot be composed with the recorded events, or
            carries no guarantee and ``allow_no_guarantee`` is not True.
        ValidationError
            If the backing file fails its integrity check, states another
            budget, or cannot be written.
        """
        return self._record(event, label, reserve=False, allow_no_guarantee=allow_no_guarantee)

    def reserve(self, event, label="", *, allow_no_guarantee=False):
        """Reserve ``event`` against the budget; commit or cancel the returned reservation.

        The reservation is checked and recorded exactly like :meth:`charge`
        (it counts as spent from now on, also for other processes sharing the
        file) but can still be cancelled while nothing has been released.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError
            If the composition would exceed the budget; nothing is recorded.
        """
        return Reservation(self, self._record(event, label, reserve=True,
                                              allow_no_guarantee=allow_no_guarantee))

    def pending(self):
        """Reservations not yet committed or cancelled (e.g. left by a killed process)."""
        return tuple(entry for entry in self.entries if entry.pending)

    @contextlib.contextmanager
    def _locked_state(self):
        """Exclusive access to the verified file: yields its state and
        ``append(kind, fields, new_entries)``, which chains one record to it and
        writes the file atomically (before the lock is released)."""
        with self._thread_lock, self._write_lock():
            real = self._real_path()
            state = _read_state(self._path, real)
            self._adopt(state)

            def append(kind, fields, entries):
                chain = list(state.records)
                chain.append(_new_record(chain, kind, **fields))
                _atomic_write_json(real, _file_payload(self._budget(), chain), state.mode)
                self._entries = entries

            yield state, append

    def _record(self, event, label, reserve, allow_no_guarantee=False):
        if not isinstance(label, str):
            raise ValidationError(f"label must be a string, got {type(label).__name__}")
        if reserve:
            entry_args = (RESERVED, uuid.uuid4().hex)
        else:
            entry_args = (COMMITTED, None)
        with self._thread_lock:
            if self._path is None:
                self._checked(self._entries, event, label, allow_no_guarantee)
                entry = LedgerEntry(event, label, time.time(), *entry_args)
                self._entries = self._entries + (entry,)
                return entry
            with self._locked_state() as (state, append):
                self._checked(state.entries, event, label, allow_no_guarantee)
                entry = LedgerEntry(event, label, time.time(), *entry_args)
                fields = {"event": event_to_dict(event), "label": label,
                          "timestamp": entry.timestamp}
                if reserve:
                    append("reserve", dict(fields, id=entry.reservation_id),
                           state.entries + (entry,))
                else:
                    append("charge", fields, state.entries + (entry,))
                return entry

    def _finish_reservation(self, reservation_id, commit):
        """Commit (mark committed) or cancel (remove) the pending entry ``reservation_id``."""
        def find(entries):
            for k, entry in enumerate(entries):
                if entry.reservation_id == reservation_id and entry.pending:
                    return k, entry
            raise ValidationError(
                f"reservation {reservation_id} is not pending in this ledger (committed, "
                "cancelled, or the ledger file was replaced).")

        def finished(entries):
            k, entry = find(entries)
            done = dataclasses.replace(entry, status=COMMITTED, reservation_id=None)
            return entries[:k] + ((done,) if commit else ()) + entries[k + 1:], done

        with self._thread_lock:
            if self._path is None:
                self._entries, done = finished(self._entries)
                return done if commit else None
            with self._locked_state() as (state, append):
                entries, done = finished(state.entries)
                append("commit" if commit else "cancel",
                       {"id": reservation_id, "timestamp": time.time()}, entries)
                return done if commit else None


def _ledger_from_state(cls, state):
    """Unpickle a file-backed ledger: a reference to its file (see ``__setstate__``)."""
    ledger = cls.__new__(cls)
    ledger.__setstate__(state)
    return ledger


class _DetachedLedger:
    """What an in-memory :class:`PrivacyLedger` becomes when pickled: it refuses every use.

    An in-memory budget cannot be shared with another process (the copy would
    be a second, independent budget), so a fit there, e.g. in a worker of
    ``cross_val_score(..., n_jobs=2)``, is refused before anything runs with
    this error, which says what to do.  Nothing is charged, nothing released.
    """

    _MESSAGE = ("this estimator's PrivacyLedger was in memory and the estimator was copied to "
                "another process (e.g. n_jobs > 1 in scikit-learn): an in-memory budget "
                "cannot be shared between processes, so nothing was trained. Use a file-backed "
                "ledger, PrivacyLedger(epsilon, delta, path=...), which every process charges "
                "under one lock, or n_jobs=1.")

    def _refuse(self, *args, **kwargs):
        raise ValidationError(self._MESSAGE)

    reserve = charge = check = epsilon_of_event = spent = _refuse

    def __repr__(self):
        return "<detached in-memory PrivacyLedger: refuses every charge>"
