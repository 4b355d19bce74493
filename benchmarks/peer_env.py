"""The comparison's own environment: a virtualenv with fastdp and the peer libraries.

``python benchmarks/peer_env.py [--dir DIR]`` creates (or updates) the venv
(default ``~/.cache/fastdp-bench/venv``), installs the peers, then fastdp from
this repository (a regular, non-editable build), and prints the venv's python.
:mod:`benchmarks.compare` calls :func:`ensure` and re-executes itself inside
that interpreter, so every pair is timed in one process on the same data.

Peers: scikit-learn, liblinear-official, snapml, cyanure, dp-accounting,
Opacus with CPU torch 2.13.0, prv_accountant and diffprivlib.  The optional
ones (everything but numpy/scipy/scikit-learn/dp-accounting) are installed one
by one; a peer that fails to install or import is reported and its rows are
skipped, never faked.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(os.environ.get("FASTDP_BENCH_ENV",
                                  Path.home() / ".cache" / "fastdp-bench" / "venv"))

BASE = ["numpy==2.4.6", "scipy", "scikit-learn", "numba", "Cython>=3", "setuptools", "wheel",
        "matplotlib", "dp-accounting", "psutil"]
# (pip requirement, import name); installed one at a time, failures tolerated
OPTIONAL = [
    ("liblinear-official", "liblinear"),
    ("snapml", "snapml"),
    ("cyanure", "cyanure"),
    ("torch==2.13.0", "torch"),
    ("opacus", "opacus"),
    ("prv-accountant", "prv_accountant"),
    ("diffprivlib", "diffprivlib"),
]


def python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _pip(py: Path, *args: str, check: bool = True) -> bool:
    cmd = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, check=check).returncode == 0


def _imports(py: Path, module: str) -> bool:
    return subprocess.run([str(py), "-c", f"import {module}"], capture_output=True).returncode == 0


def ensure(env_dir: Path = DEFAULT_DIR, *, reinstall_fastdp: bool = True) -> Path:
    """Create/update the venv; returns its python.  Idempotent (pip skips what is present)."""
    py = python_of(env_dir)
    if not py.exists():
        env_dir.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    missing = [r for r, m in [("numpy", "numpy"), ("scipy", "scipy"), ("scikit-learn", "sklearn"),
                              ("dp-accounting", "dp_accounting"), ("matplotlib", "matplotlib"),
                              ("Cython", "Cython"), ("numba", "numba"), ("psutil", "psutil")]
               if not _imports(py, m)]
    if missing:
        _pip(py, *BASE)
    for requirement, module in OPTIONAL:
        marker = env_dir / f".unavailable-{module}"
        if marker.exists() or _imports(py, module):
            continue
        _pip(py, requirement, check=False)
        if not _imports(py, module):
            marker.write_text(f"{requirement} did not install or import; delete this file to retry\n")
            print(f"peer {requirement}: not importable; its comparisons will be skipped")
    if reinstall_fastdp or not _imports(py, "fastdp"):
        _pip(py, "--no-deps", "--no-build-isolation", "--force-reinstall", str(REPO))
    return py


DIFFPRIVLIB_DIR = DEFAULT_DIR.parent / "venv-diffprivlib"
# diffprivlib 0.6.6 does not import with scikit-learn >= 1.7 (sklearn.tree._tree.DOUBLE is
# gone); it gets its own small venv with a scikit-learn it accepts (used by compare_utility.py)
DIFFPRIVLIB_REQS = ["numpy==2.4.6", "scipy", "scikit-learn==1.6.1", "diffprivlib==0.6.6"]


def ensure_diffprivlib(env_dir: Path = DIFFPRIVLIB_DIR) -> Path:
    """Create/update the diffprivlib venv (no fastdp in it); returns its python."""
    py = python_of(env_dir)
    if not py.exists():
        env_dir.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    if not _imports(py, "diffprivlib.models"):
        _pip(py, *DIFFPRIVLIB_REQS)
    return py


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    print(ensure(args.dir))


if __name__ == "__main__":
    main()
