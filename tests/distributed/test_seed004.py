"""The seed-004 reproduction helpers (the full runs are ``python -m fastdp.experiments.seed004``)."""
import numpy as np
import pytest

from fastdp.datasets import make_sparse_classification
from fastdp.experiments import seed004
from fastdp.preprocessing import normalize_rows


@pytest.fixture(scope="module")
def small():
    X, y = make_sparse_classification(1200, 40, 8, random_state=2)[:2]
    X = normalize_rows(X)
    return X[:1000], y[:1000], X[1000:], y[1000:]


def test_run_one_reports_three_epsilons(small):
    out = seed004.run_one(small, "l2", "Alg1 iota=0.1", epsilon=1.0, calibration="accountant",
                          seed=0, epochs=0.2, curve=True)
    assert out["eps_accountant"] <= 1.0
    assert out["eps_paper"] < 1.0           # the accountant's sigma exceeds the paper's
    assert 0.0 <= out["acc_test"] <= 1.0 and out["curve"]
    assert out["T"] == int(np.ceil(0.2 * 50 / 0.1))


def test_check_claims_reads_the_grid():
    grid = {}
    for i, m in enumerate(seed004.METHODS):
        for e in seed004.EPSILONS:
            grid[("l2", m, "paper", e, 0)] = {"subopt": (i + 1) / e}
    for i, m in enumerate(list(seed004.METHODS)[:2]):
        for e in seed004.EPSILONS:
            grid[("l1", m, "paper", e, 0)] = {"subopt": (i + 1) / e}
    claims = {text: ok for _, text, ok, _ in seed004.check_claims(grid)}
    assert all(claims.values()) and len(claims) == 8


@pytest.mark.slow
def test_news20_binary(data_dir):
    X, y, Xt, yt = seed004.load_problem("news20", data_dir)
    assert X.shape[1] == 62061 and set(np.unique(y)) == {-1.0, 1.0}
    assert X.shape[0] + Xt.shape[0] == 15935
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).ravel()
    assert np.allclose(norms[norms > 0], 1.0)


def test_grid_priority_budget_and_report(small, tmp_path):
    import json
    import time
    methods = {"l2": list(seed004.METHODS), "l1": ["Alg1 iota=0.1", "Alg1 iota=0.2"]}
    tasks = seed004._tasks(("l2", "l1"), methods, ("paper", "accountant"), seed004.EPSILONS, (0,),
                           [("l2", "Alg1 iota=0.1", "none", 0.0)], {"l2": 0.8, "l1": 0.4})
    assert len(tasks) == len(set(tasks)) == 5 + 2 * 5 * 5 + 1
    assert {t[:4] for t in tasks[:5]} == {("l1", m, "paper", 0.4) for m in methods["l1"]} | \
        {("l2", m, "paper", 0.8) for m in methods["l2"]}                   # Figs. 1 and 3 first
    assert tasks[-1][5] == "float32" and tasks[-2][2] == "accountant"
    res = seed004.run_grid(small, ("l2",), epsilons=(0.5, 1.0), calibrations=("paper",),
                           epochs=0.2, curve_eps={"l2": 1.0}, methods_for={"l2": ["Alg1 iota=0.1"]},
                           float32=[("l2", "Alg1 iota=0.1", "paper", 1.0)], log=lambda *_: None)
    assert not res["skipped"] and len(res["runs"]) == 4
    f32 = [r for r in res["runs"] if r["message_dtype"] == "float32"][0]
    assert 0 < f32["coef_diff"] < 1e-3
    assert all(r["subopt"] >= -1e-12 for r in res["runs"])
    late = seed004.run_grid(small, ("l2",), epsilons=(1.0,), calibrations=("paper",), epochs=0.2,
                            methods_for={"l2": ["Alg1 iota=0.1"]}, deadline=time.perf_counter(),
                            log=lambda *_: None)
    assert not late["runs"] and len(late["skipped"]) == 2
    resumed = seed004.run_grid(small, ("l2",), epochs=0.2, previous=late, log=lambda *_: None,
                               calibrations=("paper",))
    assert not resumed["skipped"] and {r["calibration"] for r in resumed["runs"]} == {"none", "paper"}
    assert resumed["truth"]["l2"] <= late["truth"]["l2"]
    res.update(n_train=1000, n_test=200, dim=40, q=50, elapsed=1.0)
    path = seed004.write_report(tmp_path, {"syn": res, "late": late}, epochs=0.2, seeds=(0,))
    text = path.read_text()
    assert "rcv1" in text and "float32 messages" in text and "Time budget reached" in text
    saved = json.loads((tmp_path / "seed004.json").read_text())
    assert saved["datasets"]["syn"]["runs"][0]["method"] == "Alg1 iota=0.1"


def test_report_only_needs_a_saved_grid(tmp_path):
    with pytest.raises(SystemExit):
        seed004.main(["--out", str(tmp_path), "--report-only"])
    seed004.write_report(tmp_path, {}, epochs=3.0, seeds=(0,), summary=["* a line"])
    (tmp_path / "seed004.md").unlink()
    seed004.main(["--out", str(tmp_path), "--report-only"])
    assert "* a line" in (tmp_path / "seed004.md").read_text()
