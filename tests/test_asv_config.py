"""The asv configuration builds commits (history, regressions) with the project's dependencies."""

import json
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


def _asv_config():
    text = (ROOT / "asv.conf.json").read_text(encoding="utf-8")
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))


def _requirement_name(spec):
    return re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower()


def test_build_mode_installs_every_runtime_dependency():
    config = _asv_config()
    assert config["environment_type"] == "virtualenv"  # existing-env mode cannot build commits
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    needed = {_requirement_name(spec) for spec in project["dependencies"]}
    assert needed <= {name.lower() for name in config["matrix"]["req"]}
    assert any("python -m build" in command for command in config["build_command"])
    assert (ROOT / config["benchmark_dir"]).is_dir()


def test_make_targets_compare_and_publish():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    compare = makefile.split("\nbench-compare:", 1)[1].split("\n\n", 1)[0]
    assert "asv continuous --factor $(BENCH_FACTOR)" in compare and "main HEAD" in compare
    history = makefile.split("\nbench-history:", 1)[1].split("\n\n", 1)[0]
    assert "asv run" in history and "asv publish" in history
    assert re.search(r"^BENCH_FACTOR \?= [0-9.]+$", makefile, flags=re.MULTILINE)
