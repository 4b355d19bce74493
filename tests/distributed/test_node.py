"""The per-agent step: subgradient, keyed noise, message form (spec 004 A2, A4)."""
import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from fastdp.distributed.node import (
    NodeProgram,
    NodeShard,
    NodeState,
    compute_message,
    mix_messages,
    node_generator,
    node_keys,
    sample_subgradient,
)
from fastdp.distributed.regularizers import L2Penalty
from fastdp.distributed.schedules import strongly_convex_schedule
from fastdp.losses import get_loss


def _shard(rng, q=30, m=12):
    X = sp.random(q, m, density=0.4, random_state=rng, format="csr")
    X.data = rng.normal(size=X.nnz)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).ravel()
    X = sp.diags(1 / np.maximum(norms, 1e-12)) @ X
    return NodeShard.from_csr(sp.csr_matrix(X), rng.choice([-1.0, 1.0], size=q)), X.toarray()


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_subgradient_matches_dense_and_finite_differences(loss):
    rng = np.random.default_rng(0)
    shard, dense = _shard(rng)
    L = get_loss(loss)
    for row in range(10):
        x = rng.normal(size=dense.shape[1])
        g = sample_subgradient(shard, row, x, L, np.zeros(len(x)))
        c, y = dense[row], shard.y[row]
        assert np.allclose(g, L.derivative(c @ x, y) * c, atol=1e-14)
        assert np.linalg.norm(g) <= np.linalg.norm(c) + 1e-12
        margin = y * (c @ x)
        if abs(margin - 1) > 1e-3:           # away from the hinge kink
            h = 1e-6
            fd = np.array([(L.value(c @ (x + h * e), y) - L.value(c @ (x - h * e), y)) / (2 * h)
                           for e in np.eye(len(x))])
            assert np.allclose(g, fd, atol=1e-6)
    if loss == "hinge":   # at the kink y <c, x> = 1 the subgradient is 0
        c, y = dense[0], shard.y[0]
        x = y * c / (c @ c)
        assert np.allclose(sample_subgradient(shard, 0, x, L, np.zeros(len(x))), 0.0)


def test_shard_is_canonical_csr():
    """from_csr sorts unsorted rows once (the kernels need canonical CSR); a shard built
    from unsorted arrays by hand is refused by the kernel, never read out of order."""
    rng = np.random.default_rng(4)
    X = sp.random(30, 12, density=0.4, random_state=rng, format="csr")
    X = sp.diags(rng.uniform(0.5, 1.0, size=30)) @ X       # scipy's product: unsorted rows
    X = sp.csr_matrix(X)
    starts = X.indptr[:-1]
    assert np.any(np.diff(X.indices)[np.setdiff1d(np.arange(X.nnz - 1), starts[1:] - 1)] < 0)
    y = rng.choice([-1.0, 1.0], size=30)
    shard = NodeShard.from_csr(X, y)
    for r in range(30):
        assert np.all(np.diff(shard.indices[shard.indptr[r]:shard.indptr[r + 1]]) > 0)
    rebuilt = sp.csr_matrix((shard.data, shard.indices, shard.indptr), shape=X.shape)
    assert np.array_equal(rebuilt.toarray(), X.toarray())  # the same matrix, bit for bit
    L = get_loss("logistic")
    x = rng.normal(size=12)
    for r in range(30):
        g = sample_subgradient(shard, r, x, L, np.zeros(12))
        c = X.toarray()[r]
        np.testing.assert_allclose(g, L.derivative(c @ x, y[r]) * c, rtol=1e-13, atol=1e-15)
    canonical = NodeShard.from_csr(rebuilt, y)               # canonical input: kept as it is
    assert np.array_equal(canonical.indices, shard.indices)
    assert np.array_equal(canonical.data, shard.data)
    unsorted = NodeShard(np.ascontiguousarray(X.data), np.ascontiguousarray(X.indices),
                         np.ascontiguousarray(X.indptr), y)
    bad_row = int(np.flatnonzero([np.any(np.diff(X.indices[X.indptr[r]:X.indptr[r + 1]]) < 0)
                                  for r in range(30)])[0])
    pytest.importorskip("fastdp._kernels._glm")             # the compiled path refuses it
    from fastdp.exceptions import ValidationError
    with pytest.raises(ValidationError, match="not strictly increasing"):
        sample_subgradient(unsorted, bad_row, x, L, np.zeros(12))


def _program(sigma, m=12, T=50, inactive_x="theory"):
    return NodeProgram(dim=m, loss="hinge", regularizer=L2Penalty(0.1),
                       schedule=strongly_convex_schedule(1.0), iota=0.5, sigma=sigma, n_rounds=T,
                       inactive_x=inactive_x)


def test_message_form_and_replay():
    rng = np.random.default_rng(1)
    shard, dense = _shard(rng)
    program = _program(0.7)
    state = NodeState.initial(program)
    state.z = rng.normal(size=12)
    key = node_keys(np.random.SeedSequence(5), 3)[1]
    t = 7
    msg = compute_message(program, state, shard, key, t)
    # replay: the same (key, round) gives the same message bit for bit
    assert np.array_equal(msg, compute_message(program, state, shard, key, t))
    assert not np.array_equal(msg, compute_message(program, state, shard, key, t + 1))
    # reconstruct z + a_t (g + nu) from the keyed stream: first the sample, then the noise
    gen = node_generator(key, t)
    row = gen.integers(shard.n_samples)
    nu = 0.7 * gen.standard_normal(12)
    x_t = program.prox_at(state.z, t)
    g = get_loss("hinge").derivative(dense[row] @ x_t, shard.y[row]) * dense[row]
    assert np.allclose(msg, state.z + t * (g + nu), rtol=0, atol=1e-12)


def test_noise_scaled_with_gradient_by_a_t():
    """(message - z - a_t g) / a_t ~ N(0, sigma^2): chi-square test at level 1e-3 (mean and variance)."""
    rng = np.random.default_rng(2)
    shard, _ = _shard(rng, m=2000)
    sigma, t = 0.3, 40
    program = _program(sigma, m=2000, T=400)
    state = NodeState.initial(program)
    key = node_keys(np.random.SeedSequence(9), 1)[0]
    zero = dataclasses.replace(program, sigma=0.0)
    draws = []
    for k in range(250):
        state.z = np.zeros(2000)
        noisy = compute_message(program, state, shard, key, t + k)
        clean = compute_message(zero, state, shard, key, t + k)      # same sample index
        draws.append((noisy - clean) / program.tables["a"][t + k])
    nu = np.concatenate(draws)                                       # 500,000 draws
    n = len(nu)
    chi2 = np.sum(nu ** 2) / sigma ** 2                              # ~ chi2(n)
    assert stats.chi2.sf(chi2, n) > 5e-4 and stats.chi2.cdf(chi2, n) > 5e-4
    z_mean = nu.mean() / (sigma / np.sqrt(n))
    assert abs(z_mean) < stats.norm.isf(5e-4)


def test_mix_messages_canonical_order():
    a, b, c = (np.array([0.1, 1e16]), np.array([0.2, 1.0]), np.array([0.3, -1e16]))
    out = mix_messages([0.5, 0.25, 0.25], [a, b, c])
    expected = 0.5 * a
    expected += 0.25 * b
    expected += 0.25 * c
    assert np.array_equal(out, expected)


def test_float32_message_is_the_rounded_float64_message():
    rng = np.random.default_rng(3)
    shard, _ = _shard(rng)
    program = _program(0.7)
    p32 = dataclasses.replace(program, message_dtype="float32")
    assert p32.message_itemsize == 4 and program.message_itemsize == 8
    state = NodeState.initial(program)
    state.z = rng.normal(size=12) * 1e3
    key = node_keys(np.random.SeedSequence(5), 2)[0]
    m64 = compute_message(program, state, shard, key, 9)
    m32 = compute_message(p32, state, shard, key, 9)
    assert m32.dtype == np.float32 and np.array_equal(m32, m64.astype(np.float32))
    # mixing widens exactly: same bits as mixing the widened float64 copies
    w = np.array([0.5, 0.5])
    assert np.array_equal(mix_messages(w, [m32, m32[::-1].copy()]),
                          mix_messages(w, [m32.astype(np.float64), m32[::-1].astype(np.float64)]))


def test_loaded_shard_is_validated_before_use():
    """A shard an agent loads itself (Ray ``shard_loader``) must meet what the privacy analysis
    and the kernels assume: planned size, columns, finite values, norms <= L, labels +-1."""
    from fastdp.distributed.engines.ray_engine import NodeAgent
    from fastdp.distributed.node import validate_shard
    from fastdp.exceptions import ValidationError

    rng = np.random.default_rng(3)
    shard, dense = _shard(rng, q=30, m=12)
    program = dataclasses.replace(_program(1.0), max_row_norm=1.0)
    checked = validate_shard(shard, program, 30)       # a valid shard passes
    loaded = sp.csr_matrix((checked.data, checked.indices, checked.indptr), shape=(30, 12))
    # the same entries, but for rows a rounding error above the bound (check_X scales
    # them onto it: an ulp or two), and every row's float64 squared norm within it
    assert np.array_equal(loaded.toarray() != 0, dense != 0)
    np.testing.assert_allclose(loaded.toarray(), dense, rtol=1e-15, atol=0)
    assert np.all(np.asarray(loaded.multiply(loaded).sum(axis=1)).ravel() <= 1.0)
    agent = NodeAgent(0, program, None, node_keys(np.random.SeedSequence(0), 1)[0], [1, 3],
                      shard_loader=lambda node: shard, n_rows=30)
    assert agent.first_message()[1] is not None

    too_long = NodeShard(shard.data * 2.0, shard.indices, shard.indptr, shard.y)
    wrong_labels = NodeShard(shard.data, shard.indices, shard.indptr, np.where(shard.y > 0, 1.0, 0.0))
    nan_data = NodeShard(np.where(np.arange(len(shard.data)) == 0, np.nan, shard.data),
                         shard.indices, shard.indptr, shard.y)
    bad_columns = NodeShard(shard.data, shard.indices + 12, shard.indptr, shard.y)
    bad_indptr = NodeShard(shard.data, shard.indices, shard.indptr[::-1].copy(), shard.y)
    cases = {"norm": too_long, "label": wrong_labels, "NaN|finite|inf": nan_data,
             "": bad_columns, " ": bad_indptr}
    for match, bad in cases.items():
        with pytest.raises(ValidationError, match=match.strip() or None):
            validate_shard(bad, program, 30)
    with pytest.raises(ValidationError, match="calibrated for 31"):
        validate_shard(shard, program, 31)
    with pytest.raises(ValidationError, match="NodeShard"):
        validate_shard((shard.data, shard.y), program, 30)
    # not private: norms are not checked
    validate_shard(too_long, dataclasses.replace(program, max_row_norm=None), 30)
    with pytest.raises(ValidationError, match="norm"):
        NodeAgent(0, program, None, node_keys(np.random.SeedSequence(0), 1)[0], [1],
                  shard_loader=lambda node: too_long, n_rows=30)
