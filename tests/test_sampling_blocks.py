"""Block-keyed Poisson sampling: membership law, independence, layout invariance, event.

Statistical tests: each z-test below rejects with probability at most 2e-7
under a correct sampler (|z| > 5.2, two-sided); the chi-square test of the lot
sizes at 1e-7 (both tails).  With six tests the suite's false-alarm rate is
below 2e-6.  ``test_tests_detect_correlated_blocks`` shows the tests can fail.
"""
import math

import numpy as np
import pytest
from scipy import stats

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import GaussianEvent
from fastdp.sampling import PoissonSampler, get_sampler
from fastdp.sampling_blocks import (
    BlockPoissonSampler,
    block_ranges,
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
    """The z-scores of the five checks on a membership matrix."""
    lots, n = M.shape
    total = np.count_nonzero(M)
    z_rate = (total - lots * n * q) / math.sqrt(lots * n * q * (1 - q))
    # neighbouring rows (chains along each lot; includes rows across block boundaries)
    z_rows = np.mean([chain_pair_z(M[t, :-1], M[t, 1:], q) for t in range(lots)]) * math.sqrt(lots)
    # the same offset in neighbouring blocks (equal counters except b would correlate these)
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
    for name, z in zip(("rate", "rows", "blocks", "lots"), statistics(M, Q, B)):
        assert abs(z) < Z_MAX, (name, z)


def test_lot_size_dispersion_is_binomial(sample):
    _, _, M = sample
    sizes = M.sum(axis=1)
    var = N * Q * (1 - Q)
    chi2 = np.sum((sizes - N * Q) ** 2) / var   # ~ chi^2(T) under H0 (known mean)
    assert stats.chi2.sf(chi2, T) > 5e-8 and stats.chi2.cdf(chi2, T) > 5e-8


def test_tests_detect_correlated_blocks(monkeypatch):
    """A broken stream that ignores the block number fails the block-correlation check."""
    from fastdp import sampling_blocks

    original = sampling_blocks._KeyedStreams.at
    monkeypatch.setattr(sampling_blocks._KeyedStreams, "at",
                        lambda self, t, b: original(self, t, 0))
    sampler = BlockPoissonSampler(Q, block_size=B)
    M = membership(sampler, sampling_key(np.random.default_rng(1)), N, 60)
    assert abs(statistics(M, Q, B)[2]) > Z_MAX


@pytest.mark.parametrize("n_shards", [1, 2, 3, 10])
def test_lots_do_not_depend_on_the_shard_layout(n_shards):
    sampler = BlockPoissonSampler(batch_size=300, block_size=B)
    key = sampling_key(np.random.default_rng(7))
    for t in (1, 2, 17):
        whole = sampler.lot(key, N, t)
        parts = [sampler.lot(key, N, t, a, b) for a, b in block_ranges(N, B, n_shards)]
        assert np.array_equal(whole, np.concatenate(parts))
        assert np.all(np.diff(whole) > 0) and whole[-1] < N


def test_members_of_a_block_do_not_depend_on_n():
    sampler = BlockPoissonSampler(0.1, block_size=B)
    key = sampling_key(np.random.default_rng(3))
    small, large = sampler.lot(key, 2 * B + 100, 4), sampler.lot(key, 9 * B, 4)
    assert np.array_equal(small, large[large < 2 * B + 100])


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
    with pytest.raises(ValidationError, match="whole blocks"):
        BlockPoissonSampler(0.1, block_size=B).lot(sampling_key(np.random.default_rng(0)), N, 1, 3)
    with pytest.raises(ValidationError, match="shards"):
        block_ranges(N, B, 11)
