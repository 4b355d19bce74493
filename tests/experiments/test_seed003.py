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
    path, status = S.reproduce(tmp_path, folds=1, runs=1, datasets=("bank",), losses=("logistic",),
                       epsilons=(1.6,), data_home=data_dir, log=lambda *a: None,
                       algorithms=("DP-BLSGD", "DP-BLGD", "NON-PRIVATE", "MAJORITY"))
    assert status["ran"] == 4 and path.parent == tmp_path
    assert S.read_units(tmp_path / S.CHECKPOINT_NAME)        # the unit checkpoint is kept
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
    fig1.update({("alpha", a, 0.05): acc for a, acc in zip(S.SWEEPS["alpha"], (.70, .71, .74, .73, .72))})
    fig1.update({("beta", b, 0.05): acc for b, acc in zip(S.SWEEPS["beta"], (.70, .71, .72, .73, .74))})
    text = "\n".join(S.sweep_report(fig1, fig2))
    assert "| C2: at ε = 0.05 the best α is 0.5 and the best β 0.8 | no | best α = 0.5, β = 0.9 |" in text
    assert "| C3: Laplace NOISYBTLS ≥ Gaussian | no | 1/2 |" in text
    assert "C5: subsampling cuts evaluations" in text and "ratio 8.0" in text


def test_ablation_report_claims_from_numbers():
    table = {}
    for amp, accs, grads in (("zw_general", (0.76, 0.82, 0.84), (5e4, 6e5, 7e6)),
                             ("zw_tight_all", (0.83, 0.835, 0.84), (3e5, 3e6, 7e6))):
        for q, acc, g in zip((0.01, 0.1, 1.0), accs, grads):
            for eps in (0.2, 0.4):
                table[(amp, q, eps)] = dict(acc=acc, gradient_evaluations=g, objective_evaluations=5 * g)
    text = "\n".join(S.ablation_report(table))
    assert "| C4 under zw_general: robust to q at ε = 0.2 (spread < 0.02) | no | spread 0.080 " \
           "(without q = 0.01: 0.020) |" in text
    assert "| C4 under zw_tight_all: robust to q at ε = 0.2 (spread < 0.02) | yes | spread 0.010 " \
           "(without q = 0.01: 0.005) |" in text
    assert "| C5 under zw_general: q = 0.1 needs > 2x fewer gradient evaluations than q = 1 at " \
           "accuracy within 0.02 (ε = 0.4) | no | ratio 11.7, accuracy 0.840 vs 0.820 |" in text
    assert "C5 under zw_tight_all" in text and "| yes | ratio 2.3" in text
    assert "| zw_general | 0.1 | 0.820 (6e+05) | 0.820 (6e+05) |" in text


def test_saved_sweeps_round_trip_and_are_reincluded_by_report_only(full_run, tmp_path, capsys):
    fig1 = {("alpha", 0.5, 0.2): 0.81, ("noise", "gaussian", 0.05): 0.75,
            ("budget_filter", "zcdp", 0.05): 0.747}
    fig2 = {0.1: dict(acc=0.83, gradient_evaluations=6e5, objective_evaluations=3e6)}
    ablation = {("sgm_exact", 1.0, 0.4): dict(acc=0.835, gradient_evaluations=5e6,
                                              objective_evaluations=2e7)}
    path = S.save_sweeps(tmp_path / S.SWEEPS_NAME, fig1, fig2, ablation, folds=10, runs=1)
    assert S.load_sweeps(path) == (fig1, fig2, ablation, 10, 1)
    assert S.main(["--out", str(tmp_path), "--report-only", "--checkpoint", str(full_run[0])]) == 0
    assert "(+ sweeps from" in capsys.readouterr().out
    md = (tmp_path / "seed003.md").read_text()
    assert "Adult, 10 fold(s) × 1 run(s) per point" in md
    assert "| budget_filter | zcdp | 0.747 | — |" in md
    assert "| sgm_exact | 1.0 | 0.835 (5e+06) |" in md


def test_amplification_ablation_runs_each_bound_and_q1_is_bound_free(data_dir):
    """At q = 1 nothing is subsampled, so the three bounds must give the same run;
    at q = 0.1 the tighter (unproven) bound affords more iterations than the default."""
    table = S.run_amplification_ablation(folds=1, runs=1, epsilons=(0.4,), sample_rates=(0.1, 1.0),
                                         data_home=data_dir, log=_quiet)
    assert set(table) == {(a, q, 0.4) for a in S.AMPLIFICATIONS for q in (0.1, 1.0)}
    full = [table[(a, 1.0, 0.4)] for a in S.AMPLIFICATIONS]
    assert all(row == full[0] for row in full)
    assert table[("zw_tight_all", 0.1, 0.4)]["gradient_evaluations"] > \
        table[("zw_general", 0.1, 0.4)]["gradient_evaluations"]
    assert 0.7 < table[("zw_general", 0.1, 0.4)]["acc"] < 0.9


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
    # best line search 0.70 vs DP-SGD 0.762 at ε = 0.05; 0.84 vs 0.84 at 1.6 (a tie counts as a win)
    assert claims["C8: the best line-search method ≥ the best baseline in most cases"] == (False, "1/2")
    assert claims["(diagnostic) C8 at ε ≤ 0.2"] == (False, "0/1")
    assert claims["(diagnostic) C8 at ε > 0.2"] == (True, "1/1")
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


# --------------------------------------------------------------------------
# resumable unit checkpoint (run_units / grid_from_units / report_from_units)
# --------------------------------------------------------------------------
import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from fastdp.exceptions import ValidationError  # noqa: E402

# The harness tests below check the unit bookkeeping (checkpoint, resume, merge, budget,
# report), which is the same for every algorithm: a full-batch and a subsampled private
# method (DP-BLGD, DP-SGD), the non-private fit and the constant.  DP-BLGD stands in for
# DP-BLSGD, which costs about 15 times more a fit on these rows (about 1 CPU s against
# 0.07); DP-BLSGD goes through the same units in test_small_reproduction_writes_report and,
# bit for bit against the published archive, in
# test_committed_report_is_rebuilt_from_its_units_and_fits_rerun_bit_for_bit.
SMALL = dict(datasets=("bank",), losses=("logistic",), algorithms=("DP-BLGD", "DP-SGD",
             "NON-PRIVATE", "MAJORITY"), epsilons=(0.4, 1.6), folds=range(3), runs=range(2))
N_SMALL_UNITS = 2 * 2 * 3 * 2 + 2 * 3


def _synthetic():
    rng = np.random.default_rng(7)
    X = rng.random((600, 6)) * (rng.random((600, 6)) < 0.6)
    y = np.where(X @ np.array([2.0, -1.0, 1.0, 0.5, -0.5, 1.0]) + 0.2 * rng.standard_normal(600)
                 > 1.0, 1.0, -1.0)
    return S._with_bias(sp.csr_matrix(X)), y


@pytest.fixture(scope="module")
def small_data():
    return {"bank": _synthetic()}


@pytest.fixture(scope="module")
def full_run(small_data, tmp_path_factory):
    """The uninterrupted reference run: (checkpoint, report dir)."""
    out = tmp_path_factory.mktemp("full")
    status = S.run_units(out / "u.jsonl", data=small_data, log=_quiet, **SMALL)
    assert status == dict(ran=N_SMALL_UNITS, skipped=0, remaining=0, stopped=False)
    S.report_from_units(out, [out / "u.jsonl"])
    return out / "u.jsonl", out


def _quiet(*args):
    pass


def _report(out):
    """(grid records, markdown without the timing) of a written report."""
    data = json.loads((Path(out) / "seed003.json").read_text())
    md = re.sub(r"fit time \(sum over the fits\) [0-9.]+ min", "", (Path(out) / "seed003.md").read_text())
    return data["grid"], md


def test_units_reproduce_run_grid_bit_for_bit(small_data, full_run, monkeypatch):
    monkeypatch.setattr(S.units, "load_paper_dataset", lambda name, home=None: small_data[name])
    sel = {k: v for k, v in SMALL.items() if k not in ("folds", "runs")}
    old = S.run_grid(folds=3, runs=2, log=_quiet, **sel)
    new = S.grid_from_units(S.read_units(full_run[0]))     # through the JSON checkpoint
    assert set(old) == set(new) and len(old) == 2 * 2 + 2
    for key, cell in old.items():
        assert {k: new[key][k] for k in cell} == cell          # exact float equality
        assert new[key]["folds"] == [0, 1, 2]
        assert new[key]["runs"] == ([0, 1] if key[2] in S.PRIVATE else [0])
    seeds = {(r["fold"], r["run"]): r["seed"] for r in S.read_units(full_run[0]).values()}
    assert seeds[(2, 1)] == 2001 and seeds[(0, 0)] == 0


def test_committed_report_is_rebuilt_from_its_units_and_fits_rerun_bit_for_bit(data_dir, tmp_path):
    """reproductions/: the cells of seed003.json are the averages of the published per-fit
    archive, and re-running some of those fits gives the archived records exactly."""
    repro = Path(__file__).resolve().parents[2] / "reproductions"
    if not (repro / S.ARCHIVE_NAME).exists():
        pytest.skip("reproductions/seed003_units.jsonl.gz not in this checkout")
    archive = S.read_units(repro / S.ARCHIVE_NAME)
    committed = json.loads((repro / "seed003.json").read_text())
    assert committed["units"] == len(archive)
    rebuilt = S.grid_from_units(archive)
    ref = S.grid_from_records(committed["grid"])
    assert set(rebuilt) == set(ref)
    for key, cell in ref.items():
        assert {k: rebuilt[key][k] for k in cell} == cell          # exact float equality
    plan = dict(datasets=("bank",), losses=("hinge",), algorithms=("DP-BLSGD", "DP-BLGD", "MAJORITY"),
                epsilons=(1.6,), folds=(0, 7), runs=(0, 4))
    S.run_units(tmp_path / "u.jsonl", data_home=data_dir, log=_quiet, **plan)
    rerun = S.read_units(tmp_path / "u.jsonl")
    assert len(rerun) == 2 * 2 * 2 + 2
    for key, record in rerun.items():
        # the fit itself bit for bit; the accountant's bookkeeping of the epsilon spent to
        # 1e-12 (its last bit follows the installed numpy/scipy build, not the fit)
        assert {k: record[k] for k in ("acc", "obj", "seed")} == \
            {k: archive[key][k] for k in ("acc", "obj", "seed")}
        got, want = record["info"], archive[key]["info"]
        assert set(got) == set(want)
        for name, value in want.items():
            if isinstance(value, float) and name.startswith(("epsilon", "rho")):
                assert got[name] == pytest.approx(value, rel=1e-12, abs=0.0), name
            else:
                assert got[name] == value, name


def test_unit_archive_round_trip_is_sorted_byte_stable_and_read_only(full_run, tmp_path):
    units = S.read_units(full_run[0])
    shuffled = dict(reversed(list(units.items())))
    a = S.write_unit_archive(tmp_path / "a" / S.ARCHIVE_NAME, units)
    b = S.write_unit_archive(tmp_path / "b" / S.ARCHIVE_NAME, shuffled)
    assert a.read_bytes() == b.read_bytes()                  # order- and time-independent
    back = S.read_units(a)
    assert back == units
    keys = list(back)
    assert keys == sorted(keys, key=lambda k: (S.ALGORITHMS.index(k[2]), k[3] or -1, k[5], k[4]))
    S.report_from_units(tmp_path / "r", [a])
    assert _report(tmp_path / "r") == _report(full_run[1])    # the archive rebuilds the report
    with pytest.raises(ValidationError, match="archive"):
        S.run_units(a, resume=True, **SMALL)


def test_resume_after_a_kill_gives_the_uninterrupted_report(small_data, full_run, tmp_path):
    ck = tmp_path / "u.jsonl"
    seen = []

    def kill_after_seven(record):
        seen.append(record)
        if len(seen) == 7:
            raise KeyboardInterrupt        # the process dies after the 7th unit is saved

    with pytest.raises(KeyboardInterrupt):
        S.run_units(ck, data=small_data, log=_quiet, after_unit=kill_after_seven, **SMALL)
    with open(ck, "a") as fh:              # ... and a second kill in the middle of a write
        fh.write('{"dataset": "bank", "loss": "logi')
    assert len(S.read_units(ck)) == 7
    with pytest.raises(ValidationError, match="--resume"):
        S.run_units(ck, data=small_data, log=_quiet, **SMALL)
    status = S.run_units(ck, data=small_data, log=_quiet, resume=True, **SMALL)
    assert status == dict(ran=N_SMALL_UNITS - 7, skipped=7, remaining=0, stopped=False)
    assert ck.read_text().count("\n") == N_SMALL_UNITS     # the torn line was cut off
    S.report_from_units(tmp_path, [ck])
    assert _report(tmp_path) == _report(full_run[1])
    # resuming a complete checkpoint runs nothing
    assert S.run_units(ck, data=small_data, log=_quiet, resume=True, **SMALL)["ran"] == 0


def test_fold_range_split_and_merge_equals_one_run(small_data, full_run, tmp_path):
    sel = {k: v for k, v in SMALL.items() if k != "folds"}
    S.run_units(tmp_path / "a.jsonl", data=small_data, log=_quiet, folds=range(0, 2), **sel)
    S.run_units(tmp_path / "b.jsonl", data=small_data, log=_quiet, folds=range(1, 3), **sel)
    S.report_from_units(tmp_path, [tmp_path / "a.jsonl", tmp_path / "b.jsonl"])  # fold 1 twice
    assert _report(tmp_path) == _report(full_run[1])
    text = (tmp_path / "seed003.md").read_text()
    assert "Every private cell averages 3 fold(s) × 2 run(s) (folds 0–2, runs 0–1: 6 fits)" in text
    assert "Protocol: 3 of 10 folds × 2 run(s)" in text


def test_budget_stops_cleanly_and_the_report_states_uneven_coverage(small_data, full_run,
                                                                   tmp_path):
    minutes = iter(range(10_000))

    def clock():                           # one minute passes per look at the clock
        return 60.0 * next(minutes)

    ck = tmp_path / "u.jsonl"
    status = S.run_units(ck, data=small_data, log=_quiet, budget_min=8, clock=clock, **SMALL)
    assert status == dict(ran=7, skipped=0, remaining=N_SMALL_UNITS - 7, stopped=True)
    units = S.read_units(ck)          # run-major order: every cell of fold 0, run 0 first
    assert sorted(k[4:] for k in units) == [(0, 0)] * 6 + [(1, 0)]
    S.report_from_units(tmp_path, [ck])
    text = (tmp_path / "seed003.md").read_text()
    assert "Cells differ in coverage" in text and "Protocol: cells differ" in text
    assert "| DP-BLGD | 2×1 | 1×1 |" in text and "| DP-SGD | 1×1 | 1×1 |" in text
    assert "| MAJORITY | 1×1 (any ε) | |" in text
    S.run_units(ck, data=small_data, log=_quiet, budget_min=4, clock=clock, resume=True, **SMALL)
    S.report_from_units(tmp_path, [ck])           # a cell missing from one pair also differs
    assert "Cells differ in coverage" in (tmp_path / "seed003.md").read_text()
    S.run_units(ck, data=small_data, log=_quiet, resume=True, **SMALL)
    S.report_from_units(tmp_path, [ck])
    assert _report(tmp_path) == _report(full_run[1])


def test_incomplete_cells_say_so():
    recs = [dict(dataset="bank", loss="logistic", algorithm="DP-BLSGD", epsilon=0.4, fold=f,
                 run=r, acc=0.9, obj=0.3, info={}) for f, r in ((0, 0), (0, 1), (1, 0))]
    grid = S.grid_from_units(recs)
    assert S.coverage(grid)[0] is None
    assert S._fits(grid[("bank", "logistic", "DP-BLSGD", 0.4)]) == "3 (folds 0–1; incomplete)"


def test_checkpoint_errors_and_selection_checks(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dataset": "bank"}\n{"x": 1}\n')
    with pytest.raises(ValidationError, match="bad.jsonl:1"):
        S.read_units(bad)
    with pytest.raises(ValidationError, match="no unit records"):
        S.report_from_units(tmp_path, [tmp_path / "missing.jsonl"])
    with pytest.raises(ValidationError, match="fold range"):
        S._selection(False, None, None, (3, 11), None)
    with pytest.raises(ValidationError, match="not both"):
        S._selection(False, 2, None, (0, 2), None)
    assert S._selection(True, None, None, None, None) == (range(0, 1), range(0, 1))
    assert S._selection(False, None, None, (4, 7), (1, 5)) == (range(4, 7), range(1, 5))


def test_cli_resume_with_budget_and_report_only(small_data, full_run, tmp_path, monkeypatch,
                                                capsys):
    import shutil

    shutil.copy(full_run[0], tmp_path / S.CHECKPOINT_NAME)
    monkeypatch.setattr(S.units, "load_paper_dataset", lambda name, home=None: small_data[name])
    # a zero budget runs nothing (the other 5 algorithms of fold 0 are left) and the
    # report is rebuilt from the units present
    assert S.main(["--out", str(tmp_path), "--resume", "--budget-min", "0", "--datasets",
                   "bank", "--losses", "logistic", "--epsilons", "0.4", "1.6", "--fold-range",
                   "0", "1", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "0 fit(s) run, 6 already in" in out and "budget reached, 10 left" in out
    assert _report(tmp_path) == _report(full_run[1])
    assert S.main(["--out", str(tmp_path / "r"), "--report-only", "--checkpoint",
                   str(full_run[0]), "--archive-units"]) == 0
    assert _report(tmp_path / "r") == _report(full_run[1])
    assert f"({N_SMALL_UNITS} fits)" in capsys.readouterr().out
    assert S.read_units(tmp_path / "r" / S.ARCHIVE_NAME) == S.read_units(full_run[0])
    assert S.main(["--out", str(tmp_path / "empty"), "--budget-min", "0"]) == 0
    assert "no report: the time budget ran out" in capsys.readouterr().out
    assert not (tmp_path / "empty" / "seed003.md").exists()
    with pytest.raises(SystemExit):       # an existing checkpoint needs --resume
        S.main(["--out", str(tmp_path), "--folds", "1", "--runs", "1", "--datasets", "bank"])
