"""Tests of fastdp.privacy.ledger: budget arithmetic, refusal, persistence, crashes, concurrency."""
import dataclasses
import json
import os
import pathlib
import signal
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
    return [
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
    ]


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
    assert len(data["entries"]) == 4
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
        assert data["version"] == 2 and data["entries"][0]["status"] == "committed"
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


def test_version_one_files_are_read_and_upgraded(tmp_path):
    path = tmp_path / "old.json"
    old = {"format": LEDGER_FORMAT, "version": 1, "epsilon": 2.0, "delta": 0.0,
           "accountant": "pure", "accountant_options": {},
           "entries": [{"event": event_to_dict(ev.PureEvent(0.5)), "label": "old fit",
                        "timestamp": 1.0}]}
    path.write_text(json.dumps(old))
    ledger = PrivacyLedger.load(path)
    assert ledger.spent() == 0.5 and not ledger.entries[0].pending
    ledger.charge(ev.PureEvent(0.25), "new fit")
    assert json.loads(path.read_text())["version"] == 2
    bad = dict(old, entries=[dict(old["entries"][0], status="reserved")])  # reserved needs an id
    path.write_text(json.dumps(bad))
    with pytest.raises(ValidationError):
        PrivacyLedger.load(path)


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
    ledger = PrivacyLedger(3.0, 1e-5)  # RDP
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
