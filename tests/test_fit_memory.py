"""Peak memory of a fit stays near the size of X (issue 20, item 3).

Each fit runs in a fresh interpreter (``benchmarks/fit_memory.py child``): it
imports fastdp, notes its resident size (the baseline), builds a sparse CSR
dataset in place (about 200-300 MB of X) and fits ``DPLogisticRegression``.
Its peak resident size (``VmHWM``) minus the baseline must stay below

    BOUND = 1.10 * size(X) + 160 B * n + 64 B * d + 64 MiB

with size(X) the bytes of ``data``, ``indices`` and ``indptr``.  Besides X a fit
needs a few vectors per example (labels, squared norms, the row map's factors,
an epoch's batch indices: about 60-100 B per row measured) and per feature
(coefficients, lazy-noise bookkeeping: about 40 B), which the two middle terms
bound with room to spare; 10 % of X and 64 MiB absorb the rest (allocator
slack, blocks of rows the validation works through).  Measured on the
project's machine with the sizes below: peak - baseline = 1.15-1.3 size(X);
the fit before issue 20 item 3 (a mapped copy of X and O(nnz) temporaries)
needed 2.5-4.9 size(X), so the bound fails for it.

The default run checks the default estimator (DP-SGD, ``normalize="auto"``) on
float32 data, with two classes and with three (multinomial DP-SGD, which reads
the mapped rows on the fly too; its model, K = 3 coefficients per feature, is
24 B per feature, inside the 64 B d term; measured: 1.5 size(X), and 2.5
size(X) when it wrote the mapped rows out); the others (float64,
``normalize=False``, DP-SCD, and a memory-mapped ``.fdp`` dataset trained
through ``fastdp train``) are marked ``slow``.  Linux only (``/proc/self/status``).

One accelerated (Nesterov) and one line-search solver (DP-BLSGD), a quarter
of an epoch each, read the mapped rows through the ``_glm`` kernels too
(issue 20, leftovers): measured 1.49 and 1.90 size(X) (their fits add about
10 and 20 vectors of d floats: iterates, gradients, noise); 2.57 and 2.69
size(X) when they wrote the mapped rows out, above the bound.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(),
                                reason="reads the peak resident size from /proc")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fit_memory.py"
N_ROWS, N_FEATURES, PER_ROW = 640_000, 1_000_000, 40   # 25.6 M entries


def bound(report):
    """The allowed peak over the baseline (see the module docstring)."""
    return (1.10 * report["x_bytes"] + 160 * report["n"] + 64 * report["d"] + 64 * 2**20)


def run(*args):
    """Run the benchmark script; its last output line, parsed as JSON (None if it printed none)."""
    out = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], check=True,
                         capture_output=True, text=True, env=dict(os.environ))
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def check(report):
    peak = report["peak_over_baseline"]
    assert report["x_bytes"] > 150 * 2**20          # X dominates the O(n + d) terms
    assert peak >= report["x_bytes"]                # the measurement sees X at all
    assert peak <= bound(report), (
        f"peak - baseline = {peak / 2**20:.0f} MiB > bound {bound(report) / 2**20:.0f} MiB "
        f"(size of X {report['x_bytes'] / 2**20:.0f} MiB): {report}")


def fit_in_memory(dtype, normalize, solver, classes=2, epochs=1.0):
    return run("child", "--n", N_ROWS, "--d", N_FEATURES, "--k", PER_ROW, "--dtype", dtype,
               "--normalize", normalize, "--solver", solver, "--classes", classes,
               "--epochs", epochs)


@pytest.mark.parametrize("solver", ["dp_nesterov", "dp_blsgd"])
def test_accelerated_and_line_search_fit_peak_is_about_the_size_of_X(solver):
    report = fit_in_memory("float32", "auto", solver, epochs=0.25)
    assert report["solver"] == solver
    check(report)


def test_default_fit_float32_peak_is_about_the_size_of_X():
    check(fit_in_memory("float32", "auto", "auto"))


def test_multinomial_fit_float32_peak_is_about_the_size_of_X():
    report = fit_in_memory("float32", "auto", "auto", classes=3)
    assert report["classes"] == 3
    check(report)


@pytest.mark.slow
@pytest.mark.parametrize("normalize", ["auto", "false"])
def test_multinomial_fit_float64_peak_is_about_the_size_of_X(normalize):
    check(fit_in_memory("float64", normalize, "dpsgd", classes=3))


@pytest.mark.slow
@pytest.mark.parametrize("dtype, normalize, solver", [
    ("float64", "auto", "auto"),
    ("float32", "false", "auto"),
    ("float64", "false", "auto"),
    ("float32", "auto", "dpscd"),    # float32 rows a few ulp above 1: the second per-row factor
    ("float64", "auto", "dpscd"),
])
def test_fit_peak_is_about_the_size_of_X(dtype, normalize, solver):
    check(fit_in_memory(dtype, normalize, solver))


@pytest.mark.slow
@pytest.mark.parametrize("normalize", ["auto", "false"])
def test_cli_train_on_memory_mapped_binary_dataset(tmp_path_factory, normalize):
    directory = tmp_path_factory.getbasetemp() / "fit_memory_fdp"
    fdp = directory / "data.fdp"
    if not fdp.exists():
        directory.mkdir(exist_ok=True)
        svm = directory / "data.svm"
        run("write-svm", svm, "--n", N_ROWS, "--d", N_FEATURES, "--k", PER_ROW)
        from fastdp.io.binary import convert_libsvm
        import numpy as np

        convert_libsvm(svm, fdp, dtype=np.float32, zero_based=False)
        svm.unlink()
    report = run("child", "--fdp", fdp, "--dtype", "float32", "--normalize", normalize)
    check(report)
