"""A ledger file refuses odd files and notices rollback (issue 34).

FIFOs and directories are refused without hanging (in a child process with a
timeout); a ledger replaced by an older copy of itself, cut at the tail with
its head hash reset, or deleted and re-created, is refused.
"""

import json
import os
import shutil

import pytest

from fastdp.exceptions import ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy._ledger_chain import _file_payload
from fastdp.privacy.ledger import PrivacyLedger

from tests._limited_child import run_limited


def _ledger(tmp_path, name="l.json"):
    return PrivacyLedger(1.0, 1e-5, path=str(tmp_path / name))


@pytest.mark.parametrize("how", ["load", "open", "show"])
def test_a_fifo_ledger_is_refused_without_hanging(tmp_path, how):
    path = tmp_path / "l.json"
    os.mkfifo(path)
    code = {
        "load": "from fastdp.privacy.ledger import PrivacyLedger as L; L.load(sys.argv[1])",
        "open": "from fastdp.privacy.ledger import PrivacyLedger as L; L(1.0, 1e-5, "
                "path=sys.argv[1])",
        "show": "from fastdp.cli.entry import main; sys.exit(main(['ledger', 'show', "
                "sys.argv[1]]))",
    }[how]
    done = run_limited(f"""
        import sys
        from fastdp.exceptions import ValidationError
        try:
            {code}
        except ValidationError as exc:
            print("refused:", exc)
    """, args=[str(path)], timeout=60)
    assert "not a regular file" in done.stdout + done.stderr


def test_a_lock_path_that_is_a_directory_is_a_clear_error(tmp_path):
    ledger = _ledger(tmp_path)
    lock = os.path.realpath(ledger.path) + ".lock"
    os.unlink(lock)
    os.mkdir(lock)
    with pytest.raises(ValidationError, match="directory"):
        ledger.charge(ev.PureEvent(0.1))


def test_an_older_copy_put_back_is_refused(tmp_path):
    ledger = _ledger(tmp_path)
    ledger.charge(ev.PureEvent(0.3))
    shutil.copy(ledger.path, tmp_path / "old.json")
    ledger.charge(ev.PureEvent(0.3))
    shutil.copy(tmp_path / "old.json", ledger.path)
    with pytest.raises(ValidationError, match="rolled back"):
        PrivacyLedger.load(ledger.path)
    with pytest.raises(ValidationError, match="rolled back"):
        ledger.charge(ev.PureEvent(0.3))


def test_a_cut_tail_with_its_head_reset_is_refused(tmp_path):
    ledger = _ledger(tmp_path)
    ledger.charge(ev.PureEvent(0.3))
    reservation = ledger.reserve(ev.PureEvent(0.3))  # pending: counted as spent
    data = json.loads(open(ledger.path).read())
    budget = {k: data[k] for k in ("epsilon", "delta", "accountant", "accountant_options")}
    with open(ledger.path, "w") as handle:  # the chain is valid, only shorter
        json.dump(_file_payload(budget, data["records"][:-1]), handle)
    with pytest.raises(ValidationError, match="rolled back"):
        PrivacyLedger.load(ledger.path)
    assert reservation.state == "pending"


def test_a_deleted_ledger_is_not_silently_restarted(tmp_path):
    ledger = _ledger(tmp_path)
    ledger.charge(ev.PureEvent(0.9))
    os.unlink(ledger.path)
    with pytest.raises(ValidationError, match="deleted or moved"):
        _ledger(tmp_path)
    os.unlink(os.path.realpath(ledger.path) + ".generation")  # a new budget, on purpose
    assert _ledger(tmp_path).spent() == 0.0


def test_normal_use_and_a_ledger_without_generation_still_open(tmp_path):
    ledger = _ledger(tmp_path)
    for _ in range(3):
        ledger.charge(ev.PureEvent(0.1))
    assert len(PrivacyLedger.load(ledger.path).entries) == 3
    os.unlink(os.path.realpath(ledger.path) + ".generation")  # e.g. written by an older fastdp
    assert len(PrivacyLedger.load(ledger.path).entries) == 3
