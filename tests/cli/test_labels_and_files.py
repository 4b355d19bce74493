"""One label convention for a file however the command line names it; label sets a model
does not know are refused; compressed formats fastdp does not read; ``convert dataset:``;
exit codes (1: an input, 2: the command line); a progress bar on a terminal by default."""
import bz2
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pytest

from fastdp.datasets import load_dataset, load_libsvm
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression

from _files import run, write_libsvm

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    """A data home holding a small ``phishing/phishing.bz2`` with 0/1 labels, 68 columns."""
    plain = write_libsvm(tmp_path / "phishing.svm", n=400, d=68)
    (tmp_path / "home" / "phishing").mkdir(parents=True)
    packed = tmp_path / "home" / "phishing" / "phishing.bz2"
    packed.write_bytes(bz2.compress(plain.read_bytes()))
    monkeypatch.setenv("FASTDP_DATA", str(tmp_path / "home"))
    return packed


def _accuracy(out):
    line = next(t for t in out.splitlines() if t.startswith("utility"))
    return float(line.split()[2])


def test_a_file_and_its_dataset_name_give_the_same_labels(tmp_path, capsys, data_home):
    status, _, _ = run(capsys, "train", data_home, "--model", "logistic", "--seed", "0",
                       "--out", tmp_path / "model")
    assert status == 0
    by_path = run(capsys, "evaluate", tmp_path / "model", data_home)
    by_name = run(capsys, "evaluate", tmp_path / "model", "dataset:phishing")
    assert by_path[0] == by_name[0] == 0
    assert _accuracy(by_name[1]) == _accuracy(by_path[1]) > 0.6
    X, y = load_dataset("phishing", labels="file")
    np.testing.assert_array_equal(y, load_libsvm(data_home)[1])
    assert set(np.unique(load_dataset("phishing")[1])) == {-1.0, 1.0}   # the mapped default


def test_evaluate_refuses_labels_of_another_convention(tmp_path, capsys):
    write_libsvm(tmp_path / "train.svm", labels=(0, 1))
    write_libsvm(tmp_path / "pm.svm", labels=(-1, 1), seed=1)
    assert run(capsys, "train", tmp_path / "train.svm", "--model", "svm", "--seed", "0",
               "--out", tmp_path / "model")[0] == 0
    status, out, err = run(capsys, "evaluate", tmp_path / "model", tmp_path / "pm.svm")
    assert status == 1 and "utility" not in out
    assert "labels {-1, 1}" in err and "classes are {0, 1}" in err


def test_score_refuses_labels_outside_classes():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = (X[:, 0] > 0).astype(float)
    model = DPLogisticRegression(epsilon=np.inf).fit(X, y)
    assert model.score(X, y) > 0.9
    assert model.score(X[y == 1], y[y == 1]) > 0.9      # a subset of the classes is fine
    with pytest.raises(ValidationError, match="another convention"):
        model.score(X, 2 * y - 1)


def test_labels_file_is_only_for_libsvm_datasets():
    with pytest.raises(ValidationError, match="not a LIBSVM file"):
        load_dataset("bank", labels="file")
    with pytest.raises(ValidationError, match="'mapped' or 'file'"):
        load_dataset("phishing", labels="pm1")


ZSTD_FRAME = bytes.fromhex("28b52ffd2000210000") + b"1 1:1\n"


@pytest.mark.parametrize("command", ["train", "convert"])
def test_a_zstd_file_is_refused_as_such(tmp_path, capsys, command):
    path = tmp_path / "data.svm.zst"
    path.write_bytes(ZSTD_FRAME)
    args = ["--model", "logistic"] if command == "train" else [tmp_path / "out.fdp"]
    status, _, err = run(capsys, command, path, *args)
    assert status == 1 and "zstd" in err and "line 1" not in err


def test_convert_reads_a_named_dataset(tmp_path, capsys, data_home):
    status, out, _ = run(capsys, "convert", "dataset:phishing", tmp_path / "ph.fdp")
    assert status == 0 and "400 rows, 68 features" in out
    from fastdp.io.binary import open_binary

    X, y = open_binary(tmp_path / "ph.fdp")
    X0, y0 = load_libsvm(data_home, n_features=68)
    np.testing.assert_array_equal(y, y0)
    assert abs(X - X0).max() == 0


def test_exit_codes_input_errors_1_command_line_errors_2(tmp_path, capsys):
    write_libsvm(tmp_path / "train.svm")
    write_libsvm(tmp_path / "wide.svm", d=9)
    run(capsys, "train", tmp_path / "train.svm", "--model", "logistic", "--out", tmp_path / "m")
    assert run(capsys, "evaluate", tmp_path / "m", tmp_path / "wide.svm")[0] == 1
    assert run(capsys, "evaluate", tmp_path / "nosuch.json", tmp_path / "train.svm")[0] == 1
    assert run(capsys, "ledger", "show", tmp_path / "nosuch.json")[0] == 1
    assert run(capsys, "train", tmp_path / "train.svm", "--model", "logistic",
               "--budget", "3")[0] == 2                       # --budget without --ledger
    with pytest.raises(SystemExit) as info:
        run(capsys, "train", tmp_path / "train.svm")          # --model missing
    assert info.value.code == 2
    docs = (REPO_ROOT / "docs" / "cli.md").read_text()
    assert "status 1" in docs and "status 2" in docs


def _train_on_a_terminal(path, *extra):
    """``python -m fastdp train`` with stderr on a pseudo-terminal: (status, stdout, what the
    terminal shows)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 x 100
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "fastdp", "train", str(path), "--model",
                             "logistic", "--solver", "dpsgd", "--epochs", "5", *extra],
                            stdout=subprocess.PIPE, stderr=terminal, env=env, cwd=REPO_ROOT)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=120)
    os.close(controller)
    return proc.returncode, proc.stdout.read().decode(), shown.decode(errors="replace")


def test_a_fit_shows_progress_on_a_terminal(tmp_path):
    path = write_libsvm(tmp_path / "train.svm")
    status, out, shown = _train_on_a_terminal(path)
    assert status == 0 and "privacy" in out
    assert "epoch" in shown
    assert "DPLogisticRegression: solver=" not in out     # the summary line is --verbose's
