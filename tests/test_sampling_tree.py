"""The binomial splitting tree of keyed Poisson sampling (:mod:`fastdp._kernels._sampling_tree`).

References: the Random123 known-answer vectors of Philox4x32-10; scipy's
binomial and hypergeometric pmfs; the closed-form law of Poisson sampling
(a subset S of n rows is a lot with probability ``q^|S| (1 - q)^(n - |S|)``).

Every chi-square test below rejects a correct kernel with probability 1e-6
(``P_MIN``); with the eight chi-square tests of this file the false-alarm
rate is below 1e-5.  ``test_chi_square_detects_the_binomial_split`` shows the
test rejects a plausible wrong split law.
"""
import itertools

import numpy as np
import pytest
from scipy import stats

from fastdp._kernels._philox import philox4x32
from fastdp._kernels._sampling_tree import leaf_members, left_count, lot_size, tree_lot

P_MIN = 1e-6
KEY = np.uint64(0x5DEECE66D2024)


def chi_square_p(observed, probs, min_expected=5.0):
    """p-value of Pearson's chi-square of integer ``observed`` draws against ``probs`` on
    the same support (cells with expected count below ``min_expected`` pooled)."""
    observed = np.asarray(observed)
    counts = np.bincount(observed, minlength=len(probs)).astype(float)
    assert counts.size == len(probs), "a draw outside the support"
    expected = len(observed) * np.asarray(probs, dtype=float)
    small = expected < min_expected
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    chi2 = np.sum((obs - exp) ** 2 / exp)
    return stats.chi2.sf(chi2, obs.size - 1)


def test_philox_known_answers():
    m = 0xFFFFFFFF
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((m, m, m, m), (m, m), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in cases:
        assert tuple(int(x) for x in philox4x32(*ctr, *key)) == want


def test_lot_size_is_binomial():
    n, q = 3000, 0.01
    draws = [lot_size(KEY, t, n, q) for t in range(1, 20001)]
    assert chi_square_p(draws, stats.binom.pmf(np.arange(n + 1), n, q)) > P_MIN


@pytest.mark.parametrize("c,a,b", [(50, 30, 70), (40, 3, 1000), (900, 10**6, 10**6 + 1),
                                   (12, 7, 6)])
def test_split_is_hypergeometric(c, a, b):
    draws = [left_count(KEY, 9, t, c, a, b) for t in range(1, 20001)]
    probs = stats.hypergeom.pmf(np.arange(min(c, a) + 1), a + b, a, c)
    assert chi_square_p(draws, probs) > P_MIN


def test_chi_square_detects_the_binomial_split():
    """Splitting c members by Binomial(c, |L| / |range|) (a Poisson process, not Bernoulli
    rows) is caught at the sample size used above."""
    c, a, b = 50, 30, 70
    wrong = np.random.default_rng(0).binomial(c, a / (a + b), size=20000)
    assert chi_square_p(wrong, stats.hypergeom.pmf(np.arange(c + 1), a + b, a, c)) < P_MIN


@pytest.mark.parametrize("size,c", [(10, 3), (6, 3)])   # rejection (c^2 <= size), Floyd
def test_leaf_members_are_a_uniform_subset(size, c):
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(size), c))}
    out = np.empty(c, dtype=np.int64)
    draws = []
    for t in range(1, 12001):
        leaf_members(KEY, 5, t, size, c, out)
        assert np.all(np.diff(out) > 0)
        draws.append(subsets[tuple(int(x) for x in out)])
    assert chi_square_p(draws, np.full(len(subsets), 1.0 / len(subsets))) > P_MIN


@pytest.mark.parametrize("n,leaf", [(6, 1), (7, 2)])
def test_lot_has_the_law_of_poisson_sampling(n, leaf):
    """Every subset of n rows, against q^|S| (1 - q)^(n - |S|): the tree split down to
    leaves of 1 or 2 members (hypergeometric splits at every level)."""
    q = 0.3
    codes = []
    for t in range(1, 30001):
        rows = tree_lot(KEY, t, n, q, 0, n, leaf)
        codes.append(int(np.sum(2 ** rows)))
    sizes = np.array([bin(s).count("1") for s in range(2 ** n)])
    assert chi_square_p(codes, q ** sizes * (1 - q) ** (n - sizes)) > P_MIN


def test_any_range_gives_the_lot_restricted_to_it():
    n, q = 10**6 + 3, 2e-3
    cuts = [0, 1, 4097, 333333, 500001, 999999, n]
    for t in (1, 2, 40):
        whole = tree_lot(KEY, t, n, q, 0, n, 32)
        assert np.all(np.diff(whole) > 0) and 0 <= whole[0] and whole[-1] < n
        parts = [tree_lot(KEY, t, n, q, a, b, 32) for a, b in zip(cuts[:-1], cuts[1:])]
        assert np.array_equal(whole, np.concatenate(parts))
