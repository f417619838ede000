"""Tidal lending names nodes (cheapest drains, pods fit on the rest of the lender) and
gives them back when the loan expires or the lender's forecast rises."""

from __future__ import annotations

import math

import numpy as np
import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import LendNodes, Plan, ReturnNodes, SkipReason, action_from_dict
from predops.policy.config import Budgets, CostModel, SizingConfig
from predops.policy.engine import plan
from predops.policy.lending import Loan, drain_cost, pick_nodes, returns
from tests.allocator.factories import make_allocator, make_pod
from tests.policy.factories import T0, H, clock, forecast, make_fleet, make_state, pool_node


def world(web_busy: tuple[int, ...] = (0, 1, 2), web_pod_gpus: int = 4):  # type: ignore[no-untyped-def]
    web = [pool_node(f"web-{i}", "web", rack=f"r{i}") for i in range(10)]
    train = [pool_node(f"train-{i}", "train", rack=f"t{i}") for i in range(4)]
    snap = ClusterSnapshot([*web, *train])
    alloc = make_allocator(snap)
    for i in web_busy:
        assert alloc.place(make_pod(f"w{i}", gpus=web_pod_gpus), rows=np.array([i])).placed
    for i in range(4):
        assert alloc.place(make_pod(f"t{i}", gpus=8), rows=np.array([10 + i])).placed
    return web, train, snap


def tidal(web_level: float = 0.0) -> list:  # type: ignore[type-arg]
    fc = []
    for k in range(24):
        day = 0.5 + 0.5 * math.sin(2 * math.pi * k / 24)  # web by day, train by night
        fc.append(forecast("web/gpus/A100", T0 + k * H, web_level + 8 + 40 * day, spread=0.1))
        fc.append(forecast("train/gpus/A100", T0 + k * H, 8 + 40 * (1 - day), spread=0.1))
    return fc


def test_lend_names_idle_nodes_first() -> None:
    web, train, snap = world()
    p = plan([], tidal(), snap, make_fleet([*web, *train]), Budgets(), clock(), loans=())
    (lend,) = [a for a in p.actions if isinstance(a, LendNodes)]
    assert (lend.target, lend.to_pool) == ("web", "train")
    assert len(lend.node_ids) == lend.nodes >= 1
    assert not {"web-0", "web-1", "web-2"} & set(lend.node_ids)  # the busy ones stay
    costs = {c["node"]: c["drain_cost"] for c in lend.evidence["allocator"]["candidates"]}
    assert all(costs[n] == 0 for n in lend.node_ids)
    assert action_from_dict(lend.to_dict()) == lend
    assert Plan.from_dict(p.to_dict()).to_dict() == p.to_dict()


def test_busy_nodes_lent_only_when_their_pods_fit_in_the_lender() -> None:
    web, train, snap = world(web_busy=tuple(range(10)), web_pod_gpus=4)
    fleet = make_fleet([*web, *train])
    costs = CostModel()
    # every web node half full: draining one re-places its pod on another web node
    nodes, ev = pick_nodes(web, 5, snap, fleet, costs)
    assert len(nodes) == 5
    assert all(c["fits"] for c in ev["candidates"] if c["node"] in nodes)
    # 10 half-full nodes hold 40 GPUs: draining 6 leaves 4 x 8 = 32 for them, too few
    nodes, ev = pick_nodes(web, 6, snap, fleet, costs)
    assert len(nodes) == 5 and not ev["candidates"][-1]["fits"]
    # the train pool's nodes are closed in the what-if: its idle room does not count
    web2, train2, snap2 = world(web_busy=tuple(range(10)), web_pod_gpus=8)
    nodes, _ = pick_nodes(web2, 1, snap2, make_fleet([*web2, *train2]), costs)
    assert nodes == []


def test_drain_cost_counts_the_whole_gang() -> None:
    costs = CostModel()
    single = make_pod("s", gpus=8)
    g = [make_pod(f"g{i}", gpus=8, gang="g") for i in range(4)]
    hours = costs.restart_overhead.total_seconds() / 3600
    per_pod = costs.hourly(8, single.cpu_milli / 1000) * hours
    assert drain_cost([single], {}, costs) == pytest.approx(per_pod)
    assert drain_cost([g[0]], {"g": g}, costs) == pytest.approx(4 * per_pod)
    assert drain_cost([], {}, costs) == 0


def test_do_not_disrupt_and_cordoned_nodes_are_never_lent() -> None:
    web, train, snap = world(web_busy=())
    states = {
        "web-3": make_state("web-3", do_not_disrupt=True),
        "web-4": make_state("web-4", cordoned=True),
    }
    nodes, _ = pick_nodes(web, 10, snap, make_fleet([*web, *train], states), CostModel())
    assert "web-3" not in nodes and "web-4" not in nodes and len(nodes) == 8


def test_nodes_go_back_at_expiry_and_early_when_the_lender_needs_them() -> None:
    loans = [Loan(f"web-{i}", "web", "train", T0 + 3 * H) for i in range(7, 10)]
    assert returns(loans, {"web": 5.0}, {"web": 7}, {}, T0) == {}
    back = returns(loans, {"web": 5.0}, {"web": 7}, {}, T0 + 3 * H)
    assert back[("web", "train")][0] == ["web-7", "web-8", "web-9"]
    # the lender's p90 needs 9 nodes, it holds 7: two come back, the emptiest first
    back = returns(loans, {"web": 8.2}, {"web": 7}, {"web-7": 3, "web-8": 0, "web-9": 1}, T0)
    assert back[("web", "train")][0] == ["web-8", "web-9"]


def test_engine_returns_loans_and_then_lends_none() -> None:
    web, train, snap = world()
    lent = web[7:]
    moved = [pool_node(n.node_id, "train", rack=n.rack) for n in lent]  # labelled train now
    fleet = make_fleet([*web[:7], *moved, *train])
    loans = [Loan(n.node_id, "web", "train", T0 - H) for n in lent]
    p = plan([], tidal(), snap, fleet, Budgets(), clock(), loans=loans)
    (back,) = [a for a in p.actions if isinstance(a, ReturnNodes)]
    assert (back.target, back.from_pool) == ("web", "train")
    assert back.node_ids == ("web-7", "web-8", "web-9")
    assert not [a for a in p.actions if isinstance(a, LendNodes)]
    assert any(s.kind == "lend_nodes" and s.reason is SkipReason.NOT_NEEDED for s in p.skips)
    assert action_from_dict(back.to_dict()) == back


def test_count_only_plans_keep_their_keys() -> None:
    old = LendNodes(target="web", to_pool="train", nodes=2, reason="night")
    assert "node_ids" not in old.params()
    with pytest.raises(ValueError, match="named"):
        LendNodes(target="web", to_pool="train", nodes=2, node_ids=("a",), reason="x")
    assert SizingConfig().lend_min_anticorrelation == 0.5
