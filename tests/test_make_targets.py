"""The Makefile's incremental install (``make -n``: what make would run, nothing is run) and
the build requirements the debug build needs."""
import os
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def tree(tmp_path):
    """The files the install targets depend on, in a scratch directory."""
    for name in ("Makefile", "setup.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    kernels = tmp_path / "fastdp" / "_kernels"
    kernels.mkdir(parents=True)
    for source in sorted((ROOT / "fastdp" / "_kernels").glob("*.p[yx][xid]")):
        shutil.copy(source, kernels / source.name)
    return tmp_path


def _would_run(tree, target):
    done = subprocess.run(["make", "-n", target, "PYTHON=python3"], cwd=tree,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _installed(tree):
    """Stamp files newer than every source, as after a completed `make install-test`."""
    (tree / "build" / "stamps").mkdir(parents=True)
    later = time.time() + 5
    for stamp in ("installed", "kernels", "test-extras"):
        path = tree / "build" / "stamps" / stamp
        path.touch()
        os.utime(path, (later, later))


def test_a_fresh_tree_installs_the_package(tree):
    assert "pip install --quiet -e ." in _would_run(tree, "demo")


def test_an_installed_unchanged_tree_rebuilds_nothing(tree):
    _installed(tree)
    for target in ("demo", "install-test"):
        commands = _would_run(tree, target)
        assert "pip install" not in commands and "build_ext" not in commands
    assert "fastdp.demo" in _would_run(tree, "demo")


def test_a_changed_kernel_is_rebuilt_in_place_without_a_reinstall(tree):
    _installed(tree)
    later = time.time() + 10
    os.utime(tree / "fastdp" / "_kernels" / "_scd.pyx", (later, later))
    commands = _would_run(tree, "demo")
    assert "build_ext --inplace" in commands
    assert "pip install --quiet -e ." not in commands


def test_changed_metadata_reinstalls(tree):
    _installed(tree)
    later = time.time() + 10
    os.utime(tree / "pyproject.toml", (later, later))
    assert "pip install --quiet -e ." in _would_run(tree, "demo")


def test_the_test_extra_brings_the_build_requirements_of_the_debug_build():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = " ".join(project["project"]["optional-dependencies"]["test"]).lower()
    assert "cython" in extra and "setuptools" in extra
