"""Seed 003 reproduction harness (fastdp.experiments.seed003) on a small slice."""
import numpy as np

from fastdp.experiments import seed003 as S
from fastdp.privacy.calibration import compute_epsilon


def test_fold_indices_partition():
    folds = S.fold_indices(103, 10, seed=1)
    tests = np.concatenate([te for _, te in folds])
    assert np.array_equal(np.sort(tests), np.arange(103))
    for tr, te in folds:
        assert np.intersect1d(tr, te).size == 0 and tr.size + te.size == 103


def test_dpsgd_schedule_is_the_largest_affordable_T():
    sigma, T = S.dpsgd_schedule(0.4, 40000, 210)
    assert sigma == 4.0 and 1 <= T < 20000
    q = 210 / 40000
    assert compute_epsilon(4.0, q, T, S.DELTA) <= 0.4 < compute_epsilon(4.0, q, T + 1, S.DELTA)


def test_paper_datasets_shapes(data_dir):
    X, y = S.load_paper_dataset("bank", data_dir)
    assert X.shape == (45211, 33) and set(np.unique(y)) == {-1.0, 1.0}
    assert X[:, 1:].min() == 0.0 and X[:, 1:].max() == 1.0
    assert abs(max(np.mean(y > 0), np.mean(y < 0)) - S.TABLE1_MAJORITY["bank"]) < 0.005


def test_small_reproduction_writes_report(data_dir, tmp_path):
    path = S.reproduce(tmp_path, folds=1, runs=1, datasets=("bank",), losses=("logistic",),
                       epsilons=(1.6,), data_home=data_dir, log=lambda *a: None,
                       algorithms=("DP-BLSGD", "DP-BLGD", "NON-PRIVATE", "MAJORITY"))
    text = path.read_text()
    assert "| DP-BLSGD |" in text and "qualitative claims" in text
    row = next(line for line in text.splitlines() if line.startswith("| DP-BLSGD |"))
    acc = float(row.split("|")[2])
    assert acc > 0.89           # above Bank's majority rate (0.883) at ε = 1.6


def test_sweep_report_claims_from_numbers():
    fig1 = {("noise", "laplace", 0.05): 0.80, ("noise", "gaussian", 0.05): 0.79,
            ("noise", "laplace", 0.2): 0.83, ("noise", "gaussian", 0.2): 0.84}
    fig2 = {0.1: dict(gradient_evaluations=1e5, objective_evaluations=5e5, acc=0.83),
            1.0: dict(gradient_evaluations=8e5, objective_evaluations=4e6, acc=0.835)}
    text = "\n".join(S.sweep_report(fig1, fig2))
    assert "| C3: Laplace NOISYBTLS ≥ Gaussian | no | 1/2 |" in text
    assert "C5: subsampling cuts evaluations" in text and "ratio 8.0" in text


def _synthetic_grid():
    grid = {}
    for alg in S.ALGORITHMS:
        for e in ((0.05, 1.6) if alg in S.PRIVATE else (None,)):
            acc = {"MAJORITY": 0.76, "DP-SGD": 0.762}.get(alg, 0.70 if e == 0.05 else 0.84)
            obj = {"DP-SGD": 0.69}.get(alg, 0.55)
            grid[("adult", "logistic", alg, e)] = dict(acc=acc, acc_sd=0.0, obj=obj, n=2, info={})
    return grid


def test_claims_on_a_synthetic_grid_and_only_present_cells():
    grid = _synthetic_grid()
    claims = {c: (h, d) for c, h, d in S.check_claims(grid, S.DATASETS, S.LOSSES, (0.05, 1.6))}
    assert claims["C8/C11: DP-BLSGD ≥ DP-SGD at small ε [0.05]"] == (False, "0/1")
    assert claims["C8/C11 (objective): DP-BLSGD's training objective ≤ DP-SGD's at small ε [0.05]"] \
        == (True, "1/1")
    assert claims["(diagnostic) DP-SGD within 0.01 of MAJORITY at small ε [0.05]"] == (True, "1/1")
    assert S.present_cells(grid, S.DATASETS, S.LOSSES) == [("adult", "logistic")]


def test_report_json_round_trip_and_from_json_cli(tmp_path):
    import json

    grid = _synthetic_grid()
    S.write_report(tmp_path / "a", grid, datasets=S.DATASETS, losses=S.LOSSES,
                   epsilons=(0.05, 1.6), folds=4, runs=1, elapsed=60.0, quick=False,
                   notes=["Note: synthetic."])
    data = json.loads((tmp_path / "a" / "seed003.json").read_text())
    assert S.grid_from_records(data["grid"]) == grid
    assert data["protocol"]["cells"] == [["adult", "logistic"]]
    S.main(["--from-json", str(tmp_path / "a" / "seed003.json"), "--out", str(tmp_path / "b"),
            "--folds", "4", "--runs", "1", "--epsilons", "0.05", "1.6"])
    text = (tmp_path / "b" / "seed003.md").read_text()
    assert "4 of 10 folds × 1 run(s)" in text and "adult/logistic" in text
    assert "## bank" not in text
