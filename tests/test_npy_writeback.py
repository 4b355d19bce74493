"""NpyAppender starts the writeback of what it appended as it goes (fastdp/io/_npy.py)."""

import os

import numpy as np

from fastdp.io import _npy


def test_writeback_ranges_tile_the_file_and_change_no_byte(tmp_path, monkeypatch):
    calls = []
    real = os.posix_fadvise

    def record(fd, offset, length, advice):
        calls.append((offset, length, advice))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    monkeypatch.setattr(_npy, "WRITEBACK_BYTES", 4096)
    rng = np.random.default_rng(0)
    chunks = [rng.normal(size=int(k)) for k in rng.integers(1, 900, size=40)]
    writer = _npy.NpyAppender(tmp_path / "x.npy", np.float64)
    for chunk in chunks:
        writer.append(chunk)
    writer.close()
    expected = np.concatenate(chunks)
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), expected)
    assert calls and all(advice == os.POSIX_FADV_DONTNEED for *_, advice in calls)
    # contiguous ranges from byte 0, each started once at least WRITEBACK_BYTES after the last
    position = 0
    for offset, length, _ in calls:
        assert offset == position and length >= 4096
        position = offset + length
    assert position <= _npy.HEADER_BYTES + expected.nbytes
    assert _npy.HEADER_BYTES + expected.nbytes - position < 4096 + 900 * 8
