"""Soft taints: off by default, nodes over the level and not drained, under their own
per-pool budget, highest risk first, removed below the clear level."""

from __future__ import annotations

from dataclasses import replace

from predops.core.actions import SkipReason, action_from_dict
from predops.policy.config import Budgets, DisruptionConfig, PolicyConfig
from predops.policy.disruption import latest_risk
from predops.policy.engine import plan
from predops.policy.soft_taint import SoftTaintPolicy, clear_level
from tests.policy.factories import (
    T0,
    busy_snapshot,
    clock,
    make_fleet,
    make_risk,
    make_state,
    rack_nodes,
)

ON = DisruptionConfig(soft_taint_p=0.1, soft_taint_max_percent=20.0)
NODES = rack_nodes("train", racks=5, per_rack=2)  # 10 nodes: 2 may carry a taint


def test_off_by_default_and_the_plan_is_unchanged() -> None:
    risks = [make_risk(n.node_id, 0.5) for n in NODES]
    out = SoftTaintPolicy(DisruptionConfig()).decide(
        latest_risk(risks), make_fleet(NODES), frozenset(), T0
    )
    assert out.actions == [] and out.skips == []


def test_taints_the_riskiest_within_the_pool_budget_and_never_a_drained_node() -> None:
    ps = {"train-r0-n0": 0.5, "train-r1-n0": 0.3, "train-r2-n0": 0.2, "train-r3-n0": 0.05}
    risks = [make_risk(n, p) for n, p in ps.items()]
    out = SoftTaintPolicy(ON).decide(
        latest_risk(risks), make_fleet(NODES), frozenset({"train-r0-n0"}), T0
    )
    assert [(a.kind, a.target) for a in out.actions] == [
        ("soft_taint", "train-r1-n0"),
        ("soft_taint", "train-r2-n0"),
    ]
    assert out.skips == []
    assert out.budgets_used == {"soft_taint:pool:train": 2}
    # undrained, the two riskiest take the budget and the rest are skipped
    risks.append(make_risk("train-r4-n0", 0.15))
    out = SoftTaintPolicy(ON).decide(latest_risk(risks), make_fleet(NODES), frozenset(), T0)
    assert [a.target for a in out.actions] == ["train-r0-n0", "train-r1-n0"]
    assert {(s.target, s.reason) for s in out.skips} == {
        ("train-r2-n0", SkipReason.BUDGET_EXHAUSTED),
        ("train-r4-n0", SkipReason.BUDGET_EXHAUSTED),
    }


def test_removed_below_the_clear_level_kept_in_the_gap() -> None:
    assert clear_level(ON) == 0.05
    states = {n: make_state(n, soft_tainted=True) for n in ("train-r0-n0", "train-r1-n0")}
    risks = [make_risk("train-r0-n0", 0.04), make_risk("train-r1-n0", 0.07)]
    out = SoftTaintPolicy(ON).decide(latest_risk(risks), make_fleet(NODES, states), frozenset(), T0)
    assert [(a.kind, a.target) for a in out.actions] == [("remove_soft_taint", "train-r0-n0")]


def test_the_engine_plans_them_and_they_read_back() -> None:
    risks = [make_risk("train-r0-n0", 0.12)]
    cfg = PolicyConfig(disruption=replace(ON))
    p = plan(risks, [], busy_snapshot(NODES, 0), make_fleet(NODES), Budgets(), clock(), cfg)
    (a,) = [a for a in p.actions if a.kind == "soft_taint"]
    assert action_from_dict(a.to_dict()).idempotency_key == a.idempotency_key
