"""Ledger entries: what one charge records, pending reservations, events as JSON.

:class:`LedgerEntry` is one charged (or reserved) release and
:class:`Reservation` the handle of a pending charge; both belong to a
:class:`~fastdp.privacy.ledger.PrivacyLedger`, which re-exports them.
:func:`event_to_dict` / :func:`event_from_dict` turn any event of
:mod:`fastdp.privacy.events` into JSON and back, with every malformed
description refused by a :class:`~fastdp.exceptions.ValidationError`.
"""

from __future__ import annotations

import dataclasses
import json
import warnings

from fastdp.exceptions import ValidationError
from fastdp.privacy import events as ev

__all__ = ["LedgerEntry", "Reservation", "settle_reservation", "cancel_on_failure",
           "note_ledger_epsilon",
           "event_to_dict",
           "event_from_dict", "COMMITTED", "RESERVED"]

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


def _short_repr(value, limit=200):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def event_from_dict(data):
    """Rebuild an event from :func:`event_to_dict` output (validated again).

    Any malformed description (missing or unexpected fields, wrong types,
    nesting too deep) raises :class:`~fastdp.exceptions.ValidationError`.
    """
    try:
        return ev.event_from_dict(data)
    except ValidationError:
        raise
    except RecursionError:
        raise ValidationError("not a valid event description: nested too deeply") from None
    except Exception as exc:  # unexpected or missing fields, wrong value types
        raise ValidationError(
            f"not a valid event description {_short_repr(data)}: {type(exc).__name__}: {exc}"
        ) from None


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

    def settle(self, exc=None, *, what=None, released=False):
        """Commit or cancel once the guarded work has ended.

        Parameters
        ----------
        exc : BaseException or None
            How the work ended (``None``: normally).
        what : str or None
            Name of the work (``"fit"``, ``"search"``) for the note added to
            ``exc`` when the charge stays; ``None`` adds no note.
        released : bool
            Whether something covered by the reservation was already released
            (then even a ``KeyboardInterrupt`` keeps the charge).

        Notes
        -----
        A ``KeyboardInterrupt`` before any release cancels; every other ending
        commits (a failure during training may depend on the private data).
        """
        if isinstance(exc, KeyboardInterrupt) and not released:
            self.cancel()
            return
        self.commit()
        if exc is None or what is None:
            return
        if isinstance(exc, KeyboardInterrupt):
            exc.add_note(f"fastdp: the privacy ledger keeps this {what}'s charge: the "
                         "callback already received released states.")
        else:
            exc.add_note(f"fastdp: the privacy ledger keeps this {what}'s charge (a failure "
                         "during training can depend on the private data).")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.settle(exc)
        return False

    def __repr__(self):
        return f"Reservation({self.entry.label!r}, {self.state}, id={self.id})"


class settle_reservation:
    """Context manager settling an optional reservation when its block ends.

    Parameters
    ----------
    reservation : Reservation or None
        The pending charge (``None``: no ledger, nothing to do).
    what : str
        Name of the guarded work, used in the note added to an exception.
    released : callable, optional
        Called without arguments at exit: whether something was already
        released (see :meth:`Reservation.settle`).
    """

    def __init__(self, reservation, what, released=None):
        self._reservation = reservation
        self._what = what
        self._released = released

    def __enter__(self):
        return self._reservation

    def __exit__(self, exc_type, exc, traceback):
        if self._reservation is not None:
            released = exc is not None and self._released is not None and self._released()
            self._reservation.settle(exc, what=self._what, released=released)
        return False


class cancel_on_failure:
    """Context manager cancelling an optional reservation if its block fails.

    For work done after reserving but before anything private runs (e.g. the
    solver's copy of the rows): a failure there releases nothing, so the
    reservation is cancelled and the exception says that nothing was charged.
    A normal exit leaves the reservation pending.

    Parameters
    ----------
    reservation : Reservation or None
        The pending charge (``None``: no ledger, nothing to do).
    what : str
        Name of the guarded work, used in the note added to an exception.
    """

    def __init__(self, reservation, what):
        self._reservation = reservation
        self._what = what

    def __enter__(self):
        return self._reservation

    def __exit__(self, exc_type, exc, traceback):
        if self._reservation is not None and exc is not None:
            self._reservation.cancel()
            exc.add_note(f"fastdp: nothing private ran; the privacy ledger's reservation "
                         f"for this {self._what} was released (nothing charged).")
        return False


class LedgerAccountingWarning(UserWarning):
    """The ledger counts a release as more ε than the fit (or search) reports."""


def note_ledger_epsilon(ledger, event, epsilon, delta, accountant_name, what):
    """Warn, before reserving, when ``ledger`` will count ``event`` as more ε than reported.

    The fit (or search) reports ``epsilon``: the ε of its own accountant at its
    own ``delta``.  The ledger charges the same event but composes it under
    its accountant at its δ (:meth:`PrivacyLedger.epsilon_of_event`).  Both
    bound the privacy loss of the same release; when the ledger's is larger
    (a looser accountant, a smaller δ), the budget drains faster than the
    reported ε suggests, and this says so with both numbers.

    Returns
    -------
    float
        The ε the ledger counts for ``event`` alone.
    """
    counted = float(ledger.epsilon_of_event(event))
    if counted > float(epsilon) * (1.0 + 1e-6) + 1e-12:
        warnings.warn(
            f"the privacy ledger counts this {what} as epsilon {counted:.6g} (accountant "
            f"{ledger.accountant_name!r} at the ledger's delta {ledger.delta:g}), while the "
            f"{what} reports epsilon {float(epsilon):.6g} (accountant {accountant_name!r} at "
            f"delta {float(delta):g}). Both bound the same release; the ledger's is the one "
            "charged against its budget. Use the ledger's accountant and delta for the "
            f"{what} to make them equal.", LedgerAccountingWarning, stacklevel=3)
    return counted
