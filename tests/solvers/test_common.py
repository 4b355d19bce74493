"""Tests of fastdp.solvers._common: the checks and helpers shared by the mini-batch solvers."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss
from fastdp.privacy import events
from fastdp.sampling import FixedSizeSampler, PoissonSampler, ShuffleSampler
from fastdp.solvers import _common as C


def test_scalar_checks():
    assert C.check_lam(0.5) == 0.5 and C.check_lam(0, allow_zero=True) == 0.0
    for bad, kwargs in [(0, {}), (-1.0, {"allow_zero": True}), (math.inf, {}), (True, {})]:
        with pytest.raises(ValidationError, match="lam"):
            C.check_lam(bad, **kwargs)
    assert C.check_noise_multiplier(0) == 0.0
    with pytest.raises(ValidationError, match="noise_multiplier"):
        C.check_noise_multiplier(-0.1)
    assert C.check_clip(None, private=False) == math.inf and C.check_clip(2, private=True) == 2.0
    with pytest.raises(ValidationError, match="finite clip"):
        C.check_clip(None, private=True)
    with pytest.raises(ValidationError, match="clip"):
        C.check_clip(0.0, private=False)
    assert C.check_num_threads(None) == 1 and C.check_num_threads(np.int64(3)) == 3
    assert C.check_num_threads(C.MAX_NUM_THREADS) == C.MAX_NUM_THREADS
    for bad in (0, 1.0, True, C.MAX_NUM_THREADS + 1, 10**6):
        with pytest.raises(ValidationError, match="num_threads"):
            C.check_num_threads(bad)


def test_check_run_arguments_order_and_values():
    loss, lam, epochs, sigma, clip = C.check_run_arguments("ridge", 1e-2, 2, 1.5, 0.3)
    assert (loss.name, lam, epochs, sigma, clip) == ("squared", 1e-2, 2.0, 1.5, 0.3)
    with pytest.raises(ValidationError, match="lam"):  # lam is checked before epochs
        C.check_run_arguments("logistic", 0.0, -1, 1.0, 1.0)
    with pytest.raises(ValidationError, match="epochs"):
        C.check_run_arguments("logistic", 0.0, 0, 1.0, 1.0, allow_zero_lam=True)


def test_as_csr_and_prepare_data():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(6, 4)) * (rng.random((6, 4)) < 0.5)
    X = C.as_csr(dense)
    assert sp.isspmatrix_csr(X) and X.has_sorted_indices and X.indices.dtype == X.indptr.dtype
    np.testing.assert_array_equal(X.toarray(), dense)
    assert C.as_csr(X) is X
    unit = dense + np.eye(6, 4)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    Xp, y = C.prepare_data(unit, np.array([0, 1, 1, 0, 1, 0]), get_loss("logistic"), private=True)
    np.testing.assert_array_equal(y, [-1, 1, 1, -1, 1, -1])
    assert y.dtype == np.float64 and y.flags.c_contiguous
    np.testing.assert_allclose(Xp.toarray(), unit)
    with pytest.raises(ValidationError, match="norm"):
        C.prepare_data(3.0 * unit, np.ones(6), get_loss("squared"), private=True)
    C.prepare_data(3.0 * unit, np.ones(6), get_loss("squared"), private=False)


def test_start_batches_and_epoch_batches_follow_the_sampler():
    sampler, n, epochs = ShuffleSampler(4), 10, 2.5
    stream, noise_rng = C.start_batches(sampler, n, epochs, random_state=7)
    seen = list(C.epoch_batches(sampler, stream, n, epochs))
    assert [done for _, done, _, _ in seen] == sampler.epoch_boundaries(n, epochs)
    assert [epoch for epoch, _, _, _ in seen] == list(range(1, len(seen) + 1))
    previous = 0
    for _, done, ptr, idx in seen:
        assert ptr.size - 1 == done - previous and np.all(np.diff(ptr) == 4)
        assert idx.min() >= 0 and idx.max() < n
        previous = done
    # the same seed gives the same batches and an independent noise stream
    stream2, noise_rng2 = C.start_batches(sampler, n, epochs, random_state=7)
    again = list(C.epoch_batches(sampler, stream2, n, epochs))
    for (_, _, p1, i1), (_, _, p2, i2) in zip(seen, again):
        np.testing.assert_array_equal(p1, p2)
        np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(noise_rng.random(3), noise_rng2.random(3))
    sampling_rng, other_noise = C.split_random_state(7)
    assert not np.array_equal(sampling_rng.random(3), other_noise.random(3))
    with pytest.raises(ValidationError, match="no complete mini-batch step"):
        C.start_batches(sampler, n, 0.2, random_state=0)
    with pytest.raises(ValidationError, match="batch_size"):
        C.start_batches(FixedSizeSampler(11), n, 1, random_state=0)


def test_check_batches_and_grow_buffer():
    C.check_batches(np.array([0, 2, 2, 3]), np.array([0, 4, 1]), 5)
    for ptr, idx in [(np.array([1, 2]), np.array([0, 1])), (np.array([0, 2, 1]), np.array([0, 1])),
                     (np.array([0, 2]), np.array([0, 5])), (np.array([0, 2]), np.array([-1, 0]))]:
        with pytest.raises(ValidationError, match="batch"):
            C.check_batches(ptr, idx, 5)
    buffer = np.zeros(3)
    assert C.grow_buffer(buffer, np.array([0, 2, 5])) is buffer
    grown = C.grow_buffer(buffer, np.array([0, 4, 5]))
    assert grown.shape == (4,) and grown.dtype == np.float64 and not grown.any()


def test_balanced_column_splits():
    X = sp.random(50, 40, density=0.2, format="csr", random_state=np.random.default_rng(3))
    assert C.balanced_column_splits(X, 1) is None
    splits = C.balanced_column_splits(X, 4)
    assert splits.dtype == np.int64 and splits[0] == 0 and splits[-1] == 40
    assert np.all(np.diff(splits) >= 0) and splits.size == 5
    counts = np.bincount(X.indices, minlength=40)
    per_thread = [counts[a:b].sum() for a, b in zip(splits[:-1], splits[1:])]
    assert sum(per_thread) == X.nnz and max(per_thread) - min(per_thread) <= 2 * counts.max()


def test_sampled_gaussian_event():
    assert isinstance(C.sampled_gaussian_event(PoissonSampler(batch_size=5), 100, 30, 0.0),
                      events.NonPrivateEvent)
    for sampler in (PoissonSampler(batch_size=5), FixedSizeSampler(5), ShuffleSampler(5)):
        assert (C.sampled_gaussian_event(sampler, 100, 30, 1.3)
                == sampler.event(100, 30, events.GaussianEvent(1.3)))
