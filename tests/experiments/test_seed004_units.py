"""Seed 004 through the shared runner (the helpers are tested in tests/distributed/test_seed004.py)."""
import json

import pytest

from fastdp.datasets import make_sparse_classification
from fastdp.exceptions import ValidationError
from fastdp.experiments import runner, seed004
from fastdp.preprocessing import normalize_rows


@pytest.fixture(scope="module")
def small():
    X, y = make_sparse_classification(1200, 40, 8, random_state=2)[:2]
    X = normalize_rows(X)
    return X[:1000], y[:1000], X[1000:], y[1000:]


@pytest.fixture(scope="module")
def quick_run(small, tmp_path_factory):
    """One quick reproduction on ``small``: (its output directory, its progress lines).

    Both tests below read it and neither changes it (the resume test copies the
    checkpoint elsewhere), so it runs once per module instead of once per test.
    """
    out = tmp_path_factory.mktemp("seed004_quick")
    lines = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(seed004.units, "load_problem", lambda name, data_home=None: small)
        path = seed004.reproduce(out, quick=True, datasets=("syn",), log=lines.append)
    return path, lines


def _runs(result):
    """Runs without their timings, keyed by configuration."""
    drop = ("seconds", "seconds_per_round", "unit")
    return {(r["penalty"], r["method"], r["calibration"], r["eps"], r["seed"], r["message_dtype"]):
            {k: v for k, v in r.items() if k not in drop} for r in result["runs"]}


def test_quick_units_match_the_in_memory_grid_and_resume(small, quick_run, tmp_path,
                                                         monkeypatch):
    monkeypatch.setattr(seed004.units, "load_problem", lambda name, data_home=None: small)
    path, lines = quick_run
    assert path.exists() and "## syn" in path.read_text()
    plan = seed004.plan_units(("syn",), seed004._settings(True, (0,)))
    assert len(lines) == len(plan) == 2 + 29 and lines[-1].startswith(f"[{len(plan)}/{len(plan)}]")
    assert [key[0] for key in plan[:2]] == ["truth", "truth"]
    assert [key[-1] for key in plan[-4:]] == ["float32"] * 4
    saved = json.loads((path.parent / "seed004.json").read_text())["datasets"]["syn"]
    # the same runs, F* and suboptimalities as the in-memory grid of the same settings
    settings = seed004._settings(True, (0,))
    grid = seed004.run_grid(small, ("l2", "l1"), epsilons=(0.2, 1.0), seeds=(0,), epochs=1.0,
                            curve_eps=settings["curve_eps"],
                            float32=[tuple(c) for c in settings["float32"]], log=lambda *_: None)
    assert saved["truth"] == grid["truth"] and not saved["skipped"]
    assert _runs(saved) == {k: json.loads(json.dumps(v)) for k, v in _runs(grid).items()}
    # a session killed before the float32 re-runs, resumed: they re-run their float64 twin
    # (same bits) for the coefficient difference
    ck = path.parent / seed004.CHECKPOINT_NAME
    head = ck.read_text().splitlines()[:-4]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / seed004.CHECKPOINT_NAME).write_text("\n".join(head) + "\n")
    with pytest.raises(ValidationError, match="--resume"):
        seed004.reproduce(tmp_path / "b", quick=True, datasets=("syn",), log=None)
    seed004.reproduce(tmp_path / "b", quick=True, datasets=("syn",), resume=True, log=None)
    resumed = json.loads((tmp_path / "b" / "seed004.json").read_text())["datasets"]["syn"]
    f32 = [r for r in resumed["runs"] if r["message_dtype"] == "float32"]
    assert len(f32) == 4 and all(r["float64_rerun_identical"] for r in f32)
    for r in f32:
        r.pop("float64_rerun_identical")
    assert _runs(resumed) == _runs(saved)
    # --report-only from the checkpoint
    (tmp_path / "b" / "seed004.md").unlink()
    assert seed004.main(["--out", str(tmp_path / "b"), "--report-only"]) == 0
    assert "float32 messages" in (tmp_path / "b" / "seed004.md").read_text()


def test_budget_leaves_the_lowest_priority_runs_as_skipped(small, quick_run, tmp_path,
                                                           monkeypatch):
    monkeypatch.setattr(seed004.units, "load_problem", lambda name, data_home=None: small)
    assert seed004.reproduce(tmp_path, quick=True, datasets=("syn",), budget_min=0,
                             log=None) is None
    assert runner.read_units(tmp_path / seed004.CHECKPOINT_NAME, runner.unit_key) == {}
    assert not (tmp_path / "seed004.md").exists()
    settings = seed004._settings(True, (0,))
    full = quick_run[0].parent / seed004.CHECKPOINT_NAME      # the complete quick run
    some = dict(list(runner.read_units(full, runner.unit_key).items())[:7])
    result = seed004.results_from_units(some, settings)["syn"]
    assert len(result["runs"]) == 5 and len(result["skipped"]) == 29 - 5
    assert result["skipped"][-1][5] == "float32"

