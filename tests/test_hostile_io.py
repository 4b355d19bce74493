"""Hostile chunk sizes for the data-parallel LIBSVM row index.

``index_libsvm`` cuts a file into chunks of ``chunk_bytes`` and counts each
chunk's rows (a read per chunk, and O(chunks) numbers in the index).
``chunk_bytes=1`` on a 2 MB file asked for two million chunks: the call did
not finish (a child process is stopped after 120 s).  A file may now be cut
into at most 2**16 chunks unless the default chunk size makes more; a
smaller ``chunk_bytes`` is one ``ValidationError`` saying the smallest
accepted.  Reference for the accepted sizes: the row count of the file
(written here) and the index built with the default chunk size.
"""

import subprocess
import sys
import textwrap

import pytest

from fastdp.distributed.data_parallel.libsvm_index import index_libsvm
from fastdp.exceptions import ValidationError

LINE = b"+1 1:0.5 3:0.25 7:1\n"


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("index") / "big.svm"
    path.write_bytes(LINE * 100_000)              # 2 MB, 100 000 rows
    return path


def test_tiny_chunks_on_a_large_file_are_refused_quickly(big_file):
    child = textwrap.dedent(f"""
        from fastdp.distributed.data_parallel.libsvm_index import index_libsvm
        from fastdp.exceptions import ValidationError
        try:
            index_libsvm({str(big_file)!r}, chunk_bytes=1)
            print("indexed")
        except ValidationError as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "more than 65536 chunks" in done.stdout


@pytest.mark.parametrize("chunk_bytes", [0, -5])
def test_non_positive_chunk_sizes_are_refused(big_file, chunk_bytes):
    with pytest.raises(ValidationError, match="chunk_bytes must be >= 1"):
        index_libsvm(big_file, chunk_bytes=chunk_bytes)


def test_the_smallest_accepted_and_a_huge_chunk_size_count_every_row(big_file):
    size = big_file.stat().st_size
    smallest = -(-size // (1 << 16))
    with pytest.raises(ValidationError, match=f"chunk_bytes >= {smallest}"):
        index_libsvm(big_file, chunk_bytes=smallest - 1)
    for chunk_bytes in (smallest * 64, 1 << 70):
        assert index_libsvm(big_file, n_tasks=2, chunk_bytes=chunk_bytes).n_rows == 100_000
