"""scale_features_range (issue 32: few features) and the demo's data path without datasets.

The map is checked against its formula written out here, its row-norm bound, its refusal of
bad ranges and sparse input, and on breast_cancer (30 features of very different scales)
against normalised rows: the test set's majority rate is 62.9 %.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import scale_features_range


def test_closed_form_and_the_norm_bound():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) * [10.0, 0.1, 1000.0] + [50.0, 0.0, -2000.0]
    lower = np.array([20.0, -0.2, -4000.0])
    upper = np.array([80.0, 0.3, 0.0])
    Z = scale_features_range(X, lower, upper)
    by_hand = np.empty_like(X)
    for i in range(X.shape[0]):
        for j in range(3):
            v = min(max(X[i, j], lower[j]), upper[j])
            by_hand[i, j] = (2.0 * (v - lower[j]) / (upper[j] - lower[j]) - 1.0) / np.sqrt(3.0)
    np.testing.assert_allclose(Z, by_hand, rtol=1e-13, atol=1e-15)
    assert np.max(np.linalg.norm(Z, axis=1)) <= 1.0 + 1e-12
    # the corners of the box map to the corners of [-1, 1]^d / sqrt(d): norm exactly 1
    corners = scale_features_range(np.array([lower, upper]), lower, upper)
    np.testing.assert_allclose(np.linalg.norm(corners, axis=1), 1.0, rtol=1e-12)
    # a scalar range applies to every feature
    np.testing.assert_allclose(scale_features_range([[0.0, 5.0]], 0.0, 10.0),
                               [[-1.0 / np.sqrt(2), 0.0]])


def test_bad_ranges_and_sparse_input_are_refused():
    X = np.ones((3, 2))
    with pytest.raises(ValidationError, match="lower must be < upper"):
        scale_features_range(X, [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValidationError, match="shape"):
        scale_features_range(X, [0.0, 0.0, 0.0], 1.0)
    with pytest.raises(ValidationError, match="finite"):
        scale_features_range(X, 0.0, np.inf)
    with pytest.raises(ValidationError, match="sparse"):
        scale_features_range(sp.csr_matrix(X), 0.0, 2.0)


def test_demo_ranges_and_breast_cancer_with_declared_ranges():
    """The demo's published ranges (the dataset description's table) are the data's, and
    the default fit on the mapped rows beats normalised rows at eps = 1 (seeds 0-2).

    Measured: normalised raw rows 62.9 % (the majority rate: every seed predicts one class),
    mapped rows 95.1 % (median).  The test asks for >= 90 % mapped and <= 75 % normalised.
    """
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from fastdp.demo import _published_ranges

    data = load_breast_cancer()
    lower, upper = _published_ranges(data.DESCR, data.data.shape[1])
    # the description prints the ranges rounded (3 decimals or 4 digits); the map clips
    lo, hi = data.data.min(0), data.data.max(0)
    assert np.all(np.abs(lower - lo) <= 5e-4 + 5e-3 * np.abs(lo))
    assert np.all(np.abs(upper - hi) <= 5e-4 + 5e-3 * np.abs(hi))
    assert _published_ranges("no table here", 30) is None
    X_tr, X_te, y_tr, y_te = train_test_split(data.data, data.target, test_size=0.25,
                                              random_state=0)
    Z_tr, Z_te = scale_features_range(X_tr, lower, upper), scale_features_range(X_te, lower, upper)
    mapped, raw = [], []
    for seed in range(3):
        mapped.append(DPLogisticRegression(epsilon=1.0, normalize="clip", random_state=seed)
                      .fit(Z_tr, y_tr).score(Z_te, y_te))
        raw.append(DPLogisticRegression(epsilon=1.0, random_state=seed)
                   .fit(X_tr, y_tr).score(X_te, y_te))
    assert np.median(mapped) >= 0.90
    assert np.median(raw) <= 0.75
