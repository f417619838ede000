"""A drain's capacity priced by its pool's headroom: idle, parked or no spare node."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Drain, Plan, SkipReason
from predops.core.contracts import Forecast
from predops.policy.config import Budgets, CostModel, PolicyConfig
from predops.policy.engine import plan
from predops.policy.fleet import FleetState, PoolState
from predops.policy.headroom import PoolHeadroom, series_kind
from tests.policy.factories import T0, H, busy_snapshot, clock, forecast, make_fleet, make_risk
from tests.policy.factories import rack_nodes as racks
from tests.policy.test_disruption import drain_outcome

NODE = "train-r0-n0"
SERIES = "train/gpus/A100"


def _cluster(idle: int) -> tuple[list, ClusterSnapshot]:
    """20 8-GPU training nodes, one per rack; each runs a 4-GPU pod except the last
    ``idle`` nodes, which are empty."""
    nodes = racks("train", racks=20, per_rack=1)
    per = {n.node_id: (0 if i >= len(nodes) - idle else 4) for i, n in enumerate(nodes)}
    return nodes, busy_snapshot(nodes, per)


def _demand(snap: ClusterSnapshot, extra_gpus: float = 0.0) -> list[Forecast]:
    """Observed demand now (what runs) and the same plus ``extra_gpus`` in 2 h."""
    placed = snap.used_gpu_milli / 1000
    return [
        forecast(SERIES, T0, placed, spread=0.0),
        forecast(SERIES, T0 + 2 * H, placed + extra_gpus, spread=0.0),
    ]


def _econ(p: Plan, node_id: str = NODE) -> dict:
    for a in p.actions:
        if a.kind == "drain" and a.target == node_id:
            return dict(a.evidence["economics"])
    raise AssertionError(f"no drain of {node_id}")


def _run(
    risks: list,
    snap: ClusterSnapshot,
    fleet: FleetState,
    forecasts: list[Forecast],
) -> Plan:
    return plan(risks, forecasts, snap, fleet, Budgets(), clock(), PolicyConfig())


def test_series_kind_parses_gpu_and_cpu_series() -> None:
    assert series_kind("train/gpus/A100") == ("train", "A100")
    assert series_kind("bigdata/cpu_cores") == ("bigdata", None)
    assert series_kind("train/memory") is None


def test_spare_pool_drains_where_a_full_pool_does_not() -> None:
    """Same node, same risk: the threshold is lower when an idle node takes the work,
    in between when a parked node can be brought back, highest in a full pool."""
    risk = [make_risk(NODE, 0.8)]
    thresholds = {}
    for case, idle, parked in (("idle", 2, None), ("parked", 0, 22), ("full", 0, None)):
        nodes, snap = _cluster(idle)
        pools = {"train": PoolState("train", max_nodes=parked)}
        fleet = make_fleet(nodes, pools=pools)
        cheap = plan([make_risk(NODE, 0.99)], _demand(snap), snap, fleet, Budgets(), clock(), None)
        econ = _econ(cheap)
        thresholds[case] = econ["break_even_p"]
        assert econ["capacity"]["basis"] == {"idle": "idle_node", "parked": "parked_node"}.get(
            case, "pool_full"
        )
        outcome = drain_outcome(_run(risk, snap, fleet, _demand(snap)), NODE)
        if case == "idle":
            assert isinstance(outcome, Drain)
            assert "capacity priced at 0%" in outcome.reason
        else:
            assert outcome is SkipReason.BELOW_THRESHOLD
    assert thresholds["idle"] < thresholds["parked"] < thresholds["full"]
    assert _econ(_run([make_risk(NODE, 0.99)], *_full_parked()))["capacity_share"] == 0.125


def _full_parked() -> tuple[ClusterSnapshot, FleetState, list[Forecast]]:
    nodes, snap = _cluster(0)
    fleet = make_fleet(nodes, pools={"train": PoolState("train", max_nodes=21)})
    return snap, fleet, _demand(snap)


def test_forecast_growth_uses_up_the_idle_nodes() -> None:
    """Two idle 8-GPU nodes, but the forecast needs 16 more GPUs within the window."""
    nodes, snap = _cluster(2)
    fleet = make_fleet(nodes)
    econ = _econ(_run([make_risk(NODE, 0.99)], snap, fleet, _demand(snap, extra_gpus=16)))
    assert econ["capacity"]["basis"] == "pool_full"
    assert econ["capacity"]["forecast_need"] == 16
    # growth beyond the window does not count
    late = [*_demand(snap), forecast(SERIES, T0 + 5 * H, 500.0, spread=0.0)]
    econ = _econ(_run([make_risk(NODE, 0.99)], snap, fleet, late))
    assert econ["capacity"]["basis"] == "idle_node"


def test_no_forecast_prices_the_window_in_full() -> None:
    nodes, snap = _cluster(2)
    econ = _econ(_run([make_risk(NODE, 0.99)], snap, make_fleet(nodes), []))
    assert (econ["capacity"]["basis"], econ["capacity_share"]) == ("unknown", 1.0)


def test_earlier_drains_of_the_plan_use_up_the_spare() -> None:
    """One idle node: the better of two risky nodes gets it; the other is priced again
    on a full pool and falls below the threshold."""
    nodes, snap = _cluster(1)
    fleet = make_fleet(nodes)
    other = "train-r1-n0"
    p = _run([make_risk(NODE, 0.8), make_risk(other, 0.85)], snap, fleet, _demand(snap))
    assert isinstance(drain_outcome(p, other), Drain)
    assert drain_outcome(p, NODE) is SkipReason.BELOW_THRESHOLD
    skip = next(s for s in p.skips if s.target == NODE)
    assert "earlier drains" in skip.detail


def test_headroom_counts_only_schedulable_empty_undisrupted_nodes() -> None:
    nodes, snap = _cluster(2)
    idle = [n.node_id for n in nodes[-2:]]
    snap.set_schedulable([idle[0]], False)
    fleet = make_fleet(nodes)
    head = PoolHeadroom.assess(snap, fleet, _demand(snap), T0, PolicyConfig().disruption.costs)
    assert head.idle == {("train", "A100"): 8.0}
    assert head.need == {("train", "A100"): 0.0}
    assert head.window == timedelta(hours=4)


def test_a_series_of_several_models_pools_their_nodes() -> None:
    """A pool of A100 and H100 nodes forecast as one series ``train/gpus/A100+H100``:
    an idle H100 node is spare for a drained A100 node."""
    nodes = racks("train", racks=20, per_rack=1)
    nodes[-1] = replace(nodes[-1], gpu_model="H100")
    per = {n.node_id: (0 if n is nodes[-1] else 4) for n in nodes}
    snap = busy_snapshot(nodes, per)
    placed = snap.used_gpu_milli / 1000
    joined = [forecast("train/gpus/A100+H100", T0, placed, spread=0.0)]
    econ = _econ(_run([make_risk(NODE, 0.99)], snap, make_fleet(nodes), joined))
    assert econ["capacity"]["basis"] == "idle_node"
    alone = [forecast("train/gpus/A100", T0, placed, spread=0.0)]
    econ = _econ(_run([make_risk(NODE, 0.99)], snap, make_fleet(nodes), alone))
    assert econ["capacity"]["basis"] == "pool_full"


def test_flat_pricing_ignores_the_headroom() -> None:
    flat = PolicyConfig(
        disruption=replace(
            PolicyConfig().disruption, costs=CostModel(capacity_value=0.1, price_by_headroom=False)
        )
    )
    shares = set()
    for idle in (2, 0):
        nodes, snap = _cluster(idle)
        p = plan(
            [make_risk(NODE, 0.99)],
            _demand(snap),
            snap,
            make_fleet(nodes),
            Budgets(),
            clock(),
            flat,
        )
        econ = _econ(p)
        shares.add((econ["capacity"]["basis"], econ["capacity_share"], econ["drain_cost"]))
    assert len(shares) == 1 and next(iter(shares))[:2] == ("flat", 1.0)


def test_spare_share_is_the_least_a_drain_costs() -> None:
    """With ``spare_share`` 0.2 a drain into an idle spare costs 0.2 of its window, one
    that brings back a parked node max(0.125, 0.2), a full pool still the whole window."""
    costs = CostModel(spare_share=0.2)
    cfg = PolicyConfig(disruption=replace(PolicyConfig().disruption, costs=costs))

    def share(snap: ClusterSnapshot, fleet: FleetState, fc: list[Forecast]) -> float:
        p = plan([make_risk(NODE, 0.99)], fc, snap, fleet, Budgets(), clock(), cfg)
        return float(_econ(p)["capacity_share"])

    nodes, snap = _cluster(2)
    assert share(snap, make_fleet(nodes), _demand(snap)) == 0.2
    assert share(*_full_parked()) == 0.2
    nodes, snap = _cluster(0)
    assert share(snap, make_fleet(nodes), _demand(snap)) == 1.0
    with pytest.raises(ValueError, match="spare_share"):
        CostModel(spare_share=1.5)
