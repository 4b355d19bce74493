"""The ledger's hash chain: records, their verification and their replay into entries.

Private helpers of :mod:`fastdp.privacy.ledger`: a ledger file is an
append-only list of records, each carrying the SHA-256 of the previous one;
:func:`_replay` verifies the chain and folds it into the budget and the
effective entries.  How the file is written and locked:
:mod:`fastdp.privacy._ledger_files`.

Tamper evidence
---------------
The file is an append-only log of *records* linked by a SHA-256 hash chain:
every record stores the hash of the previous one (``prev``) and its own hash
(``hash``, over its canonical JSON without ``hash``), and the file stores the
hash of the last one (``head``).  The first record states the budget; a
budget change is a record of its own, made only when the ledger is re-opened
with ``change_budget=True``.  Reading verifies the whole chain, and that the
budget in the file's header is the one the chain ends with, so a hand edit
(an entry removed or altered, a count set to 0, the budget raised from 5 to
1000, the last entries cut off) is refused with a
:class:`~fastdp.exceptions.ValidationError` naming the file, as is any
damaged or foreign content.  This is evidence against accidents and casual
edits, not a security boundary: anyone who can write the file can also
recompute the hashes.  Protect the file (and its directory) with permissions
or append-only storage where that matters.

File format (``"format": "fastdp.privacy_ledger"``, ``"version": 3``)::

    {"format": ..., "version": 3, "epsilon": 1.0, "delta": 1e-05,
     "accountant": "rdp", "accountant_options": {},
     "records": [
       {"seq": 0, "type": "open", "epsilon": 1.0, "delta": 1e-05, "accountant": "rdp",
        "accountant_options": {}, "nonce": "9c0e...", "timestamp": 1763700000.1,
        "prev": "000...0", "hash": "5d41..."},
       {"seq": 1, "type": "charge", "event": {...event_to_dict...}, "label": "fit 1",
        "timestamp": ..., "prev": "5d41...", "hash": "..."},
       {"seq": 2, "type": "reserve", "id": "3f2a...", "event": {...}, "label": "fit 2", ...},
       {"seq": 3, "type": "commit", "id": "3f2a...", "timestamp": ..., ...},
       {"seq": 4, "type": "budget", "epsilon": 2.0, ..., "timestamp": ..., ...}],
     "head": "<hash of the last record>"}

``cancel`` records remove a pending reservation.  Files of versions 1 and 2
(no chain) are refused with a message: if their content is trusted,
:meth:`PrivacyLedger.upgrade` converts them once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

from fastdp.exceptions import ValidationError
from fastdp.privacy._ledger_files import _check_generation, _read_generation, _read_json
from fastdp.privacy.ledger_entries import (
    COMMITTED,
    RESERVED,
    LedgerEntry,
    _short_repr,
    event_from_dict,
)

LEDGER_FORMAT = "fastdp.privacy_ledger"
LEDGER_VERSION = 3
_LEGACY_VERSIONS = (1, 2)  # no hash chain: read only by PrivacyLedger.upgrade


# ----------------------------------------------------------------------------
# the record chain: reading, verifying, replaying
# ----------------------------------------------------------------------------
_GENESIS = "0" * 64
_BUDGET_KEYS = ("epsilon", "delta", "accountant", "accountant_options")
_FILE_KEYS = frozenset(("format", "version", "records", "head") + _BUDGET_KEYS)
_CHAIN_KEYS = frozenset(("seq", "type", "prev", "hash"))
_RECORD_KEYS = {
    "open": frozenset(_BUDGET_KEYS + ("nonce", "timestamp")),
    "budget": frozenset(_BUDGET_KEYS + ("timestamp",)),
    "charge": frozenset(("event", "label", "timestamp")),
    "reserve": frozenset(("id", "event", "label", "timestamp")),
    "commit": frozenset(("id", "timestamp")),
    "cancel": frozenset(("id", "timestamp")),
}
_TRUST_ADVICE = (
    "The budget it records cannot be trusted, so fastdp refuses to use it: restore the "
    "file from a backup, or start a new ledger."
)


def _canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def _record_hash(record):
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(_canonical(body).encode("ascii")).hexdigest()


def _damaged(path, reason):
    return ValidationError(
        f"privacy ledger {path} failed its integrity check: {reason}. It was edited or "
        f"damaged outside fastdp. {_TRUST_ADVICE}")



def _budget_of(record):
    epsilon, delta = _check_budget(record["epsilon"], record["delta"])
    accountant, options = record["accountant"], record["accountant_options"]
    if not isinstance(accountant, str) or not isinstance(options, dict):
        raise ValueError("the accountant must be a name and its options an object")
    return {"epsilon": epsilon, "delta": delta, "accountant": accountant,
            "accountant_options": options}


def _timestamp(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"bad timestamp {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class _LedgerState:
    """What a verified ledger file says."""

    budget: dict           # the budget the chain ends with
    header: dict           # the budget the file's header states
    entries: tuple         # effective entries (committed and pending), oldest first
    records: list          # every record, as read
    head: str              # hash of the last record
    mode: int              # permission bits of the file

    @property
    def header_matches(self):
        return self.header == self.budget


def _legacy_error(path, version):
    return ValidationError(
        f"{path} is a version-{version} fastdp privacy ledger, written before ledgers carried "
        "tamper evidence; fastdp no longer uses it as it is, because an edit of it could not "
        "be detected. If you trust its content, convert it once with "
        "fastdp.privacy.ledger.PrivacyLedger.upgrade(path) (every entry is kept and a hash "
        "chain is added).")


def _replay(path, data):
    """Verify the chain of a parsed version-3 file and fold its records into entries."""
    if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT:
        raise ValidationError(f"{path} is not a fastdp privacy ledger file")
    version = data.get("version")
    if version in _LEGACY_VERSIONS and not isinstance(version, bool):
        raise _legacy_error(path, version)
    if version != LEDGER_VERSION or isinstance(version, bool):
        raise ValidationError(
            f"{path} has ledger format version {_short_repr(version)}; this fastdp reads "
            f"version {LEDGER_VERSION} (and upgrades versions {_LEGACY_VERSIONS})")
    if set(data) != _FILE_KEYS:
        raise _damaged(path, f"its top-level fields are {sorted(data)}, expected "
                             f"{sorted(_FILE_KEYS)}")
    records = data["records"]
    if not isinstance(records, list) or not records:
        raise _damaged(path, "it has no records")
    previous = _GENESIS
    budget = None
    entries = []            # None marks a cancelled reservation
    pending = {}            # reservation id -> position in entries
    for k, record in enumerate(records):
        where = f"record {k}"
        if not isinstance(record, dict) or not _CHAIN_KEYS <= set(record):
            raise _damaged(path, f"{where} is not a ledger record")
        seq = record["seq"]
        if isinstance(seq, bool) or seq != k:
            raise _damaged(path, f"{where} carries number {_short_repr(seq)}: records were "
                                 "removed, added or reordered")
        if record["prev"] != previous:
            raise _damaged(path, f"{where} does not follow record {k - 1} in the hash chain "
                                 "(a record was removed, replaced or reordered)")
        try:
            computed = _record_hash(record)
        except (TypeError, ValueError):
            computed = None
        if record["hash"] != computed:
            raise _damaged(path, f"{where} was modified (its content does not match its hash)")
        previous = computed
        kind = record["type"]
        fields = _RECORD_KEYS.get(kind) if isinstance(kind, str) else None
        if fields is None or set(record) != fields | _CHAIN_KEYS:
            raise _damaged(path, f"{where} has an unknown type or fields")
        if (kind == "open") != (k == 0):
            raise _damaged(path, f"{where}: only the first record opens the ledger")
        try:
            timestamp = _timestamp(record["timestamp"])
            if kind in ("open", "budget"):
                budget = _budget_of(record)
            elif kind in ("charge", "reserve"):
                label = record["label"]
                if not isinstance(label, str):
                    raise ValueError("the label must be a string")
                event = event_from_dict(record["event"])
                if kind == "charge":
                    entries.append(LedgerEntry(event, label, timestamp))
                else:
                    rid = record["id"]
                    if not isinstance(rid, str) or not rid or rid in pending:
                        raise ValueError("bad or repeated reservation id")
                    pending[rid] = len(entries)
                    entries.append(LedgerEntry(event, label, timestamp, RESERVED, rid))
            else:
                position = pending.pop(record["id"], None) if isinstance(record["id"], str) \
                    else None
                if position is None:
                    raise ValueError("it finishes a reservation that is not pending")
                entries[position] = (None if kind == "cancel" else dataclasses.replace(
                    entries[position], status=COMMITTED, reservation_id=None))
        except (ValidationError, ValueError, TypeError, KeyError) as exc:
            raise _damaged(path, f"{where} ({kind}) is invalid: {exc}") from None
    if data["head"] != previous:
        raise _damaged(path, "its last records were removed (the head hash does not match "
                             "the last record)")
    try:
        header = _budget_of(data)
    except (ValidationError, ValueError, TypeError) as exc:
        raise _damaged(path, f"its header is invalid: {exc}") from None
    return _LedgerState(budget, header, tuple(e for e in entries if e is not None),
                        records, previous, 0)


def _read_state(path, real):
    """Read and verify a ledger file; returns its :class:`_LedgerState`.

    The generation recorded beside the file is read first and checked after
    the chain (rollback detection, :mod:`fastdp.privacy._ledger_files`).
    """
    generation = _read_generation(real)
    data, mode = _read_json(path, real)
    try:
        state = _replay(path, data)
    except RecursionError:
        raise _damaged(path, "it is nested too deeply") from None
    _check_generation(path, real, generation, state.records)
    return dataclasses.replace(state, mode=mode)


def _new_record(previous_records, kind, **fields):
    """A record of type ``kind`` chained after ``previous_records``."""
    record = {"seq": len(previous_records), "type": kind, **fields,
              "prev": previous_records[-1]["hash"] if previous_records else _GENESIS}
    record["hash"] = _record_hash(record)
    return record


def _file_payload(budget, records):
    payload = {"format": LEDGER_FORMAT, "version": LEDGER_VERSION}
    payload.update({key: budget[key] for key in _BUDGET_KEYS})
    payload["records"] = records
    payload["head"] = records[-1]["hash"]
    return payload


# ----------------------------------------------------------------------------
# the ledger
# ----------------------------------------------------------------------------
def _check_budget(epsilon, delta):
    if isinstance(epsilon, bool) or isinstance(delta, bool):
        raise ValidationError(
            f"the budget needs numbers; got epsilon={epsilon!r}, delta={delta!r}")
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


def _describe(budget, keys=_BUDGET_KEYS):
    return ", ".join(f"{key}={budget[key]!r}" for key in keys)


def _check_header(path, state):
    """Refuse a file whose header states another budget than its hash chain."""
    if state.header_matches:
        return
    differing = [k for k in _BUDGET_KEYS if state.header[k] != state.budget[k]]
    raise ValidationError(
        f"privacy ledger {path} states {_describe(state.header, differing)} in its header, "
        f"but its hash chain records {_describe(state.budget, differing)}: the budget was "
        "changed outside fastdp, and is refused. To change the budget of a ledger, open it "
        "with PrivacyLedger(epsilon, delta, path=..., change_budget=True) (or "
        "PrivacyLedger.load(path, epsilon=..., change_budget=True)), which records the change "
        "in the chain.")
