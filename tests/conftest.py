"""Shared pytest fixtures for the fastdp test suite."""
import os
import pathlib

import numpy as np
import pytest
from hypothesis import settings

# CI runs must not depend on hypothesis' random choice of examples: the "ci"
# profile derandomises them (same examples every run).  Locally, examples vary.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def shared_data_dir():
    """Directory holding the real datasets, or None when it is not available.

    Looks at ``FASTDP_DATA`` first, then ``../shared/data`` beside the repository.
    """
    candidates = []
    if os.environ.get("FASTDP_DATA"):
        candidates.append(pathlib.Path(os.environ["FASTDP_DATA"]))
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for path in candidates:
        if path.is_dir() and (path / "MANIFEST.md").exists():
            return path
    return None


@pytest.fixture(scope="session")
def data_dir():
    """Path of the shared real datasets; skips the test when they are absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("real datasets not found (set FASTDP_DATA or place ../shared/data)")
    return path


@pytest.fixture
def rng():
    """A fixed-seed numpy Generator for test data."""
    return np.random.default_rng(12345)


@pytest.fixture
def make_linear_data(rng):
    """Factory of small planted linear problems with unit-norm rows, drawn from ``rng``.

    ``make_linear_data(n, task="binary")`` returns ``X`` of shape (n, m) with
    Gaussian rows scaled to norm 1, and labels in {0, 1} from
    ``sign(X w + 0.1 noise)``; ``task="regression"`` returns targets
    ``X w + 0.05 noise``.  ``w`` and the noise are standard normal.
    """

    def make(n, m=8, task="binary"):
        X = rng.normal(size=(n, m))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        w = rng.normal(size=m)
        if task == "binary":
            return X, np.where(X @ w + 0.1 * rng.normal(size=n) > 0, 1, 0)
        return X, X @ w + 0.05 * rng.normal(size=n)

    return make



# pytest-xdist: longest files first, the Ray files on one worker (see tests/_schedule.py).
from _schedule import (  # noqa: E402,F401
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_xdist_make_scheduler,
)

# the slowest test files, printed at the end of every run (see tests/_durations.py)
from _durations import pytest_terminal_summary  # noqa: E402,F401
