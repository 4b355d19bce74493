"""Tests for fastdp.privacy.events: validation, adjacency, refusals, conversions."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp as dp_rdp

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.events import (
    Adjacency,
    ComposedEvent,
    ExponentialMechanismEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureEvent,
    SelfComposedEvent,
    ShuffledEvent,
    event_from_dict,
    iter_events,
)
from fastdp.privacy.rdp import RdpAccountant

AR = Adjacency.ADD_REMOVE
R1 = Adjacency.REPLACE_ONE
INT_ORDERS = list(range(2, 65)) + [128, 256]


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: GaussianEvent(0.0),
    lambda: GaussianEvent(-1.0),
    lambda: GaussianEvent(float("nan")),
    lambda: GaussianEvent("1.0"),
    lambda: GaussianEvent(1.0, adjacency="neighbours"),
    lambda: LaplaceEvent(0.0),
    lambda: PureEvent(-0.1),
    lambda: PureEvent(float("inf")),
    lambda: LineSearchEvent("armijo", epsilon_bt=1.0),
    lambda: LineSearchEvent("laplace"),
    lambda: LineSearchEvent("laplace", epsilon_bt=1.0, rho_bt=1.0),
    lambda: LineSearchEvent("gaussian", rho_bt=0.1, analysis="conservative"),
    lambda: LineSearchEvent("gaussian", rho_bt=0.1, analysis="loose"),
    lambda: LineSearchEvent("gaussian", rho_bt=0.1, max_it=0),
    lambda: PoissonSampledEvent(1.5, GaussianEvent(1.0)),
    lambda: PoissonSampledEvent(-0.1, GaussianEvent(1.0)),
    lambda: FixedSizeSampledEvent(10, 11, GaussianEvent(1.0)),
    lambda: FixedSizeSampledEvent(10, 0, GaussianEvent(1.0)),
    lambda: ShuffledEvent(10, 2, GaussianEvent(1.0), epochs=-1),
    lambda: SelfComposedEvent(GaussianEvent(1.0), -1),
    lambda: SelfComposedEvent(GaussianEvent(1.0), 2.5),
    lambda: SelfComposedEvent("gaussian", 2),
    lambda: ComposedEvent([GaussianEvent(1.0), 3]),
])
def test_bad_parameters_raise_validation_error(make):
    with pytest.raises(ValidationError):
        make()


def test_numbers_are_normalised_and_events_hashable():
    a = GaussianEvent(np.float32(1.5))
    b = GaussianEvent(1.5, "add_remove")
    assert a == b and hash(a) == hash(b)
    assert type(a.noise_multiplier) is float
    assert SelfComposedEvent(a, np.int64(3)) == SelfComposedEvent(b, 3)
    assert ComposedEvent([a, b]).events == (a, b)
    assert PureEvent(1.0) != ExponentialMechanismEvent(1.0)


# ---------------------------------------------------------------------------
# adjacency and refusals
# ---------------------------------------------------------------------------
def test_adjacency_propagates():
    g = GaussianEvent(1.0)
    assert g.adjacency is AR
    assert SelfComposedEvent(g, 3).adjacency is AR
    assert PoissonSampledEvent(0.1, g).adjacency is AR
    assert FixedSizeSampledEvent(100, 10, g).adjacency is R1
    assert ShuffledEvent(100, 10, g, 2).adjacency is R1
    assert ComposedEvent([g, NonPrivateEvent()]).adjacency is AR
    assert NonPrivateEvent().adjacency is None


def test_composing_mixed_adjacency_is_refused():
    with pytest.raises(PrivacyAnalysisError, match="to_replace_one"):
        ComposedEvent([GaussianEvent(1.0), GaussianEvent(1.0, R1)])
    with pytest.raises(PrivacyAnalysisError):
        ComposedEvent([PoissonSampledEvent(0.1, GaussianEvent(1.0)),
                       FixedSizeSampledEvent(100, 10, GaussianEvent(1.0))])
    # explicit conversion makes it legal
    ok = ComposedEvent([GaussianEvent(1.0).to_replace_one(), GaussianEvent(1.0, R1)])
    assert ok.adjacency is R1


@pytest.mark.parametrize("make", [
    lambda: PoissonSampledEvent(0.1, NonPrivateEvent()),
    lambda: FixedSizeSampledEvent(100, 10, ComposedEvent([GaussianEvent(1.0), NonPrivateEvent()])),
    lambda: ShuffledEvent(100, 10, NonPrivateEvent(), 1),
    lambda: PoissonSampledEvent(0.1, PoissonSampledEvent(0.5, GaussianEvent(1.0))),
    lambda: PoissonSampledEvent(0.1, SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(1.0)), 2)),
    lambda: FixedSizeSampledEvent(100, 10, ShuffledEvent(10, 2, GaussianEvent(1.0), 1)),
    lambda: ShuffledEvent(100, 10, FixedSizeSampledEvent(10, 2, GaussianEvent(1.0)), 1),
    lambda: PoissonSampledEvent(0.1, GaussianEvent(1.0, R1)),
    lambda: PoissonSampledEvent(0.1, GaussianEvent(1.0)).to_replace_one(),
    lambda: LineSearchEvent.laplace(0.1).to_dp_accounting(),
])
def test_unsound_combinations_are_refused(make):
    with pytest.raises(PrivacyAnalysisError):
        make()


def test_to_replace_one_doubles_sensitivity():
    assert GaussianEvent(2.0).to_replace_one() == GaussianEvent(1.0, R1)
    assert LaplaceEvent(4.0).to_replace_one() == LaplaceEvent(2.0, R1)
    assert PureEvent(0.5).to_replace_one() == PureEvent(1.0, R1)
    assert ExponentialMechanismEvent(0.5).to_replace_one() == ExponentialMechanismEvent(1.0, R1)
    assert LineSearchEvent.laplace(0.1).to_replace_one().epsilon_bt == pytest.approx(0.2)
    assert LineSearchEvent.gaussian(0.1).to_replace_one().rho_bt == pytest.approx(0.4)
    r1 = GaussianEvent(1.0, R1)
    assert r1.to_replace_one() is r1
    composed = SelfComposedEvent(ComposedEvent([GaussianEvent(2.0), LaplaceEvent(1.0)]), 3)
    assert composed.to_replace_one().adjacency is R1
    assert FixedSizeSampledEvent(10, 2, GaussianEvent(2.0)).replace_one_event == GaussianEvent(1.0, R1)


def test_line_search_noise_scales_follow_spec_003():
    lap = LineSearchEvent.laplace(0.5, max_it=10)
    assert lap.threshold_noise == pytest.approx(2 / 0.5)
    assert lap.query_noise == pytest.approx(4 / 0.5)
    assert lap.pure_epsilon() == 0.5
    gau = LineSearchEvent.gaussian(0.3, max_it=10)
    assert gau.threshold_noise == pytest.approx(math.sqrt(3 / (2 * 0.3)))
    assert gau.query_noise == pytest.approx(math.sqrt(3 / 0.3))
    assert gau.pure_epsilon() == math.inf
    # eq. (5): a/(2σ1²) + 2a/σ2² = a·ρ, i.e. a Gaussian with σ = 1/sqrt(2ρ)
    s1, s2 = gau.threshold_noise, gau.query_noise
    assert 1 / (2 * s1 ** 2) + 2 / s2 ** 2 == pytest.approx(0.3)
    assert gau.gaussian_equivalent_noise_multiplier() == pytest.approx(1 / math.sqrt(0.6))
    cons = LineSearchEvent.gaussian(0.3, max_it=10, analysis="conservative")
    assert cons.gaussian_equivalent_noise_multiplier() ** -2 / 2 == pytest.approx(
        1 / (2 * s1 ** 2) + 10 / (2 * s2 ** 2))


def test_shuffled_event_views():
    sh = ShuffledEvent(1000, 30, GaussianEvent(2.0), epochs=3)
    assert sh.steps_per_epoch == 34
    assert ShuffledEvent(1000, 30, GaussianEvent(2.0), 3, drop_last=True).steps_per_epoch == 33
    assert sh.contains_shuffle and sh.is_sampled
    assert sh.guaranteed_event() == SelfComposedEvent(GaussianEvent(1.0, R1), 3)
    assert sh.poisson_assumed_event() == SelfComposedEvent(
        PoissonSampledEvent(0.03, GaussianEvent(2.0)), 3 * 34)
    assert ComposedEvent([sh, GaussianEvent(1.0, R1)]).contains_shuffle
    assert not PoissonSampledEvent(0.1, GaussianEvent(1.0)).contains_shuffle


# ---------------------------------------------------------------------------
# serialisation
# ---------------------------------------------------------------------------
EVENTS = [
    GaussianEvent(1.1),
    GaussianEvent(0.7, R1),
    LaplaceEvent(2.0),
    PureEvent(0.3),
    ExponentialMechanismEvent(0.2, R1),
    LineSearchEvent.laplace(0.01, max_it=20),
    LineSearchEvent.gaussian(0.02, max_it=5, analysis="conservative"),
    NonPrivateEvent(),
    SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 100),
    FixedSizeSampledEvent(1000, 10, LaplaceEvent(1.0)),
    ShuffledEvent(1000, 10, GaussianEvent(1.0), 4, drop_last=True),
    ComposedEvent([SelfComposedEvent(PoissonSampledEvent(0.1, ComposedEvent(
        [GaussianEvent(2.0), LineSearchEvent.laplace(0.1)])), 7), PureEvent(0.1)]),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_dict_round_trip(event):
    import json

    data = json.loads(json.dumps(event.to_dict()))
    back = event_from_dict(data)
    assert back == event and hash(back) == hash(event)


def test_event_from_dict_rejects_garbage():
    with pytest.raises(ValidationError):
        event_from_dict({"kind": "teleport"})
    with pytest.raises(ValidationError):
        event_from_dict([1, 2])
    with pytest.raises(ValidationError):
        event_from_dict({"kind": "gaussian", "noise_multiplier": -1})


def test_iter_events_walks_the_tree():
    kinds = [e.kind for e in iter_events(EVENTS[-1])]
    assert kinds.count("gaussian") == 1 and kinds.count("line_search") == 1
    assert kinds[0] == "composed"


# ---------------------------------------------------------------------------
# to_dp_accounting: same ε through dp_accounting's own RDP accountant
# ---------------------------------------------------------------------------
def _dp_accounting_epsilon(dp_event, delta, relation):
    acc = dp_rdp.RdpAccountant(orders=INT_ORDERS, neighboring_relation=relation)
    return acc.compose(dp_event).get_epsilon(delta)


CONVERSION_CASES = [
    (SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 1000), {}),
    (SelfComposedEvent(GaussianEvent(5.0), 30), {}),
    (SelfComposedEvent(LaplaceEvent(3.0), 20), {}),
    (ComposedEvent([SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(2.0)), 300),
                    SelfComposedEvent(LaplaceEvent(10.0), 5)]), {}),
    (SelfComposedEvent(PureEvent(0.2, R1), 10), {}),
    (SelfComposedEvent(ExponentialMechanismEvent(0.7, R1), 3), {}),
    (SelfComposedEvent(FixedSizeSampledEvent(60000, 256, GaussianEvent(1.1, R1)), 2000), {}),
    (SelfComposedEvent(FixedSizeSampledEvent(10000, 100, GaussianEvent(2.2)), 500), {}),
    (ShuffledEvent(60000, 256, GaussianEvent(1.1, R1), 60), {}),
    (SelfComposedEvent(LineSearchEvent.laplace(0.05), 40), {"rdp_equivalent": True}),
    (SelfComposedEvent(LineSearchEvent.laplace(0.05, analysis="conservative", adjacency=R1), 40), {}),
    (SelfComposedEvent(LineSearchEvent.gaussian(0.01), 40), {"rdp_equivalent": True}),
    (SelfComposedEvent(LineSearchEvent.gaussian(0.01, max_it=8, analysis="conservative"), 40),
     {"rdp_equivalent": True}),
]


@pytest.mark.parametrize("event,kwargs", CONVERSION_CASES, ids=lambda x: getattr(x, "kind", ""))
def test_to_dp_accounting_gives_the_same_epsilon(event, kwargs):
    delta = 1e-6
    # events with randomized-response conversions are built replace-one above,
    # because dp_accounting only accepts randomized response there
    relation = event.adjacency.to_dp_accounting()
    theirs = _dp_accounting_epsilon(event.to_dp_accounting(**kwargs), delta, relation)
    ours = RdpAccountant(orders=INT_ORDERS).epsilon(event, delta)
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_non_private_converts_and_gives_infinity():
    dp = ComposedEvent([GaussianEvent(1.0), NonPrivateEvent()]).to_dp_accounting()
    assert _dp_accounting_epsilon(dp, 1e-5, dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE) == math.inf


def test_poisson_view_conversion():
    sh = ShuffledEvent(60000, 256, GaussianEvent(1.1), 60)
    dp = sh.to_dp_accounting(view="poisson_assumed")
    assert isinstance(dp, dp_accounting.SelfComposedDpEvent)
    assert isinstance(dp.event, dp_accounting.PoissonSampledDpEvent)
    assert dp.count == 60 * sh.steps_per_epoch
    with pytest.raises(ValidationError):
        sh.to_dp_accounting(view="optimistic")


# ---------------------------------------------------------------------------
# PrivacyFilterEvent (the cap of a fully adaptive, filtered run)
# ---------------------------------------------------------------------------
def test_privacy_filter_event_forms_and_validation():
    from fastdp.privacy.events import PrivacyFilterEvent

    z = PrivacyFilterEvent.zcdp(0.02)
    assert z.rho == 0.02 and z.orders == () and z.adjacency is AR
    assert z.rdp_bound(7.0) == pytest.approx(0.14)
    r = PrivacyFilterEvent.rdp([8, 32], [0.5, 1.0])
    # below a tracked order: the smallest cap at a tracked order >= it (monotone RDP)
    assert [r.rdp_bound(a) for a in (2.0, 8.0, 8.5, 32.0, 33.0)] == [0.5, 0.5, 1.0, 1.0, math.inf]
    for bad in (dict(), dict(rho=0.1, orders=(2,), caps=(1,)), dict(rho=-1.0),
                dict(orders=(2, 3), caps=(1,)), dict(orders=(3, 2), caps=(1, 1)),
                dict(orders=(1.0,), caps=(1,)), dict(orders=(2,), caps=(-1,))):
        with pytest.raises(ValidationError):
            PrivacyFilterEvent(**bad)
    for e in (z, r):
        assert event_from_dict(e.to_dict()) == e
        assert hash(e) == hash(event_from_dict(e.to_dict()))


def test_privacy_filter_event_conversions():
    from fastdp.privacy.events import PrivacyFilterEvent

    z = PrivacyFilterEvent.zcdp(0.02)
    with pytest.raises(PrivacyAnalysisError):
        z.to_dp_accounting()
    g = z.to_dp_accounting(rdp_equivalent=True)
    assert isinstance(g, dp_accounting.GaussianDpEvent)
    assert g.noise_multiplier == pytest.approx(1.0 / math.sqrt(0.04))
    with pytest.raises(PrivacyAnalysisError):
        PrivacyFilterEvent.rdp([8], [0.5]).to_dp_accounting(rdp_equivalent=True)
    # replace-one: zCDP group privacy for two records, 4ρ
    r1 = z.to_replace_one()
    assert r1.adjacency is R1 and r1.rho == pytest.approx(0.08)
    with pytest.raises(PrivacyAnalysisError):
        PrivacyFilterEvent.rdp([8], [0.5]).to_replace_one()
    with pytest.raises(PrivacyAnalysisError):      # mixed adjacency composition refused
        ComposedEvent((z, GaussianEvent(1.0, adjacency=R1)))


# ---------------------------------------------------------------------------
# approximate (ε, δ)-DP events
# ---------------------------------------------------------------------------
from fastdp.privacy.events import ApproxDpEvent, check_event_delta, event_delta  # noqa: E402


@pytest.mark.parametrize("make", [
    lambda: ApproxDpEvent(-0.1, 1e-6),
    lambda: ApproxDpEvent(float("inf"), 1e-6),
    lambda: ApproxDpEvent(1.0, -1e-6),
    lambda: ApproxDpEvent(1.0, 1.0),
    lambda: ApproxDpEvent(1.0, float("nan")),
    lambda: ApproxDpEvent(1.0, "1e-6"),
    lambda: ApproxDpEvent(1.0, 1e-6, adjacency="neighbours"),
])
def test_approx_dp_event_validation(make):
    with pytest.raises(ValidationError):
        make()


@pytest.mark.parametrize("event", [
    ApproxDpEvent(0.7, 2.5e-9),
    ApproxDpEvent(0.0, 0.0, "replace_one"),
    SelfComposedEvent(ApproxDpEvent(1, 1e-7, "replace_one"), 3),
    ComposedEvent([PoissonSampledEvent(0.1, ApproxDpEvent(2.0, 1e-6)), GaussianEvent(3.0)]),
    ShuffledEvent(100, 10, ApproxDpEvent(0.5, 1e-8), epochs=2),
], ids=str)
def test_approx_dp_event_round_trip(event):
    import json

    back = event_from_dict(json.loads(json.dumps(event.to_dict())))
    assert back == event and hash(back) == hash(event)
    assert event_delta(back) == event_delta(event)


def test_approx_dp_replace_one_is_group_privacy_of_two():
    # replace = remove + add: (ε, δ) twice gives (2ε, δ + e^ε δ)
    eps, delta = 0.8, 3e-7
    r1 = ApproxDpEvent(eps, delta).to_replace_one()
    assert r1.adjacency is R1
    assert r1.epsilon == 2 * eps
    assert r1.delta == pytest.approx(delta + math.exp(eps) * delta, rel=1e-15)
    same = ApproxDpEvent(eps, delta, R1)
    assert same.to_replace_one() is same
    with pytest.raises(PrivacyAnalysisError, match="delta >= 1"):
        ApproxDpEvent(5.0, 0.1).to_replace_one()


def test_event_delta_closed_forms():
    a, b = ApproxDpEvent(1.0, 2e-6), ApproxDpEvent(0.5, 5e-7)
    assert event_delta(a) == 2e-6
    assert event_delta(GaussianEvent(1.0)) == 0.0
    assert event_delta(SelfComposedEvent(a, 7)) == pytest.approx(14e-6, rel=1e-15)
    assert event_delta(SelfComposedEvent(a, 0)) == 0.0
    assert event_delta(ComposedEvent([a, b, PureEvent(1.0), LaplaceEvent(2.0)])) == pytest.approx(
        2.5e-6, rel=1e-15)
    # sampling at rate γ scales δ by γ (Balle, Barthe, Gaboardi 2018)
    assert event_delta(PoissonSampledEvent(0.01, a)) == pytest.approx(2e-8, rel=1e-15)
    fixed = FixedSizeSampledEvent(1000, 50, a)  # inner converted to replace-one first
    assert event_delta(fixed) == pytest.approx(0.05 * (1 + math.e) * 2e-6, rel=1e-14)
    shuffled = ShuffledEvent(1000, 100, b, epochs=3)
    assert event_delta(shuffled) == pytest.approx(3 * (1 + math.exp(0.5)) * 5e-7, rel=1e-14)
    assert event_delta(shuffled, "poisson_assumed") == pytest.approx(30 * 0.1 * 5e-7, rel=1e-14)
    assert check_event_delta(SelfComposedEvent(a, 7), 2e-5) == event_delta(SelfComposedEvent(a, 7))
    with pytest.raises(PrivacyAnalysisError, match="delta >= 1.4e-05"):
        check_event_delta(SelfComposedEvent(a, 7), 1e-5)
    with pytest.raises(ValidationError):
        event_delta(a, view="optimistic")


def test_approx_dp_dp_accounting_conversion():
    converted = ApproxDpEvent(0.4, 1e-6).to_dp_accounting()
    assert isinstance(converted, dp_accounting.DpEvent)
    assert (converted.epsilon, converted.delta) == (0.4, 1e-6)
    # dp_accounting's own accountants do not know it: refused, never ignored
    for accountant in (dp_accounting.pld.PLDAccountant(), dp_rdp.RdpAccountant()):
        assert not accountant.supports(converted)
    with pytest.raises(PrivacyAnalysisError, match="no Renyi-DP curve"):
        ApproxDpEvent(0.4, 1e-6).to_dp_accounting(rdp_equivalent=True)
    # δ = 0: the pure ε-DP conversion (randomized response)
    assert ApproxDpEvent(0.4, 0.0).to_dp_accounting() == PureEvent(0.4).to_dp_accounting()
    assert ApproxDpEvent(0.4, 0.0).pure_epsilon() == 0.4
    assert math.isinf(ApproxDpEvent(0.4, 1e-9).pure_epsilon())


def test_no_guarantee_event_round_trip_conversions_and_refusals():
    from fastdp.exceptions import PrivacyAnalysisError
    from fastdp.privacy import events as ev

    event = ev.NoGuaranteeEvent(0.7, "metropolis")
    assert ev.event_from_dict(event.to_dict()) == event
    assert event.to_replace_one() == ev.NoGuaranteeEvent(1.4, "metropolis", "replace_one")
    with pytest.raises(PrivacyAnalysisError, match="NO privacy guarantee"):
        event.to_dp_accounting()
    with pytest.raises(ValidationError):
        ev.NoGuaranteeEvent(0.7, "rejection")       # exact samplers have a guarantee
    with pytest.raises(ValidationError):
        ev.NoGuaranteeEvent(-1.0, "metropolis")
    gaussian = ev.GaussianEvent(1.0)
    mixed = ev.ComposedEvent((gaussian, ev.SelfComposedEvent(event, 2)))
    assert ev.no_guarantee_events(mixed) == (event,)
    assert ev.guaranteed_part(mixed) == ev.ComposedEvent((gaussian,))
    assert ev.guaranteed_part(ev.SelfComposedEvent(event, 2)) is None
    assert ev.guaranteed_part(gaussian) is gaussian
    with pytest.raises(PrivacyAnalysisError):
        ev.check_guarantee(mixed)
