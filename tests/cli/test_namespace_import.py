"""``import fastdp`` from the directory above a clone named ``fastdp``: Python takes the
clone as a namespace package ahead of an editable install's finder; the first fastdp
module imported says so clearly instead of a distant ``cannot import name``."""
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# fastdp found only by a finder after the path finder in sys.meta_path, as with setuptools'
# editable install, and the current directory first on sys.path (python -c)
SCRIPT = r"""
import importlib.machinery, os, sys
class Editable:    # maps fastdp.* to the checkout under test, as an editable install's finder
    @staticmethod
    def find_spec(name, path=None, target=None):
        parts = name.split(".")
        if parts[0] == "fastdp":
            where = os.path.join(sys.argv[1], *parts[:-1])
            return importlib.machinery.PathFinder.find_spec(name, [where])
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder) + 1, Editable)
import fastdp
print("namespace" if fastdp.__file__ is None else "package")
try:
    from fastdp.persistence import save_model
except ImportError as exc:
    print("ImportError:", exc)
"""


def _run(cwd):
    return subprocess.run([sys.executable, "-c", SCRIPT, str(REPO_ROOT)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_clone_named_fastdp_in_the_current_directory_fails_clearly(tmp_path):
    (tmp_path / "fastdp" / "docs").mkdir(parents=True)     # a clone: no __init__.py at its root
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "namespace"
    assert lines[1].startswith("ImportError:")
    assert str(tmp_path / "fastdp") in lines[1] and "namespace package" in lines[1]
    assert "Run Python from another directory" in lines[1]


def test_without_the_clone_the_package_imports(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["package"]
