"""Line-search runs under the zCDP privacy filter (``budget_filter="zcdp"``).

(Moved from tests/solvers/test_ls_filter.py; the filter itself is tested in
tests/privacy/test_zcdp_filter.py.)
"""

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import PrivacyFilterEvent
from fastdp.privacy.zcdp import rho_for_epsilon as rho_cap_for
from fastdp.privacy.zcdp import zcdp_of
from fastdp.solvers import line_search as LS


@pytest.mark.parametrize("fn,kw", [(LS.dp_blsgd, {}), (LS.dp_blsgd, dict(adaptive_clipping=True)),
                                   (LS.dp_blgd, {}), (LS.dp_blsgd, dict(noise="gaussian"))])
def test_filtered_function_runs(problem, fn, kw):
    X, y = problem
    res = fn(X, y, epsilon=0.5, delta=1e-6, budget_filter="zcdp", random_state=2, **kw)
    cap = rho_cap_for(0.5, 1e-6)
    assert res.event == PrivacyFilterEvent.zcdp(cap)
    ex = res.extra
    assert ex["rho_cap"] == cap and 0 < ex["rho_consumed"] <= cap
    assert zcdp_of(ex["consumed_event"]) == pytest.approx(ex["rho_consumed"], rel=1e-12)
    assert ex["epsilon_spent"] <= ex["epsilon_cap"] <= 0.5
    # the run stopped because the next query was unaffordable (budget essentially used)
    assert ex["rho_consumed"] > 0.5 * cap
    again = fn(X, y, epsilon=0.5, delta=1e-6, budget_filter="zcdp", random_state=2, **kw)
    np.testing.assert_array_equal(res.coef, again.coef)


def test_filtered_mode_refuses_actual_batch_normaliser(problem):
    X, y = problem
    with pytest.raises(ValidationError, match="normalize"):
        LS.dp_blsgd(X, y, epsilon=0.5, delta=1e-6, budget_filter="zcdp", normalize="actual")
