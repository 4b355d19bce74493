"""Reproduction of seed 002 (spec 002, section 6.5): quick mode by default, the full grid slow."""
import json
import math

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.experiments import seed002


@pytest.fixture(scope="module")
def section5():
    U, z = seed002.make_synthetic_logreg()
    return seed002.Section5Problem(U, z)


def test_calibrated_data_match_the_spec(section5):
    # spec 002, section 5.3: L = 5.10008, F* = 0.27896, F(x0) - F* = 28.90, 9.58% negatives
    assert section5.smoothness == pytest.approx(5.100080706735987, rel=1e-9)
    assert section5.f_star == pytest.approx(0.278965, abs=2e-6)
    assert section5.objective(section5.x0) - section5.f_star == pytest.approx(28.90, abs=0.01)
    assert np.mean(section5.z < 0) == pytest.approx(0.0958, abs=1e-4)
    assert section5.problem.sensitivity == 40.0
    # x* is a stationary point (spec B9)
    assert np.linalg.norm(section5.problem.gradient(section5.x_star)) < 1e-9


def test_quick_reproduction(tmp_path, section5):
    # the --quick path (T = 100, both conventions, m in {n, 1000}, c in {0.1, 1}); one run per
    # cell keeps the default suite lean.  The noise-free part dominates at c = 0.1 and the
    # -opt values at c = 1 are averages over ~100 noisy steps, so a factor 2 against the
    # spec's 6-run replication is a wide margin.
    grid = seed002.reproduce(tmp_path, quick=True, runs=1, section=section5, figures=False)
    report = (tmp_path / "seed002.md").read_text()
    saved = json.loads((tmp_path / "seed002.json").read_text())
    assert saved["mode"] == "quick" and len(saved["cells"]) == len(grid) == 2 * 2 * 2 * 6
    key = "paper|1000|1.0|DP-NAG-opt|100"
    assert saved["cells"][key]["final"] == grid["paper", 1000, 1.0, "DP-NAG-opt", 100]["final"]
    assert saved["data"]["initial_gap"] == pytest.approx(28.90, abs=0.01)
    assert "## Horizon rule for the -opt variants (spec A5)" in report
    assert "## noise_convention = paper, m = 1000, c = 1.0" in report
    assert "FAIL" not in report and report.count("PASS") >= 8
    n = 100_000
    for conv, m, c in seed002.REPL:
        for name, values in seed002.REPL[conv, m, c].items():
            ours = grid[conv, m, c, name, 100]["final"]
            assert values[0] / 2 < ours < values[0] * 2, (conv, m, c, name, ours, values[0])
    for conv in seed002.CONVENTIONS:
        for m in (n, 1000):
            assert grid[conv, m, 1.0, "DP-MASG-opt", 100]["horizon"] == 89
    # realized epsilon: 1 for the paper's scale, sqrt(2) (m = n) for the authors' code
    assert grid["paper", n, 1.0, "DP-NAG", 100]["epsilon"] == pytest.approx(1.0, rel=1e-12)
    assert grid["reference_code", n, 1.0, "DP-NAG", 100]["epsilon"] == pytest.approx(math.sqrt(2))
    assert grid["reference_code", 1000, 1.0, "DP-GD", 100]["epsilon"] == pytest.approx(1.661, abs=1e-3)


def test_figures_are_written(tmp_path, section5):
    pytest.importorskip("matplotlib")
    cell = seed002.run_cell("DP-NAG-opt", section5, T=100, m=1000, c=1.0, runs=2, eval_every=10)
    grid = {("paper", 1000, 1.0, "DP-NAG-opt", 100): cell}
    seed002.write_report(tmp_path, grid, section5, runs=2, horizons=(100,),
                         batch_sizes=(1000,), elapsed=0.0, quick=True)
    for name in ("seed002_fig4_paper.png", "seed002_fig1.png", "seed002_fig2.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_line_returns_an_exit_status(tmp_path, capsys):
    # `fastdp reproduce seed002` turns main's return value into the exit status
    argv = ["--quick", "--runs", "1", "--n", "2000", "--no-figures", "--out", str(tmp_path)]
    assert seed002.main(argv) == 0
    out = capsys.readouterr().out
    assert "wrote" in out
    assert (tmp_path / "seed002.json").exists()
    # the quick path goes through the shared runner: 48 cells, one progress line each,
    # a checkpoint that a resume or --report-only turns into the same report
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) == 48 and lines[-1].startswith("[48/48] grid paper m=1000 c=1.0 DP-MASG-opt")
    assert all(line.endswith("left)") for line in lines)
    cells = json.loads((tmp_path / "seed002.json").read_text())["cells"]
    with pytest.raises(SystemExit):
        seed002.main(argv)                        # an existing checkpoint needs --resume
    assert seed002.main(argv + ["--resume"]) == 0
    assert "[1/48]" not in capsys.readouterr().out
    assert json.loads((tmp_path / "seed002.json").read_text())["cells"] == cells
    (tmp_path / "seed002.json").unlink()
    assert seed002.main(argv + ["--report-only"]) == 0
    assert json.loads((tmp_path / "seed002.json").read_text())["cells"] == cells
    with pytest.raises(SystemExit):               # --report-only with other settings
        seed002.main(["--quick", "--runs", "2", "--n", "2000", "--out", str(tmp_path),
                      "--report-only"])


def test_command_line_rejects_unknown_options(tmp_path, section5):
    with pytest.raises(SystemExit):
        seed002.main(["--bogus"])
    with pytest.raises(ValidationError, match="data_seeds"):
        seed002.reproduce(tmp_path, data_seeds=4, section=section5)


def test_fig2_profiles_and_fig1_table():
    profiles = seed002.fig2_profiles()
    assert [p.size for p in profiles.values()] == [53, 133, 293, 613]
    assert profiles[2][0] == pytest.approx(64.7, abs=0.1)
    rows = seed002.fig1_table()
    best = [r for r in rows if r["c_w"] == 1e-2 and r["alpha"] == 1.0][-1]
    assert best["nag_reference"][0] == pytest.approx(-1.24, abs=0.01)
    assert best["nag_reference"][1] == 14


def test_replica_cells_are_the_single_runs(section5):
    # run_cell runs the 20 runs in lock step; run r is run_algorithm with SeedSequence([0, r])
    cell = seed002.run_cell("DP-HB", section5, T=30, m=1000, c=1.0, runs=2, eval_every=10)
    for r in range(2):
        steps, errors, _ = seed002.run_algorithm("DP-HB", section5, T=30, m=1000, c=1.0,
                                                 seed=np.random.SeedSequence([0, r]),
                                                 eval_every=10)
        assert np.array_equal(steps, cell["steps"])
        assert errors[-1] == pytest.approx(cell["finals"][r], rel=1e-9)


def test_data_seeds_give_other_data_and_decide_the_claims():
    # spec C9: three further draws of the generator; the quick grid (T = 100, one run,
    # m = n only) decides the T = 100 claims on each
    results = seed002.run_data_seeds(n=5000, runs=1, horizons=(100,), batch_sizes=(5000,))
    assert len(results) >= 3
    assert len({round(r["negatives"], 6) for r in results}) == len(results)  # other labels
    for r in results:
        assert r["selection"] == "unselected"
        assert r["smoothness"] > 5.0 and r["initial_gap"] > 0
        texts = [t for t, _ in r["claims"]]
        assert "[paper] m=5000, c=1: every -opt final error < every non-opt final error" in texts
        # the optimised schedules beat DP-NAG at T = 100 on every data set
        assert r["finals"]["paper", 5000, 1.0, "DP-NAG-opt", 100] < \
            r["finals"]["paper", 5000, 1.0, "DP-NAG", 100]


def test_horizon_rule_table(section5):
    rows = seed002.horizon_rule_table(section5, horizons=(100, 1000), multipliers=(1.0,))
    got = {(r["m"], r["algorithm"], r["rule"]): r["horizons"] for r in rows}
    assert got[100_000, "DP-NAG-opt", "paper"] == got[100_000, "DP-NAG-opt", "subsampled"] == [100, 136]
    assert got[1000, "DP-NAG-opt", "paper"] == [100, 136]
    assert got[1000, "DP-NAG-opt", "subsampled"] == [100, 127]
    assert got[1000, "DP-MASG-opt", "subsampled"] == [89, 497]


@pytest.mark.slow
def test_full_reproduction(tmp_path, section5):
    # spec 6.5: 20 runs, the whole grid, both conventions; the claims of section 5.4 hold
    # and the reference-code finals are within a factor 1.5 of the spec's replication
    # (2x for the oscillating T = 200 curves)
    grid = seed002.reproduce(tmp_path, eval_every=10, section=section5, data_seeds=0,
                             subsampled_horizon=False)
    report = (tmp_path / "seed002.md").read_text()
    assert "FAIL" not in report
    for (conv, m, c), table in seed002.REPL.items():
        for name, values in table.items():
            for T, ref in zip(seed002.HORIZONS, values):
                factor = 2.0 if T == 200 else 1.5
                ours = grid[conv, m, c, name, T]["final"]
                assert ref / factor < ours < ref * factor, (conv, m, c, name, T, ours, ref)
    # and the numbers read off the published figures (authors' noise scale), spec 6.5
    for (m, c), table in seed002.FIG.items():
        for name, texts in table.items():
            for T, text in zip(seed002.HORIZONS, texts):
                interval = _fig_interval(text)
                if interval is None:
                    continue
                factor = 2.0 if T == 200 else 1.5
                ours = grid["reference_code", m, c, name, T]["final"]
                assert interval[0] / factor < ours < interval[1] * factor, (m, c, name, T, ours, text)


def _fig_interval(text):
    """[lo, hi] of a transcribed figure value ("0.044", "≈0.045", "1.0–1.45"); None if not a value."""
    text = text.replace("≈", "").split(" ")[0]
    if not text or text[0] in "—≥":
        return None
    lo, _, hi = text.partition("–")
    return float(lo), float(hi or lo)


def test_fig_interval_parsing():
    assert _fig_interval("≈0.045") == (0.045, 0.045)
    assert _fig_interval("1.0–1.45") == (1.0, 1.45)
    assert _fig_interval("≈5 (t=89)") == (5.0, 5.0)
    assert _fig_interval("—") is None and _fig_interval("") is None and _fig_interval("≥0.025") is None


# claims that compare with a slowly converging DP-GD, or sit at a tie, and so depend on the
# draw: on the unselected draws (58-79% negative labels, F(x0) - F* = 78-99) DP-GD at c = 1
# is converged by T = 200 (~0.02), below the best DP-HB (~0.03), and at c = 0.1 it falls
# below 10 by T = 1000; see reproductions/seed002.md, "Other data seeds"
DATA_DEPENDENT = ("best-over-T DP-HB < best-over-T DP-GD", "DP-GD at T=1000 still > 10",
                  "DP-NAG and DP-HB at T=200 < 0.5",
                  "m=1000, c=1: every -opt final error < every non-opt final error")


@pytest.mark.slow
def test_robust_claims_on_unselected_data_seeds():
    # spec C9: the conclusions on 3 unselected further data sets (paper noise, 5 runs per
    # cell); only the draw-dependent comparisons with DP-GD may fail
    for r in seed002.run_data_seeds():
        failed = [t for t, h in r["claims"] if not h]
        assert all(any(key in t for key in DATA_DEPENDENT) for t in failed), (r["seed"], failed)


@pytest.mark.slow
def test_all_claims_on_gap_matched_data_seeds():
    # spec C9 on 3 draws selected only by the published starting gap: every claim holds
    assert seed002.gap_matched_seeds() == seed002.GAP_MATCHED_SEEDS
    for r in seed002.run_data_seeds(seed002.GAP_MATCHED_SEEDS, selection="gap-matched"):
        assert 20 <= r["initial_gap"] <= 40
        failed = [t for t, h in r["claims"] if not h]
        assert not failed, (r["seed"], r["w_seed"], failed)
