"""One sampler vocabulary and one source of a sampler's event (issue 19, item 2).

The planning helpers (dp_sgd_event, compute_epsilon, calibrate_noise_multiplier, the CLI's
``privacy`` commands) must account exactly the event of the sampler that training runs.
"""

import itertools
import warnings

import numpy as np
import pytest

from fastdp import cli
from fastdp.exceptions import ValidationError
from fastdp.privacy import (
    SAMPLING_SCHEMES,
    calibrate_noise_multiplier,
    compute_epsilon,
    dp_sgd_event,
)
from fastdp.privacy.events import GaussianEvent
from fastdp.privacy.rdp import RdpAccountant
from fastdp.sampling import (
    SAMPLER_NAMES,
    FixedSizeSampler,
    PoissonSampler,
    ShuffleSampler,
    canonical_sampler_name,
    get_sampler,
)
from fastdp.solvers._common import sampled_gaussian_event

GRID = list(itertools.product(SAMPLER_NAMES, (7, 10, 60, 1000), (1, 3, 7), (1, 4, 9, 25)))


@pytest.mark.parametrize("name, n, batch, steps", GRID)
def test_planner_and_training_give_the_same_event(name, n, batch, steps):
    """Every (sampler, n, batch, steps): the planner's event is the one training records."""
    if batch > n:
        pytest.skip("batch larger than n")
    sigma = 1.3
    trained = sampled_gaussian_event(get_sampler(name, batch), n, steps, sigma)
    planned = dp_sgd_event(sigma, batch / n, steps, name, dataset_size=n)
    assert planned == trained


def test_the_issue_example():
    """n = 10, batch 3, 4 steps: the planner reports the ε the shuffle sampler is accounted at."""
    planned = compute_epsilon(1.0, 0.3, 4, 1e-5, sampling="shuffle", dataset_size=10)
    trained = RdpAccountant().epsilon(ShuffleSampler(3).event(10, 4, GaussianEvent(1.0)), 1e-5)
    assert planned == trained == pytest.approx(16.512875946682545, rel=1e-12)
    # 4 lots of 3 out of 10 touch two permutations; the old planner assumed one (10.7)
    assert ShuffleSampler(3).event(10, 4, GaussianEvent(1.0)).epochs == 2


def test_calibration_is_for_the_sampler_that_runs():
    sigma = calibrate_noise_multiplier(8.0, 1e-5, 0.3, 4, sampling="shuffle", dataset_size=10)
    event = ShuffleSampler(3).event(10, 4, GaussianEvent(float(sigma)))
    assert RdpAccountant().epsilon(event, 1e-5) <= 8.0
    smaller = ShuffleSampler(3).event(10, 4, GaussianEvent(float(sigma) / (1 + 2e-6)))
    assert RdpAccountant().epsilon(smaller, 1e-5) > 8.0


def test_a_sampler_object_is_accepted():
    for smp, n in ((PoissonSampler(0.05), None), (PoissonSampler(batch_size=5), 100),
                   (FixedSizeSampler(5), 100), (ShuffleSampler(5), 100)):
        planned = dp_sgd_event(2.0, 0.05, 30, smp, dataset_size=n)
        assert planned == smp.event(n, 30, GaussianEvent(2.0))
    with pytest.raises(ValidationError, match="rate"):
        dp_sgd_event(2.0, 0.1, 30, FixedSizeSampler(5), dataset_size=100)


def test_one_vocabulary():
    assert SAMPLER_NAMES == ("poisson", "fixed", "shuffle")
    assert SAMPLING_SCHEMES == SAMPLER_NAMES
    parser = cli.build_parser()
    train = parser.parse_args(["train", "x.svm", "--model", "ridge", "--sampler", "fixed"])
    plan = parser.parse_args(["privacy", "epsilon", "--noise-multiplier", "1", "--delta", "1e-5",
                              "--sampler", "fixed"])
    assert train.sampler == plan.sampling == "fixed"


@pytest.mark.parametrize("old", ["fixed_size", "uniform", "FIXED_SIZE"])
def test_old_spellings_are_deprecated_but_work(old):
    with pytest.warns(DeprecationWarning, match="deprecated"):
        assert canonical_sampler_name(old) == "fixed"
    with pytest.warns(DeprecationWarning):
        assert get_sampler(old, 4) == FixedSizeSampler(4)
    with pytest.warns(DeprecationWarning):
        old_eps = compute_epsilon(1.1, 0.01, 100, 1e-5, sampling=old, dataset_size=1000)
    assert old_eps == compute_epsilon(1.1, 0.01, 100, 1e-5, sampling="fixed", dataset_size=1000)


def test_none_is_deprecated_and_keeps_its_numbers():
    with pytest.warns(DeprecationWarning, match="none"):
        none = compute_epsilon(1.1, 0.5, 60, 1e-5, sampling="none")
    assert none == pytest.approx(56.9504531554, rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compute_epsilon(1.1, 0.5, 60, 1e-5, sampling="poisson")   # the new names never warn


def test_cli_deprecated_spelling_warns_on_one_line(capsys):
    status = cli.main(["privacy", "epsilon", "--noise-multiplier", "1", "--n", "10",
                       "--batch-size", "3", "--epochs", "1.2", "--delta", "1e-5",
                       "--sampling", "fixed_size"])
    out, err = capsys.readouterr()
    assert status == 0 and "sampling fixed" in out
    assert len(err.strip().splitlines()) == 1 and "deprecated" in err


def test_cli_reports_the_shuffle_sampler_that_runs(capsys):
    assert cli.main(["privacy", "epsilon", "--noise-multiplier", "1", "--n", "10",
                     "--batch-size", "3", "--epochs", "1.2", "--delta", "1e-5",
                     "--sampler", "shuffle", "--accountant", "rdp"]) == 0
    assert "epsilon 16.5129" in capsys.readouterr().out
    np.testing.assert_equal(get_sampler("shuffle", 3).n_steps(10, 1.2), 4)
