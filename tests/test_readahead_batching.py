"""The readahead of mapped fits asks for a batch's rows in few system calls (issue 20,
leftovers item 3).

References: the byte ranges of a batch's rows, merged into page runs by an
independent loop over pages (a set of pages, then runs of consecutive ones);
the number of system calls counted by the thread, against the number of runs
(one ``madvise`` per run) and ``ceil(runs / 1024)`` (``process_madvise``);
and, as in ``tests/test_mapped_fit.py``, the bits of the fit without any
advice (forced readahead with a budget of three pages).
"""

import math

import numpy as np
import pytest

import fastdp.io._advice as advice

from test_mapped_fit import SOLVERS, _dataset, _evict, _in_memory, _same_result  # noqa: E402

needs_libc = pytest.mark.skipif(advice._LIBC is None, reason="madvise through libc (Linux)")


def _runs_by_pages(starts, ends, base, gap):
    """Runs of pages covering the ranges, a run going on across at most ``gap`` missing pages."""
    pages = sorted({p for s, e in zip(starts, ends) if e > s
                    for p in range((base + s) // advice._PAGE, (base + e - 1) // advice._PAGE + 1)})
    runs = []
    for p in pages:
        if runs and p - (runs[-1][0] + runs[-1][1] - 1) <= gap + 1:
            runs[-1][1] = p - runs[-1][0] + 1
        else:
            runs.append([p, 1])
    return [r[0] for r in runs], [r[1] for r in runs]


@pytest.mark.parametrize("gap", [0, 1, 3])
@pytest.mark.parametrize("seed", range(5))
def test_page_runs_with_a_gap_match_a_loop_over_pages(gap, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 3 * advice._PAGE, size=60)
    starts = np.cumsum(rng.integers(0, 4 * advice._PAGE, size=60)) + np.cumsum(lengths) - lengths
    ends = starts + lengths
    base = int(rng.integers(0, advice._PAGE)) * 8
    lo, count = advice._page_runs(starts, ends, base, gap)
    want_lo, want_count = _runs_by_pages(starts, ends, base, gap)
    assert lo.tolist() == want_lo and count.tolist() == want_count


def _forced(monkeypatch, vectored):
    """Readahead on whatever is cached, three pages ahead; ``vectored``: process_madvise or
    one madvise per run.  Returns the list the started threads are appended to."""
    monkeypatch.setattr(advice, "_RESIDENT_SKIP", 2.0)
    monkeypatch.setattr(advice, "_BUDGET_MAX", 3 * advice._PAGE)
    if not vectored:
        monkeypatch.setattr(advice._Vectored, "get", classmethod(lambda cls: None))
    started = []
    real = advice._Readahead.start

    def start(self):
        started.append(self)
        real(self)

    monkeypatch.setattr(advice._Readahead, "start", start)
    return started


@needs_libc
@pytest.mark.parametrize("vectored", [True, False])
@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_batched_readahead_changes_no_bits(tmp_path, monkeypatch, solver, vectored):
    if vectored and advice._Vectored.get() is None:
        pytest.skip("process_madvise is not available here")
    Xm, y = _dataset(tmp_path, np.float32, n=4000, d=2000)
    reference = SOLVERS[solver](_in_memory(Xm), y)
    started = _forced(monkeypatch, vectored)
    _evict(tmp_path / "d.fdp")
    _same_result(SOLVERS[solver](Xm, y), reference)
    assert started and all(not thread.is_alive() for thread in started)
    assert sum(thread.pages_asked for thread in started) > 0


@needs_libc
@pytest.mark.parametrize("vectored", [True, False])
def test_system_calls_per_batch(tmp_path, monkeypatch, vectored):
    """One call per merged run without process_madvise, ceil(runs / 1024) with it; the pages
    asked for are those of the rows (gap pages are not counted against the budget)."""
    if vectored and advice._Vectored.get() is None:
        pytest.skip("process_madvise is not available here")
    if not vectored:
        monkeypatch.setattr(advice._Vectored, "get", classmethod(lambda cls: None))
    Xm, _ = _dataset(tmp_path, np.float64, n=6000, d=4000)
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(6000, size=size, replace=False)) for size in (300, 2500, 40)]
    batch_ptr = np.cumsum([0] + [b.size for b in batches])
    batch_idx = np.concatenate(batches).astype(np.int64)
    thread = advice._Readahead((Xm.data, Xm.indices, Xm.indptr), batch_ptr, batch_idx,
                               budget=1 << 30)
    thread.wanted = {"data": True, "indices": True, "indptr": True}
    thread.start()
    thread.join()
    calls = pages = 0
    for rows in batches:
        starts = np.array(Xm.indptr[rows], dtype=np.int64)
        ends = np.array(Xm.indptr[rows + 1], dtype=np.int64)
        size = Xm.indptr.itemsize
        for array, s, e in ((Xm.indptr, rows * size, (rows + 2) * size),
                            (Xm.indices, starts * Xm.indices.itemsize,
                             ends * Xm.indices.itemsize),
                            (Xm.data, starts * 8, ends * 8)):
            runs = len(_runs_by_pages(s, e, array.ctypes.data, advice._GAP_PAGES)[0])
            calls += math.ceil(runs / advice._IOV_MAX) if vectored else runs
            pages += sum(_runs_by_pages(s, e, array.ctypes.data, 0)[1])
    assert thread.batches_asked == len(batches)
    assert thread.syscalls == calls
    assert thread.pages_asked == pages
    if vectored:
        assert thread.syscalls <= 3 * len(batches) + 2   # the 2500-row batch: two per array
