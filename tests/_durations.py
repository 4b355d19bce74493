"""The report of the slowest test files printed at the end of every run (a conftest hook).

Where the time of ``make test`` goes, file by file: seconds of setup, call and
teardown summed over each file's tests (across all workers with
``pytest -n``; the wall time of a parallel run is about the sum divided by the
workers), the file's share of the total and its number of tests. The
seconds come from the counters of ``tests/_schedule.py``, which also orders
the next run by them. ``pytest --durations=N`` still lists single tests.
"""


def slowest_files(seconds, tests, top=12):
    """Lines of the report: a heading, one line per file (slowest first), a total.

    Parameters
    ----------
    seconds : mapping
        Test file -> seconds summed over its tests' phases.
    tests : mapping
        Test file -> number of its tests.
    top : int, default=12
        Files listed.

    Returns
    -------
    list of str
    """
    total = sum(seconds.values())
    if not seconds or total <= 0:
        return []
    ranked = sorted(seconds.items(), key=lambda item: (-item[1], item[0]))
    lines = [f"{len(ranked)} test files took {total:.1f} s of test time in all; "
             f"the {min(top, len(ranked))} slowest:"]
    width = max(len(path) for path, _ in ranked[:top])
    for path, spent in ranked[:top]:
        lines.append(f"  {spent:8.1f} s  {100.0 * spent / total:5.1f} %  {path:<{width}}  "
                     f"({tests.get(path, 0)} tests)")
    rest = total - sum(spent for _, spent in ranked[:top])
    if len(ranked) > top:
        lines.append(f"  {rest:8.1f} s  {100.0 * rest / total:5.1f} %  the other "
                     f"{len(ranked) - top} files")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print :func:`slowest_files` at the end of the run (not in xdist workers)."""
    if hasattr(config, "workerinput"):
        return
    from _schedule import _seconds, _tests

    lines = slowest_files(_seconds, _tests)
    if lines:
        terminalreporter.write_sep("=", "slowest test files")
        for line in lines:
            terminalreporter.write_line(line)
