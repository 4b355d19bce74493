"""Worker replies with wrong shapes or indices on the data-parallel engine.

The driver adds the workers' per-shard partial sums into a model-sized vector
(``out[cols] += sums``).  Before the reply checks
(:mod:`fastdp.distributed.data_parallel.replies`), numpy accepted much that
is wrong: negative columns counted from the end, a length-1 ``sums`` was
broadcast over every column, columns outside those the driver sent landed on
unrelated coordinates — each a silently different model —, an extra shard
raised a bare ``IndexError``, and an index past the model a bare
``IndexError``.  A corrupting executor (LocalWorkers whose replies are
edited, as a worker of another fastdp version would send them) must now stop
the run with one ``FastDPError`` naming the worker.  Reference for the
untouched path: the same fit with plain LocalWorkers, bit for bit.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.distributed.data_parallel import LocalWorkers, array_source, fit_distributed
from fastdp.exceptions import FastDPError
from fastdp.linear_model import DPLogisticRegression
from fastdp.sampling_blocks import BlockPoissonSampler

BLOCK = 64


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = sp.random(600, 40, density=0.1, format="csr", random_state=rng)
    X.sort_indices()
    y = np.where(rng.random(600) < 0.5, 0.0, 1.0)
    return X, y


def _estimator(solver):
    return DPLogisticRegression(epsilon=1.0, batch_size=100, epochs=2, random_state=4,
                                solver=solver, accountant="rdp",
                                sampler=BlockPoissonSampler(batch_size=100, block_size=BLOCK))


class Corrupting(LocalWorkers):
    """LocalWorkers whose replies to one method are passed through ``edit`` (first worker)."""

    def __init__(self, n_workers, method, edit):
        super().__init__(n_workers)
        self.method, self.edit = method, edit

    def _call(self, method, args):
        replies = super()._call(method, args)
        if method == self.method:
            replies = list(replies)
            replies[0] = self.edit(replies[0])
        return replies


def _each_partial(edit):
    """Edit every (cols, sums) partial of a line-search gradient reply.  A partial whose
    columns the driver knows travels without them (None): the edit sees the sums'
    length as its columns' count."""
    def apply(reply):
        partials, sizes, ahead = reply
        return [edit(c, s) for c, s in partials], sizes, ahead
    return apply


def _each_step_partial(edit):
    def apply(reply):
        partials, ahead = reply
        return [edit(c, s) for c, s in partials], ahead
    return apply


def _columns(c, s):
    return np.arange(s.shape[0], dtype=np.int64) if c is None else c


def _outside(cols, n_columns=41):
    """Sorted distinct columns of the model, one of them not among ``cols``."""
    spare = np.setdiff1d(np.arange(n_columns), cols)[:1]
    return np.union1d(cols[1:], spare).astype(np.int64)


BOTH = ("dp_blsgd", "dp_blgd")
LINE_SEARCH = {   # case: (edit, solvers); dp_blgd: full batches, dp_blsgd: lots on the support
    "column past the model": (_each_partial(
        lambda c, s: (np.append(_columns(c, s)[:-1], 10**6), s)), BOTH),
    "negative column": (_each_partial(lambda c, s: (np.append(-1, _columns(c, s)[1:]), s)),
                        BOTH),
    "length-1 sums": (_each_partial(lambda c, s: (c, s[:1])), BOTH),
    "short sums": (_each_partial(lambda c, s: (c, s[:-1])), BOTH),
    "an extra shard": (lambda r: (r[0] + r[0], r[1] + r[1], r[2]), BOTH),
    "a column not sent": (_each_partial(lambda c, s: (_outside(c), s)), ("dp_blsgd",)),
    "a sum above rows x clip": (_each_partial(lambda c, s: (c, s * 1e6)), BOTH),
    "negative row counts": (lambda r: (r[0], [-5 for _ in r[1]], r[2]), BOTH),
    "not a triple": (lambda r: r[:2], BOTH),
}


@pytest.mark.parametrize("case", sorted(LINE_SEARCH))
def test_line_search_gradient_replies_are_checked(data, case):
    X, y = data
    edit, solvers = LINE_SEARCH[case]
    for solver in solvers:
        with pytest.raises(FastDPError, match="data-parallel worker 0 replied with"):
            fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                            _estimator(solver), engine=Corrupting(2, "gradient_sums", edit))


def test_line_search_loss_sums_of_the_wrong_length_are_refused(data):
    X, y = data
    engine = Corrupting(2, "loss_sums", lambda parts: [p[:1] for p in parts])
    with pytest.raises(FastDPError, match="loss sums of shape"):
        fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                        _estimator("dp_blsgd"), engine=engine)


def test_a_missing_reply_is_refused(data):
    X, y = data

    class Dropping(LocalWorkers):
        def _call(self, method, args):
            replies = super()._call(method, args)
            return replies[:1] if method == "gradient_sums" else replies

    with pytest.raises(FastDPError, match="workers replied with 1 replies, not 2"):
        fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK),
                        _estimator("dp_blsgd"), engine=Dropping(2))


STEPS = {
    "column past the model": _each_step_partial(lambda c, s: (np.append(c[:-1], 10**6), s)),
    "negative column": _each_step_partial(lambda c, s: (np.append(-1, c[1:]), s)),
    "length-1 sums": _each_step_partial(lambda c, s: (c, s[:1])),
    "a column not sent": _each_step_partial(lambda c, s: (_outside(c), s)),
    "next columns past the model": lambda r: (r[0], np.array([10**6])),
    "an extra shard": lambda r: (r[0] + r[0], r[1]),
}


@pytest.mark.parametrize("case", sorted(STEPS))
def test_dpsgd_step_replies_are_checked(data, case):
    X, y = data
    engine = Corrupting(2, "step", STEPS[case])
    with pytest.raises(FastDPError, match="data-parallel worker 0 replied with"):
        fit_distributed(array_source(X, y, n_shards=2, block_size=BLOCK), _estimator("dpsgd"),
                        engine=engine)


@pytest.mark.parametrize("solver", ["dpsgd", "dp_blsgd", "dp_blgd"])
def test_honest_replies_give_the_same_bits(data, solver):
    X, y = data
    source = array_source(X, y, n_shards=2, block_size=BLOCK)
    plain = fit_distributed(source, _estimator(solver), engine=LocalWorkers(2))
    passed = fit_distributed(source, _estimator(solver),
                             engine=Corrupting(2, "gradient_sums", lambda r: r))
    assert np.array_equal(plain.coef_, passed.coef_)
    assert np.array_equal(plain.intercept_, passed.intercept_)
