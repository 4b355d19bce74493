"""The ``fastdp`` command line: end to end in subprocesses, plus in-process error paths.

Every user mistake must give exactly one line on stderr, starting with the
program name, and a non-zero exit status; never a traceback.
"""
import importlib.machinery
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from fastdp import cli
from fastdp.persistence import load_model
from fastdp.privacy import calibrate_noise_multiplier, compute_epsilon
from fastdp.privacy.ledger import PrivacyLedger

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=None):
    """Run ``python -m fastdp ARGS`` as a user would; returns the CompletedProcess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "fastdp", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def assert_one_line_error(proc, pattern, status=None):
    assert proc.returncode != 0, proc.stdout
    if status is not None:
        assert proc.returncode == status
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("fastdp")
    assert re.search(pattern, lines[0]), lines[0]


def _value(text, label):
    match = re.search(rf"{label}\s+([-+0-9.eE]+)", text)
    assert match, (label, text)
    return float(match.group(1))


@pytest.fixture(scope="module")
def libsvm_files(tmp_path_factory):
    rng = np.random.default_rng(0)
    d = 10
    w = rng.standard_normal(d)
    X = rng.standard_normal((1200, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ w > 0, 1, -1)
    root = tmp_path_factory.mktemp("cli")
    train, test = root / "train.svm", root / "test.svm"
    dump_svmlight_file(X[:1000], y[:1000], str(train))
    dump_svmlight_file(X[1000:], y[1000:], str(test))
    bad = root / "bad.svm"
    bad.write_text("1 1:0.5 2:0.1\n-1 1:0.2 2:oops\n")
    return {"train": train, "test": test, "bad": bad, "root": root,
            "X_test": X[1000:], "y_test": y[1000:]}


# ---------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------
def test_train_save_ledger_predict_evaluate(libsvm_files):
    f = libsvm_files
    model, ledger = f["root"] / "model", f["root"] / "budget.json"
    proc = run_cli("train", f["train"], "--model", "logistic", "--epsilon", "1", "--delta",
                   "1e-5", "--seed", "3", "--batch-size", "50", "--epochs", "5",
                   "--ledger", ledger, "--budget", "1.5", "--out", model, "--test", f["test"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("DPLogisticRegression", "add/remove one example", "poisson", "T = 100 steps",
                   "training accuracy", "test accuracy", "time", "model saved"):
        assert needle in out, needle
    saved = load_model(model)
    assert _value(out, "epsilon") == pytest.approx(saved.epsilon_, rel=1e-5)
    assert saved.epsilon_ <= 1.0
    assert _value(out, "noise_multiplier =") == pytest.approx(saved.noise_multiplier_, rel=1e-5)
    assert saved.model_metadata_["privacy"]["seed"] == 3
    # the ledger file was charged with exactly the model's event
    book = PrivacyLedger.load(ledger)
    assert len(book.entries) == 1 and book.entries[0].event == saved.privacy_event_
    assert book.spent() == pytest.approx(saved.epsilon_, rel=1e-9)

    # predict: the saved model's predictions, one per line
    pred = run_cli("predict", model.with_suffix(".json"), f["test"])
    assert pred.returncode == 0, pred.stderr
    printed = np.array([float(v) for v in pred.stdout.split()])
    np.testing.assert_array_equal(printed, saved.predict(f["X_test"]))
    # evaluate: accuracy recomputed independently
    ev = run_cli("evaluate", model, f["test"])
    assert ev.returncode == 0, ev.stderr
    expected = np.mean(saved.predict(f["X_test"]) == f["y_test"])
    assert _value(ev.stdout, "accuracy") == pytest.approx(expected, abs=1e-6)



def test_over_budget_fit_is_refused_and_ledger_show(libsvm_files, capsys, tmp_path):
    f = libsvm_files
    ledger = tmp_path / "budget.json"
    common = ["train", str(f["train"]), "--model", "logistic", "--delta", "1e-5",
              "--ledger", str(ledger)]
    assert cli.main(common + ["--epsilon", "1", "--seed", "1", "--budget", "1.5"]) == 0
    capsys.readouterr()
    # a second fit that would exceed the budget is refused and records nothing
    line = _main_error(capsys, common + ["--epsilon", "2", "--seed", "2"])
    assert "budget exceeded" in line
    book = PrivacyLedger.load(ledger)
    assert len(book.entries) == 1
    assert cli.main(["ledger", "show", str(ledger)]) == 0
    shown = capsys.readouterr().out
    assert _value(shown, "spent") == pytest.approx(book.spent(), rel=1e-5)
    assert "entries 1" in shown and "DPLogisticRegression" in shown


def test_privacy_commands_match_the_library(capsys):
    assert cli.main(["privacy", "epsilon", "--noise-multiplier", "1.1", "--n", "60000",
                     "--batch-size", "256", "--epochs", "60", "--delta", "1e-5"]) == 0
    expected = compute_epsilon(1.1, 256 / 60000, 60 * 60000 // 256, 1e-5, accountant="auto")
    assert _value(capsys.readouterr().out, "epsilon") == pytest.approx(expected, rel=1e-5)
    assert cli.main(["privacy", "calibrate", "--epsilon", "1", "--sample-rate", "0.01",
                     "--steps", "1000", "--delta", "1e-5", "--accountant", "moments"]) == 0
    sigma = _value(capsys.readouterr().out, "noise_multiplier")
    reference = calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000, accountant="moments")
    assert sigma == pytest.approx(float(reference), rel=1e-5)


@pytest.mark.parametrize("args, pattern, status", [
    (("train", "{bad}", "--model", "logistic"), r"bad\.svm: line 2: .*oops", 1),
])
def test_user_mistakes_give_one_line_errors(libsvm_files, args, pattern, status):
    args = [a.format(**{k: str(v) for k, v in libsvm_files.items() if isinstance(v, Path)})
            for a in args]
    assert_one_line_error(run_cli(*args), pattern, status=status)


# ---------------------------------------------------------------------------
# in process (fast): more bad input, dispatch
# ---------------------------------------------------------------------------
def _main_error(capsys, argv):
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse errors
        status = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status not in (0, None) and len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("argv, pattern", [
    (["train", "{root}/missing.svm", "--model", "ridge"], "no such file"),
    (["train", "{train}", "--model", "ridge", "--epsilon", "0"], "epsilon: must be > 0"),
    (["train", "{train}", "--model", "logistic", "--solver", "fastest"], "unknown solver"),
    (["predict", "{root}/nothing", "{test}"], "no fastdp model"),
    (["train", "{train}", "--model", "ridge", "--epsilon", "-1"], "must be > 0"),
    (["train", "{train}", "--model", "ridge", "--delta", "1.5"], r"\(0, 1\)"),
    (["train", "{train}", "--model", "lasso"], "invalid choice"),
    (["train", "{train}"], "required: --model"),
    (["train", "{root}", "--model", "ridge"], "is a directory"),
    (["train", "{train}", "--model", "ridge", "--budget", "1"], "--budget needs --ledger"),
    (["train", "{train}", "--model", "ridge", "--ledger", "{root}/new.json"], "pass --budget"),
    (["train", "{train}", "--model", "ridge", "--solver-option", "nope"], "KEY=VALUE"),
    (["train", "{train}", "--model", "ridge", "--solver-option", "colour=1"],
     "does not understand solver_options"),
    (["train", "dataset:no_such_set", "--model", "ridge"], "unknown dataset"),
    (["privacy", "epsilon", "--noise-multiplier", "1", "--delta", "1e-5"], "either"),
    (["privacy", "epsilon", "--noise-multiplier", "1", "--delta", "1e-5", "--sample-rate",
      "0.1"], "go together"),
    (["privacy", "calibrate", "--epsilon", "1", "--delta", "1e-5", "--n", "10",
      "--batch-size", "20", "--epochs", "1"], "larger than"),
    (["ledger", "show", "{root}/none.json"], "no such ledger"),
    (["ledger", "show", "{train}"], "not a fastdp privacy ledger"),
    (["reproduce", "seed042"], "invalid choice"),
    (["evaluate", "{train}", "{test}"], "no fastdp model|not a fastdp model"),
])
def test_in_process_errors(libsvm_files, capsys, argv, pattern):
    argv = [a.format(**{k: str(v) for k, v in libsvm_files.items() if isinstance(v, Path)})
            for a in argv]
    line = _main_error(capsys, argv)
    assert re.search(pattern, line), line


def test_debug_flag_shows_the_exception(libsvm_files):
    from fastdp.exceptions import ValidationError

    with pytest.raises(ValidationError, match="unknown solver"):
        cli.main(["--debug", "train", str(libsvm_files["train"]), "--model", "ridge",
                  "--solver", "x"])


def _fake_reproduction(monkeypatch, name, calls, status=None, error=None):
    module = types.ModuleType(f"fastdp.experiments.{name}")
    module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, loader=None)

    def main(argv=None):
        calls.append((name, list(argv)))
        if error is not None:
            raise error
        return status

    module.main = main
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_reproduce_dispatches_to_the_seed_modules(monkeypatch, capsys, tmp_path):
    calls = []
    for name in cli.REPRODUCTIONS:
        _fake_reproduction(monkeypatch, name, calls)
    assert cli.main(["reproduce", "seed003", "--quick", "--out", str(tmp_path), "--",
                     "--runs", "2"]) == 0
    assert calls == [("seed003", ["--out", str(tmp_path), "--quick", "--runs", "2"])]
    calls.clear()
    assert cli.main(["reproduce", "seed001", "--quick", "--resume", "--budget-min", "2.5",
                     "--out", str(tmp_path)]) == 0
    assert calls == [("seed001", ["--out", str(tmp_path), "--quick", "--resume",
                                  "--budget-min", "2.5"])]
    calls.clear()
    _fake_reproduction(monkeypatch, "seed002", calls,
                       error=FileNotFoundError("dataset 'x': file not found"))
    assert cli.main(["reproduce", "all", "--out", str(tmp_path)]) == 1
    assert [c[0] for c in calls] == list(cli.REPRODUCTIONS)   # goes on after a failure
    assert all(c[1] == ["--out", str(tmp_path)] for c in calls)
    err = capsys.readouterr().err
    assert "seed002: dataset 'x': file not found" in err and "failed: seed002" in err


def test_demo_dispatch(monkeypatch):
    from fastdp import demo

    seen = []
    monkeypatch.setattr(demo, "main", lambda argv=None: seen.append(argv) or 0)
    assert cli.main(["demo", "--quick", "--seed", "4"]) == 0
    assert seen == [["--quick", "--seed", "4"]]


def test_version_and_help():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("fastdp ")
    helped = run_cli("train", "--help")
    assert helped.returncode == 0 and "--epsilon" in helped.stdout and "--ledger" in helped.stdout


@pytest.mark.slow
def test_demo_runs_end_to_end():
    proc = run_cli("demo", "--quick")
    assert proc.returncode == 0, proc.stderr
    assert "DP-SCD" in proc.stdout and "eps=" in proc.stdout


def test_non_private_and_solver_options_in_process(libsvm_files, capsys, tmp_path):
    f = libsvm_files
    assert cli.main(["train", str(f["train"]), "--model", "ridge", "--epsilon", "inf",
                     "--seed", "0"]) == 0
    assert "NONE: epsilon = inf" in capsys.readouterr().out
    assert cli.main(["train", str(f["train"]), "--model", "svm", "--solver", "dpsgd",
                     "--learning-rate", "0.5", "--solver-option", 'reg="repo"', "--epsilon", "2",
                     "--seed", "1", "--out", str(tmp_path / "svm")]) == 0
    saved = load_model(tmp_path / "svm")
    assert saved.solver == "dpsgd"
    assert saved.solver_options == {"learning_rate": 0.5, "reg": "repo"}
    assert saved.epsilon_ <= 2.0


def test_empty_or_comment_only_file_is_one_clear_line(tmp_path):
    path = tmp_path / "empty.svm"
    path.write_text("# only a comment\n")
    done = subprocess.run([sys.executable, "-m", "fastdp", "train", str(path), "--model",
                           "logistic"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "0 examples" in done.stderr


def test_ledger_upgrade_converts_an_old_file(tmp_path, capsys):
    import json

    from fastdp.privacy.ledger import LEDGER_FORMAT, PrivacyLedger, event_to_dict
    from fastdp.privacy.events import PureEvent

    path = tmp_path / "old.json"
    path.write_text(json.dumps({
        "format": LEDGER_FORMAT, "version": 1, "epsilon": 2.0, "delta": 0.0,
        "accountant": "pure", "accountant_options": {},
        "entries": [{"event": event_to_dict(PureEvent(0.5)), "label": "old", "timestamp": 1.0}]}))
    assert cli.main(["ledger", "upgrade", str(path)]) == 0
    assert "1 entries kept" in capsys.readouterr().out
    assert PrivacyLedger.load(path).spent() == 0.5


def test_train_with_float32_data(tmp_path, capsys):
    from fastdp.datasets import dataset_search_paths

    if not any((p / "phishing").is_dir() for p in dataset_search_paths()):
        pytest.skip("real datasets not found (set FASTDP_DATA)")
    assert cli.main(["train", "dataset:phishing", "--model", "logistic", "--dtype", "float32",
                     "--seed", "0", "--out", str(tmp_path / "m")]) == 0
    assert "training accuracy" in capsys.readouterr().out


def test_missing_file_is_a_mistake_with_status_1_and_a_dataset_hint(capsys, tmp_path):
    assert cli.main(["train", "a9a", "--model", "logistic"]) == 1
    assert "dataset:a9a" in capsys.readouterr().err
    assert cli.main(["train", str(tmp_path / "missing.svm"), "--model", "logistic"]) == 1


def test_unknown_solver_lists_documented_names_only(capsys, libsvm_files):
    assert cli.main(["train", str(libsvm_files["train"]), "--model", "logistic",
                     "--solver", "fastest"]) == 1
    err = capsys.readouterr().err
    assert "dp_nesterov" in err and " heavy_ball," not in err and "dp_agd" not in err


def test_predict_output_creates_its_directory(libsvm_files, tmp_path, capsys):
    model = tmp_path / "m"
    assert cli.main(["train", str(libsvm_files["train"]), "--model", "logistic", "--seed", "0",
                     "--out", str(model)]) == 0
    out = tmp_path / "new" / "dir" / "p.txt"
    assert cli.main(["predict", str(model) + ".json", str(libsvm_files["test"]),
                     "--output", str(out)]) == 0
    assert out.is_file()


def test_messages_name_the_flag_not_the_python_option(tmp_path, capsys):
    path = tmp_path / "big.svm"
    path.write_text("1 1:3 2:4\n-1 1:1\n")
    assert cli.main(["train", str(path), "--model", "logistic", "--normalize", "reject"]) == 1
    err = capsys.readouterr().err
    assert "--normalize" in err and "normalize=True" not in err


@pytest.mark.parametrize("argv, pattern", [
    (["privacy", "epsilon", "--noise-multiplier", "1", "--n", "100", "--batch-size", "10",
      "--epochs", "inf", "--delta", "1e-5"], "finite"),
    (["privacy", "epsilon", "--noise-multiplier", "1e-300", "--n", "100", "--batch-size", "10",
      "--epochs", "1", "--delta", "1e-5"], "outside the range"),
    (["privacy", "epsilon", "--noise-multiplier", "1e300", "--n", "100", "--batch-size", "10",
      "--epochs", "1", "--delta", "1e-5"], "outside the range"),
    (["train", "x.svm", "--model", "ridge", "--epochs", "inf"], "finite"),
])
def test_numeric_extremes_are_one_line_errors(capsys, argv, pattern):
    line = _main_error(capsys, argv)
    assert re.search(pattern, line), line


def test_train_verbose_prints_epochs(libsvm_files, capsys):
    assert cli.main(["train", str(libsvm_files["train"]), "--model", "logistic", "--seed", "0",
                     "--verbose"]) == 0
    assert "epoch 1/" in capsys.readouterr().err


def test_convert_then_train_evaluate_predict_on_the_binary(libsvm_files, tmp_path, capsys):
    fdp = tmp_path / "train.fdp"
    assert cli.main(["convert", str(libsvm_files["train"]), str(fdp), "--dtype", "float32"]) == 0
    assert "1000 rows, 10 features" in capsys.readouterr().out
    from fastdp.persistence import load_model

    # the same fit from the text file (float32) and from the binary: same bits
    coefs = []
    for data in (str(libsvm_files["train"]), str(fdp)):
        model = tmp_path / "m"
        assert cli.main(["train", data, "--model", "logistic", "--seed", "0", "--dtype",
                         "float32", "--out", str(model)]) == 0
        capsys.readouterr()
        coefs.append(load_model(str(model) + ".json").coef_.ravel())
    np.testing.assert_array_equal(coefs[0], coefs[1])
    test_fdp = tmp_path / "test.fdp"
    assert cli.main(["convert", str(libsvm_files["test"]), str(test_fdp), "--n-features",
                     "10"]) == 0
    assert cli.main(["evaluate", str(model) + ".json", str(test_fdp)]) == 0
    assert "on " + str(test_fdp) in capsys.readouterr().out
    assert cli.main(["predict", str(model) + ".json", str(test_fdp)]) == 0
    assert len(capsys.readouterr().out.split()) == 200
    # mistakes: one line each
    assert cli.main(["train", str(fdp), "--model", "logistic", "--dtype", "float64"]) == 1   # the file does not hold what --dtype asks: an input error (1)
    assert "convert it again" in capsys.readouterr().err
    assert cli.main(["convert", str(libsvm_files["train"]), str(fdp)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["convert", str(libsvm_files["bad"]), str(tmp_path / "b.fdp")]) == 1
    assert "line 2" in capsys.readouterr().err
    assert cli.main(["train", str(tmp_path / "missing.fdp"), "--model", "logistic"]) == 1
    assert "no such binary dataset" in capsys.readouterr().err
