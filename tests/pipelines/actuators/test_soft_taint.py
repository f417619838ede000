"""The soft-taint actuator against the fake API server: predops' PreferNoSchedule taint
added and removed beside a person's taints, idempotent, read back by the cluster state,
announced as an Event, and granted to the applying component."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from predops.core.actions import RemoveSoftTaint, SoftTaint
from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import apply_plan
from predops.pipelines.actuators.node_signals import NodeSignals
from predops.pipelines.actuators.soft_taint import SOFT_TAINT, SoftTaintActuator
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.pipelines.actuators.conftest import T0, assert_role_grants, kube_for, plan_of

PERSONS_TAINT = {"key": "team.example/hold", "value": "ask-ana", "effect": "NoSchedule"}
WINDOW = {"not_before": T0, "expires": T0 + timedelta(hours=2)}


def apply(fake, tmp_path, clock, audit, action, plan_id):
    api, _, state, sleeper = kube_for(fake, tmp_path, clock)
    taints = SoftTaintActuator(api, sleeper)
    plan = plan_of([action], plan_id)
    report = apply_plan(
        plan,
        state=state,
        actuators=dict.fromkeys(taints.kinds, taints),
        audit=audit,
        clock=clock,
        execute=True,
    )
    NodeSignals(api, sleeper).publish(plan, report, [], clock.now(), execute=True)
    (out,) = report.outcomes
    return out, state


def test_soft_taint_added_and_removed_beside_a_persons_taint(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.node("n00")["spec"]["taints"] = [dict(PERSONS_TAINT)]
    fake.node("n00")["metadata"]["resourceVersion"] = "7"
    add = SoftTaint(target="n00", reason="p_fail 0.150 >= 0.1 without a drain", **WINDOW)
    out, state = apply(fake, tmp_path, clock, audit, add, "plan-taint")
    assert (out.outcome, out.report) == ("done", {"taint": "added"})
    assert fake.node("n00")["spec"]["taints"] == [PERSONS_TAINT, SOFT_TAINT]
    (patch,) = fake.seen("PATCH", "/api/v1/nodes/n00")
    assert patch.body["metadata"]["resourceVersion"] == "7"  # optimistic concurrency
    st, _ = state.node("n00", T0)
    assert st is not None and st.soft_tainted and not st.cordoned
    (ev,) = [e for e in fake.events if e["involvedObject"]["name"] == "n00"]
    assert ev["reason"] == "PredopsSoftTaint"
    # a second plan wanting the same taint writes nothing
    out, _ = apply(fake, tmp_path, clock, audit, add, "plan-taint-2")
    assert out.outcome == "already_done"
    remove = RemoveSoftTaint(target="n00", reason="p_fail 0.030 < 0.05: risk fell", **WINDOW)
    out, _ = apply(fake, tmp_path, clock, audit, remove, "plan-untaint")
    assert (out.outcome, out.report) == ("done", {"taint": "removed"})
    assert fake.node("n00")["spec"]["taints"] == [PERSONS_TAINT]
    assert_role_grants(fake, {("", "nodes", "patch"), ("", "nodes", "get")})


def test_a_taint_list_changed_since_the_read_fails_and_loses_nothing(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.node("n01")["metadata"]["resourceVersion"] = "7"
    fake.fail_next("PATCH", "/api/v1/nodes/n01", 409, "Conflict", "the object has been modified")
    add = SoftTaint(target="n01", reason="risky", **WINDOW)
    out, _ = apply(fake, tmp_path, clock, audit, add, "plan-race")
    assert out.outcome == "failed" and "HTTP 409" in out.detail
    assert "taints" not in fake.node("n01")["spec"]


def test_removing_a_taint_already_gone_writes_nothing(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    remove = RemoveSoftTaint(target="n10", reason="risk fell", **WINDOW)
    out, _ = apply(fake, tmp_path, clock, audit, remove, "plan-gone")
    assert (out.outcome, out.report) == ("done", {"taint": "already gone"})
    assert fake.seen("PATCH", "/api/v1/nodes/n10") == []
    assert "taints" not in fake.node("n10")["spec"]
