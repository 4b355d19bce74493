"""How ``pytest -n N --dist loadfile`` hands test files to the workers (hooks for conftest.py).

pytest-xdist's ``loadfile`` gives each worker whole files, largest test count first.
Test counts say little about cost (a file of 400 quick checks against a file of
ten reproductions), so a costly file handed out last leaves the other worker idle.
Two changes, nothing else about the tests:

* **Longest first.** Every run records the seconds each file took (pytest's cache,
  key ``fastdp/file-seconds``); the next run hands out files in decreasing order of
  those seconds (files without a record: the mean seconds per test times their
  count).  Without a record (a fresh clone, ``-p no:cacheprovider``) xdist's own
  order is kept.
* **One Ray cluster.** Files that ask for the ``ray_cluster`` fixture
  (``tests/distributed/conftest.py``) form one unit, run one after the other by one
  worker, which then starts one local Ray cluster instead of one per file.
"""
import collections

import pytest

CACHE_KEY = "fastdp/file-seconds"
RAY_UNIT = "ray_cluster-files"

_seconds = collections.Counter()
_tests = collections.Counter()


def _file_of(nodeid):
    return nodeid.split("::", 1)[0]


def _is_worker(config):
    return hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    _seconds[_file_of(report.nodeid)] += report.duration
    _tests[_file_of(report.nodeid)] += report.when == "setup"


def pytest_sessionfinish(session):
    config = session.config
    if _is_worker(config) or getattr(config, "cache", None) is None or not _seconds:
        return
    recorded = config.cache.get(CACHE_KEY, {})
    recorded.update({f: [round(s, 2), _tests[f]] for f, s in _seconds.items()})
    config.cache.set(CACHE_KEY, recorded)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """A ``loadfile`` scheduler ordered by recorded seconds, with the Ray files as one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    recorded = config.cache.get(CACHE_KEY, {}) if getattr(config, "cache", None) else {}
    recorded = {f: v for f, v in recorded.items() if isinstance(v, list) and len(v) == 2}
    uses_ray = {}

    def in_ray_unit(path):
        if path not in uses_ray:
            try:
                uses_ray[path] = "ray_cluster" in (config.rootpath / path).read_text()
            except OSError:
                uses_ray[path] = False
        return uses_ray[path]

    per_test = (sum(s for s, _ in recorded.values())
                / max(1, sum(n for _, n in recorded.values())))

    def estimate(scope, nodeids):
        """Recorded seconds of the unit's files; the mean per test for files not recorded."""
        counts = collections.Counter(_file_of(n) for n in nodeids)
        return sum(recorded[f][0] if f in recorded else per_test * n for f, n in counts.items())

    class CostOrderedLoadFile(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid):
            path = _file_of(nodeid)
            return RAY_UNIT if in_ray_unit(path) else path

        def _assign_work_unit(self, node):
            if recorded and not self.ordered:
                units = sorted(self.workqueue.items(), key=lambda kv: -estimate(*kv))
                self.workqueue.clear()
                self.workqueue.update(units)
            self.ordered = True
            super()._assign_work_unit(node)

    return CostOrderedLoadFile(config, log)
