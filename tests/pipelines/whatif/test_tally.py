"""The drain cost that bit: out-of-service hours of a needless drain its pool could not
replace, on hand-built cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from predops.pipelines.whatif.loop import Loop, LoopConfig
from predops.pipelines.whatif.run import sim_policy_config
from predops.pipelines.whatif.tally import Tally, unreplaced
from predops.pipelines.whatif.world import HOUR_S, World, WorldConfig, build_world

KINDS = [("train", "A100"), ("train", "A100"), ("train", "A100"), ("etl", None), ("etl", None)]


def test_a_spare_node_of_the_kind_replaces_one_out_node() -> None:
    out = np.array([3, 1, 0])
    spare = np.array([False, False, True, False, False])
    wanted = {("train", "A100"), ("etl", None)}
    # row 0 is replaced by the spare row 2; row 1 is not; row 3 has no spare of its kind
    assert unreplaced(out, KINDS, spare, wanted).tolist() == [True, True, False]
    # nobody waiting for an etl node: its hours did not bite
    assert unreplaced(out, KINDS, spare, {("train", "A100")}).tolist() == [False, True, False]
    # a spare node of another kind replaces nothing
    other = np.array([False, False, False, True, False])
    assert unreplaced(np.array([0]), KINDS, other, wanted).tolist() == [True]


def test_the_unreplaced_count_sits_beside_the_full_count() -> None:
    t = Tally(capacity_value=0.1)
    t.drain_lost_gpu_hours = 3.0
    t.needless_out_gpu_hours = 40.0
    t.needless_out_unreplaced_gpu_hours = 10.0
    d = t.to_dict()
    assert d["drain_cost_gpu_hours_full_capacity"] == 43.0
    assert d["drain_cost_gpu_hours"] == 7.0
    assert d["drain_cost_gpu_hours_unreplaced"] == 13.0
    assert d["needless_drain_out_unreplaced_gpu_hours"] == 10.0


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(WorldConfig(nodes=40, days=1, seed=11, warmup_days=2))


def test_loop_charges_only_the_hours_the_pool_could_not_replace(world: World) -> None:
    loop = Loop(world, LoopConfig(policy="reactive", policy_config=sim_policy_config()))
    c, w, k = loop.cluster, loop.cluster.w, world.cfg.first_tick
    loop.tick(k)
    t = (k + 1) * HOUR_S
    pod = int(np.flatnonzero(w.num_gpu > 0)[0])
    pool, allowed = w.pools[int(w.pool[pod])], w.model_sets[int(w.models[pod])]
    rows = [int(r) for r in c.pool_rows[pool] if allowed is None or loop.scaler.model[r] in allowed]
    row, others = rows[0], rows[1:]
    assert others, "the pool needs a second node of the kind"
    value = float(loop.value[row])
    c.needless[row] = True  # out on a needless drain since half an hour before t
    loop.charged_until[row] = t - 1800.0
    c.down_until[others] = 1e12  # every other node of the kind is in repair
    c.pending = [pod]  # and a pod that could run on the node waits
    loop._charge_unreplaced(t)
    assert loop.unreplaced_h[row] == pytest.approx(1.5 * value)
    c.down_until[others[0]] = np.nan  # one node back, parked: the pool can replace it
    c.active[others[0]] = False
    loop._charge_unreplaced(t + HOUR_S)
    assert loop.unreplaced_h[row] == pytest.approx(1.5 * value)
    c.down_until[others[0]] = 1e12  # gone again, but nobody waits any more
    c.pending = []
    loop._charge_unreplaced(t + 2 * HOUR_S)
    assert loop.unreplaced_h[row] == pytest.approx(1.5 * value)
    c.pending = [pod]  # the pod waits again and nothing replaces the node: one more hour
    loop._charge_unreplaced(t + 3 * HOUR_S)
    assert loop.unreplaced_h[row] == pytest.approx(2.5 * value)
    assert loop.charged_until[row] == t + 4 * HOUR_S
