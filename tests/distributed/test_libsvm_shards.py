"""LIBSVM byte-range shards (issue 21): the row index, byte ranges, same bits for 1/2/4 workers.

References: scikit-learn's ``load_svmlight_file`` (rows and their order) and a
line-by-line count of the data lines (``count_libsvm_rows``); the single-machine
estimator with the block-keyed sampler for the bits.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from fastdp.distributed.data_parallel import (
    LibsvmRows,
    LocalWorkers,
    RayWorkers,
    ShardValidationError,
    array_source,
    fit_distributed,
    libsvm_source,
)
from fastdp.distributed.data_parallel.executors import worker_sources
from fastdp.distributed.data_parallel.libsvm_index import chunk_data_starts, index_libsvm
from fastdp.distributed.data_parallel.shards import count_libsvm_rows

from shard_setup import BLOCK, N
from shard_setup import shard_estimator as estimator

# comments, blank and whitespace-only lines, CRLF, a comment after data, no trailing newline
AWKWARD = (b"# header comment\n1 1:0.5 3:1\n\n-1 2:1.5 # trailing comment\n   \n"
           b"\t# indented comment\n1 4:2\r\n-1 1:1 2:2\n#\n  1 3:0.25\n \t \n-1 2:4")


def _awkward_file(tmp_path, repeat=7, trailing_newline=False):
    path = tmp_path / "awkward.svm"
    path.write_bytes(b"\n".join([AWKWARD] * repeat) + (b"\n" if trailing_newline else b""))
    return str(path)


@pytest.mark.parametrize("trailing_newline", [False, True])
@pytest.mark.parametrize("chunk_bytes", [1, 3, 7, 40, 1 << 20])
def test_index_counts_and_locates_every_row(tmp_path, chunk_bytes, trailing_newline):
    path = _awkward_file(tmp_path, trailing_newline=trailing_newline)
    index = index_libsvm(path, n_tasks=3, chunk_bytes=chunk_bytes)
    X_ref, y_ref = load_svmlight_file(path, zero_based=True)
    assert index.n_rows == count_libsvm_rows(path) == X_ref.shape[0] == 42
    starts = chunk_data_starts(path, 0, index.offsets[-1])
    assert [index.position(r) for r in range(index.n_rows)] == list(starts)
    data = open(path, "rb").read()
    assert all(data[p - 1:p] in (b"", b"\n") for p in starts)   # line starts


@pytest.mark.parametrize("chunk_bytes", [5, 64, 1 << 20])
def test_byte_ranges_give_the_rows_of_the_whole_file(tmp_path, chunk_bytes):
    path = _awkward_file(tmp_path)
    X_ref, y_ref = load_svmlight_file(path, zero_based=True)
    loader = LibsvmRows(path, index=index_libsvm(path, n_tasks=2, chunk_bytes=chunk_bytes))
    rng = np.random.default_rng(0)
    cuts = [(0, 42), (0, 1), (41, 42), (3, 3)] + [tuple(sorted(rng.integers(0, 43, 2)))
                                                  for _ in range(20)]
    for a, b in cuts:
        X, y = loader(a, b)
        assert X.shape[0] == b - a and np.array_equal(y, y_ref[a:b])
        ref = X_ref[a:b]
        assert np.array_equal(X.indptr, ref.indptr) and np.array_equal(X.indices, ref.indices)
        assert np.array_equal(X.data, ref.data)
    pieces = [loader(a, b) for a, b in ((0, 10), (10, 11), (11, 42))]   # a tiling
    assert np.array_equal(np.concatenate([p[1] for p in pieces]), y_ref)
    whole = sp.vstack([sp.csr_matrix(p[0], shape=(p[0].shape[0], 5)) for p in pieces])
    assert (whole != X_ref).nnz == 0


def test_loader_reads_only_its_byte_range(tmp_path, monkeypatch):
    """A shard at the end of the file parses only its own bytes (not the file from its start)."""
    import fastdp.io.libsvm as libsvm

    path = _awkward_file(tmp_path, repeat=40)
    index = index_libsvm(path, chunk_bytes=256)
    seen = []
    real = libsvm.load_libsvm

    def spy(*args, **kwargs):
        seen.append((kwargs["offset"], kwargs["length"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(libsvm, "load_libsvm", spy)
    assert index.n_rows == 240
    LibsvmRows(path, index=index)(150, 240)
    offset, length = seen[0]
    assert offset >= index.position(150) - 1 and length == -1
    assert offset > 0.6 * index.offsets[-1]     # row 150 of 240


def test_changed_file_is_refused(tmp_path):
    path = _awkward_file(tmp_path)
    source = libsvm_source(path, n_shards=1, block_size=64)
    with open(path, "ab") as fh:
        fh.write(b"\n1 1:1\n")
    with pytest.raises(ShardValidationError, match="changed since its rows were counted"):
        fit_distributed(source, estimator(sampler=None, batch_size=5), engine=LocalWorkers(1))


def test_compressed_file_is_refused(tmp_path):
    import gzip

    path = tmp_path / "d.svm.gz"
    path.write_bytes(gzip.compress(AWKWARD))
    with pytest.raises(Exception, match="compressed"):
        libsvm_source(path)


def test_in_memory_workers_are_sent_only_their_rows(shard_data):
    """worker_sources cuts an in-memory source into views of X: no copy of X, no other rows."""
    X, y = shard_data
    X = X.tocsr()
    source = array_source(X, y, n_shards=4, block_size=BLOCK)
    parts = worker_sources(source, [[0], [1, 2], [3]])
    specs = source.shards()
    for part, (a, b) in zip(parts, ((specs[0].start, specs[0].stop),
                                    (specs[1].start, specs[2].stop),
                                    (specs[3].start, specs[3].stop))):
        held = part.loader
        assert held.y.shape[0] == b - a and held.offset == a
        assert np.shares_memory(held.X.data, X.data) and np.shares_memory(held.X.indices,
                                                                           X.indices)
        assert held.X.data.size == X.indptr[b] - X.indptr[a]
        Xa, ya = part.loader(a, b)
        assert (Xa != X[a:b]).nnz == 0 and np.array_equal(ya, y[a:b])
        with pytest.raises(Exception, match="not in this part"):
            part.loader(max(a - 1, 0), b + 1 if a == 0 else b)


# ---------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def reference(shard_svm_file):
    X, y = load_svmlight_file(str(shard_svm_file))
    return estimator().fit(X, y)


@pytest.mark.parametrize("n_workers", [1, 2, pytest.param(4, marks=pytest.mark.slow)])
def test_ray_libsvm_byte_range_shards_same_bits(ray_cluster, shard_svm_file, reference,
                                                n_workers):
    """1/2/4 Ray workers on a LIBSVM source (rows counted by Ray tasks, shards read as byte
    ranges): with one shard the bits of the single-machine fit; with four shards the same
    bits for every worker count (and within 1e-12 of one shard)."""
    engine = RayWorkers(n_workers=n_workers)
    source = libsvm_source(shard_svm_file, n_shards=4, block_size=BLOCK, engine=engine,
                           chunk_bytes=4096)
    assert source.n_rows == N and len(source.loader.index.offsets) > 10
    four = fit_distributed(source, estimator(), engine=engine)
    local = fit_distributed(libsvm_source(shard_svm_file, n_shards=4, block_size=BLOCK),
                            estimator(), engine=LocalWorkers(1))
    assert np.array_equal(four.coef_, local.coef_)
    assert np.array_equal(four.intercept_, local.intercept_)
    assert four.epsilon_ == reference.epsilon_
    np.testing.assert_allclose(four.coef_, reference.coef_, rtol=0,
                               atol=1e-12 * np.abs(reference.coef_).max())
    if n_workers == 1:
        one = fit_distributed(libsvm_source(shard_svm_file, block_size=BLOCK,   # default shards
                                            engine=engine), estimator(), engine=engine)
        assert np.array_equal(one.coef_, reference.coef_)
