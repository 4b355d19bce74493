"""A privacy budget shared by many fits: record, compose, refuse, persist.

:class:`PrivacyLedger` holds one (ε, δ) budget and the events of every release
charged against it.  The spent ε is the ε of the *composition* of all recorded
events under one accountant (RDP by default, so several fits compose far more
tightly than by adding their ε).  A charge that would take the composition
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
With ``path`` the ledger lives in a JSON file (format below) that is replaced
atomically on every charge: the new content goes to a temporary file in the
same directory, which is flushed and ``fsync``-ed and then renamed over the
ledger with ``os.replace`` (and the directory is ``fsync``-ed), so a crash at
any point leaves either the previous or the new ledger, never a torn one.  A
crash can leave a stray ``.<name>.*.tmp`` file beside the ledger; it is never
read and may be deleted.

Several processes may share one ledger file: every charge takes an exclusive
POSIX ``flock`` on the side file ``<path>.lock``, reloads the ledger from disk,
checks the budget, appends and writes, then unlocks; reads take a shared lock.
So concurrent charges are serialised and can never jointly exceed the budget,
and no charge is lost.  (On platforms without ``fcntl`` the ledger works but
does not lock, and says so with a warning.)

File format (``"format": "fastdp.privacy_ledger"``, ``"version": 2``)::

    {"format": ..., "version": 2, "epsilon": 1.0, "delta": 1e-05,
     "accountant": "rdp", "accountant_options": {},
     "entries": [{"event": {...event_to_dict...}, "label": "fit 1",
                  "timestamp": 1763700000.123, "status": "committed"},
                 {"event": {...}, "label": "fit 2", "timestamp": ...,
                  "status": "reserved", "id": "3f2a..."}, ...]}

Version 1 files (no ``status``: every entry committed) are read as well and
rewritten as version 2 on the next charge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
import threading
import time
import uuid
import warnings

from fastdp.exceptions import BudgetExceededError, ValidationError
from fastdp.privacy import events as ev

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None

__all__ = [
    "PrivacyLedger",
    "LedgerEntry",
    "Reservation",
    "event_to_dict",
    "event_from_dict",
    "LEDGER_FORMAT",
    "LEDGER_VERSION",
]

LEDGER_FORMAT = "fastdp.privacy_ledger"
LEDGER_VERSION = 2
_READABLE_VERSIONS = (1, 2)
COMMITTED = "committed"
RESERVED = "reserved"


# ----------------------------------------------------------------------------
# event serialisation
# ----------------------------------------------------------------------------
def event_to_dict(event):
    """JSON-ready description of any fastdp event (inverse: :func:`event_from_dict`).

    Every event type of :mod:`fastdp.privacy.events` is covered; nested events
    are described recursively.  The result survives ``json.dumps``/``loads``.
    """
    if not isinstance(event, ev.DpEvent):
        raise ValidationError(f"expected a fastdp DpEvent, got {type(event).__name__}")
    data = event.to_dict()
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"event {event!r} cannot be stored as JSON: {exc}") from exc
    return data


def event_from_dict(data):
    """Rebuild an event from :func:`event_to_dict` output (validated again)."""
    try:
        return ev.event_from_dict(data)
    except TypeError as exc:  # unexpected or missing fields
        raise ValidationError(f"not a valid event description {data!r}: {exc}") from exc


# ----------------------------------------------------------------------------
# entries
# ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One charged (or reserved) release.

    Attributes
    ----------
    event : DpEvent
        What was released.
    label : str
        Free text given to :meth:`PrivacyLedger.charge` (e.g. the estimator).
    timestamp : float
        POSIX time (seconds since the epoch, UTC) of the charge.
    status : {"committed", "reserved"}
        ``"reserved"`` while a :class:`Reservation` is pending; it counts as
        spent either way.
    reservation_id : str or None
        Identifies a pending reservation (None for committed entries).
    """

    event: ev.DpEvent
    label: str
    timestamp: float
    status: str = COMMITTED
    reservation_id: str | None = None

    @property
    def pending(self):
        """True while this entry is an uncommitted reservation."""
        return self.status == RESERVED

    def to_dict(self):
        data = {"event": event_to_dict(self.event), "label": self.label,
                "timestamp": self.timestamp, "status": self.status}
        if self.reservation_id is not None:
            data["id"] = self.reservation_id
        return data

    @classmethod
    def from_dict(cls, data):
        required = {"event", "label", "timestamp"}
        if (not isinstance(data, dict) or not required <= set(data)
                or not set(data) <= required | {"status", "id"}):
            raise ValidationError(f"not a ledger entry: {data!r}")
        status = data.get("status", COMMITTED)
        if status not in (COMMITTED, RESERVED) or (status == RESERVED) != ("id" in data):
            raise ValidationError(f"not a ledger entry (bad status/id): {data!r}")
        return cls(event_from_dict(data["event"]), str(data["label"]), float(data["timestamp"]),
                   status, None if "id" not in data else str(data["id"]))


class Reservation:
    """A pending charge: :meth:`commit` it after releasing, :meth:`cancel` it if nothing was.

    Returned by :meth:`PrivacyLedger.reserve`.  As a context manager it
    commits on a normal exit and cancels on ``KeyboardInterrupt``; any other
    exception commits too (a failure during training may depend on the
    private data, so its charge stays).
    """

    def __init__(self, ledger, entry):
        self._ledger = ledger
        self.entry = entry
        self.state = "pending"

    @property
    def id(self):
        return self.entry.reservation_id

    def commit(self):
        """Turn the reservation into an ordinary entry (idempotent)."""
        if self.state == "committed":
            return self.entry
        if self.state == "cancelled":
            raise ValidationError("this reservation was cancelled; it cannot be committed.")
        self.entry = self._ledger._finish_reservation(self.id, commit=True)
        self.state = "committed"
        return self.entry

    def cancel(self):
        """Remove the reservation: call only when nothing covered by it was released."""
        if self.state == "cancelled":
            return
        if self.state == "committed":
            raise ValidationError("this reservation is committed (something was released); "
                                  "it cannot be cancelled.")
        self._ledger._finish_reservation(self.id, commit=False)
        self.state = "cancelled"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.cancel()
        else:
            self.commit()
        return False

    def __repr__(self):
        return f"Reservation({self.entry.label!r}, {self.state}, id={self.id})"


# ----------------------------------------------------------------------------
# files: atomic write, locking, reading
# ----------------------------------------------------------------------------
def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write_json(path, payload):
    """Write ``payload`` to ``path`` so that readers see the old or the new file only."""
    text = json.dumps(payload, indent=1, allow_nan=False)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                                     suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


_NO_LOCK_WARNED = False


@contextlib.contextmanager
def _locked(lock_path, exclusive):
    """Hold a POSIX flock on ``lock_path`` (created if needed)."""
    global _NO_LOCK_WARNED
    if fcntl is None:  # pragma: no cover
        if not _NO_LOCK_WARNED:
            warnings.warn("fcntl is unavailable: the privacy ledger file is not locked; "
                          "do not share it between processes", RuntimeWarning, stacklevel=3)
            _NO_LOCK_WARNED = True
        yield
        return
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_ledger_file(path):
    """Parse and validate a ledger file; returns its header dict and entries."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{path} is not a fastdp privacy ledger (invalid JSON: {exc}); it was not "
            "written by fastdp or was damaged outside fastdp") from exc
    required = {"format", "version", "epsilon", "delta", "accountant", "accountant_options",
                "entries"}
    if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT or not required <= set(data):
        raise ValidationError(f"{path} is not a fastdp privacy ledger file")
    if data["version"] not in _READABLE_VERSIONS:
        raise ValidationError(
            f"{path} has ledger format version {data['version']!r}; this fastdp reads "
            f"versions {_READABLE_VERSIONS}")
    entries = tuple(LedgerEntry.from_dict(item) for item in data["entries"])
    return data, entries


# ----------------------------------------------------------------------------
# the ledger
# ----------------------------------------------------------------------------
def _check_budget(epsilon, delta):
    try:
        epsilon, delta = float(epsilon), float(delta)
    except (TypeError, ValueError):
        raise ValidationError(
            f"the budget needs numbers; got epsilon={epsilon!r}, delta={delta!r}") from None
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ValidationError(f"budget epsilon must be a finite number >= 0; got {epsilon!r}")
    if not (0.0 <= delta < 1.0):
        raise ValidationError(f"budget delta must lie in [0, 1); got {delta!r}")
    return epsilon, delta


class PrivacyLedger:
    """One (ε, δ) privacy budget, charged by any number of fits.

    What is private: the records of the dataset(s) the charged releases read,
    under the adjacency of the recorded events (all entries must share one
    adjacency, as in any composition).  What is tracked: the ε at the ledger's
    δ of the composition of every recorded event, computed by ``accountant``,
    and (:meth:`spent_delta`) the δ that approximate-DP events
    (:class:`~fastdp.privacy.events.ApproxDpEvent`) state themselves, which
    must fit in the budget δ (the accountant gets only the rest as slack).
    Approximate-DP events need ``accountant="pure"`` or ``"pld"``.

    Parameters
    ----------
    epsilon : float
        Total ε budget (>= 0).
    delta : float
        δ at which the budget is stated, in [0, 1).  δ = 0 needs a pure-DP
        accountant (``accountant="pure"`` with basic composition).
    accountant : str or accountant, default "rdp"
        Name for :func:`fastdp.privacy.accountants.get_accountant` (``"rdp"``,
        ``"pld"``, ``"pure"``, ``"moments"``) or an accountant instance (not
        allowed with ``path``, since the file must name its accountant).
    path : str or os.PathLike, optional
        JSON file backing the ledger.  If it exists it is loaded and must
        state the same budget, accountant and options (otherwise
        :class:`~fastdp.exceptions.ValidationError`); if not, it is created.
    accountant_options : dict, optional
        Keyword arguments for the accountant (e.g.
        ``{"value_discretization_interval": 1e-4}`` for PLD); stored in the file.
    tolerance : float, default 1e-12
        Relative slack on the budget comparison, absorbing floating-point
        rounding only (e.g. ten charges of ε/10 summing to 1.0000000000000002·ε).

    Examples
    --------
    >>> ledger = PrivacyLedger(epsilon=1.0, delta=1e-5)           # doctest: +SKIP
    >>> ledger.charge(event, label="DPLogisticRegression.fit")      # doctest: +SKIP
    >>> ledger.spent(), ledger.remaining()                          # doctest: +SKIP
    """

    def __init__(self, epsilon, delta, accountant="rdp", path=None, *,
                 accountant_options=None, tolerance=1e-12):
        self._epsilon, self._delta = _check_budget(epsilon, delta)
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
        if self._path is not None and os.path.exists(self._path):
            self.refresh()  # refuses a file with another budget before anything else
        self._accountant = self._make_accountant(accountant, options)
        if self._path is not None:
            self._create_file_if_missing()

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

    def _header(self):
        return {"format": LEDGER_FORMAT, "version": LEDGER_VERSION,
                "epsilon": self._epsilon, "delta": self._delta,
                "accountant": self._accountant_name,
                "accountant_options": self._accountant_options}

    def _payload(self, entries):
        payload = self._header()
        payload["entries"] = [entry.to_dict() for entry in entries]
        return payload

    def _check_header(self, data):
        mine = self._header()
        differing = [key for key in ("epsilon", "delta", "accountant", "accountant_options")
                     if data[key] != mine[key]]
        if differing:
            found = ", ".join(f"{k}={data[k]!r}" for k in differing)
            wanted = ", ".join(f"{k}={mine[k]!r}" for k in differing)
            raise ValidationError(
                f"refusing ledger file {self._path}: it records {found} but this ledger "
                f"was opened with {wanted}. Open it with PrivacyLedger.load(path) to use "
                "its own budget, or choose another path.")

    def _create_file_if_missing(self):
        with self._thread_lock, _locked(self._lock_path, exclusive=True):
            if os.path.exists(self._path):  # another process may have just created it
                data, entries = _read_ledger_file(self._path)
                self._check_header(data)
                self._entries = entries
            else:
                _atomic_write_json(self._path, self._payload(()))

    @classmethod
    def load(cls, path, epsilon=None, delta=None, accountant=None, *,
             accountant_options=None, tolerance=1e-12):
        """Open an existing ledger file with the budget it records.

        Any of ``epsilon``, ``delta``, ``accountant``, ``accountant_options``
        that is given must equal the file's value, otherwise the file is
        refused with :class:`~fastdp.exceptions.ValidationError`.
        """
        path = os.fspath(path)
        if not os.path.exists(path):
            raise ValidationError(f"no privacy ledger at {path}; create one with "
                                  "PrivacyLedger(epsilon, delta, path=...)")
        with _locked(path + ".lock", exclusive=False):
            data, _ = _read_ledger_file(path)
        wanted = {"epsilon": epsilon, "delta": delta,
                  "accountant": None if accountant is None else str(accountant).lower(),
                  "accountant_options": accountant_options}
        differing = {k: v for k, v in wanted.items()
                     if v is not None and (float(v) if k in ("epsilon", "delta") else v) != data[k]}
        if differing:
            raise ValidationError(
                f"refusing ledger file {path}: it records "
                + ", ".join(f"{k}={data[k]!r}" for k in differing)
                + " but the caller expected "
                + ", ".join(f"{k}={v!r}" for k, v in differing.items()))
        return cls(data["epsilon"], data["delta"], data["accountant"], path,
                   accountant_options=data["accountant_options"], tolerance=tolerance)

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
        """The backing file, or None."""
        return self._path

    @property
    def _lock_path(self):
        return self._path + ".lock"

    @property
    def entries(self):
        """Recorded entries, oldest first (re-read from the file when there is one)."""
        self.refresh()
        return self._entries

    def __len__(self):
        return len(self.entries)

    def __repr__(self):
        where = f", path={self._path!r}" if self._path else ""
        return (f"PrivacyLedger(epsilon={self._epsilon!r}, delta={self._delta!r}, "
                f"accountant={self._accountant_name!r}{where}, entries={len(self._entries)})")

    # -- accounting -------------------------------------------------------------
    def refresh(self):
        """Re-read the entries from the backing file (no-op without a path)."""
        if self._path is None:
            return
        with self._thread_lock, _locked(self._lock_path, exclusive=False):
            data, entries = _read_ledger_file(self._path)
            self._check_header(data)
            self._entries = entries

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
        if not events:
            return 0.0
        return float(self._accountant.epsilon(ev.ComposedEvent(tuple(events)), self._delta))

    def spent(self):
        """ε spent so far: the accountant's ε of all recorded events at the ledger's δ."""
        return self._epsilon_of(self.entries)

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

    def _checked(self, entries, event, label):
        if not isinstance(event, ev.DpEvent):
            raise ValidationError(f"expected a fastdp DpEvent, got {type(event).__name__}")
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

    def check(self, event, label=""):
        """ε that would be spent after charging ``event``; records nothing.

        Raises
        ------
        BudgetExceededError
            If charging ``event`` would exceed the budget.
        PrivacyAnalysisError
            If the accountant cannot compose ``event`` with the recorded events
            (e.g. a replace-one event on an add/remove ledger).
        """
        return self._checked(self.entries, event, label)

    def charge(self, event, label=""):
        """Record ``event`` if the budget allows it; call BEFORE releasing anything.

        With a backing file this is atomic across processes: lock, reload,
        check, append, write, unlock.

        Returns
        -------
        LedgerEntry
            The recorded entry.

        Raises
        ------
        BudgetExceededError
            If the composition would exceed the budget; nothing is recorded.
        """
        return self._record(event, label, reserve=False)

    def reserve(self, event, label=""):
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
        return Reservation(self, self._record(event, label, reserve=True))

    def pending(self):
        """Reservations not yet committed or cancelled (e.g. left by a killed process)."""
        return tuple(entry for entry in self.entries if entry.pending)

    def _record(self, event, label, reserve):
        if not isinstance(label, str):
            raise ValidationError(f"label must be a string, got {type(label).__name__}")
        if reserve:
            entry_args = (RESERVED, uuid.uuid4().hex)
        else:
            entry_args = (COMMITTED, None)
        with self._thread_lock:
            if self._path is None:
                self._checked(self._entries, event, label)
                entry = LedgerEntry(event, label, time.time(), *entry_args)
                self._entries = self._entries + (entry,)
                return entry
            with _locked(self._lock_path, exclusive=True):
                data, entries = _read_ledger_file(self._path)
                self._check_header(data)
                self._entries = entries
                self._checked(entries, event, label)
                entry = LedgerEntry(event, label, time.time(), *entry_args)
                new_entries = entries + (entry,)
                _atomic_write_json(self._path, self._payload(new_entries))
                self._entries = new_entries
                return entry

    def _finish_reservation(self, reservation_id, commit):
        """Commit (mark committed) or cancel (remove) the pending entry ``reservation_id``."""
        def update(entries):
            for k, entry in enumerate(entries):
                if entry.reservation_id == reservation_id and entry.pending:
                    if commit:
                        done = dataclasses.replace(entry, status=COMMITTED, reservation_id=None)
                        return entries[:k] + (done,) + entries[k + 1:], done
                    return entries[:k] + entries[k + 1:], None
            raise ValidationError(
                f"reservation {reservation_id} is not pending in this ledger (committed, "
                "cancelled, or the ledger file was replaced).")

        with self._thread_lock:
            if self._path is None:
                self._entries, entry = update(self._entries)
                return entry
            with _locked(self._lock_path, exclusive=True):
                data, entries = _read_ledger_file(self._path)
                self._check_header(data)
                new_entries, entry = update(entries)
                _atomic_write_json(self._path, self._payload(new_entries))
                self._entries = new_entries
                return entry
