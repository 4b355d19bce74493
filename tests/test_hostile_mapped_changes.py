"""A memory-mapped binary dataset whose files change after ``open_binary`` returned.

``open_binary`` maps the arrays and registers the CSR as verified, with the
row norms stored at conversion (which the DP mechanisms' norm bound and the
kernels' clipping read instead of X).  Before the files' identities were
recorded at open and re-checked whenever that registration is consulted:

* truncating ``data.npy``, ``indices.npy`` or ``indptr.npy`` and then fitting or
  predicting killed the interpreter with SIGBUS;
* rewriting an array in place (same size), replacing it by a rename, or
  ``convert_libsvm(..., overwrite=True)`` to the same path fitted on the stale
  stored norms or on a mix of old and new data.

Each case now raises one ``ValidationError`` ("... changed since it was opened
...: reopen it with open_binary") at the next fit, predict, refit or norm pass,
before any privacy is reserved or any model attribute changed: the model fitted
before keeps its coefficients bit for bit and the ledger keeps its entries.

All change cases run in one child process (one interpreter start keeps the
default suite cheap): a SIGBUS there fails the test, naming the case that was
running, instead of killing pytest.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fastdp.io.binary import convert_libsvm
from _libsvm_files import write_random_libsvm

CASES = ("truncate:data", "truncate:indices", "truncate:indptr", "truncate:row_sq_norms",
         "truncate:kernel_sq_norms", "truncate:labels", "rewrite:data", "rewrite:indices",
         "rename:data", "delete:data", "overwrite:other", "overwrite:same", "header:touched")


def _write_libsvm(path, n, d, seed):
    """A small LIBSVM file (rows of norm <= 1, two classes)."""
    return write_random_libsvm(path, n, d, seed, low=0.05, high=0.35, max_entries=8)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mapped_changes")
    first = _write_libsvm(root / "a.svm", 300, 40, 0)
    other = _write_libsvm(root / "b.svm", 250, 40, 1)
    convert_libsvm(first, root / "a.fdp")
    return root, first, other


_CHILD = textwrap.dedent(r"""
    import json, os, shutil, sys
    import numpy as np
    from fastdp._validation import check_X
    from fastdp.exceptions import ValidationError
    from fastdp.io.binary import convert_libsvm, open_binary
    from fastdp.linear_model import DPLogisticRegression
    from fastdp.privacy.ledger import PrivacyLedger

    root, first, other = sys.argv[1:4]
    cases = sys.argv[4:]

    def change(path, case):
        kind, _, name = case.partition(":")
        file = os.path.join(path, name + ".npy")
        if kind == "truncate":
            os.truncate(file, os.path.getsize(file) // 2)
        elif kind == "rewrite":  # same size, other values: the stored norms go stale
            with open(file, "r+b") as handle:
                handle.seek(128)
                block = bytearray(handle.read(64))
                handle.seek(128)
                handle.write(bytes(b ^ 0x55 for b in block))
        elif kind == "rename":  # another file renamed over the mapped one
            values = np.load(file) * 50.0
            np.save(file + ".new.npy", values)
            os.replace(file + ".new.npy", file)
        elif kind == "delete":
            os.remove(file)
        elif kind == "overwrite":  # the path converted again while this process maps it
            convert_libsvm(other if name == "other" else first, path, overwrite=True)
        elif kind == "header":  # metadata only: still a change (reopen)
            os.utime(os.path.join(path, "header.json"))
        else:
            raise AssertionError(case)

    def refused(action):
        try:
            action()
        except ValidationError as exc:
            text = str(exc)
            assert "changed since it was opened" in text, text
            assert "reopen it with open_binary" in text, text
            return text
        raise AssertionError("no error")

    for case in cases:
        print("start", case, flush=True)
        path = os.path.join(root, "work.fdp")
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(os.path.join(root, "a.fdp"), path)
        X, y = open_binary(path)
        ledger = PrivacyLedger(epsilon=10.0, delta=1e-5)
        clf = DPLogisticRegression(epsilon=1.0, ledger=ledger, random_state=0).fit(X, y)
        coef = clf.coef_.copy()
        intercept = np.array(clf.intercept_, copy=True)
        entries = len(ledger.entries)
        change(path, case)
        messages = [
            refused(lambda: clf.predict(X)),
            refused(lambda: clf.fit(X, y)),                         # refit of the fitted model
            refused(lambda: DPLogisticRegression(epsilon=1.0, ledger=ledger,
                                                 random_state=0).fit(X, y)),
            refused(lambda: check_X(X, max_row_norm=1.0)),          # a norm pass
        ]
        assert np.array_equal(clf.coef_, coef) and np.array_equal(clf.intercept_, intercept)
        assert len(ledger.entries) == entries
        print(json.dumps({"case": case, "message": messages[1]}), flush=True)
    print("done", flush=True)
""")


def test_every_change_after_open_is_one_clear_error_and_loses_nothing(sources):
    root, first, other = sources
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(first), str(other),
                          *CASES], capture_output=True, text=True, timeout=600, env=env)
    started = [line.split(" ", 1)[1] for line in run.stdout.splitlines()
               if line.startswith("start ")]
    if run.returncode != 0:
        died = (f"killed by {signal.Signals(-run.returncode).name}" if run.returncode < 0
                else f"exit status {run.returncode}")
        pytest.fail(f"child {died} during case {started[-1] if started else None!r}:\n"
                    f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    results = {r["case"]: r["message"] for r in
               (json.loads(line) for line in run.stdout.splitlines() if line.startswith("{"))}
    assert list(results) == list(CASES)
    assert "size changed" in results["truncate:data"]
    assert "indptr.npy" in results["truncate:indptr"]
    assert "modified in place" in results["rewrite:data"]
    assert "replaced by another file" in results["rename:data"]
    assert "deleted or renamed" in results["delete:data"]
    for case in ("overwrite:other", "overwrite:same"):
        assert "now holds another dataset" in results[case], results[case]


def test_convert_overwrite_of_a_mapped_dataset_leaves_the_old_maps_readable(sources, tmp_path):
    """``convert --overwrite`` writes a new directory and renames it into place: the
    maps of this process keep the old (deleted) files, whose values stay readable
    (no SIGBUS: nothing truncated them), and a fresh open reads the new dataset."""
    from fastdp.io.binary import open_binary

    root, first, other = sources
    path = tmp_path / "d.fdp"
    convert_libsvm(first, path)
    X, _ = open_binary(path)
    before = X.toarray()  # scipy reads the maps directly (no fastdp check)
    convert_libsvm(other, path, overwrite=True)
    assert np.array_equal(X.toarray(), before)
    X2, y2 = open_binary(path)
    assert X2.shape[0] == 250 and y2.shape == (250,)
