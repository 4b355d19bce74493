"""``_row_blocks`` on int32 and int64 ``indptr``: the blocks, and no cast of ``indptr``.

Found training on a 1.5 G-entry memory-mapped dataset (int32 indptr of 45 M
rows): numpy's ``searchsorted`` with a Python-int key converts the whole int32
array to int64 on every call, so splitting X into blocks cost O(n) per block
(hours for the estimator's row norms).  Reference: the blocks a plain Python
scan of ``indptr`` gives.
"""

import numpy as np
import pytest

from fastdp._validation import _row_blocks


def _reference_blocks(indptr, max_entries):
    blocks, r0, n = [], 0, len(indptr) - 1
    while r0 < n:
        r1 = r0 + 1  # at least one row; then every row that keeps the block within bounds
        while r1 < n and indptr[r1 + 1] - indptr[r0] <= max_entries:
            r1 += 1
        blocks.append((r0, r1))
        r0 = r1
    return blocks


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_blocks_match_a_plain_scan(dtype):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 40, 500)
    counts[[7, 100]] = [0, 300]  # an empty row, and a row longer than a block
    indptr = np.r_[0, np.cumsum(counts)].astype(dtype)
    assert list(_row_blocks(indptr, 100)) == _reference_blocks(indptr.tolist(), 100)


def test_the_search_key_has_the_dtype_of_indptr(monkeypatch):
    indptr = np.arange(0, 50_001, 5, dtype=np.int32)
    keys = []
    searchsorted = np.searchsorted

    def spy(array, key, *args, **kwargs):
        keys.append(np.asarray(key).dtype)
        return searchsorted(array, key, *args, **kwargs)

    monkeypatch.setattr(np, "searchsorted", spy)
    blocks = list(_row_blocks(indptr, 1000))
    assert len(blocks) == 50 and keys and set(keys) == {np.dtype(np.int32)}
    # a key beyond int32 (entries near 2**31) stays a Python int: correct, if slower
    near_limit = np.array([0, 2**31 - 10, 2**31 - 1], dtype=np.int32)
    assert list(_row_blocks(near_limit, 1000)) == [(0, 1), (1, 2)]
