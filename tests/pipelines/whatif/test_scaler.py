"""The what-if's pool autoscaler: parked nodes serve from the next tick, the engine's
scale-in order, the safest parked node back first, today's reactive target."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from predops.core.contracts import Forecast
from predops.pipelines.whatif.loop import Loop, LoopConfig
from predops.pipelines.whatif.risk import oracle_risk
from predops.pipelines.whatif.run import sim_policy_config
from predops.pipelines.whatif.scaler import reactive_target
from predops.pipelines.whatif.world import HOUR_S, World, WorldConfig, build_world

WORLD = WorldConfig(nodes=60, days=4, seed=11, warmup_days=7)


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(WORLD)


def _no_forecasts(now: datetime) -> list[Forecast]:
    return []


def test_scaled_up_nodes_serve_from_the_next_tick(world: World) -> None:
    loop = Loop(world, LoopConfig(policy="reactive", policy_config=sim_policy_config()))
    c, k = loop.cluster, world.cfg.first_tick
    loop.tick(k)
    pool, rows = max(c.pool_rows.items(), key=lambda kv: int((~c.active[kv[1]]).sum()))
    parked = rows[~c.active[rows]]
    assert parked.size > 0, "the first tick parks idle nodes"
    loop.scaler.resize(pool, int(c.active[rows].sum()) + parked.size, world.cfg.at(k))
    assert c.active[parked].all() and not c.schedulable()[parked].any()
    c.sync_schedulable()
    assert not c.snapshot.schedulable[parked].any()  # the allocator cannot use them yet
    loop._lifecycle(k + 1, (k + 1) * HOUR_S)  # the next tick starts: they are in service
    back = parked[~c.disrupted()[parked]]
    assert back.size > 0 and c.schedulable()[back].all()


def test_resize_parks_the_engines_order_and_brings_back_the_safest(world: World) -> None:
    cfg = LoopConfig(policy="oracle", policy_config=sim_policy_config(), sizing_every=6)
    loop = Loop(world, cfg, oracle_risk(world, cfg.horizon), _no_forecasts)
    c, k = loop.cluster, world.cfg.first_tick
    loop.tick(k)
    pool, rows = max(c.pool_rows.items(), key=lambda kv: int((~c.active[kv[1]]).sum()))
    # bring every parked node back, then park two of the idle ones in a given order
    loop.scaler.resize(pool, int((c.active[rows] | ~c.under_repair[rows]).sum()), world.cfg.at(k))
    idle = [int(r) for r in rows if c.active[r] and not c.busy()[r] and not c.disrupted()[r]]
    assert len(idle) >= 3, "the pool has idle nodes to park"
    want = [idle[-1], idle[0]]  # not the loop's own order (least pending, highest row)
    order = [world.node_ids[r] for r in want]
    loop.scaler.resize(pool, int(c.active[rows].sum()) - 2, world.cfg.at(k), order=order)
    assert not c.active[want].any() and c.active[idle[1:-1]].all()
    # bringing one back takes the parked node with the lowest p_fail read this hour
    p = np.zeros(len(world.specs))
    p[want[1]] = 0.9  # the lower row, which the tie-break alone would take
    loop.scaler.resize(pool, int(c.active[rows].sum()) + 1, world.cfg.at(k), p_fail=p)
    assert c.active[want[0]] and not c.active[want[1]]


def test_reactive_target_sizes_from_usage() -> None:
    assert reactive_target(busy=10, out_of_service=2, pending_nodes=3, headroom=0.1) == 16
    assert reactive_target(busy=0, out_of_service=0, pending_nodes=0, headroom=0.1) == 0
