"""The audit log as the record of predops' soft taints: the plan marks the nodes whose
last done soft-taint action added one, so the policy can take it off again."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from predops.allocator.topology import Topology
from predops.pipelines.jobs.plan import with_soft_taints
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.fleet import FleetState, NodeState

T0 = datetime(2026, 5, 2, 12, tzinfo=UTC)


def done(log: AuditLog, kind: str, node: str, outcome: str = "done") -> None:
    what = {"kind": kind, "target": node, "params": {}}
    log.append(at=T0, outcome=outcome, what=what, why="test", key=f"{kind}:{node}")


def test_the_last_done_soft_taint_action_of_each_node_counts(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", who="tester")
    done(log, "soft_taint", "n00")
    done(log, "soft_taint", "n01")
    done(log, "remove_soft_taint", "n01")
    done(log, "soft_taint", "n02", outcome="failed")
    done(log, "soft_taint", "n03", outcome="would_run")
    assert log.soft_tainted() == {"n00"}
    fleet = FleetState(Topology.of([]), T0, {n: NodeState(n, T0) for n in ("n00", "n01", "n02")})
    marked = with_soft_taints(fleet, log)
    assert {n for n, st in marked.nodes.items() if st.soft_tainted} == {"n00"}
    empty = AuditLog(tmp_path / "none.jsonl", who="tester")
    assert with_soft_taints(fleet, empty) is fleet
