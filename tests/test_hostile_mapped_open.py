"""Opening a binary dataset: symbolic links, unchanged files, and the descriptors kept.

* An array file or ``header.json`` that is a symbolic link used to be followed
  at open (the dataset could then read a file outside its directory, which the
  change-after-open check would not watch); it is now refused with one clear
  error.  A symbolic link *to the dataset directory*, named by the user, is
  fine: it is resolved once, at open.
* An untouched dataset fits to the same bits as the in-memory CSR it equals
  (``load_libsvm`` of the same file), so the check changes no result.
* ``open_binary`` keeps one descriptor (the dataset directory) per open
  dataset, closed when the matrix is garbage collected.
"""

import gc
import os
import shutil

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.io.binary import binary_shape, convert_libsvm, open_binary, open_binary_rows
from fastdp.io.libsvm import load_libsvm
from fastdp.linear_model import DPLogisticRegression, DPRidge
from _libsvm_files import write_random_libsvm


def _write_libsvm(path, n=200, d=30, seed=0):
    return write_random_libsvm(path, n, d, seed, low=-0.4, high=0.4, max_entries=6)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("mapped_open")
    source = _write_libsvm(root / "a.svm")
    convert_libsvm(source, root / "a.fdp")
    return root, source


@pytest.mark.parametrize("name", ["data.npy", "indices.npy", "indptr.npy", "labels.npy",
                                  "row_sq_norms.npy", "kernel_sq_norms.npy", "header.json"])
def test_a_symlinked_file_of_the_dataset_is_refused(converted, tmp_path, name):
    root, _ = converted
    path = tmp_path / "d.fdp"
    shutil.copytree(root / "a.fdp", path)
    target = tmp_path / f"outside-{name}"
    os.replace(path / name, target)
    os.symlink(target, path / name)  # the same bytes, through a link
    with pytest.raises(ValidationError, match=f"{name} is a symbolic link"):
        open_binary(path)
    with pytest.raises(ValidationError, match="symbolic link"):
        open_binary_rows(path, 0, 5)
    if name == "header.json":
        with pytest.raises(ValidationError, match="symbolic link"):
            binary_shape(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_in_place_of_an_array_is_refused_without_waiting(converted, tmp_path):
    root, _ = converted
    path = tmp_path / "d.fdp"
    shutil.copytree(root / "a.fdp", path)
    os.remove(path / "indices.npy")
    os.mkfifo(path / "indices.npy")  # opening it for reading would block without a writer
    with pytest.raises(ValidationError, match="indices.npy is not a regular file"):
        open_binary(path)


def test_a_symlinked_dataset_directory_is_fine_and_fits_the_same_bits(converted, tmp_path):
    root, source = converted
    link = tmp_path / "link.fdp"
    os.symlink(root / "a.fdp", link)
    X, y = open_binary(link)
    Xm, ym = load_libsvm(source)
    assert np.array_equal(y, ym)
    for make in (lambda: DPLogisticRegression(epsilon=1.0, random_state=3),
                 lambda: DPLogisticRegression(epsilon=1.0, solver="dpscd", random_state=3),
                 lambda: DPRidge(epsilon=1.0, random_state=3)):
        mapped, memory = make().fit(X, y), make().fit(Xm, ym)
        assert np.array_equal(mapped.coef_.view(np.uint64), memory.coef_.view(np.uint64))
        assert np.array_equal(mapped.predict(X), memory.predict(Xm))
        # a second fit of the unchanged dataset: the same bits again
        assert np.array_equal(make().fit(X, y).coef_.view(np.uint64),
                              mapped.coef_.view(np.uint64))


def test_a_moved_dataset_directory_still_fits(converted, tmp_path):
    """The files are watched in the directory that was opened, not by name: moving the
    whole directory changes nothing that is mapped."""
    root, _ = converted
    path = tmp_path / "d.fdp"
    shutil.copytree(root / "a.fdp", path)
    X, y = open_binary(path)
    os.rename(path, tmp_path / "moved.fdp")
    DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y).predict(X)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_open_keeps_one_descriptor_per_dataset_and_frees_it(converted):
    root, _ = converted

    def count():
        return len(os.listdir("/proc/self/fd"))

    gc.collect()
    before = count()
    opened = [open_binary(root / "a.fdp") for _ in range(20)]
    # each dataset: its directory, plus the descriptors of its 3 live maps (held by mmap)
    assert count() - before <= 20 * 4
    del opened
    gc.collect()
    assert count() == before
    for _ in range(20):  # failed and header-only opens keep nothing
        binary_shape(root / "a.fdp")
        open_binary_rows(root / "a.fdp", 0, 3)
    gc.collect()
    assert count() == before
