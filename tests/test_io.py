"""Tests of fastdp.io: loader options, byte ranges, chunks, the binary CSR format.

References: scikit-learn's ``load_svmlight_file`` (values, byte ranges) and
fastdp's own whole-file ``load_libsvm`` (which tests/test_datasets.py checks
against scikit-learn) for chunks and the binary round trip.
"""

import bz2
import gzip
import io
import json
import lzma

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

import fastdp.io._parse as parse_module
import fastdp.io._source as source_module
from fastdp import _validation
from fastdp.datasets import load_dataset
from fastdp.exceptions import LibsvmParseError, ValidationError
from fastdp.io import convert_libsvm, iter_libsvm_chunks, load_libsvm, open_binary
from fastdp.io._growable import GrowableArray, widen_to_int64

from _validation_lookups import patch_validation
from test_datasets import LIBSVM_FILES, assert_same_as_sklearn


def _same_csr(A, B):
    assert A.shape == B.shape
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    unsigned = np.uint32 if A.dtype == np.float32 else np.uint64
    assert A.dtype == B.dtype
    np.testing.assert_array_equal(np.asarray(A.data).view(unsigned),
                                  np.asarray(B.data).view(unsigned))


def _random_file(path, n_rows=400, n_cols=60, seed=0, zero_based=False, qid=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_cols, density=0.15, format="csr", random_state=rng)
    X.data = rng.standard_normal(X.nnz) * 10.0 ** rng.integers(-5, 5, X.nnz)
    y = rng.integers(-2, 3, n_rows).astype(float)
    dump_svmlight_file(X, y, str(path), zero_based=zero_based,
                       query_id=rng.integers(0, 9, n_rows) if qid else None)
    return path


# ----------------------------------------------------------------------------- dtypes

# every LIBSVM file of shared/data; the larger ones only in the slow run
REAL_FILES = [pytest.param(name, marks=pytest.mark.slow) if name in ("news20", "a9a", "w8a")
              else name for name in sorted(LIBSVM_FILES)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", REAL_FILES)
def test_real_files_in_both_dtypes_equal_sklearn(name, dtype, data_dir):
    relative, n_features = LIBSVM_FILES[name]
    path = data_dir / relative
    ours = load_libsvm(path, n_features=n_features, dtype=dtype)
    assert_same_as_sklearn(ours, load_svmlight_file(str(path), n_features=n_features,
                                                    dtype=dtype))
    assert ours[0].indices.dtype == ours[0].indptr.dtype == np.int32


def test_index_dtype_forced_and_widened(tmp_path, monkeypatch):
    path = _random_file(tmp_path / "a.svm")
    reference = load_svmlight_file(str(path))
    X64, _ = load_libsvm(path, index_dtype=np.int64)
    assert X64.indices.dtype == X64.indptr.dtype == np.int64
    assert_same_as_sklearn((X64, reference[1]), reference)
    # the entries outgrow "int32" (patched small): widened in place, same values
    monkeypatch.setattr(parse_module, "INT32_MAX", 100)
    monkeypatch.setattr(source_module, "CHUNK_BYTES", 512)
    X, y = load_libsvm(path)
    assert X.indices.dtype == X.indptr.dtype == np.int64
    assert_same_as_sklearn((X, y), reference)
    with pytest.raises(ValidationError, match="too many for index_dtype=int32"):
        load_libsvm(path, index_dtype=np.int32)


def test_widen_to_int64_in_place(monkeypatch):
    import fastdp.io._growable as growable

    monkeypatch.setattr(growable, "WIDEN_BLOCK", 7)  # many overlapping blocks
    values = np.arange(-50, 50, dtype=np.int32) * 40_000_000 // 7
    raw = np.zeros(8 * values.size, dtype=np.uint8)
    raw[: 4 * values.size] = values.view(np.uint8)
    widen_to_int64(raw, values.size)
    np.testing.assert_array_equal(raw.view(np.int64), values.astype(np.int64))
    grown = GrowableArray(np.int32, 3)
    grown.view()[:3] = [7, -8, 9]
    grown.reserve(1000)
    grown.widen(3)
    np.testing.assert_array_equal(grown.finish(3), np.array([7, -8, 9], dtype=np.int64))


@pytest.mark.parametrize("kwargs", [{"dtype": np.int32}, {"index_dtype": np.float64},
                                    {"index_dtype": "int16"}, {"offset": -1},
                                    {"offset": 1.5, "n_features": 3}, {"length": "10"},
                                    {"progress": "yes"}])
def test_bad_loader_arguments(kwargs):
    with pytest.raises(ValidationError):
        load_libsvm(io.BytesIO(b"1 1:1\n"), **kwargs)


def test_progress_bar_counts_the_bytes(tmp_path, monkeypatch):
    import fastdp.progress

    bars = []

    class Bar:
        def __init__(self, total, desc, **kwargs):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setattr(fastdp.progress, "progress_bar", Bar)
    path = _random_file(tmp_path / "a.svm")
    load_libsvm(path, progress=True)
    path.write_bytes(bz2.compress(path.read_bytes()))
    convert_libsvm(path, tmp_path / "d.fdp", progress=None)
    size = path.stat().st_size
    assert [(b.desc, b.total, b.n, b.closed) for b in bars[1:]] == [("converting", size, size,
                                                                     True)]
    assert bars[0].n == bars[0].total > 0 and bars[0].closed


# ----------------------------------------------------------------------------- byte ranges


def _ranged(path, offset, length, n_features, **kwargs):
    X, y = load_libsvm(path, offset=offset, length=length, n_features=n_features, **kwargs)
    X_ref, y_ref = load_svmlight_file(str(path), offset=offset, length=length,
                                      n_features=n_features, **kwargs)
    assert_same_as_sklearn((X, y), (X_ref, y_ref))
    return X, y


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
def test_byte_ranges_equal_sklearn(tmp_path, suffix):
    plain = _random_file(tmp_path / "a.svm", n_rows=300)
    text = plain.read_bytes()
    path = tmp_path / ("a.svm" + suffix)
    if suffix:
        path.write_bytes({".gz": gzip.compress, ".bz2": bz2.compress}[suffix](text))
    rng = np.random.default_rng(3)
    for _ in range(25):
        offset = int(rng.integers(0, len(text) + 10))
        length = int(rng.choice([-1, 0, int(rng.integers(200, len(text)))]))
        _ranged(path, offset, length, 61)
    _ranged(path, 0, 1, 61)  # the first line only
    _ranged(path, len(text), -1, 61)  # past the end: nothing


@pytest.mark.parametrize("n_ranges", [1, 2, 7, 40])
def test_ranges_that_tile_the_file_give_every_row_once(tmp_path, n_ranges, monkeypatch):
    monkeypatch.setattr(source_module, "CHUNK_BYTES", 256)
    path = _random_file(tmp_path / "a.svm", n_rows=300)
    text = path.read_bytes()
    whole = load_libsvm(path, zero_based=True, n_features=61)
    cuts = np.linspace(0, len(text), n_ranges + 1).astype(int)
    parts = [load_libsvm(path, offset=int(a), length=int(b - a), n_features=61)
             for a, b in zip(cuts[:-1], cuts[1:])]
    _same_csr(sp.vstack([p[0] for p in parts], format="csr"), whole[0])
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), whole[1])
    for (a, b), part in zip(zip(cuts[:-1], cuts[1:]), parts):  # and as scikit-learn splits
        _ranged(path, int(a), int(b - a), 61)


def test_range_ending_in_a_blank_line_gives_the_next_row_once(tmp_path):
    # scikit-learn (1.9) reads one row past a range that ends inside a blank line,
    # so that row also starts the next range; here each row belongs to one range
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1\n\n2 2:2\n3 3:3\n")
    first = load_libsvm(path, offset=0, length=6, n_features=4)[1]
    second = load_libsvm(path, offset=6, length=-1, n_features=4)[1]
    assert first.tolist() == [1.0] and second.tolist() == [2.0, 3.0]
    sk_first = load_svmlight_file(str(path), offset=0, length=6, n_features=4)[1]
    assert sk_first.tolist() == [1.0, 2.0]  # the quirk this loader does not copy


def test_range_parse_errors_count_lines_from_the_range(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1\n1 2:1\n1 3:zz\n")
    with pytest.raises(LibsvmParseError, match="after byte 3") as info:
        load_libsvm(path, offset=3, n_features=4)
    assert info.value.line_number == 2
    with pytest.raises(ValidationError, match="n_features is required"):
        load_libsvm(path, offset=3)


# ----------------------------------------------------------------------------- chunks


@pytest.mark.parametrize("compress", [None, gzip.compress, lzma.compress])
@pytest.mark.parametrize("chunking", [{"chunk_rows": 1}, {"chunk_rows": 37},
                                      {"chunk_bytes": 300}, {"chunk_bytes": 10**7}, {}])
def test_chunks_concatenate_to_the_whole_file(tmp_path, chunking, compress):
    path = _random_file(tmp_path / "a.svm", n_rows=250, qid=True)
    if compress is not None:
        path.write_bytes(compress(path.read_bytes()))
    X, y, qid = load_libsvm(path, zero_based=False, n_features=60, return_qid=True,
                            dtype=np.float32)
    chunks = list(iter_libsvm_chunks(path, n_features=60, zero_based=False, return_qid=True,
                                     dtype=np.float32, **chunking))
    if "chunk_rows" in chunking:
        sizes = [c[0].shape[0] for c in chunks]
        assert all(s == chunking["chunk_rows"] for s in sizes[:-1])
        assert 0 < sizes[-1] <= chunking["chunk_rows"]
    _same_csr(sp.vstack([c[0] for c in chunks], format="csr"), X)
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y)
    np.testing.assert_array_equal(np.concatenate([c[2] for c in chunks]), qid)


def test_chunks_without_n_features_are_as_wide_as_they_need(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1\n1 9:1\n")
    shapes = [c[0].shape for c in iter_libsvm_chunks(path, chunk_rows=1)]
    assert shapes == [(1, 2), (1, 10)]  # "auto" is zero-based for chunks, as for ranges
    with pytest.raises(ValidationError, match="too small"):
        list(iter_libsvm_chunks(path, chunk_rows=1, n_features=5))
    with pytest.raises(ValidationError):
        list(iter_libsvm_chunks(path, chunk_rows=0))


def test_compressed_file_is_streamed_not_read_whole(tmp_path, monkeypatch):
    """The decompressed text never exists whole: reads come in bounded pieces."""
    text = _random_file(tmp_path / "a.svm", n_rows=3000).read_bytes()
    path = tmp_path / "a.gz"
    path.write_bytes(gzip.compress(text))
    monkeypatch.setattr(source_module, "CHUNK_BYTES", 4096)
    largest = []
    real = source_module.LineChunks._readinto

    def spy(self, view):
        largest.append(len(view))
        return real(self, view)

    monkeypatch.setattr(source_module.LineChunks, "_readinto", spy)
    X, y = load_libsvm(path)
    assert max(largest) <= 2 * 4096 < len(text) // 10
    assert_same_as_sklearn((X, y), load_svmlight_file(io.BytesIO(text)))


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_truncated_compressed_file_is_a_clear_error(tmp_path, compress):
    text = _random_file(tmp_path / "a.svm", n_rows=2000).read_bytes()
    path = tmp_path / "a.cmp"
    path.write_bytes(compress(text)[: len(compress(text)) // 2])
    with pytest.raises(ValidationError, match="truncated or corrupt"):
        load_libsvm(path)


# ----------------------------------------------------------------------------- binary format


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", REAL_FILES)
def test_binary_round_trip_of_real_files(tmp_path, name, dtype, data_dir):
    relative, n_features = LIBSVM_FILES[name]
    src = data_dir / relative
    header = convert_libsvm(src, tmp_path / "d.fdp", dtype=dtype, n_features=n_features)
    X, y = open_binary(tmp_path / "d.fdp", verify=True, source=src)
    X_ref, y_ref = load_libsvm(src, n_features=n_features, dtype=dtype)
    _same_csr(X, X_ref)
    np.testing.assert_array_equal(y.view(np.uint64), y_ref.view(np.uint64))
    for array in (X.data, X.indices, X.indptr):
        assert isinstance(array, np.memmap) and not array.flags.writeable
    assert header["shape"] == list(X.shape) and header["nnz"] == X.nnz
    assert header["source"]["compression"] == "bzip2"
    assert header["dtype"] == np.dtype(dtype).name and header["index_dtype"] == "int32"
    stored = np.load(tmp_path / "d.fdp" / "row_sq_norms.npy")
    np.testing.assert_array_equal(stored, _validation._csr_sq_norms(X_ref))


@pytest.mark.parametrize("zero_based", ["auto", True, False])
def test_binary_zero_based_rules_equal_the_loader(tmp_path, zero_based, monkeypatch):
    monkeypatch.setattr(source_module, "CHUNK_BYTES", 64)  # index 0 only in a late chunk
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1 3:2\n" * 20 + b"-1 0:5 2:1\n" + b"1 2:1\n" * 5)
    if zero_based is False:
        with pytest.raises(LibsvmParseError):
            convert_libsvm(path, tmp_path / "d.fdp", zero_based=zero_based)
        assert not (tmp_path / "d.fdp").exists() and not list(tmp_path.glob("d.fdp*"))
        path.write_bytes(b"1 1:1 3:2\n" * 20)
    convert_libsvm(path, tmp_path / "d.fdp", zero_based=zero_based)
    _same_csr(open_binary(tmp_path / "d.fdp")[0], load_libsvm(path, zero_based=zero_based)[0])


def test_binary_widens_its_index_files(tmp_path, monkeypatch):
    import fastdp.io.binary as binary

    monkeypatch.setattr(binary, "INT32_MAX", 200)
    monkeypatch.setattr(source_module, "CHUNK_BYTES", 256)
    path = _random_file(tmp_path / "a.svm")
    header = convert_libsvm(path, tmp_path / "d.fdp")
    X, _ = open_binary(tmp_path / "d.fdp", verify=True)
    assert header["index_dtype"] == "int64" and X.indices.dtype == X.indptr.dtype == np.int64
    _same_csr(X, load_libsvm(path, index_dtype=np.int64)[0])
    with pytest.raises(ValidationError, match="int32"):
        convert_libsvm(path, tmp_path / "e.fdp", index_dtype=np.int32)


def test_binary_of_empty_and_quirky_files(tmp_path):
    for content in (b"", b"# only a comment\n", b"1\n-1 \n", b"1 1:inf 2:nan\n-1 3:1\n"):
        path = tmp_path / "a.svm"
        path.write_bytes(content)
        header = convert_libsvm(path, tmp_path / "d.fdp", overwrite=True)
        X, y = open_binary(tmp_path / "d.fdp")
        X_ref, y_ref = load_libsvm(path)
        _same_csr(X, X_ref)
        np.testing.assert_array_equal(y, y_ref)
        assert header["verified"]["finite"] == bool(np.isfinite(X_ref.data).all())


def test_convert_refuses_to_overwrite(tmp_path):
    path = _random_file(tmp_path / "a.svm")
    convert_libsvm(path, tmp_path / "d.fdp")
    with pytest.raises(ValidationError, match="already exists"):
        convert_libsvm(path, tmp_path / "d.fdp")
    convert_libsvm(path, tmp_path / "d.fdp", overwrite=True, dtype=np.float32)
    assert open_binary(tmp_path / "d.fdp")[0].dtype == np.float32


@pytest.fixture
def binary(tmp_path):
    path = _random_file(tmp_path / "a.svm", n_rows=200)
    convert_libsvm(path, tmp_path / "d.fdp")
    return tmp_path / "d.fdp"


def _rewrite_header(directory, edit, fix_sha=True):
    from fastdp.io.binary import _header_digest

    header = json.loads((directory / "header.json").read_text())
    edit(header)
    if fix_sha:
        header["header_sha256"] = _header_digest(header)
    (directory / "header.json").write_text(json.dumps(header))


def _truncate(directory, name, drop=8):
    file = directory / name
    file.write_bytes(file.read_bytes()[:-drop])


def _extend(directory, name):
    with open(directory / name, "ab") as handle:
        handle.write(b"\0" * 8)


def _set_shape(header):
    header["shape"][0] += 1


def _set_dtype(header):
    header["dtype"] = "float32"


def _set_version(header):
    header["format_version"] = 99


def _set_last_indptr(directory):
    indptr = np.load(directory / "indptr.npy", mmap_mode="r+")
    indptr[-1] -= 1
    indptr.flush()


CORRUPTIONS = {
    "truncated data": (lambda d: _truncate(d, "data.npy"), "truncated"),
    "truncated indices": (lambda d: _truncate(d, "indices.npy", 3), "truncated"),
    "truncated npy header": (lambda d: (d / "labels.npy").write_bytes(b"\x93NUMPY"),
                             "cannot be mapped"),
    "extended row norms": (lambda d: _extend(d, "row_sq_norms.npy"), "extended"),
    "missing indptr": (lambda d: (d / "indptr.npy").unlink(), "indptr.npy is missing"),
    "missing header": (lambda d: (d / "header.json").unlink(), "header.json is missing"),
    "garbage header": (lambda d: (d / "header.json").write_text("{not json"), "cannot be read"),
    "edited header": (lambda d: _rewrite_header(d, _set_shape, fix_sha=False), "SHA-256"),
    "wrong shape": (lambda d: _rewrite_header(d, _set_shape), "shape"),
    "wrong dtype": (lambda d: _rewrite_header(d, _set_dtype), "float32"),
    "other version": (lambda d: _rewrite_header(d, _set_version), "format version 99"),
    "no format": (lambda d: _rewrite_header(d, lambda h: h.pop("format")), "not a fastdp"),
    "bad indptr": (_set_last_indptr, "indptr runs from 0 to"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupted_binary_is_one_clear_error(binary, name):
    damage, message = CORRUPTIONS[name]
    damage(binary)
    with pytest.raises(ValidationError, match=message) as info:
        open_binary(binary)
    assert "fastdp convert" in str(info.value) or "no such" in str(info.value)


def test_missing_or_foreign_binary_paths(tmp_path):
    with pytest.raises(ValidationError, match="no such binary dataset"):
        open_binary(tmp_path / "nothing.fdp")
    (tmp_path / "file.fdp").write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        open_binary(tmp_path / "file.fdp")


def test_verify_finds_damage_the_cheap_checks_trust(binary, tmp_path):
    X, _ = open_binary(binary)
    first_row = slice(int(X.indptr[0]), int(X.indptr[1]))
    assert X.indptr[1] - X.indptr[0] >= 2
    del X
    indices = np.load(binary / "indices.npy", mmap_mode="r+")
    indices[first_row] = indices[first_row][::-1].copy()  # unsorted row
    indices.flush()
    del indices
    open_binary(binary)  # trusted (cheap checks pass) ...
    with pytest.raises(ValidationError, match="verify"):
        open_binary(binary, verify=True)  # ... but not verified
    with pytest.raises(ValidationError, match="another file"):
        open_binary(binary, source=_random_file(tmp_path / "b.svm", seed=9))


def test_load_dataset_opens_binary(binary):
    X, y = load_dataset(binary)
    assert isinstance(X.data, np.memmap)
    with pytest.raises(ValidationError, match="convert it again"):
        load_dataset(str(binary), dtype=np.float32)


# ----------------------------------------------------------------------------- validation


def _old_scaled_sq_norms(X, bound):
    """The unchunked computation (before issue 20), as a reference."""
    data = np.asarray(X.data[: X.indptr[-1]], dtype=np.float64)
    if bound != 1.0:
        data = data / bound
    starts = X.indptr[:-1]
    nonempty = starts < X.indptr[1:]
    sq = np.zeros(X.shape[0])
    if data.size:
        sq[nonempty] = np.add.reduceat(data * data, starts[nonempty])
    return sq


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bound", [1.0, 0.3])
def test_chunked_row_norms_are_bit_identical(monkeypatch, dtype, bound):
    patch_validation(monkeypatch, "_BLOCK_ENTRIES", 37)
    rng = np.random.default_rng(0)
    X = sp.random(500, 80, density=0.2, format="csr", random_state=rng, dtype=dtype)
    X.data = (rng.standard_normal(X.nnz) * 10.0 ** rng.integers(-3, 3, X.nnz)).astype(dtype)
    X.data[X.indptr[7]:X.indptr[8]] = 0  # an empty row
    X.eliminate_zeros()
    assert X.indptr[7] == X.indptr[8]
    got = _validation._scaled_sq_norms(X, bound)
    np.testing.assert_array_equal(got.view(np.uint64), _old_scaled_sq_norms(X, bound).view(
        np.uint64))


def test_validation_blocks_bound_temporaries(monkeypatch):
    """The norm check of float32 data allocates one block of float64 at a time."""
    import tracemalloc

    patch_validation(monkeypatch, "_BLOCK_ENTRIES", 1 << 16)
    rng = np.random.default_rng(1)
    X = sp.random(20000, 500, density=0.1, format="csr", random_state=rng, dtype=np.float32)
    tracemalloc.start()
    assert _validation.check_X(X, max_row_norm=100.0) is X
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # a float64 copy of the data would be 8 MB; the blocks need a few 100 kB
    assert peak < 0.2 * X.nnz * 8


def test_mapped_data_is_validated_from_the_stored_metadata(binary, monkeypatch):
    X, y = open_binary(binary)
    scale = 0.9 / np.sqrt(_validation._csr_sq_norms(X).max())
    checks = []

    def no_scan(*args, **kwargs):  # the O(nnz) checks must not run on verified arrays
        checks.append(args)
        raise AssertionError("scanned X")

    for name in ("_csr_is_canonical", "_reject_non_finite_csr", "_check_csr_arrays"):
        patch_validation(monkeypatch, name, no_scan)
    patch_validation(monkeypatch, "_csr_sq_norms", no_scan)
    assert _validation.check_X(X) is X
    assert _validation.check_sparse_structure(X) is X
    _validation.structure_token(X)
    # every row well below this bound: decided from the stored norms alone
    assert _validation.check_X(X, max_row_norm=1.1 / scale) is X
    assert not checks
    monkeypatch.undo()
    X_mem = load_libsvm(binary.parent / "a.svm")[0]
    for bound in (1.0, 0.9 / scale, 0.2 / scale):  # stored norms vs direct: same verdict
        outcome = []
        for matrix in (X, X_mem):
            try:
                result = _validation.check_X(matrix, max_row_norm=bound)
                outcome.append(("ok", result.data.tobytes()))
            except ValidationError as exc:
                outcome.append(("error", str(exc)))
        assert outcome[0] == outcome[1]


def test_a_fit_on_mapped_data_makes_no_copy(tmp_path):
    import tracemalloc

    from fastdp.solvers.scd import dual_dpscd
    from fastdp.solvers.sgd import dpsgd

    rng = np.random.default_rng(0)
    X = sp.random(30000, 300, density=0.2, format="csr", random_state=rng)
    X.data = np.ones(X.nnz) / 12.0  # norms <= 1 with room (<= 144 entries a row)
    dump_svmlight_file(X, rng.choice([-1.0, 1.0], X.shape[0]), str(tmp_path / "a.svm"))
    convert_libsvm(tmp_path / "a.svm", tmp_path / "d.fdp")
    Xm, ym = open_binary(tmp_path / "d.fdp")
    size = Xm.data.nbytes + Xm.indices.nbytes
    for solver in (dpsgd, dual_dpscd):
        tracemalloc.start()
        solver(Xm, ym, loss="logistic", lam=1e-3, epochs=1, batch_size=100, clip=1.0,
               noise_multiplier=1.0, random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 0.25 * size, (solver.__name__, peak, size)  # O(n + d), not O(nnz)


# ----------------------------------------------------------------------------- peak memory
#
# The child process first runs the same code on a small file (loading the
# compiled parser costs ~50 MB, more than some of the bounds), then measures
# the growth of its resident size (VmRSS, sampled every millisecond by a
# thread) during one load, conversion or fit.  resource.getrusage's ru_maxrss
# cannot serve: it already holds the warm-up's peak, and restarting it
# (/proc/self/clear_refs) proved off by tens of MB.  A copy of 100 MB takes
# tens of milliseconds, so the sampling sees it.

PEAK_SCRIPT = """
    import json, sys
    import numpy as np
    from fastdp.io import convert_libsvm, load_libsvm, open_binary

    def rss():  # resident now (bytes)
        with open("/proc/self/status") as status:
            line = next(l for l in status if l.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    mode, path, out, dtype = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    warm = sys.argv[5]  # a small file: loads the compiled code before measuring
    if mode == "load":
        load_libsvm(warm, dtype=dtype)
    elif mode == "convert":
        convert_libsvm(warm, out + ".warm", dtype=dtype)
    else:
        from fastdp.solvers.sgd import dpsgd

        X, y = open_binary(warm)
        dpsgd(X, y, loss="logistic", lam=1e-3, epochs=1, batch_size=10, clip=1.0,
              noise_multiplier=1.0, random_state=0)
    import threading, time
    highest = [0]
    running = [True]

    def sample():  # the resident size every millisecond (ru_maxrss cannot be restarted)
        while running[0]:
            highest[0] = max(highest[0], rss())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    base = rss()
    sampler.start()
    if mode == "load":
        X, y = load_libsvm(path, dtype=dtype)
        size = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    elif mode == "convert":
        convert_libsvm(path, out, dtype=dtype)
        size = 0
    else:
        X, y = open_binary(out)
        dpsgd(X, y, loss="logistic", lam=1e-3, epochs=1, batch_size=1000, clip=1.0,
              noise_multiplier=1.0, random_state=0)
        size = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    running[0] = False
    sampler.join()
    print(json.dumps({"growth": highest[0] - base, "size": size}))
"""


@pytest.fixture(scope="module")
def big_text(tmp_path_factory):
    """About 120 MB of criteo-like LIBSVM text (40 entries a row, rows of norm < 1)."""
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(20000):
        columns = np.sort(rng.choice(1_000_000, 40, replace=False)) + 1
        values = rng.integers(1, 150000, 40)
        lines.append(("1" if rng.random() < 0.5 else "-1") + "".join(
            f" {c}:0.{v:06d}" for c, v in zip(columns, values)))
    block = ("\n".join(lines) + "\n").encode()
    directory = tmp_path_factory.mktemp("big")
    path = directory / "big.svm"
    with open(path, "wb") as handle:
        for _ in range(max(1, 120_000_000 // len(block))):
            handle.write(block)
    small = directory / "small.svm"  # compiles the parser specialisations before measuring
    small.write_bytes(block[:10000].rsplit(b"\n", 1)[0] + b"\n")
    for dtype in (np.float32, np.float64):
        load_libsvm(small, dtype=dtype)
        convert_libsvm(small, directory / f"small_{np.dtype(dtype).name}.fdp", dtype=dtype)
    yield path
    path.unlink()


def _peak(mode, path, out, dtype, big_text):
    from test_datasets import _run_child

    warm = big_text.parent / ("small.svm" if mode != "fit" else f"small_{dtype}.fdp")
    result = _run_child(PEAK_SCRIPT, mode, path, out, dtype, warm)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dtype, compress", [("float32", False), ("float64", True)])
def test_peak_memory_of_a_load_is_the_csr(big_text, tmp_path, dtype, compress):
    path = big_text
    if compress:
        path = tmp_path / "big.svm.gz"
        with open(big_text, "rb") as raw, gzip.open(path, "wb", compresslevel=1) as packed:
            while block := raw.read(1 << 24):
                packed.write(block)
    measured = _peak("load", path, "", dtype, big_text)
    # final CSR + the fixed buffers (a two-copy loader needs about 2x the CSR)
    assert measured["size"] > 50e6
    assert measured["growth"] <= 1.1 * measured["size"] + 30e6, measured


def test_peak_memory_of_a_conversion_is_bounded(big_text, tmp_path):
    measured = _peak("convert", big_text, tmp_path / "big.fdp", "float64", big_text)
    assert measured["growth"] <= 40e6, measured  # the CSR of this file is about 120 MB


def test_peak_memory_of_a_fit_on_mapped_data_is_x(big_text, tmp_path):
    out = tmp_path / "big.fdp"
    convert_libsvm(big_text, out, dtype=np.float32)
    measured = _peak("fit", big_text, out, "float32", big_text)
    # the mapped pages of X that the epoch reads, plus O(n + d): no copy of X
    assert measured["size"] > 50e6
    assert measured["growth"] <= 1.1 * measured["size"] + 40e6, measured
