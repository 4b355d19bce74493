"""``fastdp train`` checks every input it can before the ledger is charged (a mistake costs
no budget), and what it says about labels, warnings, small epsilons and Ctrl-C."""
import json

import numpy as np
import pytest

from fastdp.privacy.ledger import PrivacyLedger

from _files import run, write_libsvm


@pytest.fixture
def train_file(tmp_path):
    return write_libsvm(tmp_path / "train.svm")


def _spent(ledger_path):
    return PrivacyLedger.load(ledger_path).spent()


def _existing_ledger(tmp_path):
    path = tmp_path / "l.json"
    PrivacyLedger(3.0, 1e-5, path=path)
    assert path.exists() and _spent(path) == 0
    return path


@pytest.mark.parametrize("mistake", ["missing", "malformed", "wider", "other labels", "out"])
def test_a_bad_test_file_or_output_path_charges_nothing(tmp_path, capsys, train_file, mistake):
    ledger = _existing_ledger(tmp_path)
    test = tmp_path / "test.svm"
    out = tmp_path / "model"
    if mistake == "malformed":
        test.write_text("1 1:0.5\n0 2:x\n")
    elif mistake == "wider":
        write_libsvm(test, d=9)
    elif mistake == "other labels":
        write_libsvm(test, labels=(-1, 1))
    else:
        write_libsvm(test)
    if mistake == "out":
        (tmp_path / "blocker").write_text("a file, not a directory")
        out = tmp_path / "blocker" / "model"
    status, stdout, err = run(capsys, "train", train_file, "--model", "logistic",
                              "--test", test if mistake != "missing" else tmp_path / "nosuch.svm",
                              "--ledger", ledger, "--out", out, "--seed", "0")
    assert status == 1 and stdout == ""
    assert err.startswith("fastdp: error:") and len(err.strip().splitlines()) == 1
    assert _spent(ledger) == 0
    assert not (tmp_path / "model.json").exists()


def test_a_new_ledger_is_not_created_when_an_input_fails(tmp_path, capsys, train_file):
    status, _, err = run(capsys, "train", train_file, "--model", "logistic", "--test",
                         tmp_path / "nosuch.svm", "--ledger", tmp_path / "l.json", "--budget", "3")
    assert status == 1 and "no such file" in err
    assert not (tmp_path / "l.json").exists()


def test_a_good_run_still_charges_and_saves(tmp_path, capsys, train_file):
    ledger = _existing_ledger(tmp_path)
    write_libsvm(tmp_path / "test.svm", seed=1)
    status, stdout, _ = run(capsys, "train", train_file, "--model", "logistic", "--epsilon", "1",
                            "--test", tmp_path / "test.svm", "--ledger", ledger,
                            "--out", tmp_path / "model", "--seed", "0")
    assert status == 0 and "test accuracy" in stdout
    assert 1.0 * (1 - 1e-3) <= _spent(ledger) <= 1.0   # calibrated to 1 (never above)
    assert json.loads((tmp_path / "model.json").read_text())


def test_regression_targets_are_refused_by_a_classifier(tmp_path, capsys):
    data = write_libsvm(tmp_path / "reg.svm", targets=lambda X, rng: X @ rng.normal(size=6) * 10)
    status, _, err = run(capsys, "train", data, "--model", "logistic")
    assert status == 1 and "regression targets" in err and "--model ridge" in err


def test_many_integer_labels_give_one_warning_line(tmp_path, capsys):
    data = write_libsvm(tmp_path / "int.svm", n=400,
                        targets=lambda X, rng: rng.integers(0, 60, size=X.shape[0]))
    status, _, err = run(capsys, "train", data, "--model", "logistic", "--epsilon", "inf")
    assert status == 0
    warning = [line for line in err.splitlines() if "distinct labels" in line]
    assert len(warning) == 1 and warning[0].startswith("fastdp: warning:")
    assert "--model ridge" in warning[0]


def test_weak_delta_warning_is_one_clean_line(tmp_path, capsys, train_file):
    status, _, err = run(capsys, "train", train_file, "--model", "logistic", "--delta", "0.5",
                         "--seed", "0")
    assert status == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fastdp: warning: delta = 0.5")
    assert ".py:" not in err and "model.fit" not in err


def test_a_zero_epsilon_bound_is_explained(tmp_path, capsys, train_file):
    status, out, _ = run(capsys, "train", train_file, "--model", "logistic", "--epsilon",
                         "1e-9", "--seed", "0")
    assert status == 0
    line = next(t for t in out.splitlines() if t.strip().startswith("epsilon"))
    assert "target 1e-09" in line
    if line.split()[1] == "0":
        assert "(0, delta)-DP" in out


@pytest.mark.parametrize("text, message", [("1e400", "overflows"), ("nan", "not a number"),
                                           ("1e-400", "> 0")])
def test_numbers_that_are_not_finite_are_refused(tmp_path, capsys, train_file, text, message):
    with pytest.raises(SystemExit) as info:
        run(capsys, "train", train_file, "--model", "logistic", "--epsilon", text)
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "--epsilon" in err


def test_budget_minutes_must_be_a_finite_number(capsys):
    with pytest.raises(SystemExit) as info:
        run(capsys, "reproduce", "seed000", "--budget-min", "nan")
    assert info.value.code == 2 and "not a number" in capsys.readouterr().err


def _interrupt_after_release(self, solver, Xm, y, loss, settings, *rest):
    settings.callback({"epoch": 1, "n_iter": 1, "coef": np.zeros(Xm.shape[1])})
    raise KeyboardInterrupt


def _interrupt_at_once(self, *args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("interrupt, stays", [(_interrupt_after_release, True),
                                              (_interrupt_at_once, False)])
def test_ctrl_c_says_what_became_of_the_charge(tmp_path, capsys, monkeypatch, train_file,
                                               interrupt, stays):
    from fastdp.linear_model import DPLogisticRegression

    monkeypatch.setattr(DPLogisticRegression, "_run_fits", interrupt)
    ledger = _existing_ledger(tmp_path)
    status, _, err = run(capsys, "train", train_file, "--model", "logistic", "--verbose",
                         "--ledger", ledger, "--out", tmp_path / "model")
    assert status == 130
    assert _spent(ledger) == (pytest.approx(1.0, rel=1e-3) if stays else 0)
    expected = "its charge stays in the ledger" if stays else "nothing was charged"
    assert expected in err and "no model was saved" in err
    assert not (tmp_path / "model.json").exists()
