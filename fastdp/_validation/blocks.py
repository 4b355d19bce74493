"""Blocks of consecutive CSR rows: the O(nnz) checks of sparse input work on one block
of rows at a time, so their temporaries stay bounded (about 8 MiB of float64).
"""

import numpy as np


#: Entries per block of the O(nnz) checks of sparse input: each allocates
#: temporaries for one block of rows only (about 8 MiB of float64).
_BLOCK_ENTRIES = 1 << 20


def _row_blocks(indptr, max_entries=None):
    """Consecutive row ranges ``(r0, r1)`` covering all rows, each holding at most
    ``max_entries`` entries (or a single longer row)."""
    max_entries = _BLOCK_ENTRIES if max_entries is None else max_entries
    n_rows = indptr.shape[0] - 1
    r0 = 0
    largest = np.iinfo(indptr.dtype).max
    while r0 < n_rows:
        key = int(indptr[r0]) + max_entries
        # a key of indptr's own dtype: with a Python int, numpy casts all of an int32
        # indptr to int64 on every call (O(n) per block, quadratic over X)
        key = indptr.dtype.type(key) if key <= largest else key
        r1 = int(np.searchsorted(indptr, key, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n_rows)
        yield r0, r1
        r0 = r1
