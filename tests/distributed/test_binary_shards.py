"""Data-parallel shards read from a binary dataset (``*.fdp``, issue 21 item 1).

Each worker slices its own row range out of the memory maps; the driver reads
the header only.  References: the in-memory ``array_source`` over the same
matrix with the same shards (bit for bit), and ``open_binary`` for the rows.
"""
import json
import os

import numpy as np
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fastdp.distributed.data_parallel import (  # noqa: E402
    LocalWorkers,
    ShardValidationError,
    array_source,
    binary_source,
    fit_distributed,
)
from fastdp.distributed.data_parallel import driver  # noqa: E402
from fastdp.exceptions import ValidationError  # noqa: E402
from fastdp.io.binary import (  # noqa: E402
    binary_shape,
    convert_libsvm,
    open_binary,
    open_binary_rows,
)
from fastdp.persistence import load_model  # noqa: E402
from fastdp.privacy.ledger import PrivacyLedger  # noqa: E402

from shard_setup import BLOCK, N  # noqa: E402
from shard_setup import shard_estimator as estimator  # noqa: E402


def convert(svm_path, directory, name="data.fdp", **kw):
    dst = directory / name
    convert_libsvm(svm_path, dst, **kw)
    return dst


@pytest.fixture(scope="module")
def fdp(shard_svm_file, tmp_path_factory):
    return convert(shard_svm_file, tmp_path_factory.mktemp("fdp"))


def test_row_ranges_equal_the_whole_file_rows(fdp):
    X, y = open_binary(fdp)
    for start, stop in ((0, N), (0, 1), (512, 1024), (1792, N), (700, 700)):
        Xs, ys = open_binary_rows(fdp, start, stop)
        assert Xs.shape == (stop - start, X.shape[1])
        assert (Xs != X[start:stop]).nnz == 0 and Xs.dtype == X.dtype
        assert np.array_equal(ys, y[start:stop])
    assert binary_shape(fdp) == X.shape
    with pytest.raises(ValidationError, match="outside"):
        open_binary_rows(fdp, 10, N + 1)


@pytest.mark.parametrize("n_shards,n_workers,dtype", [(None, 1, np.float64), (4, 2, np.float64),
                                                      (4, 3, np.float32)])
def test_binary_source_equals_array_source_bit_for_bit(fdp, shard_svm_file, tmp_path, n_shards,
                                                       n_workers, dtype):
    path = fdp if dtype == np.float64 else convert(shard_svm_file, tmp_path, dtype=dtype)
    X, y = open_binary(path)
    ref = fit_distributed(array_source(X, y, n_shards=n_shards, block_size=BLOCK), estimator(),
                          engine=LocalWorkers(1))
    source = binary_source(path, n_shards=n_shards, block_size=BLOCK)
    assert (source.n_rows, source.n_features, source.zero_based) == (N, X.shape[1], True)
    fit = fit_distributed(source, estimator(), engine=LocalWorkers(n_workers))
    assert np.array_equal(fit.coef_, ref.coef_)
    assert np.array_equal(fit.intercept_, ref.intercept_)
    assert fit.epsilon_ == ref.epsilon_ and fit.privacy_event_ == ref.privacy_event_
    if n_shards is None:  # and with the default shards, the single-machine fit on the same matrix
        assert np.array_equal(fit.coef_, estimator().fit(X, y).coef_)


def test_driver_reads_the_header_only(shard_svm_file, tmp_path):
    path = convert(shard_svm_file, tmp_path, name="gone.fdp")
    os.remove(path / "data.npy")                        # workers need it; the driver does not
    source = binary_source(path, n_shards=2, block_size=BLOCK)
    assert source.n_rows == N
    with pytest.raises(ShardValidationError, match=r"shard 0 \(rows 0\.\.1023 of gone\.fdp\).*"
                                                   r"data\.npy is missing"):
        fit_distributed(source, estimator(), engine=LocalWorkers(1))


def test_damaged_shard_is_named_before_any_noise(shard_svm_file, tmp_path, monkeypatch):
    path = convert(shard_svm_file, tmp_path, name="bad.fdp")
    indptr = np.load(path / "indptr.npy")
    data = np.load(path / "data.npy", mmap_mode="r+")
    data[indptr[3 * BLOCK + 5]] = np.nan                # a row of shard 1 of 4 (blocks 2..3)
    data.flush()
    del data
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)

    def no_noise(*a, **k):
        raise AssertionError("noise drawn before the shards were checked")

    monkeypatch.setattr(driver.LazyNoisyModel, "__init__", no_noise)
    source = binary_source(path, n_shards=4, block_size=BLOCK)
    with pytest.raises(ShardValidationError, match=r"shard 1 \(rows 512\.\.1023 of bad\.fdp\)"):
        fit_distributed(source, estimator(ledger=ledger), engine=LocalWorkers(2))
    assert len(ledger.entries) == 0


def test_damaged_header_is_refused_by_the_driver(shard_svm_file, tmp_path):
    path = convert(shard_svm_file, tmp_path, name="edited.fdp")
    header = json.loads((path / "header.json").read_text())
    header["shape"][0] -= 1                             # edited without its digest
    (path / "header.json").write_text(json.dumps(header))
    with pytest.raises(ValidationError, match="SHA-256"):
        binary_source(path, n_shards=2, block_size=BLOCK)


# ---------------------------------------------------------------- Ray


def test_ray_binary_shards_and_cli(ray_cluster, fdp, tmp_path, capsys):
    from fastdp.cli import main

    X, y = open_binary(fdp)
    ref = fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                          estimator(sampler="block_poisson"), engine=LocalWorkers(1))
    out = tmp_path / "model"
    status = main(["train", str(fdp), "--model", "logistic", "--ray", "local",
                   "--workers", "2", "--shards", "2", "--block-size", str(BLOCK),
                   "--batch-size", "150", "--epochs", "2", "--seed", "11",
                   "--delta", str(ref.delta_), "--out", str(out)])
    assert status == 0
    text = capsys.readouterr().out
    assert "data-parallel on Ray" in text and "bytes per step" in text
    model = load_model(str(out) + ".json")
    assert np.array_equal(model.coef_, ref.coef_) and model.epsilon_ == ref.epsilon_
