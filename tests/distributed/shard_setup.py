"""The data-parallel tests' data set and estimator (one definition for every test file).

2000 sparse rows with 40 features and labels in {0, 1}, cut into blocks of
``BLOCK`` rows (8 blocks, the last one short); the estimator: epsilon 1, lots of
150 rows, 2 epochs, the block-keyed Poisson sampler.  ``conftest.py`` serves the
data as the session fixtures ``shard_data`` and ``shard_svm_file``.
"""
import numpy as np

from fastdp.datasets import make_sparse_classification
from fastdp.linear_model import DPLogisticRegression
from fastdp.sampling_blocks import BlockPoissonSampler

BLOCK = 256
N = 2000          # 8 blocks, the last one short


def make_shard_data():
    """(X, y): the N x 40 sparse matrix and its labels in {0, 1}."""
    X, y = make_sparse_classification(N, 40, 6, random_state=3)[:2]
    return X, np.where(y > 0, 1.0, 0.0)


def shard_estimator(**params):
    """``DPLogisticRegression`` with the tests' settings; ``params`` override them."""
    settings = dict(epsilon=1.0, batch_size=150, epochs=2, random_state=11,
                    sampler=BlockPoissonSampler(batch_size=150, block_size=BLOCK))
    settings.update(params)
    return DPLogisticRegression(**settings)
