"""The scalar checks of fastdp._validation that every module uses (issue 19, item 8)."""

import math

import numpy as np
import pytest

from fastdp._validation import check_delta, check_epsilon, check_integer, check_real
from fastdp.exceptions import ValidationError
from fastdp.privacy.accountants import check_delta as query_delta


@pytest.mark.parametrize("kwargs, ok, bad", [
    ({}, [1e-9, 0.5, 1 - 1e-12], [0.0, 1.0, -0.1, 1.5, math.nan, True, "0.1", None]),
    ({"allow_zero": True}, [0.0, 0.5], [1.0, -1e-300]),
    ({"allow_one": True}, [1.0, 0.5], [0.0]),
    ({"allow_zero": True, "allow_one": True}, [0.0, 1.0, np.float32(0.25)], [1.0000001, -0.0001]),
])
def test_delta_domains(kwargs, ok, bad):
    for value in ok:
        assert check_delta(value, **kwargs) == float(value)
    for value in bad:
        with pytest.raises(ValidationError, match="delta"):
            check_delta(value, **kwargs)


def test_privacy_targets_use_the_open_interval_and_queries_the_closed_one():
    with pytest.raises(ValidationError, match=r"\(0, 1\)"):
        check_delta(1.0)
    assert query_delta(1.0) == 1.0 and query_delta(0) == 0.0
    with pytest.raises(ValidationError, match=r"\[0, 1\]"):
        query_delta(1.5)


def test_epsilon():
    assert check_epsilon(2) == 2.0
    assert check_epsilon(0.0, allow_zero=True) == 0.0
    assert check_epsilon(math.inf, allow_inf=True) == math.inf
    for bad, kwargs in ((0.0, {}), (-1.0, {"allow_zero": True}), (math.inf, {}), (math.nan, {}),
                        (False, {})):
        with pytest.raises(ValidationError, match="epsilon"):
            check_epsilon(bad, **kwargs)


def test_real_bounds():
    assert check_real("x", 0.5, low=0.0, high=1.0, low_open=True) == 0.5
    assert check_real("x", math.inf) == math.inf           # infinities kept by default
    for value, kwargs, match in [(0.0, {"low": 0.0, "low_open": True}, "x must be > 0"),
                                 (1.0, {"high": 1.0, "high_open": True}, "x must be < 1"),
                                 (-1.0, {"low": 0.0}, "x must be >= 0"),
                                 (2.0, {"high": 1.0}, "x must be <= 1"),
                                 (math.inf, {"allow_inf": False}, "finite"),
                                 (np.bool_(True), {}, "real number")]:
        with pytest.raises(ValidationError, match=match):
            check_real("x", value, **kwargs)


def test_integer():
    assert check_integer("k", np.int64(3), low=1) == 3
    assert check_integer("k", 3.0, allow_integral_float=True) == 3
    for value, kwargs in [(3.0, {}), (3.5, {"allow_integral_float": True}), (True, {}),
                          (0, {"low": 1}), (5, {"high": 4}), (math.inf, {"allow_integral_float": True})]:
        with pytest.raises(ValidationError, match="k"):
            check_integer("k", value, **kwargs)
