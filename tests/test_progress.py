"""Progress bars (silent off a terminal) and the per-epoch solver callbacks."""
import io

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.preprocessing import normalize_rows
from fastdp.progress import EpochProgress, RecordCoefficients, chain_callbacks, progress_bar
from fastdp.solvers.scd import dual_dpscd
from fastdp.solvers.sgd import dpsgd


class _FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def problem(rng):
    X = normalize_rows(rng.standard_normal((120, 6)))
    y = np.sign(X @ rng.standard_normal(6) + 1e-12)
    return X, y


def test_bar_is_silent_when_output_is_not_a_terminal():
    out = io.StringIO()
    assert list(progress_bar(range(5), desc="x", file=out)) == [0, 1, 2, 3, 4]
    assert out.getvalue() == ""


def test_bar_shows_on_a_terminal_and_when_forced():
    for out, enabled in ((_FakeTerminal(), None), (io.StringIO(), True)):
        list(progress_bar(range(3), desc="rounds", file=out, enabled=enabled, leave=True))
        assert "rounds" in out.getvalue() and "3/3" in out.getvalue()
    forced_off = _FakeTerminal()
    list(progress_bar(range(3), file=forced_off, enabled=False))
    assert forced_off.getvalue() == ""


def test_bad_enabled_flag_is_rejected():
    with pytest.raises(ValidationError, match="enabled"):
        progress_bar(range(2), enabled="yes")
    with pytest.raises(ValidationError, match="callable"):
        EpochProgress(total=1, callback=3)


@pytest.mark.parametrize("solver", ["dpscd", "dpsgd"])
def test_epoch_callback_sees_every_released_epoch(problem, solver):
    X, y = problem
    record = RecordCoefficients()
    out = _FakeTerminal()
    kwargs = dict(loss="logistic", lam=1e-2, epochs=4, batch_size=10, clip=0.5,
                  noise_multiplier=1.0, random_state=3)
    run = dual_dpscd if solver == "dpscd" else dpsgd
    with EpochProgress(total=4, desc=solver, file=out, callback=record,
                       leave=True) as progress:
        result = run(X, y, callback=progress, **kwargs)
    assert progress.calls == 4 and len(record) == 4
    assert record.epochs == [1, 2, 3, 4]
    assert record.n_iter[-1] == result.n_iter == 4 * 120 // 10
    # the last recorded model is the released one, bit for bit
    np.testing.assert_array_equal(record.coefs[-1], result.coef)
    assert "4/4" in out.getvalue()
    # the callback does not change the run: same seed, same bits without it
    np.testing.assert_array_equal(run(X, y, **kwargs).coef, result.coef)


def test_chain_callbacks_calls_in_order():
    seen = []
    chained = chain_callbacks(None, lambda s: seen.append(("a", s["epoch"])),
                              lambda s: seen.append(("b", s["epoch"])))
    chained({"epoch": 1})
    assert seen == [("a", 1), ("b", 1)]
    assert chain_callbacks(None, None) is None
    single = RecordCoefficients()
    assert chain_callbacks(single) is single
    with pytest.raises(ValidationError):
        chain_callbacks(object())
    with pytest.raises(ValidationError, match="coef"):
        RecordCoefficients()({"epoch": 1})


def test_epoch_progress_prints_plain_lines_when_no_bar_is_drawn():
    import io

    from fastdp.progress import EpochProgress

    log = io.StringIO()                      # not a terminal: the bar is off
    with EpochProgress(total=3, desc="dpsgd epochs", file=log, lines=True) as progress:
        for epoch in (1, 2, 3):
            progress({"epoch": epoch, "n_iter": 10 * epoch})
    assert log.getvalue().splitlines() == [
        "dpsgd epochs: epoch 1/3, T=10", "dpsgd epochs: epoch 2/3, T=20",
        "dpsgd epochs: epoch 3/3, T=30"]
    quiet = io.StringIO()
    with EpochProgress(total=3, file=quiet) as progress:  # lines=False: silent in logs
        progress({"epoch": 1, "n_iter": 1})
    assert quiet.getvalue() == ""


def test_estimator_verbose_reaches_a_log(capsys):
    import numpy as np

    from fastdp.linear_model import DPLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int)
    DPLogisticRegression(epsilon=1.0, verbose=1, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    assert "dpsgd epochs: epoch 1/20" in err and "epoch 20/20" in err
