"""Batched backtracking kernel (fastdp._kernels._line_search) against numpy references.

Spec 003 §7 items 3, 5, 20: clipped sums match a dense numpy reference, the
batched kernel returns the same index as the sequential Algorithm-1 loop with
identical pre-drawn noise (ties accept), and it is deterministic.
"""

import numpy as np
import pytest

from fastdp._kernels import _line_search as K
from fastdp.losses import get_loss

LOSSES = ["squared", "logistic", "hinge"]


def reference_clipped_sum(z, y, loss, c_obj):
    """Σ min(loss(z_i, y_i), c_obj) with fastdp.losses (independent of the kernel)."""
    return float(np.sum(np.minimum(get_loss(loss).value(z, y), c_obj)))


def sequential_noisy_btls(z, u, y, loss, c_obj, etas, slope, curvature, lam, nu):
    """Algorithm 1 as printed: one candidate at a time, stop at the first ⊤."""
    f_w = reference_clipped_sum(z, y, loss, c_obj)
    for k, eta in enumerate(etas):
        q = f_w - reference_clipped_sum(z - eta * u, y, loss, c_obj) - slope * eta \
            - curvature * eta * eta
        if q + nu[k] >= lam:
            return k
    return -1


def _case(rng, loss, b=40, K_=6):
    z = rng.normal(0, 2, b)
    u = rng.normal(0, 1, b)
    y = rng.normal(0, 1, b) if loss == "squared" else rng.choice([-1.0, 1.0], b)
    etas = rng.uniform(0.5, 2.0) * 0.7 ** np.arange(K_)
    return z, u, y, etas


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("c_obj", [0.3, 1.0, np.inf])
def test_clipped_sums_match_numpy(loss, c_obj):
    rng = np.random.default_rng(3)
    z, u, y, etas = _case(rng, loss)
    out = np.empty(etas.size + 1)
    K.clipped_loss_sums(z, u, y, etas, K.LOSS_CODES[loss], c_obj, out)
    expected = [reference_clipped_sum(z, y, loss, c_obj)] + [
        reference_clipped_sum(z - e * u, y, loss, c_obj) for e in etas]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # every clipped per-example value lies in [0, c_obj]
    assert np.all(out >= 0) and np.all(out <= z.size * c_obj)


def test_logistic_is_stable_at_large_margins():
    z = np.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    y = np.ones(5)
    out = np.empty(1)
    K.clipped_loss_sums(z, np.zeros(5), y, np.empty(0), K.LOSS_LOGISTIC, np.inf, out)
    expected = 1e4 + (50.0 + np.log1p(np.exp(-50.0))) + np.log(2.0) + np.log1p(np.exp(-50.0)) + 0
    assert np.isfinite(out[0])
    assert out[0] == pytest.approx(expected, rel=1e-14)


def test_queries_are_sum_difference_minus_public_terms():
    sums = np.array([10.0, 9.0, 8.5, 7.0])
    etas = np.array([1.0, 0.5, 0.25])
    out = np.empty(3)
    K.armijo_queries(sums, etas, 2.0, 0.5, out)
    np.testing.assert_allclose(out, [10 - 9 - 2 - 0.5, 10 - 8.5 - 1 - 0.125,
                                     10 - 7 - 0.5 - 0.03125])


def test_first_above_ties_accept_and_failure():
    q = np.array([-1.0, 0.5, 2.0])
    assert K.first_above(q, 0.5, np.zeros(3)) == 1           # tie q + nu == lam accepts
    assert K.first_above(q, 0.5, np.array([1.5, -1.0, 0.0])) == 0
    assert K.first_above(q, 5.0, np.zeros(3)) == -1
    assert K.first_above(np.empty(0), 0.0, np.empty(0)) == -1


@pytest.mark.parametrize("loss", LOSSES)
def test_batched_equals_sequential_loop(loss):
    """10^4 random cases in total (spec §7.5), including exact ties."""
    rng = np.random.default_rng(7)
    n_cases = 3334
    n_ties = 0
    sums = np.empty(7)
    queries = np.empty(6)
    for case in range(n_cases):
        z, u, y, etas = _case(rng, loss, b=int(rng.integers(1, 12)))
        c_obj = float(rng.choice([0.5, 1.0, 3.0]))
        slope, curvature = rng.normal(0, 1), abs(rng.normal(0, 0.1))
        lam = float(rng.laplace(0, 2.0))
        nu = rng.laplace(0, 4.0, etas.size)
        if case % 5 == 0:
            # force an exact tie q_k + nu_k == lam at a random candidate
            K.clipped_loss_sums(z, u, y, etas, K.LOSS_CODES[loss], c_obj, sums)
            K.armijo_queries(sums, etas, slope, curvature, queries)
            k = int(rng.integers(0, etas.size))
            nu[:k] = lam - queries[:k] - 1.0     # earlier candidates reject
            nu[k] = lam - queries[k]
            if queries[k] + nu[k] == lam:
                n_ties += 1
        got = K.noisy_backtracking(z, u, y, etas, K.LOSS_CODES[loss], c_obj, slope, curvature,
                                   lam, nu, sums, queries)
        ref = sequential_noisy_btls(z, u, y, loss, c_obj, etas, slope, curvature, lam, nu)
        if got != ref:
            # the two sums may differ in the last ulp: only a near-tie may disagree
            first = min(got % (etas.size + 1), ref % (etas.size + 1))
            margin = queries[first] + nu[first] - lam
            assert abs(margin) < 1e-9, (case, got, ref)
        if case % 5 == 0 and queries[k] + nu[k] == lam:
            assert got == k
    assert n_ties > 100


def test_exact_ties_agree_with_sequential_loop():
    """Dyadic data (hinge loss, integer margins, steps 2^-k): every sum is exact in any
    order, so a constructed tie q_k + ν_k = λ is a tie for both implementations."""
    rng = np.random.default_rng(5)
    sums = np.empty(5)
    queries = np.empty(4)
    etas = 2.0 ** -np.arange(4)
    for _ in range(500):
        b = int(rng.integers(1, 20))
        z = rng.integers(-4, 5, b).astype(float)
        u = rng.integers(-4, 5, b).astype(float)
        y = rng.choice([-1.0, 1.0], b)
        slope = float(rng.integers(-8, 9)) / 4
        K.clipped_loss_sums(z, u, y, etas, K.LOSS_HINGE, 4.0, sums)
        K.armijo_queries(sums, etas, slope, 0.0, queries)
        k = int(rng.integers(0, 4))
        lam = float(rng.integers(-8, 9))
        nu = np.full(4, -1e6)
        nu[k] = lam - queries[k]
        got = K.noisy_backtracking(z, u, y, etas, K.LOSS_HINGE, 4.0, slope, 0.0, lam, nu,
                                   sums, queries)
        ref = sequential_noisy_btls(z, u, y, "hinge", 4.0, etas, slope, 0.0, lam, nu)
        assert got == ref == k


def test_deterministic_same_bits():
    rng = np.random.default_rng(11)
    z, u, y, etas = _case(rng, "logistic", b=500)
    outs = []
    for _ in range(2):
        s = np.empty(etas.size + 1)
        K.clipped_loss_sums(z, u, y, etas, K.LOSS_LOGISTIC, 1.0, s)
        outs.append(s.tobytes())
    assert outs[0] == outs[1]
