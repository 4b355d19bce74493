"""The shared experiment runner (fastdp.experiments.runner): checkpoint, resume, budget, progress."""
import gzip
import json
import math
import re

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner

PLAN = [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] (.*) \((\d+\.\d) s; elapsed (\d+:\d\d)(, ~(\d+:\d\d) left)?\)$")


def key_of(record):
    return tuple(record["unit"])


class Work:
    """A unit function that records its calls; the value of (name, i) is i squared (+ earlier)."""

    def __init__(self, fail_after=None):
        self.calls, self.fail_after = [], fail_after

    def __call__(self, key, units):
        self.calls.append(key)
        earlier = sum(r["value"] for r in units.values())       # units may read earlier ones
        return {"unit": list(key), "value": key[1] ** 2 + earlier, "arr": np.arange(key[1])}

    def after(self, record):
        if self.fail_after is not None and len(self.calls) == self.fail_after:
            raise KeyboardInterrupt          # the process dies after this unit is saved


def run(path, work, **kw):
    kw.setdefault("log", None)
    return runner.run_units(path, PLAN, work, key_of=key_of, after_unit=work.after, **kw)


def test_checkpoint_round_trip_with_settings(tmp_path):
    ck = tmp_path / "u.jsonl"
    status, units = run(ck, Work(), settings={"grid": (1, 2), "x": np.float64(0.5)})
    assert status == dict(ran=5, skipped=0, remaining=0, stopped=False)
    assert list(units) == PLAN
    lines = ck.read_text().splitlines()
    assert json.loads(lines[0]) == {"settings": {"grid": [1, 2], "x": 0.5}}
    assert runner.read_settings(ck) == {"grid": [1, 2], "x": 0.5}
    back = runner.read_units(ck, key_of)
    assert list(back) == PLAN
    # values as computed: 1, 4 + 1, 1 + 6, 4 + 13, 1 + 30; arrays as lists
    assert [r["value"] for r in back.values()] == [1, 5, 7, 17, 31]
    assert back[("b", 2)]["arr"] == [0, 1]
    assert [r["value"] for r in units.values()] == [1, 5, 7, 17, 31]


def test_torn_last_line_is_ignored_then_cut_off(tmp_path):
    ck = tmp_path / "u.jsonl"
    runner.append_record(ck, {"unit": ["a", 1], "value": 1})
    runner.append_record(ck, {"unit": ["a", 2], "value": 4})
    with open(ck, "a") as fh:                 # a kill in the middle of the third write
        fh.write('{"unit": ["b", 1], "val')
    size = ck.stat().st_size
    assert list(runner.read_units(ck, key_of)) == [("a", 1), ("a", 2)]
    assert ck.stat().st_size == size          # reading alone changes nothing
    assert len(runner.read_units(ck, key_of, repair=True)) == 2
    assert ck.read_text().endswith('"value": 4}\n')
    runner.append_record(ck, {"unit": ["b", 1], "value": 9})
    assert [r["value"] for r in runner.read_units(ck, key_of).values()] == [1, 4, 9]


def test_a_bad_line_names_the_file_and_line(tmp_path):
    ck = tmp_path / "bad.jsonl"
    ck.write_text('{"unit": ["a", 1]}\n{"no unit": 1}\n')
    with pytest.raises(ValidationError, match=r"bad.jsonl:2: not a thing record"):
        runner.read_units(ck, key_of, label="thing")


def test_resume_skips_the_done_units_and_gives_the_uninterrupted_result(tmp_path):
    _, reference = run(tmp_path / "ref.jsonl", Work())
    ck = tmp_path / "u.jsonl"
    first = Work(fail_after=3)
    with pytest.raises(KeyboardInterrupt):
        run(ck, first)
    assert first.calls == PLAN[:3] and len(runner.read_units(ck, key_of)) == 3
    with pytest.raises(ValidationError, match="--resume"):     # never overwritten
        run(ck, Work())
    second = Work()
    status, units = run(ck, second, resume=True)
    assert second.calls == PLAN[3:]
    assert status == dict(ran=2, skipped=3, remaining=0, stopped=False)
    assert [r["value"] for r in units.values()] == [r["value"] for r in reference.values()]
    again = Work()
    assert run(ck, again, resume=True)[0]["ran"] == 0 and again.calls == []


def test_resume_with_other_settings_is_refused(tmp_path):
    ck = tmp_path / "u.jsonl"
    run(ck, Work(), settings={"grid": [1, 2]})
    with pytest.raises(ValidationError, match="other settings"):
        run(ck, Work(), settings={"grid": [1, 3]}, resume=True)
    assert run(ck, Work(), settings={"grid": (1, 2)}, resume=True)[0]["ran"] == 0


def test_budget_stops_before_the_next_unit(tmp_path):
    minutes = iter(range(100))

    def clock():                      # one minute passes per look at the clock
        return 60.0 * next(minutes)

    lines = []
    ck = tmp_path / "u.jsonl"
    status, units = run(ck, Work(), budget_min=3, clock=clock, log=lines.append)
    assert status == dict(ran=2, skipped=0, remaining=3, stopped=True)
    assert list(units) == PLAN[:2]
    assert lines[-1] == "time budget of 3 min reached: 3 unit(s) left (rerun with --resume)"
    status, units = run(ck, Work(), budget_min=0, resume=True)
    assert status == dict(ran=0, skipped=2, remaining=3, stopped=True) and len(units) == 2


def test_in_memory_runs_need_no_file(tmp_path):
    status, units = runner.run_units(None, PLAN, Work(), key_of=key_of, log=None)
    assert status["ran"] == 5 and list(units) == PLAN
    assert list(tmp_path.iterdir()) == []


def test_records_are_stamped_with_key_and_time_by_default(tmp_path):
    ck = tmp_path / "u.jsonl"
    _, units = runner.run_units(ck, PLAN[:2], lambda key, units: {"x": key[1]},
                                timer=lambda: 5.0, log=None)          # no time passes
    assert units[("a", 1)] == {"unit": ["a", 1], "x": 1, "seconds": 0.0}
    runner.run_units(ck, PLAN[:3], lambda key, units: {"seconds": 7}, resume=True, log=None)
    assert runner.read_units(ck, runner.unit_key)[("b", 1)] == {"unit": ["b", 1], "seconds": 7}
    assert runner.read_checkpoint(ck)[0] is None and len(runner.read_checkpoint(ck)[1]) == 3
    with pytest.raises(ValidationError, match="no unit records"):
        runner.read_checkpoint(tmp_path / "missing.jsonl")


def test_progress_line_and_estimate_text():
    assert runner.format_duration(0) == "0:00"
    assert runner.format_duration(59.6) == "1:00"
    assert runner.format_duration(754) == "12:34"
    assert runner.format_duration(3 * 3600 + 62) == "3:01:02"
    assert runner.progress_line(3, 14, "phishing DP-SCD ε=0.5", "accuracy 0.9012", 4.23, 13.2,
                                48.0) == \
        "[3/14] phishing DP-SCD ε=0.5 accuracy 0.9012 (4.2 s; elapsed 0:13, ~0:48 left)"
    assert runner.progress_line(1, 2, "u", "", 0.04, 0.0, None) == "[1/2] u (0.0 s; elapsed 0:00)"


class FakeTimer:
    """perf_counter whose units take 10, 20, 30, ... seconds."""

    def __init__(self):
        self.now, self.k, self.in_unit = 0.0, 0, False

    def __call__(self):
        return self.now

    def unit(self, key, units):
        self.k += 1
        self.now += 10.0 * self.k
        return {"unit": list(key)}


def test_estimate_is_the_mean_unit_time_times_the_units_left(tmp_path):
    timer, lines = FakeTimer(), []
    runner.run_units(tmp_path / "u.jsonl", PLAN, timer.unit, key_of=key_of, timer=timer,
                     log=lines.append, describe=lambda k: f"{k[0]}{k[1]}",
                     summarize=lambda r: "done")
    parsed = [PROGRESS.match(line) for line in lines]
    assert all(parsed), lines
    # unit k takes 10 k s; after k units the mean is 5 (k + 1) s and 5 - k units are left
    for k, m in enumerate(parsed, start=1):
        assert (int(m.group(1)), int(m.group(2))) == (k, 5)
        assert float(m.group(4)) == 10.0 * k
        left = 5 * (k + 1) * (5 - k)
        assert m.group(7) == runner.format_duration(left)
        assert m.group(5) == runner.format_duration(5 * k * (k + 1))
    assert lines[0] == "[1/5] a1 done (10.0 s; elapsed 0:10, ~0:40 left)"


def test_estimate_with_unit_costs_and_after_a_resume(tmp_path):
    ck = tmp_path / "u.jsonl"
    runner.run_units(ck, PLAN[:2], lambda key, units: {"unit": list(key)}, key_of=key_of,
                     log=None)
    timer, lines = FakeTimer(), []
    cost = {("b", 1): 1.0, ("b", 2): 2.0, ("c", 1): 4.0}
    runner.run_units(ck, PLAN, timer.unit, key_of=key_of, timer=timer, resume=True,
                     log=lines.append, cost=cost.__getitem__)
    # numbering continues after the 2 units already done; the first unit (cost 1) took
    # 10 s, so the 6 units of cost left are estimated at 60 s
    assert lines[0].startswith("[3/5] ") and lines[0].endswith("(10.0 s; elapsed 0:10, ~1:00 left)")
    # then 30 s for 3 units of cost: 10 s per unit of cost, 4 left
    assert lines[1].endswith("(20.0 s; elapsed 0:30, ~0:40 left)")


def test_archive_is_sorted_byte_stable_and_read_only(tmp_path):
    _, units = run(tmp_path / "u.jsonl", Work())
    records = [runner.jsonable(r) for r in units.values()]

    def sort_key(record):
        return (-record["unit"][1], record["unit"][0])

    a = runner.write_unit_archive(tmp_path / "a" / "u.jsonl.gz", records, sort_key)
    b = runner.write_unit_archive(tmp_path / "b" / "u.jsonl.gz", records[::-1], sort_key)
    assert a.read_bytes() == b.read_bytes()
    keys = [tuple(json.loads(line)["unit"]) for line in gzip.decompress(a.read_bytes()).splitlines()]
    assert keys == [("a", 2), ("b", 2), ("a", 1), ("b", 1), ("c", 1)]
    assert runner.read_units(a, key_of) == {tuple(r["unit"]): r for r in records}
    with pytest.raises(ValidationError, match="read-only"):
        runner.read_units(a, key_of, repair=True)
    merged = runner.merge_units([tmp_path / "missing.jsonl", a], key_of)
    assert len(merged) == 5


def test_jsonable_and_report_helpers(tmp_path):
    obj = {1.5: (np.int64(3), np.float32(0.5), np.array([1.0, np.inf])), "b": np.bool_(True),
           "n": [math.nan]}
    assert runner.jsonable(obj) == {"1.5": [3, 0.5, [1.0, math.inf]], "b": True, "n": [math.nan]}
    strict = runner.jsonable(obj, nonfinite="string")
    assert strict["1.5"][2] == [1.0, "inf"] and strict["n"] == ["nan"]
    path = runner.write_json(tmp_path / "x.json", obj, nonfinite="string")
    assert json.loads(path.read_text())["n"] == ["nan"]
    with pytest.raises(ValidationError):
        runner.jsonable(obj, nonfinite="drop")
    assert runner.claims_table([("c1", True, "1/1"), ("c2", np.bool_(False), "0/1")]) == [
        "| claim | held | detail |", "|---|---|---|", "| c1 | yes | 1/1 |", "| c2 | no | 0/1 |"]
    assert runner.claims_table([("c", True)], ("claim", "held"), yes="PASS")[2] == "| c | PASS |"
    assert runner.verdict([True, True]) == "yes" and runner.verdict([False]) == "no"
    assert runner.verdict([True, False, True]) == "partly (2/3)"
    assert runner.verdict([]).startswith("n/a")


def test_base_parser_and_checkpoint_path(tmp_path):
    parser = runner.base_parser("demo", name="seed999")
    args = parser.parse_args([])
    assert (args.out, args.quick, args.resume, args.budget_min, args.report_only) == \
        ("seed999_results", False, False, None, False)
    assert runner.checkpoint_path(args, "seed999") == \
        runner.Path("seed999_results") / "seed999_units.jsonl"
    args = parser.parse_args(["--out", str(tmp_path), "--quick", "--resume", "--budget-min", "2.5",
                              "--report-only", "--checkpoint", "c.jsonl"])
    assert (args.quick, args.resume, args.budget_min, args.report_only) == (True, True, 2.5, True)
    assert runner.checkpoint_path(args, "seed999") == runner.Path("c.jsonl")
