"""Loaders bound what a hostile file can make them allocate (issue 34).

A line longer than ``max_line_bytes`` (one huge compressed line, a sparse file
of NULs) and a compressed file that expands more than ``max_expansion`` times
are clear ValidationErrors, checked in a child process with a memory limit;
raising the bound reads a genuine file; a binary dataset whose header is a
directory is a clear error.
"""

import bz2
import gzip
import os

import pytest

from fastdp.exceptions import ValidationError
from fastdp.io import load_libsvm

from tests._limited_child import run_limited

_LOAD = """
    import sys
    from fastdp.exceptions import ValidationError
    from fastdp.io import load_libsvm
    try:
        load_libsvm(sys.argv[1])
    except ValidationError as exc:
        print("refused:", exc)
"""


@pytest.mark.parametrize("opener, name", [(gzip.open, "line.gz"), (bz2.open, "line.bz2")])
def test_one_huge_compressed_line_is_refused_in_bounded_memory(tmp_path, opener, name):
    # a 48 MiB line with an 8 MiB bound, under a 1 GiB limit: refused before the buffer grows
    with opener(tmp_path / name, "wb") as out:
        out.write(b"1" * (48 << 20))
    done = run_limited("""
        import sys
        from fastdp.exceptions import ValidationError
        from fastdp.io import load_libsvm
        try:
            load_libsvm(sys.argv[1], max_line_bytes=8 << 20, max_expansion=1e9)
        except ValidationError as exc:
            print("refused:", exc)
    """, memory_gib=1, args=[str(tmp_path / name)])
    assert "refused:" in done.stdout and "max_line_bytes" in done.stdout, done.stderr[-2000:]


def test_a_sparse_file_of_nuls_is_refused_in_bounded_memory(tmp_path):
    path = tmp_path / "nuls.svm"
    with open(path, "wb") as out:
        out.truncate(20 << 30)  # 20 GiB of NULs, no disk used
    try:
        done = run_limited(_LOAD, memory_gib=2, args=[str(path)])
    finally:
        os.unlink(path)
    assert "refused:" in done.stdout and "max_line_bytes" in done.stdout, done.stderr[-2000:]


def test_max_line_bytes_bounds_and_can_be_raised(tmp_path):
    path = tmp_path / "long.svm"
    path.write_text("1 " + " ".join(f"{j}:1" for j in range(1, 3000)) + "\n0 1:2\n")
    with pytest.raises(ValidationError, match="max_line_bytes"):
        load_libsvm(path, max_line_bytes=1000)
    X, y = load_libsvm(path, max_line_bytes=100_000)
    assert X.shape == (2, 2999) and X.nnz == 3000


def test_a_decompression_bomb_of_tiny_rows_is_refused(tmp_path):
    path = tmp_path / "rows.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b"1\n" * (16 << 20))  # 32 MiB of empty rows in ~30 KB
    with pytest.raises(ValidationError, match="max_expansion"):
        load_libsvm(path, max_expansion=20)  # allowed: 20 x 1 MiB (the first MiB is free)
    assert load_libsvm(path, max_expansion=100)[0].shape[0] == 16 << 20


def test_a_genuine_compressed_file_loads_with_the_defaults(tmp_path):
    small = tmp_path / "small.gz"
    with gzip.open(small, "wb") as out:
        out.write(b"1 1:0.5 3:2\n0 2:1\n" * 100)
    assert load_libsvm(small)[0].shape == (200, 3)


def test_binary_dataset_header_that_is_a_directory_is_a_clear_error(tmp_path):
    from fastdp.io.binary import convert_libsvm, open_binary

    src = tmp_path / "a.svm"
    src.write_text("1 1:1 2:3\n0 2:1\n")
    convert_libsvm(src, tmp_path / "a.fdp")
    os.unlink(tmp_path / "a.fdp" / "header.json")
    os.mkdir(tmp_path / "a.fdp" / "header.json")
    with pytest.raises(ValidationError, match="not a regular file"):
        open_binary(tmp_path / "a.fdp")


def test_a_symlinked_dataset_directory_opens(tmp_path):
    from fastdp.io.binary import convert_libsvm, open_binary

    src = tmp_path / "a.svm"
    src.write_text("1 1:1 2:3\n0 2:1\n")
    convert_libsvm(src, tmp_path / "a.fdp")
    os.symlink("a.fdp", tmp_path / "link.fdp")
    assert open_binary(tmp_path / "link.fdp")[0].shape == (2, 2)
