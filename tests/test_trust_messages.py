"""Raw exceptions become fastdp messages, before any budget is reserved (issue 34)."""

import numpy as np
import pytest

from fastdp.cli.entry import main
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.privacy.ledger import PrivacyLedger


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("params", [
    {"epsilon": 1e308},
    {"solver": "dp_masg", "solver_options": {"smoothness": 1e308}},
    {"solver": "dp_blgd", "solver_options": {"epsilon_bt": 1e308}},
    {"solver": "dp_blgd", "solver_options": {"epsilon_iter": 1e308}},
    {"solver": "dp_blgd", "solver_options": {"xi": 0}},
], ids=["epsilon", "smoothness", "epsilon_bt", "epsilon_iter", "xi"])
def test_out_of_range_settings_are_validation_errors_before_the_charge(params):
    X, y = _data()
    ledger = PrivacyLedger(1e6, 1e-3)
    with pytest.raises(ValidationError):
        DPLogisticRegression(random_state=0, ledger=ledger, **params).fit(X, y)
    assert ledger.entries == ()


def test_huge_integer_intercept_scaling_is_a_number():
    X, y = _data()
    model = DPLogisticRegression(random_state=0, intercept_scaling=10**30).fit(X, y)
    assert np.all(np.isfinite(model.coef_))


def test_pld_grid_too_large_is_refused_before_it_is_built(capsys):
    code = main(["privacy", "epsilon", "--accountant", "pld", "--noise-multiplier", "0.1",
                 "--sample-rate", "0.5", "--steps", "1000", "--delta", "1e-5"])
    assert code != 0
    assert "PLD accountant would need a grid" in capsys.readouterr().err
