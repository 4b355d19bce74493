"""Forged column indices in a binary dataset: a clear error, never a crash (issue 20).

``open_binary`` (without ``verify``) trusts the structure checked at conversion and
does not read ``indices.npy``; the kernels then check each row the first time they
read it, and the Python paths that hand the mapped CSR to scipy or numpy check the
rows first (``fastdp._validation.check_rows_as_read``).  Each test forges a small
``.fdp`` written by ``fastdp.io.binary.convert_libsvm`` (entries of ``indices.npy``
overwritten in place: a huge column, a negative one, a swapped pair, a duplicate;
or the header re-signed with fewer features) and runs the fits and predictions in
a *subprocess*: a segfault fails the test instead of killing pytest.  Every call
must raise ``fastdp.exceptions.ValidationError`` naming the corrupt row and
pointing to ``open_binary(verify=True)``; a model fitted before keeps its bits
("loses nothing").

Reference for the honest data: the fit of the in-memory CSR (the same arrays copied,
scanned by ``check_X``), compared bit for bit with the fit of the opened ``.fdp``.

This file runs a few configurations by default; the sweep over every solver and
option is ``tests/test_hostile_forged_columns_sweep.py`` (slow).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.io.binary import _header_digest, convert_libsvm, open_binary

N, D = 240, 30
ROWS = (37, 101, 170, 222)        # the forged rows (one entry each)
FORGERIES = ("huge", "negative", "swapped", "duplicate", "header_n_features")


# --------------------------------------------------------------------------- data


def _problem(n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(N, D, density=0.25, format="csr", random_state=rng)
    X.data = rng.uniform(0.1, 1.0, X.nnz)
    X.sort_indices()
    lengths = np.diff(X.indptr)
    for r in ROWS:                      # forged rows need two entries (swap, duplicate)
        assert lengths[r] >= 2, r
    assert X[:, D - 1].nnz > 0          # the last column is used (header n_features forgery)
    labels = (rng.integers(0, n_classes, N) if n_classes > 2
              else np.where(rng.random(N) < 0.5, -1, 1))
    return X, labels.astype(np.float64)


def write_dataset(root, name, n_classes=2):
    """An honest ``.fdp`` converted from a LIBSVM file: (path, X in memory, y)."""
    from sklearn.datasets import dump_svmlight_file

    X, y = _problem(n_classes)
    svm = Path(root) / f"{name}.svm"
    dump_svmlight_file(X, y, str(svm), zero_based=True)
    path = Path(root) / f"{name}.fdp"
    convert_libsvm(svm, path, n_features=D, zero_based=True)
    return path, X, y


def forge(path, kind):
    """Damage the ``.fdp`` at ``path`` in place (see the module docstring)."""
    if kind == "header_n_features":
        header = json.loads((path / "header.json").read_text())
        header["shape"] = [header["shape"][0], header["shape"][1] - 1]
        header["header_sha256"] = _header_digest(header)      # re-signed: consistent
        (path / "header.json").write_text(json.dumps(header))
        return
    indices = np.load(path / "indices.npy", mmap_mode="r+")
    indptr = np.load(path / "indptr.npy")
    for r in ROWS:
        k = int(indptr[r])
        if kind == "huge":
            indices[k] = np.iinfo(indices.dtype).max
        elif kind == "negative":
            indices[k] = -7
        elif kind == "swapped":
            indices[k], indices[k + 1] = int(indices[k + 1]), int(indices[k])
        elif kind == "duplicate":
            indices[k + 1] = indices[k]
    indices.flush()
    del indices


# --------------------------------------------------------------------------- child


def _estimator(spec):
    from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge

    cls = {"logistic": DPLogisticRegression, "ridge": DPRidge, "svc": DPLinearSVC}[spec["model"]]
    kw = dict(epsilon=1.0, delta=1e-5, random_state=0, solver=spec["solver"],
              fit_intercept=spec.get("fit_intercept", True),
              normalize=spec.get("normalize", "auto"))
    kw.update(spec.get("options", {}))
    return cls(**kw)


def _digest(model):
    import hashlib

    h = hashlib.sha256(np.ascontiguousarray(model.coef_, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(model.intercept_, dtype=np.float64).tobytes())
    return h.hexdigest()


def _run_action(action, honest):
    """One action of the child on ``action["forged"]``; returns a JSON-able result."""
    Xf, yf = open_binary(action["forged"])
    spec = action["spec"]
    kind = action["kind"]
    if kind == "fit":
        _estimator(spec).fit(Xf, yf)
        return {"status": "ok"}
    if kind in ("decision_function", "predict", "predict_proba", "score"):
        Xh, yh = open_binary(honest)
        model = _estimator(spec).fit(Xh, yh)
        method = getattr(model, kind)
        method(Xf, yf) if kind == "score" else method(Xf)
        return {"status": "ok"}
    if kind == "refit":               # a fitted model must keep its bits
        Xh, yh = open_binary(honest)
        model = _estimator(spec).fit(Xh, yh)
        before = _digest(model)
        try:
            model.fit(Xf, yf)
        except Exception as exc:
            return {"status": "error", "type": type(exc).__name__, "message": str(exc),
                    "kept": _digest(model) == before}
        return {"status": "ok"}
    raise AssertionError(kind)


def child_main(argv):
    honest, actions = argv[0], json.loads(argv[1])
    for action in actions:
        print(json.dumps({"start": action["name"]}), flush=True)
        try:
            result = _run_action(action, honest)
        except Exception as exc:   # reported to the parent, which judges the type
            result = {"status": "error", "type": type(exc).__name__, "message": str(exc)}
        result["name"] = action["name"]
        print(json.dumps(result), flush=True)


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1])] + env.get("PYTHONPATH", "").split(os.pathsep))
    return env


def run_child(honest, actions, timeout=600):
    """Run ``actions`` (each on its ``forged`` dataset) in one subprocess (its start-up,
    the imports, is most of the cost); their results by name."""
    proc = subprocess.run([sys.executable, __file__, str(honest), json.dumps(actions)],
                          capture_output=True, text=True, timeout=timeout, env=child_env())
    results = {}
    started = None
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        if "start" in record:
            started = record["start"]
        else:
            results[record["name"]] = record
    assert proc.returncode == 0, (
        f"the child died (return code {proc.returncode}, a negative one is a signal) during "
        f"{started!r}:\n{proc.stderr[-3000:]}")
    return results


def assert_clear_error(result, kind):
    """A ValidationError naming a forged row (for the header: a row using the last column,
    now outside the claimed features) and the full check."""
    assert result["status"] == "error", f"{result['name']}: no error on a {kind} forgery"
    assert result["type"] == "ValidationError", result
    message = result["message"]
    assert "is corrupt" in message and "verify=True" in message, message
    if kind == "header_n_features":
        assert f"outside [0, {D - 1})" in message, message
    else:
        assert any(f"row {r} of X" in message for r in ROWS), message


def _fit(name, model, solver, **spec):
    return {"name": name, "kind": "fit",
            "spec": dict(model=model, solver=solver, **spec)}


# a few configurations of the default run (the sweep covers the rest)
DEFAULT_ACTIONS = [
    _fit("dpsgd", "logistic", "dpsgd"),
    _fit("dpscd", "logistic", "dpscd", fit_intercept=False),
    _fit("output", "logistic", "output", normalize=True),
    {"name": "predict", "kind": "predict", "spec": dict(model="logistic", solver="dpsgd")},
    {"name": "refit", "kind": "refit", "spec": dict(model="logistic", solver="dpsgd")},
]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("forged")
    honest, X, y = write_dataset(root, "honest")
    return root, honest, X, y


def forged_dataset(root, kind, name=None, n_classes=2):
    path, _, _ = write_dataset(root, name or f"forged-{kind}", n_classes)
    forge(path, kind)
    open_binary(path)                       # the cheap checks at open do not see it
    return path


def run_and_check(root, honest, actions_by_kind, name_suffix="", n_classes=2):
    """Every action on every forgery, in one child; each must fail cleanly."""
    actions = []
    for kind, kind_actions in actions_by_kind.items():
        forged = str(forged_dataset(root, kind, f"forged-{kind}{name_suffix}", n_classes))
        actions += [dict(action, name=f"{kind}:{action['name']}", forged=forged, forgery=kind)
                    for action in kind_actions]
    results = run_child(honest, actions)
    for action in actions:
        result = results[action["name"]]
        assert_clear_error(result, action["forgery"])
        if action["kind"] == "refit":
            assert result["kept"], f"{action['name']}: a failed fit changed the fitted model"


def test_forged_columns_give_a_clear_error_not_a_crash(datasets):
    root, honest, _, _ = datasets
    run_and_check(root, honest, {kind: DEFAULT_ACTIONS if kind == "huge" else DEFAULT_ACTIONS[:1]
                                 for kind in FORGERIES})


def test_verify_finds_every_forgery(datasets):
    """``open_binary(verify=True)`` is the full check the errors point to."""
    from fastdp.exceptions import ValidationError

    root = datasets[0]
    for kind in FORGERIES:
        forged = forged_dataset(root, kind, name=f"verify-{kind}")
        with pytest.raises(ValidationError, match="verify"):
            open_binary(forged, verify=True)


def test_cli_train_of_forged_data_fails_cleanly(datasets):
    forged = forged_dataset(datasets[0], "negative", name="cli")
    proc = subprocess.run([sys.executable, "-m", "fastdp", "train", str(forged), "--model",
                           "logistic", "--delta", "1e-5"], capture_output=True, text=True,
                          timeout=600, env=child_env())
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "is corrupt" in proc.stderr and "verify=True" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("spec", [
    dict(model="logistic", solver="dpsgd"),
    dict(model="logistic", solver="dpscd", fit_intercept=False, normalize=True),
])
def test_honest_fdp_fits_the_bits_of_the_in_memory_csr(datasets, spec):
    honest = datasets[1]
    Xm, ym = open_binary(honest)
    X = sp.csr_matrix((np.array(Xm.data), np.array(Xm.indices), np.array(Xm.indptr)),
                      shape=Xm.shape)            # the same arrays in memory: scanned by check_X
    mapped = _estimator(spec).fit(Xm, ym)
    memory = _estimator(spec).fit(X, ym.copy())
    assert _digest(mapped) == _digest(memory)
    np.testing.assert_array_equal(mapped.decision_function(Xm), memory.decision_function(X))


def test_only_trusted_structures_are_checked_as_read(datasets):
    """A structure scanned in this process (``check_X`` of an in-memory CSR,
    ``open_binary(verify=True)``) is read unchecked: its token has no row map; a trusted
    one (``open_binary``) gets a map, rows marked once checked, and a prediction (which
    reads every row through scipy) checks the rest."""
    from fastdp._validation import check_X, rows_checked_as_read, structure_token

    honest = datasets[1]
    Xv, _ = open_binary(honest, verify=True)
    X = sp.csr_matrix((np.array(Xv.data), np.array(Xv.indices), np.array(Xv.indptr)),
                      shape=Xv.shape)
    assert structure_token(check_X(X)).row_checked is None
    assert structure_token(Xv).row_checked is None
    assert rows_checked_as_read(Xv) is None
    Xm, ym = open_binary(honest)
    checked = structure_token(Xm).row_checked
    assert checked is rows_checked_as_read(Xm) and checked.shape == (N,) and not checked.any()
    model = _estimator(dict(model="logistic", solver="dpsgd",
                            options={"epochs": 1, "batch_size": 8})).fit(Xm, ym)
    assert 0 < checked.sum() < N                  # the rows the sampled batches read
    model.predict(Xm)
    assert checked.all()


if __name__ == "__main__":
    child_main(sys.argv[1:])
