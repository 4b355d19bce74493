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
