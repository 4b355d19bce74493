"""The two-class problem the line-search run tests share."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def problem():
    """1500 rows of norm <= 1 in 6 dimensions, labels ±1 of a random hyperplane."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 6))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ rng.normal(size=6) > 0, 1.0, -1.0)
    return X, y
