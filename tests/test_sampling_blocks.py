"""Keyed Poisson sampling (the splitting tree): membership law, independence, layout, event.

Statistical tests: each z-test below rejects with probability at most 2e-7
under a correct sampler (|z| > 5.2, two-sided); the chi-square tests of the
lot sizes and of the per-row inclusion counts at 1e-7 (both tails).  With
eight tests (six z, two chi-square) the suite's false-alarm rate is below 2e-6.
``test_tests_detect_lots_that_ignore_t`` shows the tests can fail.  The
kernel's own laws (binomial size, hypergeometric splits, uniform leaves, the
exact law of a lot of a few rows) are tested in ``test_sampling_tree.py``.
"""
import math

import numpy as np
import pytest
from scipy import stats

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import GaussianEvent
from fastdp.sampling import PoissonSampler, get_sampler
from fastdp.sampling_blocks import (
    DEFAULT_SHARDS,
    BlockPoissonSampler,
    block_ranges,
    default_shard_count,
    keyed_streams,
    sampling_key,
)

Z_MAX = 5.2  # two-sided P(|N(0,1)| > 5.2) = 2.0e-7

N, B, Q, T = 5000, 512, 0.04, 300   # 10 blocks, the last one short (392 rows)


def membership(sampler, key, n, n_lots):
    """Boolean matrix (lots x rows)."""
    streams = keyed_streams(key)
    M = np.zeros((n_lots, n), dtype=bool)
    for t in range(1, n_lots + 1):
        M[t - 1, sampler.lot(streams, n, t)] = True
    return M


def chain_pair_z(A, Bm, q):
    """z of the count of (A & Bm) against q^2 for a chain of overlapping pairs.

    ``A[k]`` and ``Bm[k]`` are memberships, ``Bm[k] == A[k + 1]`` (a chain): under
    independence the mean is ``N q^2`` and the variance
    ``N q^2 (1 - q^2) + 2 (N - 1) (q^3 - q^4)`` (neighbouring pairs share a row).
    """
    count = np.count_nonzero(A & Bm)
    pairs = A.size
    mean = pairs * q * q
    var = pairs * q * q * (1 - q * q) + 2 * (pairs - 1) * (q**3 - q**4)
    return (count - mean) / math.sqrt(var)


def statistics(M, q, block):
    """The z-scores of the four checks on a membership matrix (``block``: a row offset)."""
    lots, n = M.shape
    total = np.count_nonzero(M)
    z_rate = (total - lots * n * q) / math.sqrt(lots * n * q * (1 - q))
    # neighbouring rows (chains along each lot; includes rows across block boundaries)
    z_rows = np.mean([chain_pair_z(M[t, :-1], M[t, 1:], q) for t in range(lots)]) * math.sqrt(lots)
    # rows ``block`` apart (rows in the two halves of a tree node)
    z_blocks = np.mean([chain_pair_z(M[t, :-block], M[t, block:], q)
                        for t in range(lots)]) * math.sqrt(lots)
    # the same row in consecutive lots
    z_lots = np.mean([chain_pair_z(M[:-1, i], M[1:, i], q) for i in range(n)]) * math.sqrt(n)
    return z_rate, z_rows, z_blocks, z_lots


@pytest.fixture(scope="module")
def sample():
    sampler = BlockPoissonSampler(Q, block_size=B)
    key = sampling_key(np.random.default_rng(2024))
    return sampler, key, membership(sampler, key, N, T)


def test_membership_rate_and_independence(sample):
    _, _, M = sample
    for offset in (B, N // 2, N // 4 + 1):
        for name, z in zip(("rate", "rows", "offset", "lots"), statistics(M, Q, offset)):
            assert abs(z) < Z_MAX, (name, offset, z)


def test_per_row_inclusion_counts_are_binomial(sample):
    """Each row's count over T lots is Binomial(T, q), the rows independent: the sum of the
    squared standardized counts is chi^2(N) (to the normal approximation, Tq = 12)."""
    _, _, M = sample
    counts = M.sum(axis=0)
    chi2 = np.sum((counts - T * Q) ** 2) / (T * Q * (1 - Q))
    assert stats.chi2.sf(chi2, N) > 5e-8 and stats.chi2.cdf(chi2, N) > 5e-8


def test_lot_size_dispersion_is_binomial(sample):
    _, _, M = sample
    sizes = M.sum(axis=1)
    var = N * Q * (1 - Q)
    chi2 = np.sum((sizes - N * Q) ** 2) / var   # ~ chi^2(T) under H0 (known mean)
    assert stats.chi2.sf(chi2, T) > 5e-8 and stats.chi2.cdf(chi2, T) > 5e-8


def test_tests_detect_lots_that_ignore_t(monkeypatch):
    """A broken sampler whose lots repeat every other step fails the lots check."""
    original = BlockPoissonSampler.lot
    monkeypatch.setattr(BlockPoissonSampler, "lot",
                        lambda self, key, n, t, *a: original(self, key, n, (t + 1) // 2, *a))
    sampler = BlockPoissonSampler(Q, block_size=B)
    M = membership(sampler, sampling_key(np.random.default_rng(1)), N, 60)
    assert abs(statistics(M, Q, B)[3]) > Z_MAX


@pytest.mark.parametrize("n_shards", [1, 2, 3, 10])
def test_lots_do_not_depend_on_the_shard_layout(n_shards):
    sampler = BlockPoissonSampler(batch_size=300, block_size=B)
    key = sampling_key(np.random.default_rng(7))
    for t in (1, 2, 17):
        whole = sampler.lot(key, N, t)
        parts = [sampler.lot(key, N, t, a, b) for a, b in block_ranges(N, B, n_shards)]
        cuts = [0, 1, 777, 2500, 2501, N]                   # any ranges, not only blocks
        assert np.array_equal(whole, np.concatenate(
            [sampler.lot(key, N, t, a, b) for a, b in zip(cuts[:-1], cuts[1:])]))
        assert np.array_equal(whole, np.concatenate(parts))
        assert np.all(np.diff(whole) > 0) and whole[-1] < N


def test_lots_do_not_depend_on_the_block_size():
    key = sampling_key(np.random.default_rng(3))
    for t in (1, 4):
        assert np.array_equal(BlockPoissonSampler(0.1, block_size=B).lot(key, N, t),
                              BlockPoissonSampler(0.1, block_size=7).lot(key, N, t))


def test_default_shards_are_a_rule_of_the_data():
    assert default_shard_count(N, B) == 10 and default_shard_count(10**8, 4096) == DEFAULT_SHARDS
    assert default_shard_count(1, B) == 1


def test_stream_is_keyed_and_resumable():
    sampler = get_sampler("block_poisson", 250)
    a = sampler.stream(N, np.random.default_rng(5))
    b = sampler.stream(N, np.random.default_rng(5))
    p1, i1 = a.take(5)
    p2a, i2a = b.take(2)
    p2b, i2b = b.take(3)
    assert np.array_equal(i1, np.concatenate([i2a, i2b]))
    assert np.array_equal(p1[:3], p2a) and np.array_equal(p1[2:] - p1[2], p2b)


def test_event_is_poisson_event():
    step = GaussianEvent(1.3)
    assert (BlockPoissonSampler(batch_size=64).event(N, 40, step)
            == PoissonSampler(batch_size=64).event(N, 40, step))
    s = BlockPoissonSampler(batch_size=64)
    assert s.sample_rate(N) == 64 / N and s.adjacency == "add_remove"


def test_rate_one_takes_every_row():
    s = BlockPoissonSampler(1.0, block_size=B)
    assert np.array_equal(s.lot(sampling_key(np.random.default_rng(0)), N, 3), np.arange(N))


def test_bad_arguments():
    with pytest.raises(ValidationError, match="block_size"):
        BlockPoissonSampler(0.1, block_size=0)
    key = sampling_key(np.random.default_rng(0))
    with pytest.raises(ValidationError, match="within"):
        BlockPoissonSampler(0.1, block_size=B).lot(key, N, 1, 3, N + 1)
    with pytest.raises(ValidationError, match="lot number"):
        BlockPoissonSampler(0.1, block_size=B).lot(key, N, 0)
    with pytest.raises(ValidationError, match="shards"):
        block_ranges(N, B, 11)
