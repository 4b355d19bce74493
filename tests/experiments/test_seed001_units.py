"""Seed 001 through the shared runner: one unit per sweep point, the random stream resumed.

(The reproduction's numbers are tested in tests/solvers/piecewise_affine/test_piecewise_affine.py.)
"""
import json

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner, seed001


def tiny():
    return seed001.quick_config(n_runs=20, n_steps=200, n_iter=10, n_importance=2000,
                                c_grid=(0.1, 1.0), m_grid=(5, 10), k_grid=(2, 5), eps_grid=(1.0,))


def test_units_resume_the_random_stream_and_report_only(tmp_path, capsys):
    cfg = tiny()
    lines = []
    full = seed001.run_all(cfg, checkpoint=tmp_path / "a" / "u.jsonl", log=lines.append)
    assert [line.split(" ", 1)[0] for line in lines] == [f"[{k}/7]" for k in range(1, 8)]
    assert seed001.plan_units(cfg) == [("k", 2), ("k", 5), ("c", 0.1), ("c", 1.0), ("m", 5),
                                       ("m", 10), ("eps", 1.0)]
    same = seed001.run_all(cfg)                          # the same numbers in memory
    assert json.dumps(runner.jsonable(same)) == json.dumps(runner.jsonable(full))
    # a run killed after 3 points, resumed: the stream continues where it stopped
    head = (tmp_path / "a" / "u.jsonl").read_text().splitlines()[:4]    # settings + 3 units
    part = tmp_path / "b" / "u.jsonl"
    part.parent.mkdir()
    part.write_text("\n".join(head) + "\n")
    resumed_lines = []
    resumed = seed001.run_all(cfg, checkpoint=part, resume=True, log=resumed_lines.append)
    assert resumed_lines[0].startswith("[4/7] c = 1 ")
    assert json.dumps(runner.jsonable(resumed)) == json.dumps(runner.jsonable(full))
    # without the saved state the resumed points differ (so the comparison above can fail)
    record = json.loads(head[3])
    record["rng_state"] = np.random.default_rng(cfg.seed).bit_generator.state
    other = tmp_path / "c.jsonl"
    other.write_text("\n".join(head[:3] + [json.dumps(record)]) + "\n")
    restarted = seed001.run_all(cfg, checkpoint=other, resume=True, log=None)
    assert restarted["c"][1.0]["M_P"] != full["c"][1.0]["M_P"]
    with pytest.raises(ValidationError, match="--resume"):
        seed001.run_all(cfg, checkpoint=part, log=None)  # existing checkpoint, no resume
    # --report-only rebuilds the report from the checkpoint and its settings line
    seed001.write_report(full, cfg, tmp_path / "r1", figures=False)
    assert seed001.main(["--report-only", "--out", str(tmp_path / "r2"), "--checkpoint",
                         str(part), "--no-figures"]) == 0
    assert (tmp_path / "r2" / "seed001.md").read_text() == \
        (tmp_path / "r1" / "seed001.md").read_text()
    assert "| claim | held | detail |" in capsys.readouterr().out


def test_a_budget_stopped_sweep_is_left_out_of_the_report(tmp_path):
    cfg = tiny()
    ck = tmp_path / "u.jsonl"
    seed001.run_all(cfg, checkpoint=ck, log=None, which=("k",))
    units = runner.read_units(ck, runner.unit_key)
    del units[("k", 5)]
    results = seed001.results_from_units(units, cfg, ("k",))
    assert "k" not in results and results["claims"] == []
