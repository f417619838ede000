"""The what-if's node autoscaler and placeholders on a small fleet: the engine's resize
sets placeholders as the actuator does, arrivals preempt them at once, pending
placeholders bring nodes after the lead, empty unheld nodes are consolidated, and a
lead under the hour counts as that much pending time."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from predops.allocator.requests import PodRequest
from predops.core.contracts import Forecast
from predops.pipelines.whatif.autoscaler import NodeAutoscaler
from predops.pipelines.whatif.cluster import Cluster
from predops.pipelines.whatif.loop import Loop, LoopConfig
from predops.pipelines.whatif.risk import oracle_risk
from predops.pipelines.whatif.run import (
    OpsConfig,
    _loop_config,
    compare_sizing,
    sim_policy_config,
)
from predops.pipelines.whatif.world import HOUR_S, World, WorldConfig, build_world

WORLD = WorldConfig(nodes=60, days=4, seed=11, warmup_days=7)


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(WORLD)


def _no_forecasts(now: datetime) -> list[Forecast]:
    return []


def _loop(world: World, actuation: str, lead: timedelta = timedelta(minutes=10)) -> Loop:
    cfg = LoopConfig(
        policy="oracle",
        policy_config=sim_policy_config(),
        sizing_every=6,
        pool_actuation=actuation,
        autoscaler_lead=lead,
    )
    return Loop(world, cfg, oracle_risk(world, cfg.horizon), _no_forecasts)


def _after_first_tick(
    world: World, lead: timedelta = timedelta(minutes=10)
) -> tuple[Loop, NodeAutoscaler, int, float, str]:
    """A placeholders loop after its first tick, its autoscaler, the tick, its time and
    the pool with the most parked healthy nodes to bring back."""
    loop = _loop(world, "placeholders", lead)
    k = world.cfg.first_tick
    loop.tick(k)
    assert isinstance(loop.autoscaler, NodeAutoscaler)
    c = loop.cluster
    parked = ~c.active & ~c.under_repair
    pool = max(c.pool_rows, key=lambda p: int(parked[c.pool_rows[p]].sum()))
    return loop, loop.autoscaler, k, k * HOUR_S, pool


def _taken(c: Cluster, pool: str) -> int:
    """Nodes of ``pool`` in service that run work or are disrupted."""
    rows = c.pool_rows[pool]
    act = rows[c.active[rows]]
    return int((c.busy()[act] | c.disrupted()[act]).sum())


def test_the_engines_resize_sets_placeholders_on_empty_nodes(world: World) -> None:
    loop, auto, k, t, pool = _after_first_tick(world)
    c, rows = loop.cluster, loop.cluster.pool_rows[pool]
    auto.hold(pool, _taken(c, pool) + 3, world.cfg.at(k))
    assert auto.replicas[pool] == 3
    auto.step(k, t)
    held = rows[c.placeholder[rows]]
    assert held.size == 3
    assert not c.busy()[held].any() and c.schedulable()[held].all()
    # the nodes a placeholder holds stay; the pool's other empty nodes are consolidated
    idle = c.active & c.schedulable() & ~c.busy()
    assert (idle[rows] == c.placeholder[rows]).all()
    # a resize below the nodes that run work is no placeholder, never fewer
    auto.hold(pool, 0, world.cfg.at(k))
    assert auto.replicas[pool] == 0


def test_an_arrival_preempts_a_placeholder_and_the_lead_brings_it_a_node(world: World) -> None:
    loop, auto, k, t, pool = _after_first_tick(world, timedelta(minutes=20))
    c, rows = loop.cluster, loop.cluster.pool_rows[pool]
    auto.hold(pool, _taken(c, pool) + 1, world.cfg.at(k))
    auto.step(k, t)
    (node,) = rows[c.placeholder[rows]].tolist()
    active = int(c.active[rows].sum())
    # a pod that fits nowhere else lands on the held node at once: the scheduler
    # preempts the placeholder, the pod does not wait for a node
    c.sync_schedulable()
    pod = PodRequest(pod_id="arrival", cpu_milli=1000, memory_mib=1024)
    assert c.alloc.place(pod, rows=np.array([node])).placed
    before = auto.preemptions
    auto.step(k, t)
    assert auto.preemptions == before + 1
    # the placeholder went pending and a node was brought back for it within the hour
    assert int(c.active[rows].sum()) == active + 1
    (new,) = rows[c.placeholder[rows]].tolist()
    assert new != node and not c.joining[new]


def test_a_lead_of_an_hour_or_more_serves_from_a_later_tick(world: World) -> None:
    loop, auto, k, t, pool = _after_first_tick(world, timedelta(hours=2))
    c, rows = loop.cluster, loop.cluster.pool_rows[pool]
    parked = int((~c.active[rows] & ~c.under_repair[rows]).sum())
    want = _taken(c, pool) + int(c.active[rows].sum()) + 1
    auto.hold(pool, want, world.cfg.at(k))
    auto.step(k, t)
    coming = rows[c.joining[rows]]
    assert 0 < coming.size <= parked
    assert (auto.ready_tick[coming] == k + 2).all()
    auto.begin(k + 1)  # an hour later still on the way: not schedulable
    assert c.joining[coming].all() and not c.schedulable()[coming].any()
    c.joining[:] = False  # the loop's lifecycle of tick k + 2
    auto.begin(k + 2)
    assert not c.joining[coming].any()


def test_the_autoscaler_alone_holds_no_idle_node_and_ignores_resizes(world: World) -> None:
    loop = _loop(world, "autoscaler")
    for k in range(world.cfg.first_tick, world.cfg.first_tick + 12):
        loop.tick(k)
    c = loop.cluster
    assert loop.autoscaler is not None and loop.autoscaler.replicas == {}
    assert not c.placeholder.any()
    assert not (c.active & c.schedulable() & ~c.busy()).any()
    assert loop.tally.idle_node_hours == 0


def test_static_keeps_every_node(world: World) -> None:
    loop = _loop(world, "static")
    for k in range(world.cfg.first_tick, world.cfg.first_tick + 6):
        loop.tick(k)
    assert loop.cluster.active.all() and loop.autoscaler is None


def test_the_variants_need_the_engine() -> None:
    with pytest.raises(ValueError, match="pool_actuation"):
        LoopConfig(policy="reactive", pool_actuation="placeholders")
    with pytest.raises(ValueError, match="pool_actuation"):
        LoopConfig(policy="predictive", pool_actuation="magic")


def test_compare_sizing_sets_the_variants_beside_the_ideal_resize() -> None:
    def f(pending: float, idle: float) -> dict[str, float]:
        return {"pending_pod_hours": pending, "idle_node_hours": idle, "provisioned_node_hours": 1}

    got = compare_sizing({"predictive": f(100, 50), "predictive-placeholders": f(80, 60)})
    assert got["predictive-placeholders"]["pending_vs_ideal"] == 0.8
    assert got["predictive-placeholders"]["idle_vs_ideal"] == 1.2
    assert compare_sizing({"predictive": f(1, 1)}) == {}


def test_a_sizing_variant_is_the_predictive_policy_acted_on_otherwise() -> None:
    cfg = OpsConfig(
        world=WorldConfig(nodes=30, days=1, seed=5, warmup_days=7),
        policies=("predictive", "predictive-placeholders", "predictive-static"),
        autoscaler_lead=timedelta(minutes=15),
    )
    loop_cfg = _loop_config(cfg, "predictive-placeholders")
    assert (loop_cfg.policy, loop_cfg.pool_actuation) == ("predictive", "placeholders")
    assert loop_cfg.autoscaler_lead == timedelta(minutes=15)
    assert _loop_config(cfg, "predictive").pool_actuation == "ideal"
    assert cfg.to_dict()["autoscaler_lead_h"] == 0.25
    with pytest.raises(ValueError, match="policies must be among"):
        OpsConfig(world=cfg.world, policies=("predictive-magic",))
