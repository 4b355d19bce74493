"""The report of the slowest test files (tests/_durations.py) printed after every run."""
from _durations import slowest_files


def test_files_are_ranked_by_seconds_with_shares_and_the_rest_summed():
    seconds = {"tests/a.py": 1.0, "tests/b.py": 6.0, "tests/c.py": 3.0}
    tests = {"tests/a.py": 4, "tests/b.py": 2, "tests/c.py": 9}
    lines = slowest_files(seconds, tests, top=2)
    assert lines[0].startswith("3 test files took 10.0 s")
    assert lines[1].split() == ["6.0", "s", "60.0", "%", "tests/b.py", "(2", "tests)"]
    assert lines[2].split() == ["3.0", "s", "30.0", "%", "tests/c.py", "(9", "tests)"]
    assert lines[3].split()[:4] == ["1.0", "s", "10.0", "%"] and "other 1 files" in lines[3]
    assert len(lines) == 4


def test_nothing_is_printed_without_seconds():
    assert slowest_files({}, {}) == []


class _Reporter:
    def __init__(self):
        self.lines = []

    def write_sep(self, sep, title):
        self.lines.append(f"{sep * 3} {title}")

    def write_line(self, line):
        self.lines.append(line)


def test_the_end_of_run_hook_prints_the_files_of_this_run():
    import types

    from _durations import pytest_terminal_summary

    reporter = _Reporter()
    pytest_terminal_summary(reporter, 0, types.SimpleNamespace())
    assert reporter.lines[0] == "=== slowest test files"
    # this file ran, so it is listed by name, or counted among "the other N files" of a
    # long run (only the slowest files are named)
    assert any("tests/test_durations_report.py" in line or "the other" in line
               for line in reporter.lines[2:])
