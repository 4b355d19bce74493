"""Fixtures shared by the distributed tests: one local Ray cluster, the data-parallel data set.

Ray
    ``ray_cluster`` starts a local Ray (``num_cpus=2``, no dashboard, every service
    on 127.0.0.1) the first time a test asks for it and keeps it for the tests that
    follow in the same worker process; it is shut down as soon as the next test
    comes from a file that never asks for it (or at the end of the run), so an idle
    cluster never runs beside unrelated tests.  ``tests/conftest.py`` sends every
    file that asks for ``ray_cluster`` to one pytest-xdist worker, one after the
    other, so a run starts one cluster instead of one per file.
Data-parallel data set
    ``shard_data`` and ``shard_svm_file`` (the same rows as a LIBSVM file), built
    once per process from ``shard_setup.py``, which also holds the block size, the
    row count and the estimator of those tests.
"""
import os

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

_ray_files = set()     # test files with at least one test asking for ray_cluster
_started_here = []     # [ray] while a cluster started by ray_cluster is running


def pytest_collection_modifyitems(items):
    _ray_files.update(item.path for item in items if "ray_cluster" in item.fixturenames)


@pytest.fixture
def ray_cluster():
    """The running local Ray cluster (started on first use; skipped when Ray is absent)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        from fastdp.distributed.data_parallel import RayWorkers

        RayWorkers()._ray()
        _started_here[:] = [ray]
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    return ray


def pytest_runtest_teardown(item, nextitem):
    if _started_here and (nextitem is None or nextitem.path not in _ray_files):
        _started_here.pop().shutdown()


@pytest.fixture(scope="session")
def shard_data():
    """(X, y) of ``shard_setup.make_shard_data``: 2000 sparse rows, labels in {0, 1}."""
    from shard_setup import make_shard_data

    return make_shard_data()


@pytest.fixture(scope="session")
def shard_svm_file(shard_data, tmp_path_factory):
    """``shard_data`` written as a one-based LIBSVM file."""
    from sklearn.datasets import dump_svmlight_file

    path = tmp_path_factory.mktemp("shards") / "data.svm"
    dump_svmlight_file(shard_data[0], shard_data[1], str(path), zero_based=False)
    return path
