"""Tests of fastdp.sampling: batch laws (statistical, stated false-alarm rates), bookkeeping, events."""
import math

import numpy as np
import pytest
from scipy import stats

from fastdp.exceptions import ValidationError
from fastdp.privacy import events
from fastdp.sampling import (
    FixedSizeSampler,
    PoissonSampler,
    ShuffleSampler,
    epoch_boundaries,
    get_sampler,
    n_steps_for_epochs,
    uniform_subsets,
)


def split(ptr, idx):
    return [idx[ptr[t]:ptr[t + 1]] for t in range(len(ptr) - 1)]


def assert_well_formed(ptr, idx, n):
    assert ptr.dtype == np.int64 and idx.dtype == np.int64
    assert ptr[0] == 0 and ptr[-1] == idx.size and np.all(np.diff(ptr) >= 0)
    for b in split(ptr, idx):
        assert np.all(np.diff(b) > 0)  # sorted and distinct
        assert b.size == 0 or (b[0] >= 0 and b[-1] < n)


def test_n_steps_is_floor_of_epochs_n_over_L():
    assert n_steps_for_epochs(1, 200_000, 1000) == 200
    assert n_steps_for_epochs(50, 347_786, 1000) == 17_389  # spec 000 section 6.5
    assert n_steps_for_epochs(2.5, 10, 3) == 8
    assert PoissonSampler(0.005).n_steps(200_000, 1) == 200
    assert PoissonSampler(batch_size=1000).n_steps(347_786, 50) == 17_389
    assert epoch_boundaries(3, 10, 4) == [2, 5, 7]
    assert epoch_boundaries(1.5, 10, 1) == [10, 15]


def test_poisson_batch_sizes_and_inclusion_rate():
    """Sizes ~ Binomial(n, q) and every example is included at rate q.

    z-tests at |z| < 5 and a chi-square test at p > 1e-4 (false alarm < 2e-4).
    """
    n, q, steps = 300, 0.05, 4000
    ptr, idx = PoissonSampler(q).stream(n, np.random.default_rng(0)).take(steps)
    assert_well_formed(ptr, idx, n)
    sizes = np.diff(ptr)
    assert abs(sizes.mean() - n * q) < 5 * math.sqrt(n * q * (1 - q) / steps)
    assert abs(sizes.var() / (n * q * (1 - q)) - 1) < 5 * math.sqrt(2 / steps)
    counts = np.bincount(idx, minlength=n)
    assert stats.chisquare(counts).pvalue > 1e-4
    # rare empty batches are allowed and kept
    ptr, _ = PoissonSampler(0.001).stream(100, np.random.default_rng(1)).take(50)
    assert np.any(np.diff(ptr) == 0)


def test_fixed_size_batches_are_uniform_subsets():
    n, L, steps = 6, 2, 6000
    ptr, idx = FixedSizeSampler(L).stream(n, np.random.default_rng(2)).take(steps)
    assert_well_formed(ptr, idx, n)
    assert np.all(np.diff(ptr) == L)
    pairs = idx.reshape(-1, 2)
    codes = pairs[:, 0] * n + pairs[:, 1]
    counts = np.unique(codes, return_counts=True)[1]
    assert counts.size == math.comb(n, L)
    assert stats.chisquare(counts).pvalue > 1e-4  # false alarm 1e-4


def test_uniform_subsets_rejection_path_is_uniform():
    """Sizes small relative to n use the with-replacement + redraw path.

    All C(16, 2) = 120 subsets must be equally likely: chi-square, p > 1e-4.
    """
    n = 16
    ptr, idx = uniform_subsets(np.random.default_rng(3), n, np.full(30000, 2))
    assert_well_formed(ptr, idx, n)
    pairs = idx.reshape(-1, 2)
    counts = np.unique(pairs[:, 0] * n + pairs[:, 1], return_counts=True)[1]
    assert counts.size == math.comb(n, 2)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("n,L", [(10, 3), (12, 4), (7, 7), (9, 1)])
def test_shuffle_lots_are_distinct_and_each_pass_is_a_permutation(n, L):
    steps = 40
    ptr, idx = ShuffleSampler(L).stream(n, np.random.default_rng(4)).take(steps)
    assert_well_formed(ptr, idx, n)
    assert np.all(np.diff(ptr) == L)
    # an example appears at most once per permutation: at most ceil(T L / n) times overall
    counts = np.bincount(idx, minlength=n)
    assert counts.max() <= -(-steps * L // n)
    assert counts.min() >= (steps * L) // n - 1


def test_shuffle_stream_is_continuous_across_calls():
    s = ShuffleSampler(3)
    a = s.stream(10, np.random.default_rng(5))
    p1, i1 = a.take(7)
    p2, i2 = a.take(6)
    _, i_all = s.stream(10, np.random.default_rng(5)).take(13)
    assert np.array_equal(np.concatenate([i1, i2]), i_all)


def test_same_seed_same_batches():
    for s in (PoissonSampler(0.1), FixedSizeSampler(5), ShuffleSampler(5)):
        a = s.stream(50, np.random.default_rng(9)).take(30)
        b = s.stream(50, np.random.default_rng(9)).take(30)
        c = s.stream(50, np.random.default_rng(10)).take(30)
        assert np.array_equal(a[1], b[1]) and np.array_equal(a[0], b[0])
        assert not np.array_equal(a[1], c[1])


def test_events_describe_the_sampler_that_ran():
    g = events.GaussianEvent(2.0)
    ev = PoissonSampler(batch_size=10).event(100, 30, g)
    assert ev == events.SelfComposedEvent(events.PoissonSampledEvent(0.1, g), 30)
    ev = FixedSizeSampler(10).event(100, 30, g)
    assert ev == events.SelfComposedEvent(events.FixedSizeSampledEvent(100, 10, g), 30)
    ev = ShuffleSampler(10).event(100, 25, g)  # 250 visits of 100 examples: 3 permutations
    assert ev == events.ShuffledEvent(100, 10, g, 3)
    assert ShuffleSampler(10).adjacency == "replace_one" == FixedSizeSampler(10).adjacency
    assert PoissonSampler(0.1).adjacency == "add_remove"


def test_get_sampler_and_bad_input():
    assert get_sampler("poisson", 5) == PoissonSampler(batch_size=5)
    assert get_sampler("uniform", 5) == FixedSizeSampler(5)
    assert isinstance(get_sampler("shuffle", 5), ShuffleSampler)
    with pytest.raises(ValidationError):
        get_sampler("bogus", 5)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValidationError):
            FixedSizeSampler(bad)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValidationError):
            PoissonSampler(bad)
    with pytest.raises(ValidationError):
        PoissonSampler()
    with pytest.raises(ValidationError):  # L > n
        ShuffleSampler(11).stream(10, np.random.default_rng(0))
    with pytest.raises(ValidationError):
        PoissonSampler(batch_size=11).n_steps(10, 1)
