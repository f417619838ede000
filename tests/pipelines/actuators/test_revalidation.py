"""Property: re-validation never runs an action whose node became do-not-disrupt,
cordoned or healthy, or whose disruption budget is used up — whatever happened to the
fleet between planning and applying."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.topology import NodeSpec, Topology
from predops.core.actions import Action
from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk, Provenance
from predops.pipelines.actuators.apply import FleetStateSource, apply_plan
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.budgets import BudgetLedger
from predops.policy.config import Budgets, DisruptionBudget
from predops.policy.fleet import FleetState, NodeState
from tests.pipelines.actuators.conftest import T0, drain, plan_of

NODES = [
    NodeSpec(f"n{r}{i}", 64_000, 512_000, 8, "H100", rack=f"r{r}", spine=f"s{r % 2}", pool="p")
    for r in range(3)
    for i in range(3)
]
TOPOLOGY = Topology.of(NODES)
CHANGES = ("none", "do_not_disrupt", "cordoned", "under_repair", "healthy", "still_risky")
# What the plan saw: failure cost 60, migration 2 (an 8-GPU node's 4 h inspection is
# ~37 units, so p 0.9 pays, p 0.05 does not).
ECON = {"failure_cost": 60.0, "migration_cost": 2.0, "p_fail": 0.9}
PROV = Provenance("predops.node_failure", "3", "fs", T0 - timedelta(hours=1))


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        self.ran.append(action.target)
        return {}


def _state(node_id: str, change: str) -> NodeState:
    return NodeState(
        node_id,
        T0,
        cordoned=change == "cordoned",
        cordon_owner="someone" if change == "cordoned" else None,
        under_repair=change == "under_repair",
        do_not_disrupt=change == "do_not_disrupt",
    )


@settings(max_examples=60, deadline=None)
@given(
    targets=st.lists(st.sampled_from([n.node_id for n in NODES]), unique=True, min_size=1),
    changes=st.fixed_dictionaries({n.node_id: st.sampled_from(CHANGES) for n in NODES}),
    rack_max=st.integers(0, 2),
    pool_max=st.integers(0, 6),
    spine_pct=st.sampled_from([10.0, 50.0, 100.0]),
    execute=st.booleans(),
)
def test_revalidation_never_runs_a_stale_action(
    tmp_path_factory: Any,
    targets: list[str],
    changes: dict[str, str],
    rack_max: int,
    pool_max: int,
    spine_pct: float,
    execute: bool,
) -> None:
    budgets = Budgets(
        (
            DisruptionBudget("rack", max_nodes=rack_max),
            DisruptionBudget("pool", max_nodes=pool_max),
            DisruptionBudget("spine", max_percent=spine_pct, min_nodes=1),
        )
    )
    states = {n.node_id: _state(n.node_id, changes[n.node_id]) for n in NODES}
    fleet = FleetState(TOPOLOGY, T0, states)
    risk = {
        n: FailureRisk(n, T0, timedelta(hours=24), 0.05 if c == "healthy" else 0.9, (), PROV)
        for n, c in changes.items()
        if c in ("healthy", "still_risky")
    }
    plan = plan_of([drain(n, evidence={"economics": ECON}) for n in targets])
    path: Path = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    audit = AuditLog(path, who="prop")
    rec = Recorder()
    report = apply_plan(
        plan,
        state=FleetStateSource(fleet),
        actuators={"drain": rec},
        audit=audit,
        clock=FixedClock(T0),
        execute=execute,
        budgets=budgets,
        risk=risk,
    )
    ran = rec.ran if execute else [o.target for o in report.outcomes if o.outcome == "would_run"]
    assert all(changes[n] in ("none", "still_risky") for n in ran)
    # Replaying the run in order, no budget is ever exceeded.
    already = {n for n, s in states.items() if s.disrupted}
    for i, node in enumerate(ran):
        ledger = BudgetLedger(budgets, NODES, (already | set(ran[:i])) - {node})
        assert ledger.blocked(node) is None, (node, ran)
    # Every action is accounted for once, and stale ones say why.
    assert sorted(o.target for o in report.outcomes) == sorted(targets)
    for o in report.outcomes:
        if changes[o.target] in ("do_not_disrupt", "cordoned", "under_repair", "healthy"):
            assert o.outcome == "dropped"
            assert (
                o.reason
                == {
                    "do_not_disrupt": "do_not_disrupt",
                    "cordoned": "already_cordoned",
                    "under_repair": "under_repair",
                    "healthy": "below_threshold",
                }[changes[o.target]]
            )
    # And nothing is dropped that should run: the run equals taking the plan in order,
    # skipping stale nodes and whatever a budget ledger blocks.
    expected: list[str] = []
    for node in targets:
        ledger = BudgetLedger(budgets, NODES, already | set(expected))
        if changes[node] in ("none", "still_risky") and ledger.blocked(node) is None:
            expected.append(node)
    assert ran == expected


def test_a_drain_whose_node_risk_stayed_high_runs() -> None:
    """The contrast to the 'healthy' drop: a current high risk keeps the drain."""
    fleet = FleetState(TOPOLOGY, T0, {n.node_id: _state(n.node_id, "none") for n in NODES})
    risk = {"n00": FailureRisk("n00", T0, timedelta(hours=24), 0.9, (), PROV)}
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rec = Recorder()
        apply_plan(
            plan_of([drain("n00", evidence={"economics": ECON})]),
            state=FleetStateSource(fleet),
            actuators={"drain": rec},
            audit=AuditLog(Path(d) / "a.jsonl", who="t"),
            clock=FixedClock(T0),
            execute=True,
            risk=risk,
        )
        assert rec.ran == ["n00"]
        rec.ran.clear()
        low = {"n00": replace(risk["n00"], p_fail=0.05)}
        out = apply_plan(
            plan_of([drain("n00", evidence={"economics": ECON})], "other"),
            state=FleetStateSource(fleet),
            actuators={"drain": rec},
            audit=AuditLog(Path(d) / "b.jsonl", who="t"),
            clock=FixedClock(T0),
            execute=True,
            risk=low,
        )
        assert rec.ran == [] and out.outcomes[0].reason == "below_threshold"
