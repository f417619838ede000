"""Elastic pool sizing: packing estimate, failure buffer, usage floor, cooldown, lending."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import LendNodes, Plan, ResizePool, SkipReason
from predops.policy.config import Budgets, PolicyConfig, SizingConfig
from predops.policy.engine import plan
from predops.policy.fleet import PoolState
from predops.policy.sizing import PoolSizingPolicy, window_probability
from tests.allocator.factories import make_allocator, make_pod
from tests.policy.factories import (
    T0,
    H,
    clock,
    forecast,
    make_fleet,
    make_risk,
    make_state,
    pool_node,
)


def cluster(
    pool: str, n: int, pod_gpus: int, busy: int | None = None
) -> tuple[list, ClusterSnapshot]:
    nodes = [pool_node(f"{pool}-{i}", pool, rack=f"r{i}") for i in range(n)]
    snap = ClusterSnapshot(nodes)
    alloc = make_allocator(snap)
    for i in range(n if busy is None else busy):
        pod = make_pod(f"{pool}-pod-{i}", gpus=pod_gpus, cpu=2000)
        assert alloc.place(pod, rows=np.array([i])).placed
    return nodes, snap


def resize(p: Plan, pool: str) -> ResizePool | SkipReason:
    for a in p.actions:
        if isinstance(a, ResizePool) and a.target == pool:
            return a
    [s] = [s for s in p.skips if s.kind == "resize_pool" and s.target == pool]
    return s.reason


def test_scale_up_counts_fragmentation_by_packing() -> None:
    # the pool runs 5-GPU pods on 8-GPU nodes: 3 GPUs of every node are stranded
    nodes, snap = cluster("train", 4, 5)
    fc = [forecast("train/gpus/A100", T0 + k * H, 36.0, spread=0.1) for k in range(1, 6)]
    r = resize(plan([], fc, snap, make_fleet(nodes), Budgets(), clock()), "train")
    assert isinstance(r, ResizePool)
    # p90 = 39.6 GPUs = 8 five-GPU pods -> 8 nodes, not ceil(39.6 / 8) = 5
    assert r.evidence["allocator"]["method"] == "allocator_packing"
    assert r.evidence["nodes_for_demand"] == 8 > math.ceil(39.6 / 8)
    assert r.evidence["allocator"]["frag_ratio"] > 0
    assert (r.from_nodes, r.to_nodes) == (4, 8)
    assert r.expected_cost is not None and r.expected_cost > 0


def test_growth_fills_the_busy_nodes_before_new_ones() -> None:
    # 4 nodes run a 2-GPU pod each: 24 GPUs free on them, 2 empty nodes besides
    nodes, snap = cluster("train", 6, 2, busy=4)
    fc = [forecast("train/gpus/A100", T0 + H, 20.0, spread=0.0)]
    r = resize(plan([], fc, snap, make_fleet(nodes), Budgets(), clock()), "train")
    assert isinstance(r, ResizePool)
    alloc = r.evidence["allocator"]
    # 12 more GPUs = 6 two-GPU pods, all on the busy nodes' free room: no new node
    assert alloc["growth_pods"] == alloc["growth_on_busy_nodes"] == 6
    assert r.evidence["nodes_for_demand"] == 4 and r.to_nodes == 4
    before = snap.state()
    more = [forecast("train/gpus/A100", T0 + H, 60.0, spread=0.0)]
    r = resize(plan([], more, snap, make_fleet(nodes), Budgets(), clock()), "train")
    assert isinstance(r, ResizePool) and r.evidence["allocator"]["placed_on_new"] > 0
    # 52 more GPUs: 24 on the busy nodes, 28 on ceil(28 / 8) = 4 new nodes
    assert r.evidence["nodes_for_demand"] == 4 + 4
    assert ClusterSnapshot.same_state(before, snap.state())  # a what-if only
    # packing only 8 of the 14 pods left and scaling by their GPUs gives the same count
    capped = PolicyConfig(sizing=SizingConfig(max_packed_pods=8))
    r = resize(plan([], more, snap, make_fleet(nodes), Budgets(), clock(), capped), "train")
    assert isinstance(r, ResizePool) and r.evidence["allocator"]["packed_pods"] == 8
    assert r.evidence["nodes_for_demand"] == 4 + 4


def test_buffer_for_expected_failures_and_nodes_in_repair() -> None:
    nodes, snap = cluster("train", 6, 8, busy=2)
    fc = [forecast("train/gpus/A100", T0 + H, 16.0, spread=0.0)]
    risks = [make_risk(n.node_id, 0.5) for n in nodes[:4]]
    fleet = make_fleet(nodes, {"train-5": make_state("train-5", under_repair=True)})
    r = resize(plan(risks, fc, snap, fleet, Budgets(), clock()), "train")
    cfg = SizingConfig()
    window = cfg.scale_up_lead + cfg.hold
    expected = 4 * window_probability(0.5, timedelta(hours=24), window)
    assert isinstance(r, ResizePool)
    # 16 GPUs = the 2 busy nodes, + ceil(expected) for failures, + 1 in repair = 4 (from 6)
    assert abs(r.evidence["expected_failures"] - expected) < 1e-3
    assert r.evidence["target"] == 2 + 1 + 1 and r.to_nodes == 4


def test_scale_in_removes_the_idle_nodes_likeliest_to_fail_first() -> None:
    # 2 busy nodes, 5 idle (one unscored), 1 in repair; demand fits on the busy two
    nodes, snap = cluster("train", 8, 8, busy=2)
    fc = [forecast("train/gpus/A100", T0 + H, 16.0, spread=0.0)]
    p_fail = {"train-0": 0.9, "train-2": 0.1, "train-3": 0.6, "train-5": 0.3, "train-6": 0.1}
    risks = [make_risk(n, p) for n, p in p_fail.items()]
    fleet = make_fleet(nodes, {"train-7": make_state("train-7", under_repair=True)})
    r = resize(plan(risks, fc, snap, fleet, Budgets(), clock()), "train")
    assert isinstance(r, ResizePool) and r.to_nodes < r.from_nodes
    # riskiest idle first, equal risks by id, the unscored node last; never the busy
    # node (train-0, however risky) nor the node in repair
    assert r.evidence["scale_in_order"] == ["train-3", "train-5", "train-2", "train-6", "train-4"]
    # a scale-up names no nodes to remove
    up = [forecast("train/gpus/A100", T0 + H, 80.0)]
    r = resize(plan(risks, up, snap, fleet, Budgets(), clock()), "train")
    assert isinstance(r, ResizePool) and "scale_in_order" not in r.evidence


def test_never_below_usage_and_cooldown() -> None:
    nodes, snap = cluster("train", 6, 2)  # every node runs a pod
    fc = [forecast("train/gpus/A100", T0 + H, 2.0)]
    p = plan([], fc, snap, make_fleet(nodes), Budgets(), clock())
    assert resize(p, "train") is SkipReason.USAGE_FLOOR
    idle_nodes, idle = cluster("train", 6, 2, busy=1)
    r = resize(plan([], fc, idle, make_fleet(idle_nodes), Budgets(), clock()), "train")
    assert isinstance(r, ResizePool) and r.to_nodes == 1 and r.expected_benefit
    recent = make_fleet(idle_nodes, pools={"train": PoolState("train", T0 - H)})
    assert resize(plan([], fc, idle, recent, Budgets(), clock()), "train") is SkipReason.COOLDOWN
    # the cooldown counts from the last scale-up when the pool state knows it
    after_in = make_fleet(
        idle_nodes, pools={"train": PoolState("train", T0 - H, last_scale_up_at=T0 - 3 * H)}
    )
    assert isinstance(resize(plan([], fc, idle, after_in, Budgets(), clock()), "train"), ResizePool)
    # a scale-up ignores the cooldown
    big = [forecast("train/gpus/A100", T0 + H, 80.0)]
    assert isinstance(resize(plan([], big, idle, recent, Budgets(), clock()), "train"), ResizePool)


def test_forecast_guards() -> None:
    nodes, snap = cluster("train", 3, 4)
    cases = [
        ([], SkipReason.NO_FORECAST),
        ([forecast("train/gpus/A100", T0 + H, 20.0, provenance=None)], SkipReason.NO_PROVENANCE),
        ([forecast("train/gpus/A100", T0 + H, 20.0, issued_at=T0 - 7 * H)], SkipReason.STALE_DATA),
        ([forecast("train/gpus/A100", T0 + 9 * H, 20.0)], SkipReason.NO_FORECAST),  # past window
    ]
    for fc, reason in cases:
        assert resize(plan([], fc, snap, make_fleet(nodes), Budgets(), clock()), "train") is reason


def test_lending_between_pools_with_opposite_peaks() -> None:
    web_nodes, _ = cluster("web", 10, 4)
    train_nodes = [pool_node(f"train-{i}", "train", rack=f"t{i}") for i in range(4)]
    snap = ClusterSnapshot([*web_nodes, *train_nodes])
    alloc = make_allocator(snap)
    for i in range(3):  # web busy on 3 nodes, train on 4
        assert alloc.place(make_pod(f"w{i}", gpus=4), rows=np.array([i])).placed
    for i in range(4):
        assert alloc.place(make_pod(f"t{i}", gpus=8), rows=np.array([10 + i])).placed
    fc = []
    for k in range(24):
        day = 0.5 + 0.5 * math.sin(2 * math.pi * k / 24)  # web by day, train by night
        fc.append(forecast("web/gpus/A100", T0 + k * H, 8 + 40 * day, spread=0.1))
        fc.append(forecast("train/gpus/A100", T0 + k * H, 8 + 40 * (1 - day), spread=0.1))
    fleet = make_fleet([*web_nodes, *train_nodes])
    assert not [
        a for a in plan([], fc, snap, fleet, Budgets(), clock()).actions if isinstance(a, LendNodes)
    ]  # loans not tracked: no lending
    p = plan([], fc, snap, fleet, Budgets(), clock(), loans=())
    lends = [a for a in p.actions if isinstance(a, LendNodes)]
    assert [(a.target, a.to_pool) for a in lends] == [("web", "train")]
    lend = lends[0]
    assert lend.evidence["correlation"] < -0.9 and lend.nodes >= 1
    assert lend.not_before is not None and lend.expires is not None
    assert lend.not_before < lend.expires


def test_a_memo_bound_to_the_snapshot_gives_the_same_sizes_without_packing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes, snap = cluster("train", 4, 5)
    fc = [forecast("train/gpus/A100", T0 + k * H, 36.0, spread=0.1) for k in range(1, 6)]
    fleet = make_fleet(nodes)
    fresh = plan([], fc, snap, fleet, Budgets(), clock())
    memo: dict[str, Any] = {}
    first = plan([], fc, snap, fleet, Budgets(), clock(), sizing_memo=memo)
    assert len(memo) == 1 and first.to_dict() == fresh.to_dict()

    def no_packing(*_: Any) -> Any:
        raise AssertionError("packed again although the memo holds the answer")

    with monkeypatch.context() as m:
        m.setattr(PoolSizingPolicy, "_nodes_for", no_packing)
        again = plan([], fc, snap, fleet, Budgets(), clock(), sizing_memo=memo)
    assert again.to_dict() == fresh.to_dict()
    # another peak is another entry, worked out afresh
    more = [forecast("train/gpus/A100", T0 + k * H, 52.0, spread=0.1) for k in range(1, 6)]
    bigger = plan([], more, snap, fleet, Budgets(), clock(), sizing_memo=memo)
    assert len(memo) == 2
    assert bigger.to_dict() == plan([], more, snap, fleet, Budgets(), clock()).to_dict()
    assert resize(bigger, "train").to_nodes > resize(fresh, "train").to_nodes  # type: ignore[union-attr]
