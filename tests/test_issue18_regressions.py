"""Regression tests of issue 18 items whose fix had no test of its own at the estimator.

* item 7: a fit whose noise overflows raises (never a NaN model), and keeps its charge;
* item 13: noise multipliers at the ends of the float range (1e300, 1e-300) give one
  ValidationError from the library (the CLI already said so), before anything runs,
  and ``epochs=nan`` names the parameter.
"""

import warnings

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.events import GaussianEvent, SelfComposedEvent
from fastdp.privacy.ledger import PrivacyLedger


def _data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("params", [dict(clip=1e307), dict(noise_multiplier=1e154, clip=1e154)])
def test_overflowing_noise_raises_instead_of_returning_a_nan_model(params, tmp_path):
    X, y = _data()
    ledger = PrivacyLedger(1e6, 0.5, path=str(tmp_path / "ledger.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPLogisticRegression(solver="dpscd", ledger=ledger, random_state=0, **params)
        with pytest.raises(ValidationError, match="non-finite coefficients|overflows float64") \
                as info:
            model.fit(X, y)
    assert not hasattr(model, "coef_")
    if "overflows float64" in str(info.value):
        # refused from public quantities (noise x clip) before anything was reserved (issue 34)
        assert len(ledger.entries) == 0
        return
    # the failure happened after the data was read: the charge stays, and the error says so
    assert len(ledger.entries) == 1 and not ledger.pending()
    assert any("keeps this fit's charge" in note for note in info.value.__notes__)


@pytest.mark.parametrize("sigma", [1e300, 1e-300])
@pytest.mark.parametrize("accountant", ["rdp", "pld", "moments"])
def test_extreme_noise_multipliers_are_a_clear_error_or_a_correct_epsilon(sigma, accountant):
    """Before: raw OverflowError / ZeroDivisionError from the RDP accountant, raised after
    training when there was no ledger (the estimator then held a coef_).  Now each
    accountant either gives a sound limit (small for 1e300, inf for 1e-300) or one
    ValidationError, and the estimator asks before anything runs."""
    X, y = _data()
    event = SelfComposedEvent(GaussianEvent(sigma), 10)
    try:
        epsilon = get_accountant(accountant).epsilon(event, 1e-5)
    except ValidationError as exc:
        assert "outside the range" in str(exc)
        model = DPLogisticRegression(noise_multiplier=sigma, accountant=accountant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValidationError, match="cannot evaluate"):
                model.fit(X, y)
        assert not hasattr(model, "coef_")
    else:
        assert epsilon < 0.1 if sigma > 1 else epsilon == np.inf   # (moments: its order grid)


def test_nan_epochs_names_the_parameter():
    X, y = _data()
    with pytest.raises(ValidationError, match="epochs"):
        DPLogisticRegression(epochs=float("nan")).fit(X, y)
