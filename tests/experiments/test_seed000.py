"""Reproduction of seed 000 (spec 000 §6): σ table, data preparation, the --quick mode."""
import json
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.experiments import seed000
from fastdp.privacy import calibrate_noise_multiplier


def test_sigma_table_reproduces_spec_section_3_6():
    # the paper's accountant (exact and the authors' arithmetic and search) against the
    # numbers spec 000 section 3.6 computed independently; fastdp's RDP sigma is smaller
    table = seed000.sigma_table(rows=(("phishing", 100), ("msd", 1000)))
    assert len(table) == 8
    for row in table:
        assert seed000.units._same_digits(row["exact_ma"], row["spec_exact"], 3), row
        assert seed000.units._same_digits(row["repo"], row["spec_repo"], 3), row
        assert row["fastdp_rdp"] == pytest.approx(row["spec_improved"], rel=0.01), row
        assert row["fastdp_rdp"] < row["exact_ma"]
    msd = [r for r in table if r["dataset"] == "msd"]
    assert msd[0]["T"] == 17389 and msd[0]["exact_ma"] == pytest.approx(14.22, abs=0.005)


def test_noise_multiplier_is_the_calibrated_poisson_sigma():
    n, L, epochs = 6218, 100, 10
    sigma = seed000.noise_multiplier("DP-SCD", n, L, epochs, 1.0)
    reference = calibrate_noise_multiplier(1.0, 1e-3, L / n, epochs * n // L)
    assert sigma == pytest.approx(float(reference), rel=1e-5)
    # seqDP-SCD runs fixed-size batches (replace-one): more noise for the same epsilon
    assert seed000.noise_multiplier("seqDP-SCD", n, L, epochs, 1.0) > sigma


def test_grids_match_the_paper():
    grids = seed000.PAPER_GRIDS
    assert len(seed000.configurations("DP-SCD", grids)) == 156
    assert len(seed000.configurations("DP-SGD", grids)) == 2028
    assert len(seed000.configurations("SGD", grids)) == 156
    assert seed000.configurations("SCD", grids) == [{}]


def test_adult_preparation(data_dir):
    data = seed000.load_paper_dataset("adult", data_home=data_dir)
    assert data.X.shape == (32561, 88) and data.X_test.shape == (16281, 88)
    assert data.n_train == 24420   # the paper's N
    norms = np.sqrt(np.asarray(data.X.multiply(data.X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)
    assert set(np.unique(data.y)) == {-1.0, 1.0}
    X_tr, y_tr, X_val, y_val = data.split(3)
    assert X_tr.shape[0] == 24420 and X_val.shape[0] == 8141


def test_quick_mode_on_phishing(data_dir, tmp_path, capsys):
    argv = ["--quick", "--datasets", "phishing", "--epsilons", "1", "--seeds", "2",
            "--out", str(tmp_path), "--data-home", str(data_dir)]
    status = seed000.main(argv)
    assert status == 0
    # through the shared runner: one progress line per unit, every unit in the checkpoint
    out = capsys.readouterr().out
    assert len(re.findall(r"^\[\d/7\] .*left\)$", out, flags=re.M)) == 7
    units = json.loads((tmp_path / "seed000_units.jsonl").read_text().splitlines()[0])
    assert units["settings"]["grids"]["learning_rates"] == [1.0, 10.0]
    assert [tuple(u) for u in seed000.plan_units(("phishing",), (1.0,))] == [
        ("sigma",), ("select", "phishing", "SCD", None), ("select", "phishing", "SGD", None),
        ("select", "phishing", "DP-SCD", 1.0), ("select", "phishing", "seqDP-SCD", 1.0),
        ("select", "phishing", "DP-SGD", 1.0), ("anchor", "phishing")]
    first = json.loads((tmp_path / "seed000.json").read_text())
    with pytest.raises(SystemExit):                   # an existing checkpoint needs --resume
        seed000.main(argv)
    assert seed000.main(argv + ["--resume"]) == 0     # nothing left to run: the same report
    assert "[1/7]" not in capsys.readouterr().out
    assert seed000.main(["--report-only", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "seed000.json").read_text())
    assert again["runs"]["phishing"]["results"] == first["runs"]["phishing"]["results"]
    assert again["claims"] == first["claims"]
    report = (tmp_path / "seed000.md").read_text()
    assert "**quick** run" in report and "YearPredictionMSD is not available" in report
    assert "## Which of the paper's claims held" in report
    payload = json.loads((tmp_path / "seed000.json").read_text())
    res = payload["runs"]["phishing"]["results"]
    assert payload["runs"]["phishing"]["n_train"] == 6218
    dpscd, scd = res["1.0"]["DP-SCD"]["test_median"], res["non_private"]["SCD"]["test_median"]
    # utility sanity: majority class is ~0.56 on phishing; the non-private optimum ~0.93
    assert 0.9 < scd < 0.96
    assert 0.8 < dpscd <= scd + 0.01
    assert len(res["1.0"]["DP-SCD"]["tests"]) == 2
    sigma = res["1.0"]["DP-SCD"]["sigma"]
    L = res["1.0"]["DP-SCD"]["config"]["L"]
    assert sigma == pytest.approx(seed000.noise_multiplier("DP-SCD", 6218, L, 10, 1.0), rel=1e-9)
    assert (tmp_path / "seed000_phishing.png").exists() or "## Figures" not in report


@pytest.mark.slow
def test_full_quick_reproduction(data_dir, tmp_path):
    path = seed000.reproduce(tmp_path, quick=True, data_home=data_dir)
    payload = json.loads((tmp_path / "seed000.json").read_text())
    assert path.exists() and set(payload["runs"]) == set(seed000.DATASETS)
    held = {c["claim"]: c["held"] for c in payload["claims"]}
    assert held["σ table: fastdp's exact moments accountant reproduces spec §3.6 (3 digits)"] \
        == "yes"


def test_diverged_ridge_model_has_infinite_mse_without_a_warning():
    # |x.θ| ≈ 1e200: the squared residual overflows; the MSE is +inf (the worst value)
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert seed000.utility(np.array([1e200, 0.0]), X, np.zeros(2), "squared") == np.inf
        assert seed000.utility(np.array([3.0, 0.0]), X, np.array([1.0, 0.0]),
                               "squared") == pytest.approx(2.0)
