"""Hostile binary datasets (``.fdp`` directories) and hostile ``convert --overwrite`` targets.

``open_binary`` trusts what conversion checked (canonical structure, finite
values, the stored row norms) and checks only what is cheap.  These tests
cover the part of the trust that O(n) reads can confirm: the row pointer
and the two stored squared-norm files (which the row-norm bound of the DP
mechanisms and the kernels' clipping read instead of X), and the header's
fields.  Each hostile directory must give one ``ValidationError`` naming the
damage; before these checks, NaN, negative, zero or swapped norm files were
accepted (a row of norm 90 passed ``check_X(max_row_norm=1)``), a decreasing
``indptr`` reached the solvers, and a non-object ``verified`` field or a
deeply nested header escaped as ``AttributeError``/``RecursionError``.

Reference for what must still open: the same directory unedited (and its
values, which equal the matrix it was written from).
"""

import json
import os
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.io.binary import _header_digest, convert_libsvm, open_binary, save_binary


def _matrix(n=120, d=25, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng)
    X.data = rng.uniform(0.1, 1.0, X.nnz)
    X = sp.csr_matrix(X.multiply(0.9 / np.sqrt(X.multiply(X).sum(axis=1) + 1e-300)))
    X.sort_indices()
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


@pytest.fixture
def dataset(tmp_path):
    X, y = _matrix()
    X.data[X.indptr[7]:X.indptr[8]] = 0.0  # an empty row (norm 0)
    X.eliminate_zeros()
    assert X.indptr[7] == X.indptr[8]
    path = tmp_path / "d.fdp"
    save_binary(path, [(X, y)], n_features=X.shape[1])
    return path, X, y


def _edit_array(path, name, edit):
    array = np.load(path / f"{name}.npy")
    edit(array)
    np.save(path / f"{name}.npy", array)


def _edit_header(path, edit):
    header = json.loads((path / "header.json").read_text())
    edit(header)
    header["header_sha256"] = _header_digest(header)   # a consistent (re-signed) header
    (path / "header.json").write_text(json.dumps(header))


def test_unedited_dataset_opens_with_its_values(dataset):
    path, X, y = dataset
    Xm, ym = open_binary(path)
    assert (Xm != X).nnz == 0
    np.testing.assert_array_equal(ym, y)
    assert check_X(Xm, max_row_norm=1.0) is Xm


def _set(index, value):
    def edit(array):
        array[index] = value
    return edit


NORM_EDITS = {
    "row_sq_norms NaN": ("row_sq_norms", _set(slice(None), np.nan)),
    "row_sq_norms one NaN": ("row_sq_norms", _set(3, np.nan)),
    "kernel_sq_norms negative": ("kernel_sq_norms", _set(slice(None), -1.0)),
    "row_sq_norms tiny": ("row_sq_norms", _set(slice(None), 1e-6)),
    "kernel_sq_norms zero": ("kernel_sq_norms", _set(slice(None), 0.0)),
    "row_sq_norms one row doubled": ("row_sq_norms", lambda a: a.__setitem__(5, 2 * a[5])),
    "empty row with a norm": ("kernel_sq_norms", _set(7, 0.25)),
}


@pytest.mark.parametrize("case", sorted(NORM_EDITS))
def test_damaged_or_one_sided_norm_files_are_refused(dataset, case):
    path, _, _ = dataset
    name, edit = NORM_EDITS[case]
    _edit_array(path, name, edit)
    with pytest.raises(ValidationError, match="not a valid fastdp binary dataset"):
        open_binary(path)


def test_labels_and_norms_swapped_are_refused(dataset):
    path, _, _ = dataset
    os.replace(path / "labels.npy", path / "tmp.npy")
    os.replace(path / "row_sq_norms.npy", path / "labels.npy")
    os.replace(path / "tmp.npy", path / "row_sq_norms.npy")
    with pytest.raises(ValidationError, match="row_sq_norms.npy"):
        open_binary(path)


def test_data_scaled_up_with_norms_left_is_refused_where_the_norms_show_it(dataset):
    """Data multiplied by 100 behind one norm file that was recomputed: the two norm files
    disagree.  (Both recomputed consistently is the documented limit: verify=True.)"""
    path, X, _ = dataset
    _edit_array(path, "data", lambda a: a.__imul__(100.0))
    from fastdp._kernels._scd import row_squared_norms
    Z = X.copy()
    Z.data *= 100.0
    np.save(path / "kernel_sq_norms.npy", row_squared_norms(Z.data, Z.indptr))
    for verify in (False, True):
        with pytest.raises(ValidationError, match="disagree"):
            open_binary(path, verify=verify)


def test_decreasing_indptr_is_refused_at_open(dataset):
    path, _, _ = dataset
    _edit_array(path, "indptr", _set(10, 10**8))
    with pytest.raises(ValidationError, match="indptr decreases at row 10"):
        open_binary(path)


@pytest.mark.parametrize("edit, needle", [
    (lambda h: h.__setitem__("shape", [120.7, 25]), "not an integer"),
    (lambda h: h.__setitem__("shape", ["120", 25]), "not an integer"),
    (lambda h: h.__setitem__("shape", [120, True]), "not an integer"),
    (lambda h: h.__setitem__("nnz", float(h["nnz"])), "not an integer"),
    (lambda h: h.__setitem__("verified", "yes"), "verified is not an object"),
])
def test_garbled_header_fields_are_one_clear_error(dataset, edit, needle):
    path, _, _ = dataset
    _edit_header(path, edit)
    with pytest.raises(ValidationError, match=needle):
        open_binary(path)


def test_deeply_nested_header_is_one_clear_error(dataset):
    path, _, _ = dataset
    (path / "header.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValidationError, match="nested too deeply"):
        open_binary(path)


def test_header_with_a_huge_number_is_one_clear_error(dataset):
    path, _, _ = dataset
    text = (path / "header.json").read_text()
    (path / "header.json").write_text(text.replace('"nnz":', '"nnz": 1' + "0" * 5000 + ", \"x\":"))
    with pytest.raises(ValidationError, match="cannot be read"):
        open_binary(path)


# ----------------------------------------------------------------------------- overwrite


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "small.svm"
    path.write_text("+1 1:0.5 3:0.25\n-1 2:0.5\n")
    return path


def test_overwrite_does_not_delete_a_directory_that_is_not_a_dataset(tmp_path, source):
    victim = tmp_path / "home"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work")
    with pytest.raises(ValidationError, match="not a fastdp binary dataset"):
        convert_libsvm(source, victim, overwrite=True)
    assert (victim / "thesis.tex").read_text() == "years of work"


def test_overwrite_does_not_replace_a_file_or_follow_a_link(tmp_path, source):
    victim = tmp_path / "notes.txt"
    victim.write_text("keep")
    with pytest.raises(ValidationError, match="not a fastdp binary dataset"):
        convert_libsvm(source, victim, overwrite=True)
    assert victim.read_text() == "keep"
    target = tmp_path / "real.fdp"
    convert_libsvm(source, target)
    link = tmp_path / "link.fdp"
    link.symlink_to(target)
    with pytest.raises(ValidationError, match="not a fastdp binary dataset"):
        convert_libsvm(source, link, overwrite=True)
    assert link.is_symlink() and open_binary(target)[0].shape == (2, 3)


def test_overwrite_replaces_a_dataset_or_an_empty_directory(tmp_path, source):
    existing = tmp_path / "old.fdp"
    convert_libsvm(source, existing, n_features=10)
    convert_libsvm(source, existing, overwrite=True)
    assert open_binary(existing)[0].shape == (2, 3)
    empty = tmp_path / "empty.fdp"
    empty.mkdir()
    convert_libsvm(source, empty, overwrite=True)
    assert open_binary(empty)[0].shape == (2, 3)
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_cli_overwrite_of_a_non_dataset_is_one_line_and_deletes_nothing(tmp_path, source):
    import subprocess
    import sys

    victim = tmp_path / "project"
    victim.mkdir()
    (victim / "main.py").write_text("print(1)")
    done = subprocess.run([sys.executable, "-m", "fastdp", "convert", str(source), str(victim),
                           "--overwrite"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "not a fastdp binary dataset" in done.stderr
    assert (victim / "main.py").exists()
    shutil.rmtree(victim)


@pytest.mark.parametrize("start, stop", [("0", 3), (1.5, 3), (0, 2.0), (None, 3)])
def test_row_ranges_must_be_integers(dataset, start, stop):
    from fastdp.io.binary import open_binary_rows

    path, X, _ = dataset
    with pytest.raises(ValidationError, match="must be integers"):
        open_binary_rows(path, start, stop)
    rows, _ = open_binary_rows(path, np.int64(1), 3)
    assert (rows != X[1:3]).nnz == 0
