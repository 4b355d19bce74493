"""Nothing is charged for a fit that fails before it releases anything (issue 34).

Every public parameter and the plan read from the data's shape are checked
before the ledger's reservation; the memory a fit will allocate is estimated
from public facts first; a ledger that counts a release as more epsilon than
the model reports says so; a search charges the ledger its estimator holds.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.model_selection import MAX_GRID_SIZE, DPHyperparameterSearch
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.privacy.ledger_entries import LedgerAccountingWarning

from tests._limited_child import run_limited

ESTIMATORS = [DPLogisticRegression, DPLinearSVC, DPRidge]


def _data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("params, match", [
    ({"random_state": -1}, "random_state"),
    ({"random_state": "x"}, "random_state"),
    ({"random_state": 1.5}, "random_state"),
    ({"epochs": 1e-9}, "no private step"),
    ({"clip": 1e308}, "overflows float64"),
])
def test_refused_settings_charge_nothing(estimator, params, match):
    X, y = _data()
    ledger = PrivacyLedger(10.0, 1e-3)
    with pytest.raises(ValidationError, match=match):
        estimator(ledger=ledger, **params).fit(X, y)
    assert ledger.entries == ()


def test_a_generator_is_checked_without_drawing_from_it():
    X, y = _data()
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    DPLogisticRegression(random_state=a).fit(X, y)
    DPLogisticRegression(random_state=b).fit(X, y)
    assert a.random() == b.random()


def test_one_vs_rest_too_large_for_memory_is_refused_before_the_charge():
    # 200 one-vs-rest fits on 4 M sparse features keep 200 dense coefficient
    # vectors (6.4 GB): refused from the public shape under a 3 GiB limit
    done = run_limited("""
        import numpy as np, scipy.sparse as sp
        from fastdp.exceptions import ValidationError
        from fastdp.linear_model import DPLinearSVC
        from fastdp.privacy.ledger import PrivacyLedger
        n, d = 400, 4_000_000
        cols = np.random.default_rng(0).integers(0, d, n)
        X = sp.csr_matrix((np.ones(n), (np.arange(n), cols)), shape=(n, d))
        ledger = PrivacyLedger(10.0, 1e-3)
        try:
            DPLinearSVC(ledger=ledger, random_state=0).fit(X, np.arange(n) % 200)
        except ValidationError as exc:
            print("refused:", exc)
        print("entries:", len(ledger.entries))
    """, memory_gib=3)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "one-vs-rest fits" in done.stdout
    assert "entries: 0" in done.stdout


def test_huge_feature_index_is_refused_before_the_charge(tmp_path):
    path = tmp_path / "tiny.svm"
    path.write_text("1 300000000:1\n-1 1:1\n")  # 24 bytes, 3e8 columns
    done = run_limited("""
        import sys
        from fastdp.exceptions import ValidationError
        from fastdp.io import load_libsvm
        from fastdp.linear_model import DPLogisticRegression
        from fastdp.privacy.ledger import PrivacyLedger
        X, y = load_libsvm(sys.argv[1])
        ledger = PrivacyLedger(10.0, 1e-3)
        try:
            DPLogisticRegression(ledger=ledger, random_state=0).fit(X, y)
        except ValidationError as exc:
            print("refused:", exc)
        print("entries:", len(ledger.entries))
    """, memory_gib=3, args=[str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "entries: 0" in done.stdout


def test_failure_before_the_mechanism_releases_the_reservation(monkeypatch):
    import fastdp.linear_model._base as base

    def no_memory(*args, **kwargs):
        raise MemoryError("no room for the solver's copy of the rows")

    monkeypatch.setattr(base, "rows_for_solver", no_memory)
    X, y = _data()
    ledger = PrivacyLedger(10.0, 1e-3)
    with pytest.raises(MemoryError) as info:
        DPLogisticRegression(ledger=ledger, random_state=0).fit(X, y)
    assert ledger.entries == ()
    assert any("nothing charged" in note for note in info.value.__notes__)


def test_ledger_with_another_accountant_says_which_bound_it_charges():
    X, y = _data()
    ledger = PrivacyLedger(10.0, 1e-5, accountant="rdp")  # looser than the fit's PLD
    with pytest.warns(LedgerAccountingWarning, match="accountant 'rdp'") as record:
        model = DPLogisticRegression(accountant="pld", delta=1e-5, ledger=ledger,
                                     random_state=0).fit(X, y)
    text = str(record[0].message)
    assert f"{ledger.spent():.6g}" in text and f"{model.epsilon_:.6g}" in text
    assert ledger.spent() > model.epsilon_


def test_same_accountant_and_delta_agree_without_warning():
    X, y = _data()
    ledger = PrivacyLedger(10.0, 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LedgerAccountingWarning)
        model = DPLogisticRegression(delta=1e-5, ledger=ledger, random_state=0).fit(X, y)
    assert ledger.spent() == pytest.approx(model.epsilon_, rel=1e-9)


def test_in_memory_ledger_sent_to_another_process_refuses_clearly():
    ledger = PrivacyLedger(1.0, 1e-5)
    copy = pickle.loads(pickle.dumps(DPLogisticRegression(ledger=ledger)))
    X, y = _data()
    with pytest.raises(ValidationError, match="file-backed ledger"):
        copy.fit(X, y)
    assert ledger.entries == ()


def test_file_ledger_still_pickles_as_its_file(tmp_path):
    ledger = PrivacyLedger(1.0, 1e-5, path=str(tmp_path / "l.json"))
    copy = pickle.loads(pickle.dumps(ledger))
    assert copy.path == ledger.path and copy.epsilon == 1.0


def test_search_charges_the_ledger_its_estimator_holds():
    X, y = _data(n=600)
    ledger = PrivacyLedger(1.0, 1e-5)
    ledger.charge(DPLogisticRegression(epsilon=0.9, delta=1e-5, random_state=0)
                  .fit(X, y).privacy_event_)
    from fastdp.exceptions import BudgetExceededError
    with pytest.raises(BudgetExceededError):
        DPHyperparameterSearch(DPLogisticRegression(ledger=ledger), {"alpha": [1e-4, 1e-3]},
                               epsilon=1.0, random_state=0).fit(X, y)
    assert len(ledger.entries) == 1


def test_search_refuses_two_ledgers():
    X, y = _data()
    with pytest.raises(ValidationError, match="another one"):
        DPHyperparameterSearch(DPLogisticRegression(ledger=PrivacyLedger(1.0, 1e-5)),
                               ledger=PrivacyLedger(1.0, 1e-5)).fit(X, y)


@pytest.mark.parametrize("estimator, grid, match", [
    (None, None, "fastdp estimator"),
    (DPLogisticRegression(), {"alpah": [1.0]}, "not a parameter"),
    (DPLogisticRegression(), {"alpha": list(np.logspace(-6, 0, MAX_GRID_SIZE + 1))},
     "MAX_GRID_SIZE"),
])
def test_search_refuses_bad_estimator_and_grids_before_planning(estimator, grid, match):
    X, y = _data()
    with pytest.raises(ValidationError, match=match):
        DPHyperparameterSearch(estimator, grid).fit(X, y)
