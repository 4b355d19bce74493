"""Failure safety of a fit: interrupted fits charge nothing and release nothing.

``fastdp.linear_model`` reserves the fit's privacy event in the ledger before
training, commits it when training ends and cancels it when the user
interrupts training (KeyboardInterrupt).  Any other failure keeps the charge
(its occurrence may depend on the private data).  A process killed outright
leaves its reservation pending, counted as spent.
"""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastdp.solvers.scd as scd_module
from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.privacy.ledger import PrivacyLedger

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
POSIX = sys.platform != "win32"


def _data(n=300, m=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = X @ rng.normal(size=m) + 0.1 * rng.normal(size=n)
    return X, y


def _interrupt_after_epochs(monkeypatch, epochs, exception):
    """Make the estimators' dual_dpscd raise ``exception`` from its per-epoch callback."""
    original = scd_module.dual_dpscd
    seen = []

    def interrupted(*args, **kwargs):
        estimator_callback = kwargs.pop("callback", None)

        def callback(state):
            seen.append(state["epoch"])
            if state["epoch"] >= epochs:
                raise exception
            if estimator_callback is not None:
                estimator_callback(state)

        return original(*args, callback=callback, **kwargs)

    monkeypatch.setattr(scd_module, "dual_dpscd", interrupted)
    return seen


@pytest.mark.parametrize("backed", [False, True])
def test_keyboard_interrupt_charges_and_releases_nothing(monkeypatch, tmp_path, backed):
    path = tmp_path / "ledger.json" if backed else None
    ledger = PrivacyLedger(5.0, 1e-5, path=path)
    X, y = _data()
    seen = _interrupt_after_epochs(monkeypatch, 2, KeyboardInterrupt())
    model = DPRidge(solver="dpscd", epsilon=1.0, epochs=5, ledger=ledger, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, y)
    assert seen == [1, 2]                       # training really started, then stopped
    assert not hasattr(model, "coef_")          # nothing released
    assert len(ledger.entries) == 0 and ledger.spent() == 0.0 and ledger.pending() == ()
    if backed:
        assert len(PrivacyLedger.load(path).entries) == 0
    # the whole budget is still there: the same fit, uninterrupted, is charged once
    monkeypatch.undo()
    model.fit(X, y)
    assert len(ledger.entries) == 1 and not ledger.entries[0].pending
    assert ledger.spent() == pytest.approx(model.epsilon_, rel=1e-9)


def test_other_failures_during_training_keep_the_charge(monkeypatch):
    ledger = PrivacyLedger(5.0, 1e-5)
    X, y = _data()
    _interrupt_after_epochs(monkeypatch, 1, FloatingPointError("diverged"))
    model = DPRidge(solver="dpscd", epsilon=1.0, epochs=3, ledger=ledger, random_state=0)
    with pytest.raises(FloatingPointError) as info:
        model.fit(X, y)
    assert any("keeps this fit's charge" in note for note in info.value.__notes__)
    assert not hasattr(model, "coef_")
    assert len(ledger.entries) == 1 and not ledger.entries[0].pending
    assert ledger.spent() > 0


def test_refused_fit_trains_nothing(monkeypatch):
    ledger = PrivacyLedger(0.5, 1e-5)
    X, y = _data()
    seen = _interrupt_after_epochs(monkeypatch, 99, RuntimeError("never"))
    model = DPLogisticRegression(solver="dpscd", epsilon=1.0, epochs=2, ledger=ledger, random_state=0)
    from fastdp.exceptions import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        model.fit(X, np.sign(y))
    assert seen == [] and len(ledger.entries) == 0


# ----------------------------------------------------------------------------
# real signals in a child process
# ----------------------------------------------------------------------------
LONG_FIT = """
    import signal
    import sys
    import numpy as np
    # a process started in the background by a non-interactive shell inherits SIGINT
    # ignored (POSIX), and Python then keeps it ignored: the fit would run to its end
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import fastdp.solvers.scd as scd
    from fastdp.linear_model import DPRidge
    from fastdp.privacy.ledger import PrivacyLedger

    original = scd.dual_dpscd

    def announced(*args, **kwargs):
        def callback(state):
            if state["epoch"] == 1:
                print("training", flush=True)
        kwargs.pop("callback", None)
        return original(*args, callback=callback, **kwargs)

    scd.dual_dpscd = announced
    ledger = PrivacyLedger.load(sys.argv[1])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 40))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = X @ rng.normal(size=40)
    model = DPRidge(solver="dpscd", noise_multiplier=50.0, epochs=100000, batch_size=100, ledger=ledger,
                    random_state=0)
    try:
        model.fit(X, y)
    except KeyboardInterrupt:
        print("interrupted", hasattr(model, "coef_"), flush=True)
        sys.exit(3)
    print("finished", flush=True)
"""


def _spawn(script, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(REPO_ROOT))


def _wait_for_training(child):
    line = child.stdout.readline()
    if line.strip() != "training":
        child.kill()
        raise AssertionError(f"child did not start training: {line!r} {child.stderr.read()}")


@pytest.mark.skipif(not POSIX, reason="SIGINT/SIGKILL delivery is POSIX")
def test_real_signals_during_a_fit(tmp_path):
    """SIGINT: the reservation is cancelled, nothing charged.  SIGKILL: the process
    cannot say whether it released anything, so its reservation stays, counted.

    Both children run at once (their start-up dominates the test's time).
    """
    interrupted_path, killed_path = tmp_path / "interrupted.json", tmp_path / "killed.json"
    for path in (interrupted_path, killed_path):
        PrivacyLedger(1000.0, 1e-5, path=path)
    children = [_spawn(LONG_FIT, interrupted_path), _spawn(LONG_FIT, killed_path)]
    try:
        for child in children:
            _wait_for_training(child)
        # while training, the reservation is visible to every process and counts as spent
        during = PrivacyLedger.load(interrupted_path)
        assert len(during.pending()) == 1 and during.spent() > 0
        children[0].send_signal(signal.SIGINT)
        os.kill(children[1].pid, signal.SIGKILL)
        out, err = children[0].communicate(timeout=120)
        children[1].wait(timeout=30)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert children[0].returncode == 3, err
    assert out.strip().splitlines()[-1] == "interrupted False"
    after = PrivacyLedger.load(interrupted_path)
    assert after.entries == () and after.spent() == 0.0
    killed = PrivacyLedger.load(killed_path)
    assert len(killed.pending()) == 1 and killed.pending()[0].label == "DPRidge"
    assert killed.spent() > 0


def test_interrupt_after_a_callback_saw_released_states_keeps_the_charge(monkeypatch):
    """Once a user callback received a released (noisy) state, stopping costs the budget."""
    ledger = PrivacyLedger(5.0, 1e-5)
    X, y = _data()
    _interrupt_after_epochs(monkeypatch, 3, KeyboardInterrupt())
    seen = []
    model = DPRidge(solver="dpscd", epsilon=1.0, epochs=5, ledger=ledger, random_state=0, callback=seen.append)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, y)
    assert len(seen) == 2
    assert len(ledger.entries) == 1 and not ledger.pending()
