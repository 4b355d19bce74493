"""Tests of fastdp.privacy.ledger: budget arithmetic, refusal, persistence, crashes, concurrency."""
import dataclasses
import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from fastdp.exceptions import BudgetExceededError, PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.ledger import (
    LEDGER_FORMAT,
    LedgerEntry,
    PrivacyLedger,
    event_from_dict,
    event_to_dict,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
POSIX = sys.platform != "win32"


def sgm(q, sigma, steps):
    return ev.SelfComposedEvent(ev.PoissonSampledEvent(q, ev.GaussianEvent(sigma)), steps)


def one_of_each_event():
    """An instance of every event type (checked for completeness below)."""
    gaussian = ev.GaussianEvent(1.3)
    events = [
        gaussian,
        ev.GaussianEvent(0.7, adjacency="replace_one"),
        ev.LaplaceEvent(2.5),
        ev.PureEvent(0.25, adjacency="replace_one"),
        ev.ExponentialMechanismEvent(0.4),
        ev.LineSearchEvent.laplace(0.3, max_it=12),
        ev.LineSearchEvent.gaussian(0.05, max_it=8, analysis="conservative"),
        ev.NonPrivateEvent(),
        ev.PoissonSampledEvent(0.01, gaussian),
        ev.FixedSizeSampledEvent(1000, 32, ev.LaplaceEvent(1.0)),
        ev.ShuffledEvent(1000, 100, gaussian, epochs=3, drop_last=True),
        ev.SelfComposedEvent(ev.PoissonSampledEvent(0.1, ev.LaplaceEvent(3.0)), 17),
        ev.ComposedEvent([gaussian, ev.LaplaceEvent(4.0), ev.NonPrivateEvent()]),
        ev.PrivacyFilterEvent.zcdp(0.02),
        ev.PrivacyFilterEvent.rdp([8, 32], [0.5, 1.0]),
        ev.ApproxDpEvent(0.2, 3e-9, adjacency="replace_one"),
        ev.SelfComposedEvent(ev.PoissonSampledEvent(0.05, ev.ApproxDpEvent(1.5, 1e-8)), 4),
        ev.NoGuaranteeEvent(0.5, "metropolis", adjacency="replace_one"),
    ]
    if hasattr(ev, "RepeatedSelectionEvent"):  # private hyperparameter search
        events.append(ev.RepeatedSelectionEvent((gaussian, ev.GaussianEvent(2.0)), "poisson",
                                                mu=3.0))
    if hasattr(ev, "ParallelComposedEvent"):  # disjoint parts of a split (issue 17)
        events.append(ev.ParallelComposedEvent((ev.PoissonSampledEvent(0.01, gaussian),
                                                ev.GaussianEvent(5.0))))
    return events


def test_event_serialisation_covers_every_event_type():
    concrete = {cls for cls in vars(ev).values()
                if isinstance(cls, type) and issubclass(cls, ev.DpEvent)
                and dataclasses.is_dataclass(cls)}
    examples = one_of_each_event()
    assert concrete <= {type(e) for e in examples}
    for event in examples:
        data = json.loads(json.dumps(event_to_dict(event)))
        assert event_from_dict(data) == event


def test_event_serialisation_rejects_garbage():
    with pytest.raises(ValidationError):
        event_to_dict("gaussian")
    with pytest.raises(ValidationError):
        event_from_dict({"kind": "gaussian", "sigma": 1.0})
    with pytest.raises(ValidationError):
        event_from_dict({"kind": "teleport"})


@pytest.mark.parametrize("accountant, options", [
    ("rdp", {}), ("pld", {"value_discretization_interval": 1e-3}), ("pure", {}),
])
def test_budget_arithmetic_matches_direct_accountant_calls(accountant, options):
    if accountant == "pure":
        events = [ev.SelfComposedEvent(ev.LaplaceEvent(20.0), 10), ev.PureEvent(0.3),
                  ev.SelfComposedEvent(ev.PoissonSampledEvent(0.1, ev.LaplaceEvent(1.0)), 4)]
    else:
        events = [sgm(0.01, 1.2, 500), sgm(0.02, 2.0, 300), ev.SelfComposedEvent(ev.GaussianEvent(8.0), 5)]
    ledger = PrivacyLedger(10.0, 1e-6, accountant, accountant_options=options)
    direct = get_accountant(accountant, **options)
    assert ledger.spent() == 0.0 and ledger.remaining() == 10.0
    for k, event in enumerate(events, start=1):
        expected = direct.epsilon(ev.ComposedEvent(tuple(events[:k])), 1e-6)
        assert ledger.check(event) == expected
        entry = ledger.charge(event, label=f"fit {k}")
        assert isinstance(entry, LedgerEntry) and entry.event == event and entry.label == f"fit {k}"
        assert ledger.spent() == expected
        assert ledger.remaining() == pytest.approx(10.0 - expected, rel=1e-15)
    # composing beats adding the fits' separate epsilons (RDP/PLD), equals it for pure
    separate = sum(direct.epsilon(e, 1e-6) for e in events)
    if accountant == "pure":
        assert ledger.spent() == pytest.approx(separate, rel=1e-14)
    else:
        assert ledger.spent() < separate


def test_over_budget_is_refused_and_nothing_recorded(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = PrivacyLedger(1.0, 0.0, "pure", path=path)
    ledger.charge(ev.PureEvent(0.6), "first")
    before = path.read_bytes()
    with pytest.raises(BudgetExceededError, match="Nothing was released or recorded"):
        ledger.charge(ev.PureEvent(0.5), "second")
    with pytest.raises(BudgetExceededError):
        ledger.check(ev.PureEvent(0.5))
    assert path.read_bytes() == before
    assert [e.label for e in ledger.entries] == ["first"]
    assert ledger.spent() == 0.6
    ledger.charge(ev.PureEvent(0.4), "exactly to the budget")
    assert ledger.remaining() == 0.0
    with pytest.raises(BudgetExceededError):
        ledger.charge(ev.PureEvent(1e-9))
    with pytest.raises(BudgetExceededError):
        PrivacyLedger(5.0, 1e-5).charge(ev.NonPrivateEvent())


def test_rounding_tolerance_only():
    ledger = PrivacyLedger(1.0, 0.0, "pure")
    for _ in range(3):
        ledger.charge(ev.PureEvent(1.0 / 3.0))
    assert ledger.spent() == pytest.approx(1.0, rel=1e-15)
    strict = PrivacyLedger(1.0, 0.0, "pure", tolerance=0.0)
    strict.charge(ev.PureEvent(0.5))
    with pytest.raises(BudgetExceededError):
        strict.charge(ev.PureEvent(0.5 + 1e-15))


def test_incompatible_events_are_refused_without_recording():
    ledger = PrivacyLedger(50.0, 1e-5, "rdp")
    ledger.charge(sgm(0.01, 1.0, 100))
    with pytest.raises(PrivacyAnalysisError):
        ledger.charge(ev.FixedSizeSampledEvent(1000, 10, ev.GaussianEvent(1.0)))  # replace-one
    pure = PrivacyLedger(5.0, 0.0, "pure")
    with pytest.raises(PrivacyAnalysisError):
        pure.charge(ev.GaussianEvent(1.0))
    assert len(ledger) == 1 and len(pure) == 0


def test_persistence_round_trip(tmp_path):
    path = tmp_path / "budget.json"
    ledger = PrivacyLedger(20.0, 1e-5, "rdp", path=path)
    events = [sgm(0.01, 1.1, 200), ev.LineSearchEvent.laplace(0.2, max_it=5),
              ev.SelfComposedEvent(ev.LaplaceEvent(3.0), 4), ev.ExponentialMechanismEvent(0.5)]
    for k, event in enumerate(events):
        ledger.charge(event, label=f"fit-{k}")
    data = json.loads(path.read_text())
    assert data["format"] == LEDGER_FORMAT and data["epsilon"] == 20.0 and data["delta"] == 1e-5
    assert [r["type"] for r in data["records"]] == ["open"] + ["charge"] * 4
    assert data["head"] == data["records"][-1]["hash"]
    again = PrivacyLedger.load(path)
    assert again.entries == ledger.entries
    assert again.spent() == ledger.spent()
    assert (again.epsilon, again.delta, again.accountant_name) == (20.0, 1e-5, "rdp")
    # same budget: the constructor reopens the file; charges through either are seen by both
    reopened = PrivacyLedger(20.0, 1e-5, "rdp", path=str(path))
    reopened.charge(ev.PureEvent(0.1), "later")
    assert len(ledger) == 5 and ledger.entries[-1].label == "later"
    timestamps = [e.timestamp for e in again.entries]
    assert timestamps == sorted(timestamps) and abs(timestamps[-1] - time.time()) < 3600


def test_files_with_another_budget_or_garbage_are_refused(tmp_path):
    path = tmp_path / "ledger.json"
    PrivacyLedger(1.0, 1e-5, "pld", path=path, accountant_options={"value_discretization_interval": 1e-3})
    for kwargs in (dict(epsilon=2.0, delta=1e-5, accountant="pld"),
                   dict(epsilon=1.0, delta=1e-6, accountant="pld"),
                   dict(epsilon=1.0, delta=1e-5, accountant="rdp")):
        with pytest.raises(ValidationError, match="refusing"):
            PrivacyLedger(path=path, accountant_options={"value_discretization_interval": 1e-3}, **kwargs)
    with pytest.raises(ValidationError, match="refusing"):
        PrivacyLedger(1.0, 1e-5, "pld", path=path)  # options differ
    with pytest.raises(ValidationError, match="refusing"):
        PrivacyLedger.load(path, epsilon=3.0)
    assert PrivacyLedger.load(path, epsilon=1.0, delta=1e-5, accountant="pld").epsilon == 1.0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValidationError):
        PrivacyLedger.load(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValidationError):
        PrivacyLedger(1.0, 1e-5, path=bad)
    with pytest.raises(ValidationError):
        PrivacyLedger.load(tmp_path / "missing.json")


def test_bad_arguments():
    with pytest.raises(ValidationError):
        PrivacyLedger(-1.0, 1e-5)
    with pytest.raises(ValidationError):
        PrivacyLedger(1.0, 1.0)
    with pytest.raises(ValidationError):
        PrivacyLedger(1.0, 0.0, "rdp")  # δ = 0 needs the pure accountant
    with pytest.raises(ValidationError):
        PrivacyLedger(1.0, 1e-5, "nonsense")
    with pytest.raises(ValidationError):
        PrivacyLedger(1.0, 1e-5, get_accountant("rdp"), path="x.json")
    in_memory = PrivacyLedger(1.0, 1e-5, get_accountant("pure"))
    in_memory.charge(ev.PureEvent(0.5))
    assert in_memory.spent() == 0.5
    with pytest.raises(ValidationError):
        in_memory.charge(ev.PureEvent(0.1), label=3)
    with pytest.raises(ValidationError):
        in_memory.charge("a gaussian")


# ----------------------------------------------------------------------------
# crashes and concurrency (real processes)
# ----------------------------------------------------------------------------
def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _spawn(script, *args):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=str(REPO_ROOT))


KILLED_INSIDE_WRITE = """
    import os, sys, time
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    ledger = PrivacyLedger.load(sys.argv[1])

    def stall(fd):  # the new ledger is in the temporary file, not yet renamed
        print("inside write", flush=True)
        time.sleep(120)

    os.fsync = stall
    ledger.charge(ev.PureEvent(0.01), "never completes")
"""


@pytest.mark.skipif(not POSIX, reason="SIGKILL and flock are POSIX")
def test_sigkill_inside_the_write_keeps_previous_ledger(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = PrivacyLedger(10.0, 0.0, "pure", path=path)
    ledger.charge(ev.PureEvent(0.5), "before the crash")
    before = path.read_bytes()
    child = _spawn(KILLED_INSIDE_WRITE, path)
    try:
        assert child.stdout.readline().strip() == "inside write", child.stderr.read()
        strays = [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
        assert strays, "the child should be stopped with its temporary file written"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert path.read_bytes() == before
    reloaded = PrivacyLedger.load(path)
    assert [e.label for e in reloaded.entries] == ["before the crash"]
    # the dead process's lock is gone: charging works at once
    reloaded.charge(ev.PureEvent(0.5), "after the crash")
    assert PrivacyLedger.load(path).spent() == 1.0


CHARGE_IN_A_LOOP = """
    import sys
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    ledger = PrivacyLedger.load(sys.argv[1])
    padding = "x" * 20000          # big entries: each write takes a while
    count = len(ledger.entries)
    while True:
        ledger.charge(ev.PureEvent(1e-3), padding)
        count += 1
        print(count, flush=True)
"""


@pytest.mark.skipif(not POSIX, reason="SIGKILL and flock are POSIX")
def test_sigkill_while_writing_in_a_loop_leaves_a_loadable_ledger(tmp_path):
    path = tmp_path / "ledger.json"
    PrivacyLedger(1e6, 0.0, "pure", path=path)
    rng = np.random.default_rng(3)
    committed = 0
    for round_number in range(4):
        child = _spawn(CHARGE_IN_A_LOOP, path)
        try:
            last = committed
            target = committed + 5
            while last < target:
                line = child.stdout.readline()
                assert line, child.stderr.read()
                last = int(line)
            time.sleep(float(rng.uniform(0.0, 0.03)))  # lands at a random point of a write
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        reported = [int(line) for line in child.stdout.read().split()]
        last = max([last] + reported)
        entries = PrivacyLedger.load(path).entries  # never torn
        # every charge the child reported is there, plus at most the one in flight
        assert last <= len(entries) <= last + 1
        assert all(e.event == ev.PureEvent(1e-3) for e in entries)
        committed = len(entries)
    assert committed >= 20


CHARGE_UNTIL_REFUSED = """
    import os, sys, time
    from fastdp.exceptions import BudgetExceededError
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    path, name, start = sys.argv[1], sys.argv[2], sys.argv[3]
    ledger = PrivacyLedger.load(path)
    while not os.path.exists(start):
        time.sleep(0.001)
    granted = 0
    for i in range(15):
        try:
            ledger.charge(ev.PureEvent(0.1), f"{name}-{i}")
            granted += 1
        except BudgetExceededError:
            pass
    print(granted, flush=True)
"""


@pytest.mark.skipif(not POSIX, reason="flock is POSIX")
def test_two_processes_never_exceed_the_budget(tmp_path):
    path = tmp_path / "shared.json"
    start = tmp_path / "start"
    PrivacyLedger(1.0, 0.0, "pure", path=path)
    children = [_spawn(CHARGE_UNTIL_REFUSED, path, name, start) for name in ("a", "b")]
    time.sleep(0.5)
    start.write_text("go")
    granted = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        granted.append(int(out))
    entries = PrivacyLedger.load(path).entries
    # every granted charge is recorded (none lost), and together they fit the budget
    assert sum(granted) == len(entries) == 10
    assert PrivacyLedger.load(path).spent() <= 1.0
    assert {e.label[0] for e in entries} <= {"a", "b"}


# ----------------------------------------------------------------------------
# reservations (reserve / commit / cancel)
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("backed", [False, True])
def test_reservations_count_until_cancelled(tmp_path, backed):
    path = tmp_path / "ledger.json" if backed else None
    ledger = PrivacyLedger(1.0, 0.0, "pure", path=path)
    first = ledger.reserve(ev.PureEvent(0.6), "fit A")
    assert ledger.spent() == 0.6 and [e.pending for e in ledger.entries] == [True]
    assert ledger.pending() == (first.entry,)
    with pytest.raises(BudgetExceededError):   # the pending 0.6 counts
        ledger.reserve(ev.PureEvent(0.5), "fit B")
    first.cancel()
    first.cancel()                              # idempotent
    assert ledger.entries == () and ledger.spent() == 0.0
    with pytest.raises(ValidationError):
        first.commit()
    second = ledger.reserve(ev.PureEvent(0.5), "fit B")
    entry = second.commit()
    assert second.commit() == entry and not entry.pending and entry.reservation_id is None
    with pytest.raises(ValidationError):
        second.cancel()
    assert [e.label for e in ledger.entries] == ["fit B"] and ledger.spent() == 0.5
    if backed:
        data = json.loads(path.read_text())
        assert data["version"] == 3
        assert [r["type"] for r in data["records"]] == ["open", "reserve", "cancel", "reserve",
                                                        "commit"]
        assert PrivacyLedger.load(path).entries == ledger.entries


def test_reservation_context_manager():
    ledger = PrivacyLedger(1.0, 0.0, "pure")
    with ledger.reserve(ev.PureEvent(0.1), "ok") as reservation:
        assert reservation.entry.pending
    assert reservation.state == "committed"
    with pytest.raises(KeyboardInterrupt):
        with ledger.reserve(ev.PureEvent(0.2), "interrupted"):
            raise KeyboardInterrupt
    with pytest.raises(ZeroDivisionError):
        with ledger.reserve(ev.PureEvent(0.3), "failed"):
            1 / 0
    assert [e.label for e in ledger.entries] == ["ok", "failed"]  # only the interrupt is cancelled
    assert ledger.spent() == pytest.approx(0.4)


@pytest.mark.parametrize("version", [1, 2])
def test_old_files_without_a_chain_are_refused_until_upgraded(tmp_path, version):
    path = tmp_path / "old.json"
    entries = [{"event": event_to_dict(ev.PureEvent(0.5)), "label": "old fit", "timestamp": 1.0}]
    if version == 2:
        entries.append({"event": event_to_dict(ev.PureEvent(0.25)), "label": "pending fit",
                        "timestamp": 2.0, "status": "reserved", "id": "abc123"})
    old = {"format": LEDGER_FORMAT, "version": version, "epsilon": 2.0, "delta": 0.0,
           "accountant": "pure", "accountant_options": {}, "entries": entries}
    path.write_text(json.dumps(old))
    for opener in (lambda: PrivacyLedger.load(path), lambda: PrivacyLedger(2.0, 0.0, "pure", path)):
        with pytest.raises(ValidationError, match=r"PrivacyLedger.upgrade\(path\)"):
            opener()
    ledger = PrivacyLedger.upgrade(path)
    assert [e.label for e in ledger.entries] == [e["label"] for e in entries]
    assert ledger.spent() == (0.5 if version == 1 else 0.75)
    if version == 2:
        assert ledger.pending()[0].reservation_id == "abc123"
    ledger.charge(ev.PureEvent(0.25), "new fit")
    data = json.loads(path.read_text())
    assert data["version"] == 3 and data["records"][0]["type"] == "open"
    assert PrivacyLedger.upgrade(path).entries == ledger.entries  # v3: left as it is
    bad = dict(old, entries=[dict(entries[0], status="reserved")])  # reserved needs an id
    path.write_text(json.dumps(bad))
    with pytest.raises(ValidationError):
        PrivacyLedger.upgrade(path)


HOLD_A_RESERVATION = """
    import os, sys, time
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    ledger = PrivacyLedger.load(sys.argv[1])
    reservation = ledger.reserve(ev.PureEvent(0.6), "child")
    print("reserved", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    reservation.cancel()
    print("cancelled", flush=True)
"""


@pytest.mark.skipif(not POSIX, reason="flock is POSIX")
def test_a_reservation_in_another_process_counts_against_the_budget(tmp_path):
    path, release = tmp_path / "shared.json", tmp_path / "go"
    ledger = PrivacyLedger(1.0, 0.0, "pure", path=path)
    child = _spawn(HOLD_A_RESERVATION, path, release)
    try:
        assert child.stdout.readline().strip() == "reserved", child.stderr.read()
        with pytest.raises(BudgetExceededError):
            ledger.charge(ev.PureEvent(0.5), "parent")
        release.write_text("go")
        assert child.stdout.readline().strip() == "cancelled", child.stderr.read()
    finally:
        child.kill() if child.poll() is None else None
        child.wait(timeout=30)
    ledger.charge(ev.PureEvent(0.5), "parent")
    assert [e.label for e in ledger.entries] == ["parent"]


# ---------------------------------------------------------------------------
# approximate (ε, δ)-DP events: their δ is charged against the budget δ
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("accountant, options", [
    ("pure", {}), ("pure", {"composition": "advanced"}),
    ("pld", {"value_discretization_interval": 1e-3}),
])
def test_approximate_events_charge_their_delta(accountant, options):
    ledger = PrivacyLedger(3.0, 1e-5, accountant, accountant_options=options)
    direct = get_accountant(accountant, **options)
    first = ev.SelfComposedEvent(ev.ApproxDpEvent(0.1, 1e-6), 4)
    second = ev.PureEvent(0.2)
    ledger.charge(first)
    ledger.charge(second)
    assert ledger.spent_delta() == pytest.approx(4e-6, rel=1e-15)
    assert ledger.spent() == direct.epsilon(ev.ComposedEvent((first, second)), 1e-5)
    # a charge whose own δ does not fit in the budget δ is refused, nothing recorded
    with pytest.raises(BudgetExceededError, match="delta"):
        ledger.charge(ev.ApproxDpEvent(0.01, 7e-6), label="too much delta")
    assert len(ledger) == 2 and ledger.spent_delta() == pytest.approx(4e-6, rel=1e-15)
    ledger.charge(ev.ApproxDpEvent(0.01, 6e-6))  # exactly fills the budget δ
    assert ledger.spent_delta() == pytest.approx(1e-5, rel=1e-12)


def test_approximate_events_refused_by_rdp_ledger_and_zero_delta_budget():
    ledger = PrivacyLedger(3.0, 1e-5, "rdp")
    with pytest.raises(PrivacyAnalysisError, match="accountant='pure'"):
        ledger.charge(ev.ApproxDpEvent(0.1, 1e-7))
    assert len(ledger) == 0 and ledger.spent_delta() == 0.0
    pure_budget = PrivacyLedger(3.0, 0.0, "pure")
    with pytest.raises(BudgetExceededError, match="delta"):
        pure_budget.charge(ev.ApproxDpEvent(0.1, 1e-12))
    pure_budget.charge(ev.ApproxDpEvent(0.1, 0.0))
    assert pure_budget.spent() == pytest.approx(0.1) and pure_budget.spent_delta() == 0.0


def test_approximate_events_persist(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = PrivacyLedger(3.0, 1e-5, "pure", path)
    event = ev.SelfComposedEvent(ev.ApproxDpEvent(0.25, 2e-7, "replace_one"), 3)
    ledger.charge(event, label="M_E independence")
    again = PrivacyLedger.load(path)
    assert again.entries[0].event == event
    assert again.spent_delta() == ledger.spent_delta() == pytest.approx(6e-7, rel=1e-15)
    assert again.spent() == ledger.spent()


# ---------------------------------------------------------------------------
# several names for one ledger file (issue 18, item 2)
# ---------------------------------------------------------------------------
CHARGE_BY_NAME_UNTIL_REFUSED = """
    import os, sys, time
    from fastdp.exceptions import BudgetExceededError, ValidationError
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    path, name, start = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        ledger = PrivacyLedger.load(path)
    except ValidationError as exc:
        print("refused", exc, flush=True)
        sys.exit(0)
    while not os.path.exists(start):
        time.sleep(0.001)
    granted = 0
    for i in range(15):
        try:
            ledger.charge(ev.PureEvent(0.1), f"{name}-{i}")
            granted += 1
        except BudgetExceededError:
            pass
        except ValidationError as exc:
            print("refused", exc, flush=True)
            sys.exit(0)
    print(granted, flush=True)
"""


def _race_two_names(tmp_path, first, second):
    """Two processes charge one budget of 1.0 (ten charges of 0.1) through two names."""
    start = tmp_path / "start"
    children = [_spawn(CHARGE_BY_NAME_UNTIL_REFUSED, name, tag, start)
                for name, tag in ((first, "a"), (second, "b"))]
    time.sleep(0.5)
    start.write_text("go")
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out.strip())
    return outputs


@pytest.mark.skipif(not POSIX, reason="flock and symbolic links are POSIX")
def test_a_symlinked_ledger_is_one_budget(tmp_path):
    real_dir, link_dir = tmp_path / "real", tmp_path / "elsewhere"
    real_dir.mkdir()
    link_dir.mkdir()
    path = real_dir / "budget.json"
    link = link_dir / "alias.json"
    PrivacyLedger(1.0, 0.0, "pure", path=path)
    link.symlink_to(path)
    granted = _race_two_names(tmp_path, path, link)
    # one budget, never exceeded (the link used to be replaced by a file of its own,
    # with a lock of its own: both processes were granted the whole budget)
    assert sum(map(int, granted)) == 10
    assert link.is_symlink() and os.path.samefile(link, path)
    entries = PrivacyLedger.load(path).entries
    assert len(entries) == 10
    assert PrivacyLedger.load(link).spent() == PrivacyLedger.load(path).spent() <= 1.0
    assert not (link_dir / "alias.json.lock").exists()  # the lock is the real file's
    # a symlinked directory and a relative name reach the same file too
    (tmp_path / "dirlink").symlink_to(real_dir, target_is_directory=True)
    via_dir = PrivacyLedger.load(tmp_path / "dirlink" / "budget.json")
    with pytest.raises(BudgetExceededError):
        via_dir.charge(ev.PureEvent(0.1))


@pytest.mark.skipif(not POSIX, reason="hard links and flock are POSIX")
def test_a_hard_linked_ledger_is_refused(tmp_path):
    path, other = tmp_path / "budget.json", tmp_path / "second-name.json"
    ledger = PrivacyLedger(1.0, 0.0, "pure", path=path)
    ledger.charge(ev.PureEvent(0.5), "before the link")
    os.link(path, other)
    for name in (path, other):
        with pytest.raises(ValidationError, match="2 hard links"):
            PrivacyLedger.load(name)
    with pytest.raises(ValidationError, match="hard links"):
        ledger.charge(ev.PureEvent(0.5), "after the link")  # an open ledger notices too
    # two processes, one per name: neither may charge, so the budget cannot split
    outputs = _race_two_names(tmp_path, path, other)
    assert all(out.startswith("refused") and "hard links" in out for out in outputs), outputs
    os.unlink(other)
    assert [e.label for e in PrivacyLedger.load(path).entries] == ["before the link"]


# ---------------------------------------------------------------------------
# copies, clones and pickles charge the same budget (issue 22, item 2)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("backed", [False, True])
def test_copies_are_the_ledger_itself(tmp_path, backed):
    import copy

    ledger = PrivacyLedger(1.0, 0.0, "pure", path=tmp_path / "l.json" if backed else None)
    assert copy.copy(ledger) is ledger and copy.deepcopy(ledger) is ledger
    holder = {"ledger": ledger, "again": ledger}
    copied = copy.deepcopy(holder)
    assert copied["ledger"] is ledger and copied["again"] is ledger
    copy.deepcopy(ledger).charge(ev.PureEvent(0.4))
    assert ledger.spent() == 0.4


def test_in_memory_ledger_pickles_as_one_that_refuses_every_charge():
    import pickle

    ledger = PrivacyLedger(1.0, 1e-5)
    copy = pickle.loads(pickle.dumps(ledger))
    with pytest.raises(ValidationError, match="file-backed ledger"):
        copy.charge(ev.PureEvent(0.1))
    assert ledger.entries == ()


UNPICKLE_AND_CHARGE = """
    import pickle, sys
    from fastdp.privacy import events as ev

    ledger = pickle.loads(bytes.fromhex(sys.argv[1]))
    ledger.charge(ev.PureEvent(0.25), "from another process")
    print(len(ledger.entries), flush=True)
"""


def test_file_ledger_pickles_as_a_reference_to_its_file(tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(tmp_path)
    ledger = PrivacyLedger(1.0, 0.0, "pure", path="relative.json")
    ledger.charge(ev.PureEvent(0.25), "here")
    blob = pickle.dumps(ledger)
    assert b"records" not in blob and len(blob) < 1000  # a reference, not a snapshot
    again = pickle.loads(blob)
    assert again is not ledger and again.path == "relative.json"
    again.charge(ev.PureEvent(0.25), "through the copy")
    assert [e.label for e in ledger.entries] == ["here", "through the copy"]
    # another process with another working directory charges the same file
    child = _spawn(UNPICKLE_AND_CHARGE, blob.hex())
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert int(out) == 3 and ledger.spent() == 0.75
    with pytest.raises(BudgetExceededError):
        pickle.loads(blob).charge(ev.PureEvent(0.5))


def _unit_rows_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X /= 1.01 * np.linalg.norm(X, axis=1, keepdims=True)   # row norms <= 1
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def test_clone_gridsearch_and_cross_validation_charge_the_file(tmp_path):
    """Every fit of every clone is charged to the one file (it used to raise
    TypeError: cannot pickle '_thread.RLock' object)."""
    import pickle

    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score

    from fastdp.linear_model import DPLogisticRegression

    X, y = _unit_rows_data()
    path = tmp_path / "budget.json"
    ledger = PrivacyLedger(50.0, 1e-5, path=path)
    model = DPLogisticRegression(epsilon=0.1, normalize=True, ledger=ledger, random_state=0)
    clone(model).fit(X, y)
    assert len(PrivacyLedger.load(path).entries) == 1
    search = GridSearchCV(model, {"alpha": [0.01, 0.1]}, cv=2).fit(X, y)
    assert len(PrivacyLedger.load(path).entries) == 1 + 2 * 2 + 1  # 4 fits and the refit
    assert search.best_estimator_.ledger is ledger
    cross_val_score(model, X, y, cv=3)
    assert len(PrivacyLedger.load(path).entries) == 9
    pickle.loads(pickle.dumps(model)).fit(X, y)
    entries = PrivacyLedger.load(path).entries
    assert len(entries) == 10 and all(not e.pending for e in entries)
    assert all(e.label == "DPLogisticRegression" for e in entries)


@pytest.mark.skipif(not POSIX, reason="process pools are slow to start elsewhere")
def test_cross_validation_in_worker_processes_charges_the_file(tmp_path):
    from sklearn.model_selection import cross_val_score

    from fastdp.linear_model import DPLogisticRegression

    X, y = _unit_rows_data()
    path = tmp_path / "budget.json"
    model = DPLogisticRegression(epsilon=0.1, normalize=True, random_state=0,
                                 ledger=PrivacyLedger(50.0, 1e-5, path=path))
    cross_val_score(model, X, y, cv=2, n_jobs=2)  # the estimator is pickled to the workers
    assert len(PrivacyLedger.load(path).entries) == 2


def test_in_memory_ledger_is_shared_by_clones_not_forked():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    from fastdp.linear_model import DPLogisticRegression

    X, y = _unit_rows_data()
    ledger = PrivacyLedger(50.0, 1e-5)
    model = DPLogisticRegression(epsilon=0.1, normalize=True, ledger=ledger, random_state=0)
    assert clone(model).ledger is ledger
    GridSearchCV(model, {"alpha": [0.01, 0.1]}, cv=2).fit(X, y)
    assert len(ledger.entries) == 5


# ---------------------------------------------------------------------------
# damaged and hand-edited files (issue 18, item 5)
# ---------------------------------------------------------------------------
def _valid_ledger(path):
    ledger = PrivacyLedger(5.0, 0.0, "pure", path=path)
    ledger.charge(ev.SelfComposedEvent(ev.PureEvent(0.5), 2), "first")
    ledger.charge(ev.PureEvent(0.5), "second")
    ledger.reserve(ev.PureEvent(0.25), "third").commit()
    return ledger


DAMAGED = {
    "not_utf8": lambda text: b"\xff\xfe\x00garbage",
    "truncated": lambda text: text.encode()[: len(text) // 2],
    "empty": lambda text: b"",
    "deep_nesting": lambda text: b"[" * 200000 + b"]" * 200000,
    "nan": lambda text: text.replace('"delta": 0.0', '"delta": NaN').encode(),
    "huge_number": lambda text: text.replace('"delta": 0.0', '"delta": 1e999').encode(),
    "duplicate_key": lambda text: text.replace('"head":', '"delta": 0.0, "head":').encode(),
    "records_not_a_list": lambda text: json.dumps(
        dict(json.loads(text), records={"0": 1})).encode(),
    "record_not_an_object": lambda text: json.dumps(
        dict(json.loads(text), records=json.loads(text)["records"] + [5])).encode(),
    "top_level_list": lambda text: b"[1, 2, 3]",
    "version_string": lambda text: json.dumps(dict(json.loads(text), version="3")).encode(),
    "version_future": lambda text: json.dumps(dict(json.loads(text), version=4)).encode(),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_files_give_one_clear_error_naming_the_file(tmp_path, name):
    path = tmp_path / "ledger.json"
    _valid_ledger(path)
    path.write_bytes(DAMAGED[name](path.read_text()))
    for opener in (lambda: PrivacyLedger.load(path),
                   lambda: PrivacyLedger(5.0, 0.0, "pure", path=path)):
        with pytest.raises(ValidationError) as info:
            opener()
        assert str(path) in str(info.value)


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))


def _set_count_zero(data):
    data["records"][1]["event"]["count"] = 0


HAND_EDITS = {
    "entry_removed": lambda d: d["records"].pop(2),
    "last_entries_cut": lambda d: d["records"].__delitem__(slice(3, None)),
    "count_set_to_zero": _set_count_zero,
    "label_changed": lambda d: d["records"][2].__setitem__("label", "someone else"),
    "records_swapped": lambda d: d["records"].insert(1, d["records"].pop(2)),
    "budget_in_first_record": lambda d: d["records"][0].__setitem__("epsilon", 1000.0),
    "forged_record_appended": lambda d: d["records"].append(
        {"seq": len(d["records"]), "type": "cancel", "id": "x", "timestamp": 1.0,
         "prev": d["head"], "hash": "0" * 64}),
    "reservation_cancelled_by_hand": lambda d: d["records"].__delitem__(slice(3, None)),
    "head_rewritten": lambda d: d.__setitem__("head", d["records"][2]["hash"]),
}


@pytest.mark.parametrize("name", sorted(HAND_EDITS))
def test_hand_edits_are_detected(tmp_path, name):
    path = tmp_path / "ledger.json"
    _valid_ledger(path)
    _edit(path, HAND_EDITS[name])
    with pytest.raises(ValidationError, match="integrity check|outside fastdp") as info:
        PrivacyLedger.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValidationError):
        PrivacyLedger(5.0, 0.0, "pure", path=path).charge(ev.PureEvent(0.1))


def test_a_budget_raised_by_hand_is_refused_unless_reopened_with_it(tmp_path):
    path = tmp_path / "ledger.json"
    _valid_ledger(path)
    spent = PrivacyLedger.load(path).spent()
    _edit(path, lambda d: d.update(epsilon=1000.0))
    for opener in (lambda: PrivacyLedger.load(path), lambda: PrivacyLedger.load(path, epsilon=5.0),
                   lambda: PrivacyLedger(1000.0, 0.0, "pure", path=path)):
        with pytest.raises(ValidationError, match="change_budget=True"):
            opener()
    # re-opened explicitly with the new budget: the change is recorded in the chain
    ledger = PrivacyLedger.load(path, epsilon=1000.0, change_budget=True)
    assert ledger.epsilon == 1000.0 and ledger.spent() == spent
    data = json.loads(path.read_text())
    assert data["records"][-1]["type"] == "budget" and data["records"][-1]["epsilon"] == 1000.0
    assert PrivacyLedger.load(path).epsilon == 1000.0


def test_changing_a_budget_explicitly(tmp_path):
    path = tmp_path / "ledger.json"
    _valid_ledger(path)
    with pytest.raises(ValidationError, match="refusing"):
        PrivacyLedger(2.0, 0.0, "pure", path=path)
    lowered = PrivacyLedger(2.0, 0.0, "pure", path=path, change_budget=True)
    assert lowered.remaining() == pytest.approx(0.25)
    with pytest.raises(BudgetExceededError):
        lowered.charge(ev.PureEvent(1.0))
    assert [r["type"] for r in json.loads(path.read_text())["records"]] == [
        "open", "charge", "charge", "reserve", "commit", "budget"]
    # an old handle with the previous budget refuses the file instead of charging it
    with pytest.raises(ValidationError, match="refusing"):
        PrivacyLedger.load(path, epsilon=5.0)
    same = PrivacyLedger(2.0, 0.0, "pure", path=path, change_budget=True)  # nothing to change
    assert len(json.loads(path.read_text())["records"]) == 6 and same.spent() == 1.75


@pytest.mark.skipif(not POSIX, reason="permission bits are POSIX")
def test_charges_keep_the_file_mode(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = PrivacyLedger(5.0, 0.0, "pure", path=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # new ledgers are private
    os.chmod(path, 0o640)
    ledger.charge(ev.PureEvent(0.1))
    ledger.reserve(ev.PureEvent(0.1)).cancel()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_reading_takes_no_lock_and_writes_nothing(tmp_path, monkeypatch):
    from fastdp.privacy import ledger as ledger_module

    path = tmp_path / "ledger.json"
    _valid_ledger(path)
    (tmp_path / "ledger.json.lock").unlink()
    before = sorted(os.listdir(tmp_path)), path.read_bytes()

    def no_lock(*args, **kwargs):
        raise AssertionError("a read took the write lock")

    monkeypatch.setattr(ledger_module, "_exclusive_lock", no_lock)
    ledger = PrivacyLedger.load(path)
    ledger.spent(), ledger.entries, ledger.pending(), ledger.remaining()
    PrivacyLedger(5.0, 0.0, "pure", path=path).spent()
    assert (sorted(os.listdir(tmp_path)), path.read_bytes()) == before


READ_ONLY_DIRECTORY = """
    import os, sys
    from fastdp.exceptions import ValidationError
    from fastdp.privacy import events as ev
    from fastdp.privacy.ledger import PrivacyLedger

    path = sys.argv[1]
    PrivacyLedger(1.0, 0.0, "pure").charge(ev.PureEvent(0.1))  # import everything first
    if os.geteuid() == 0:  # root writes anywhere: become nobody
        os.setgid(65534)
        os.setuid(65534)
    ledger = PrivacyLedger.load(path)
    print("spent", ledger.spent(), len(ledger.entries), flush=True)
    try:
        ledger.charge(ev.PureEvent(0.1))
    except ValidationError as exc:
        print("refused:", exc, flush=True)
"""


@pytest.mark.skipif(not POSIX, reason="permission bits are POSIX")
def test_a_ledger_in_a_read_only_directory_can_be_read():
    import shutil
    import tempfile

    directory = pathlib.Path(tempfile.mkdtemp(dir="/tmp"))  # reachable by any user
    path = directory / "ledger.json"
    try:
        _valid_ledger(path)
        (directory / "ledger.json.lock").unlink()
        os.chmod(path, 0o644)
        os.chmod(directory, 0o555)
        child = _spawn(READ_ONLY_DIRECTORY, path)
        out, err = child.communicate(timeout=120)
        lock_created = (directory / "ledger.json.lock").exists()
    finally:
        os.chmod(directory, 0o755)
        shutil.rmtree(directory)
    assert child.returncode == 0, err
    assert "spent 1.75 3" in out
    assert "refused: cannot write privacy ledger" in out
    assert not lock_created


# ---------------------------------------------------------------------------
# releases without a guarantee (issue 18, item 14)
# ---------------------------------------------------------------------------
def test_no_guarantee_events_are_refused_unless_the_caller_opts_in(tmp_path):
    no_guarantee = ev.NoGuaranteeEvent(0.5, "metropolis")
    gaussian = ev.GaussianEvent(2.0)
    ledger = PrivacyLedger(5.0, 1e-5, path=str(tmp_path / "ledger.json"))
    before = (tmp_path / "ledger.json").read_bytes()
    for event in (no_guarantee, ev.ComposedEvent((gaussian, no_guarantee)),
                  ev.SelfComposedEvent(no_guarantee, 3)):
        with pytest.raises(PrivacyAnalysisError, match="no privacy guarantee"):
            ledger.charge(event, "mcmc")
        with pytest.raises(PrivacyAnalysisError, match="no privacy guarantee"):
            ledger.reserve(event, "mcmc")
        with pytest.raises(PrivacyAnalysisError, match="no privacy guarantee"):
            ledger.check(event)
        with pytest.raises(PrivacyAnalysisError):
            ledger.charge(event, "mcmc", allow_no_guarantee="yes")   # only True opts in
    assert (tmp_path / "ledger.json").read_bytes() == before
    ledger.charge(gaussian, "fit")
    alone = ledger.spent()
    entry = ledger.charge(ev.ComposedEvent((gaussian, no_guarantee)), "mixed",
                          allow_no_guarantee=True)
    # only the part with a guarantee is accounted; the report says the rest is unbounded
    assert ledger.spent() == pytest.approx(ledger.accountant.epsilon(
        ev.SelfComposedEvent(gaussian, 2), 1e-5))
    assert ledger.spent() > alone
    assert ledger.no_guarantee_entries() == (entry,)
    assert "NO GUARANTEE" in ledger.summary() and "not bounded" in ledger.summary()
    assert "no_guarantee=1" in repr(ledger)
    reloaded = PrivacyLedger.load(str(tmp_path / "ledger.json"))
    assert reloaded.entries[-1].event == entry.event
    assert reloaded.spent() == pytest.approx(ledger.spent())
    # a further charge with a guarantee is still checked against the budget
    with pytest.raises(BudgetExceededError):
        reloaded.charge(ev.GaussianEvent(0.05), "too much")


def test_cli_ledger_show_flags_releases_without_a_guarantee(tmp_path):
    from fastdp.cli import main

    path = str(tmp_path / "ledger.json")
    ledger = PrivacyLedger(5.0, 1e-5, path=path)
    ledger.charge(ev.GaussianEvent(2.0), "fit")
    ledger.charge(ev.NoGuaranteeEvent(0.5, "hit_and_run"), "mcmc", allow_no_guarantee=True)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ledger", "show", path]) == 0
    text = out.getvalue()
    assert "NO GUARANTEE" in text and "epsilon alone: NO GUARANTEE" in text
