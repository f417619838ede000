"""Cordon / drain / uncordon: the cost threshold and every guard, one test each."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Drain, Plan, SkipReason, Uncordon
from predops.policy.config import (
    Budgets,
    CostModel,
    DisruptionBudget,
    DisruptionConfig,
    PolicyConfig,
)
from predops.policy.costs import node_economics
from predops.policy.engine import plan
from predops.policy.fleet import FleetState, PdbState
from tests.allocator.factories import make_allocator, make_pod
from tests.policy.factories import (
    T0,
    H,
    busy_snapshot,
    clock,
    make_fleet,
    make_risk,
    make_state,
    pool_node,
    prov,
    rack_nodes,
)

EAGER = PolicyConfig(
    disruption=DisruptionConfig(costs=CostModel(inspection_window=timedelta(minutes=30)))
)


def run(
    risks: list,
    snap: ClusterSnapshot,
    fleet: FleetState,
    budgets: Budgets | None = None,
    config: PolicyConfig = EAGER,
) -> Plan:
    return plan(risks, [], snap, fleet, budgets or Budgets(), clock(), config)


def drain_outcome(p: Plan, node_id: str) -> Drain | SkipReason:
    for a in p.actions:
        if a.kind == "drain" and a.target == node_id:
            assert isinstance(a, Drain)
            return a
    for s in p.skips:
        if s.kind == "drain" and s.target == node_id:
            return s.reason
    raise AssertionError(f"{node_id} is not in the plan")


@pytest.fixture
def fleet20() -> tuple[list, ClusterSnapshot]:
    nodes = rack_nodes("train", racks=10, per_rack=2)
    return nodes, busy_snapshot(nodes)


def test_a_risky_busy_node_is_drained_with_its_evidence(fleet20: tuple) -> None:
    nodes, snap = fleet20
    before = snap.state()
    p = run([make_risk("train-r0-n0", 0.9)], snap, make_fleet(nodes))
    d = drain_outcome(p, "train-r0-n0")
    assert isinstance(d, Drain)
    ev = d.evidence
    assert ev["risk"]["p_fail"] == 0.9 and len(ev["risk"]["top_reasons"]) == 3
    assert ev["risk"]["top_reasons"][0]["feature"] == "ecc_dbe_total__delta_6h"
    assert ev["risk"]["provenance"]["model_name"] == "node_failure"
    assert ev["allocator"]["fits"] and ev["allocator"]["moves"][0]["pod"] == "pod-train-r0-n0"
    assert ev["allocator"]["moves"][0]["to"] != "train-r0-n0"
    econ = ev["economics"]
    assert d.expected_benefit == pytest.approx(0.9 * econ["failure_cost"], rel=1e-4)
    assert d.expected_benefit > d.expected_cost  # the threshold rule
    assert d.not_before == T0 and d.expires is not None and d.expires > T0
    assert d.idempotency_key.startswith("drain:train-r0-n0:")
    assert p.budgets_used["pool:train"] == 1
    assert ClusterSnapshot.same_state(before, snap.state())  # what-ifs only


def test_low_risk_is_below_the_cost_threshold(fleet20: tuple) -> None:
    nodes, snap = fleet20
    p = run([make_risk("train-r0-n0", 0.5)], snap, make_fleet(nodes))
    assert drain_outcome(p, "train-r0-n0") is SkipReason.BELOW_THRESHOLD
    # an idle node costs nothing to lose: never worth an inspection window
    idle = busy_snapshot(nodes, {n.node_id: 4 for n in nodes[1:]})
    p = run([make_risk("train-r0-n0", 0.99)], idle, make_fleet(nodes))
    assert drain_outcome(p, "train-r0-n0") is SkipReason.BELOW_THRESHOLD


def test_threshold_moves_with_the_costs(fleet20: tuple) -> None:
    nodes, snap = fleet20
    default = plan([make_risk("train-r0-n0", 0.9)], [], snap, make_fleet(nodes), Budgets(), clock())
    # default costs: a 4 h inspection of an 8-GPU node outweighs one 4-GPU pod's hour
    assert drain_outcome(default, "train-r0-n0") is SkipReason.BELOW_THRESHOLD


@pytest.mark.parametrize(
    "state_kw,risk_kw,reason",
    [
        ({}, {"provenance": None}, SkipReason.NO_PROVENANCE),
        ({}, {"as_of": T0 - 3 * H}, SkipReason.STALE_DATA),
        ({}, {"as_of": T0 + H}, SkipReason.STALE_DATA),
        ({}, {"provenance": prov(cutoff=T0 - 7 * H)}, SkipReason.STALE_DATA),
        ({"observed_at": T0 - 7 * H}, {}, SkipReason.STALE_DATA),
        ({"do_not_disrupt": True}, {}, SkipReason.DO_NOT_DISRUPT),
        ({"under_repair": True}, {}, SkipReason.UNDER_REPAIR),
        ({"cordoned": True, "cordon_owner": "predops"}, {}, SkipReason.ALREADY_CORDONED),
        ({"uncordoned_at": T0 - 2 * H}, {}, SkipReason.HYSTERESIS),
    ],
)
def test_each_node_guard_skips_with_its_reason(
    fleet20: tuple, state_kw: dict, risk_kw: dict, reason: SkipReason
) -> None:
    nodes, snap = fleet20
    fleet = make_fleet(nodes, {"train-r0-n0": make_state("train-r0-n0", **state_kw)})
    p = run([make_risk("train-r0-n0", 0.95, **risk_kw)], snap, fleet)
    assert drain_outcome(p, "train-r0-n0") is reason
    assert not [a for a in p.actions if a.kind == "drain"]


def test_hysteresis_lapses_after_min_hold(fleet20: tuple) -> None:
    nodes, snap = fleet20
    fleet = make_fleet(nodes, {"train-r0-n0": make_state("train-r0-n0", uncordoned_at=T0 - 7 * H)})
    assert isinstance(
        drain_outcome(run([make_risk("train-r0-n0", 0.95)], snap, fleet), "train-r0-n0"), Drain
    )


def test_repair_hold_when_set(fleet20: tuple) -> None:
    nodes, snap = fleet20
    held = PolicyConfig(disruption=replace(EAGER.disruption, repair_hold=24 * H))
    risk = [make_risk("train-r0-n0", 0.95)]

    def outcome(repaired_ago: int, cfg: PolicyConfig) -> Drain | SkipReason:
        state = make_state("train-r0-n0", repaired_at=T0 - repaired_ago * H)
        fleet = make_fleet(nodes, {"train-r0-n0": state})
        return drain_outcome(plan(risk, [], snap, fleet, Budgets(), clock(), cfg), "train-r0-n0")

    assert outcome(20, held) is SkipReason.HYSTERESIS
    assert isinstance(outcome(25, held), Drain)
    assert isinstance(outcome(1, EAGER), Drain)  # off by default


def test_confirmation_needs_consecutive_scores_over_the_threshold(fleet20: tuple) -> None:
    nodes, snap = fleet20
    fleet = make_fleet(nodes)
    cfg = PolicyConfig(disruption=replace(EAGER.disruption, confirm_scores=2))

    def outcome(risks: list) -> Drain | SkipReason:
        return drain_outcome(plan(risks, [], snap, fleet, Budgets(), clock(), cfg), "train-r0-n0")

    now = make_risk("train-r0-n0", 0.95)
    assert outcome([now]) is SkipReason.HYSTERESIS  # no earlier score
    assert outcome([now, make_risk("train-r0-n0", 0.01, as_of=T0 - H)]) is SkipReason.HYSTERESIS
    # an earlier score too old to be the previous hour's does not confirm
    assert outcome([now, make_risk("train-r0-n0", 0.9, as_of=T0 - 3 * H)]) is SkipReason.HYSTERESIS
    assert isinstance(outcome([make_risk("train-r0-n0", 0.9, as_of=T0 - H), now]), Drain)
    # the default acts on the latest score alone
    assert isinstance(drain_outcome(run([now], snap, fleet), "train-r0-n0"), Drain)
    with pytest.raises(ValueError, match="confirm_scores"):
        DisruptionConfig(confirm_scores=0)


def test_unknown_node_and_missing_state(fleet20: tuple) -> None:
    nodes, snap = fleet20
    fleet = make_fleet(nodes)
    states = dict(fleet.nodes)
    del states["train-r1-n0"]
    fleet = FleetState(fleet.topology, T0, states)
    p = run([make_risk("ghost", 0.99), make_risk("train-r1-n0", 0.99)], snap, fleet)
    assert drain_outcome(p, "ghost") is SkipReason.UNKNOWN_NODE
    assert drain_outcome(p, "train-r1-n0") is SkipReason.STALE_DATA


BREAKER = PolicyConfig(disruption=replace(EAGER.disruption, pacing="breaker"))
"""The former per-pool storm breaker instead of slow-start pacing."""
UNPACED = PolicyConfig(disruption=replace(EAGER.disruption, burst_nodes=1000))
"""Slow start with no burst small enough to pace: the budgets alone bind."""


def test_storm_breaker_trips_and_alerts(fleet20: tuple) -> None:
    nodes, snap = fleet20
    bad = [n.node_id for n in nodes[:5]]  # 5 of 20 = 25 % > 20 %
    p = run([make_risk(n, 0.95) for n in bad], snap, make_fleet(nodes), config=BREAKER)
    assert [drain_outcome(p, n) for n in bad] == [SkipReason.STORM_BREAKER] * 5
    assert len(p.alerts) == 1 and "pool train" in p.alerts[0]
    # 4 of 20 = 20 % is not "more than" 20 %: acts, within budgets
    p = run([make_risk(n, 0.95) for n in bad[:4]], snap, make_fleet(nodes), config=BREAKER)
    assert not p.alerts and any(isinstance(drain_outcome(p, n), Drain) for n in bad[:4])


def test_pool_and_rack_budgets_most_restrictive_wins(fleet20: tuple) -> None:
    nodes, snap = fleet20
    # one node in each of 4 racks: pool budget max(1, 10 % of 20) = 2 (four candidates
    # of one signal over 4 racks would be a paced burst: pacing is kept out of it)
    risky = ["train-r0-n0", "train-r1-n0", "train-r2-n0", "train-r3-n0"]
    p = run([make_risk(n, 0.95) for n in risky], snap, make_fleet(nodes), config=UNPACED)
    outcomes = [drain_outcome(p, n) for n in risky]
    assert sum(isinstance(o, Drain) for o in outcomes) == 2
    assert outcomes.count(SkipReason.BUDGET_EXHAUSTED) == 2
    # both nodes of one rack: 1 per rack
    p = run(
        [make_risk("train-r0-n0", 0.95), make_risk("train-r0-n1", 0.96)], snap, make_fleet(nodes)
    )
    assert isinstance(drain_outcome(p, "train-r0-n1"), Drain)  # the higher net benefit first
    assert drain_outcome(p, "train-r0-n0") is SkipReason.BUDGET_EXHAUSTED
    # an already cordoned node uses the rack's budget
    fleet = make_fleet(nodes, {"train-r0-n1": make_state("train-r0-n1", cordoned=True)})
    p = run([make_risk("train-r0-n0", 0.95)], snap, fleet)
    assert drain_outcome(p, "train-r0-n0") is SkipReason.BUDGET_EXHAUSTED
    # a count budget tighter than the percentage wins
    tight = Budgets((*Budgets().budgets, DisruptionBudget("pool", max_nodes=1, domain="train")))
    p = run([make_risk(n, 0.95) for n in risky], snap, make_fleet(nodes), tight, UNPACED)
    assert sum(isinstance(drain_outcome(p, n), Drain) for n in risky) == 1
    zero = Budgets((DisruptionBudget("pool", max_nodes=0),))
    p = run([make_risk("train-r0-n0", 0.95)], snap, make_fleet(nodes), zero)
    assert drain_outcome(p, "train-r0-n0") is SkipReason.BUDGET_EXHAUSTED


def test_pdb_headroom_is_used_up(fleet20: tuple) -> None:
    nodes, snap = fleet20
    pdb_pods = {"train-r0-n0": {"web/api": 1}, "train-r1-n0": {"web/api": 1}}
    fleet = make_fleet(nodes, pdbs={"web/api": PdbState("web/api", 1)}, pdb_pods=pdb_pods)
    p = run([make_risk("train-r0-n0", 0.95), make_risk("train-r1-n0", 0.95)], snap, fleet)
    got = sorted(str(type(drain_outcome(p, n)).__name__) for n in ("train-r0-n0", "train-r1-n0"))
    assert got == ["Drain", "SkipReason"]
    blocked = [
        n for n in ("train-r0-n0", "train-r1-n0") if not isinstance(drain_outcome(p, n), Drain)
    ]
    assert drain_outcome(p, blocked[0]) is SkipReason.PDB_BLOCKED
    for allowed in (0, None):
        fleet = make_fleet(nodes, pdbs={"web/api": PdbState("web/api", allowed)}, pdb_pods=pdb_pods)
        p = run([make_risk("train-r0-n0", 0.95)], snap, fleet)
        assert drain_outcome(p, "train-r0-n0") is SkipReason.PDB_BLOCKED


def _gang_cluster() -> tuple[list, ClusterSnapshot]:
    """4 full nodes (8 GPUs each): a 2-node gang on a0/a1, single pods elsewhere, and one
    free node with 4 GPUs — too little for a gang member, enough for a 4-GPU single."""
    nodes = [pool_node(f"a{i}", rack=f"r{i}") for i in range(5)]
    snap = ClusterSnapshot(nodes)
    alloc = make_allocator(snap)
    import numpy as np

    for i in (0, 1):
        assert alloc.place(make_pod(f"g-{i}", gpus=8, gang="g"), rows=np.array([i])).placed
    for i in (2, 3):
        assert alloc.place(make_pod(f"s-{i}", gpus=4), rows=np.array([i])).placed
        assert alloc.place(make_pod(f"t-{i}", gpus=4), rows=np.array([i])).placed
    assert alloc.place(make_pod("u-4", gpus=4), rows=np.array([4])).placed
    return nodes, snap


def test_a_drain_that_would_strand_a_gang_is_skipped() -> None:
    nodes, snap = _gang_cluster()
    p = run([make_risk("a0", 0.95), make_risk("a2", 0.95)], snap, make_fleet(nodes))
    assert drain_outcome(p, "a0") is SkipReason.WOULD_STRAND_GANG
    d = drain_outcome(p, "a2")  # its two 4-GPU pods: one fits on a4... the other does not
    assert d is SkipReason.DOES_NOT_FIT


def test_gang_failure_cost_counts_every_member() -> None:
    nodes, snap = _gang_cluster()
    member = snap.placements["g-0"].pod
    gangs = {"g": (member, snap.placements["g-1"].pod)}
    costs = CostModel()
    one = node_economics(nodes[0], (member,), {}, make_state("a0"), 0.5, T0, costs, H)
    whole = node_economics(nodes[0], (member,), gangs, make_state("a0"), 0.5, T0, costs, H)
    # a0 hosts one 8-GPU member, but a failure stops the whole 16-GPU gang
    assert whole.pods_interrupted == 2 and one.pods_interrupted == 1
    assert whole.failure_cost == pytest.approx(2 * one.failure_cost)
    assert whole.gpu_hours_at_risk == pytest.approx(16 * (1.0 + 0.5 + 0.25))


def test_drain_waits_for_a_near_checkpoint(fleet20: tuple) -> None:
    nodes, snap = fleet20
    st = make_state(
        "train-r0-n0", last_checkpoint_at=T0 - timedelta(minutes=90), checkpoint_interval=2 * H
    )
    p = run([make_risk("train-r0-n0", 0.9)], snap, make_fleet(nodes, {"train-r0-n0": st}))
    d = drain_outcome(p, "train-r0-n0")
    assert isinstance(d, Drain)
    assert d.not_before == T0 + timedelta(minutes=30)
    assert d.evidence["economics"]["drain_lost_work_h"] == 0.0
    assert "checkpoint" in d.reason


def test_uncordon_after_repair_and_clean_window(fleet20: tuple) -> None:
    nodes, snap = fleet20
    ours = {"cordoned": True, "cordon_owner": "predops"}
    states = {
        "train-r0-n0": make_state(
            "train-r0-n0", **ours, cordoned_at=T0 - 30 * H, repaired_at=T0 - H
        ),
        "train-r1-n0": make_state("train-r1-n0", **ours, cordoned_at=T0 - 30 * H),
        "train-r2-n0": make_state("train-r2-n0", **ours, cordoned_at=T0 - 30 * H),
        "train-r3-n0": make_state("train-r3-n0", **ours, cordoned_at=T0 - 2 * H, repaired_at=T0),
        "train-r4-n0": make_state("train-r4-n0", cordoned=True, cordon_owner="alice"),
        "train-r5-n0": make_state(
            "train-r5-n0", **ours, cordoned_at=T0 - 30 * H, under_repair=True
        ),
        "train-r6-n0": make_state("train-r6-n0", **ours, cordoned_at=T0 - 10 * H),
    }
    risks = [
        make_risk("train-r1-n0", 0.01),
        make_risk("train-r2-n0", 0.3),
        make_risk("train-r6-n0", 0.01),
    ]
    p = run(risks, snap, make_fleet(nodes, states))
    got = {a.target: "uncordon" for a in p.actions if isinstance(a, Uncordon)}
    got.update({s.target: s.reason for s in p.skips if s.kind == "uncordon"})
    assert got == {
        "train-r0-n0": "uncordon",
        "train-r1-n0": "uncordon",
        "train-r2-n0": SkipReason.STILL_AT_RISK,
        "train-r3-n0": "uncordon",  # an inspection that finished is not a flap
        "train-r4-n0": SkipReason.NOT_OWNED,
        "train-r5-n0": SkipReason.UNDER_REPAIR,
        "train-r6-n0": SkipReason.HYSTERESIS,
    }
    # the risky cordoned nodes are drain candidates too, skipped as already cordoned
    assert drain_outcome(p, "train-r2-n0") is SkipReason.ALREADY_CORDONED
