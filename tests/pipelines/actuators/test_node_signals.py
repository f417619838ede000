"""Risk in Kubernetes, against the fake API server: the failure-risk annotation, the
``PredictedFailure`` condition and the Events, read back as ``kubectl describe node``
reads them; idempotent on re-apply, nothing sent in a dry-run, a person's conditions and
taints untouched, and every call granted to the applying component."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from predops.core.actions import Plan, Skip, SkipReason
from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk, Provenance, Reason
from predops.pipelines.actuators.apply import ApplyReport, apply_plan
from predops.pipelines.actuators.node_signals import (
    CONDITION_TYPE,
    RISK_ANNOTATION,
    NodeSignals,
    PublishOptions,
)
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.config import Budgets, DisruptionBudget
from tests.fakes.kube_api import FakeKubeAPI
from tests.pipelines.actuators.conftest import (
    T0,
    assert_role_grants,
    cli_apply,
    drain,
    kube_for,
)

LOOSE = Budgets((DisruptionBudget("pool", max_nodes=100),))
PROV = Provenance("node_failure", "7", "fs-abc", T0 - timedelta(hours=1))
NPD_CONDITION = {
    "type": "KernelDeadlock",
    "status": "False",
    "reason": "KernelHasNoDeadlock",
    "message": "kernel has no deadlock",
    "lastTransitionTime": "2026-04-01T00:00:00Z",
}
PERSONS_TAINT = {"key": "team.example/hold", "value": "ask-ana", "effect": "NoSchedule"}


def risk(node: str, p: float, hours: float = 24, as_of=T0) -> FailureRisk:
    return FailureRisk(
        node,
        as_of,
        timedelta(hours=hours),
        p,
        (
            Reason("gpu_dbe__sum_6h", 0.9, "GPU double-bit ECC errors rising (6 h)"),
            Reason("xid_79__count_24h", 0.3, "GPU fell off the bus (XID 79) twice"),
        ),
        PROV,
    )


def plan_with_skips() -> Plan:
    return Plan(
        plan_id="plan-signals",
        created_at=T0,
        data_cutoff=T0,
        actions=(drain("n00"),),
        skips=(
            Skip("drain", "n01", SkipReason.BUDGET_EXHAUSTED, "rack r0: 1 of 1 in use"),
            Skip("drain", "n10", SkipReason.BELOW_THRESHOLD, "p_fail 0.010"),
        ),
    )


RISKS = [risk("n00", 0.42), risk("n00", 0.2, hours=6), risk("n01", 0.15), risk("n10", 0.01)]


def run(fake, tmp_path, clock, audit, *, execute=True, risks=RISKS, plan=None, options=None):
    api, actuator, state, sleeper = kube_for(fake, tmp_path, clock)
    plan = plan or plan_with_skips()
    report: ApplyReport = apply_plan(
        plan,
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=execute,
        budgets=LOOSE,
    )
    signals = NodeSignals(api, sleeper, options)
    return signals.publish(plan, report, risks, clock.now(), execute=execute)


def describe_events(fake: FakeKubeAPI, node: str) -> list[dict]:
    """Events of ``node`` as ``kubectl describe node`` searches them: all namespaces,
    by the involved object's kind, name and uid."""
    uid = fake.node(node)["metadata"]["uid"]
    selector = (
        f"involvedObject.kind=Node,involvedObject.name={node},"
        f"involvedObject.namespace=,involvedObject.uid={uid}"
    )
    resp = requests.get(
        f"{fake.url}/api/v1/events",
        params={"fieldSelector": selector},
        headers={"Authorization": "Bearer test-token"},
        timeout=10,
    )
    resp.raise_for_status()
    return resp.json()["items"]


def condition(fake: FakeKubeAPI, node: str) -> dict | None:
    conds = fake.node(node)["status"]["conditions"]
    return next((c for c in conds if c["type"] == CONDITION_TYPE), None)


def test_execute_writes_what_describe_node_shows(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    out = run(fake, tmp_path, clock, audit)
    assert out["errors"] == []
    assert (out["annotations"], out["conditions"]) == (3, 3)
    note = json.loads(fake.node("n00")["metadata"]["annotations"][RISK_ANNOTATION])
    assert note["p_fail"] == {"24h": 0.42, "6h": 0.2}
    assert note["model"] == "node_failure@7"
    assert note["reasons"][0] == "GPU double-bit ECC errors rising (6 h)"
    assert note["as_of"] == T0.isoformat() and note["at"] == T0.isoformat()
    c = condition(fake, "n00")
    assert c is not None
    assert (c["status"], c["reason"]) == ("True", "RiskAboveThreshold")
    assert "p_fail 0.420 within 24h" in c["message"]
    assert "GPU double-bit ECC errors" in c["message"]
    assert c["lastTransitionTime"] == "2026-05-02T12:00:00Z"
    low = condition(fake, "n10")
    assert low is not None and (low["status"], low["reason"]) == ("False", "RiskBelowThreshold")
    # the kubelet's conditions are still there beside ours
    assert {"Ready", "MemoryPressure", CONDITION_TYPE} <= {
        x["type"] for x in fake.node("n00")["status"]["conditions"]
    }
    (ev,) = describe_events(fake, "n00")
    assert ev["reason"] == "PredopsDrain" and ev["type"] == "Normal"
    assert ev["source"] == {"component": "predops"}
    assert ev["involvedObject"]["kind"] == "Node"
    assert "predops drain of n00 (plan plan-signals)" in ev["message"]
    (skip,) = describe_events(fake, "n01")
    assert skip["reason"] == "PredopsSkip"
    assert "budget_exhausted: rack r0: 1 of 1 in use" in skip["message"]
    assert describe_events(fake, "n10") == []  # below threshold: not news
    (status_patch,) = fake.seen("PATCH", "/api/v1/nodes/n00/status")
    assert "strategic-merge-patch+json" in status_patch.headers["content-type"]


def test_reapply_sends_no_event_twice_and_keeps_the_transition_time(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    run(fake, tmp_path, clock, audit)
    patches = len(fake.seen("PATCH", "/api/v1/nodes/"))
    again = run(fake, tmp_path, clock, audit)  # same plan, same scores
    assert again["events"] == 0 and again["events_already_sent"] == 2  # drain, skip
    assert again["unchanged"] == 3 and again["errors"] == []
    assert len(fake.seen("PATCH", "/api/v1/nodes/")) == patches  # nothing rewritten
    assert len(fake.events) == 2
    # an hour later, a new score, same side of the threshold: transition time stays
    clock.advance(timedelta(hours=1))
    later = [risk("n00", 0.5, as_of=clock.now())]
    run(fake, tmp_path, clock, audit, risks=later)
    c = condition(fake, "n00")
    assert c is not None and c["status"] == "True"
    assert c["lastTransitionTime"] == "2026-05-02T12:00:00Z"
    assert c["lastHeartbeatTime"] == "2026-05-02T13:00:00Z"
    assert len([x for x in fake.node("n00")["status"]["conditions"] if x["type"] == c["type"]])
    # the risk falls: the condition turns False, now
    clock.advance(timedelta(hours=1))
    run(fake, tmp_path, clock, audit, risks=[risk("n00", 0.02, as_of=clock.now())])
    c = condition(fake, "n00")
    assert c is not None and (c["status"], c["lastTransitionTime"]) == (
        "False",
        "2026-05-02T14:00:00Z",
    )
    assert len(fake.events) == 2


def test_dry_run_sends_nothing_and_says_what_it_would(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    out = run(fake, tmp_path, clock, audit, execute=False)
    assert {r.method for r in fake.requests} == {"GET"}
    assert fake.events == [] and condition(fake, "n00") is None
    rows = out["would_send"]
    assert {r["node"] for r in rows if "node" in r} == {"n00", "n01", "n10"}
    events = [r["event"] for r in rows if "event" in r]
    assert {(e["node"], e["reason"]) for e in events} == {
        ("n00", "PredopsDrain"),
        ("n01", "PredopsSkip"),
    }


def test_a_dry_runs_preview_is_capped_events_first(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    out = run(fake, tmp_path, clock, audit, execute=False, options=PublishOptions(max_preview=2))
    assert [next(iter(r)) for r in out["would_send"]] == ["event", "event"]
    assert out["would_send_left_out"] == 3
    assert (out["annotations"], out["conditions"], out["events"]) == (3, 3, 2)


def test_a_persons_conditions_and_taints_are_left_alone(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    node = fake.node("n01")
    node["status"]["conditions"].append(dict(NPD_CONDITION))
    node["spec"]["taints"] = [dict(PERSONS_TAINT)]
    node["metadata"]["annotations"] = {"team.example/owner": "ana"}
    run(fake, tmp_path, clock, audit)
    node = fake.node("n01")
    assert NPD_CONDITION in node["status"]["conditions"]
    assert node["spec"]["taints"] == [PERSONS_TAINT]
    assert node["metadata"]["annotations"]["team.example/owner"] == "ana"
    assert RISK_ANNOTATION in node["metadata"]["annotations"]


def test_the_applying_role_grants_every_call(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    run(fake, tmp_path, clock, audit)
    assert_role_grants(
        fake,
        {("", "nodes/status", "patch"), ("", "events", "create"), ("", "nodes", "patch")},
    )


def test_predops_apply_sends_events_only_with_execute(
    fake: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply = cli_apply(fake, tmp_path, monkeypatch, plan_with_skips())
    dry = apply()
    assert dry.exit_code == 0, dry.output
    signals = json.loads(dry.output)["node_signals"]
    assert signals["mode"] == "dry_run" and fake.events == []
    assert {r["event"]["reason"] for r in signals["would_send"]} == {"PredopsDrain", "PredopsSkip"}
    done = apply("--execute")
    assert done.exit_code == 0, done.output
    signals = json.loads(done.output)["node_signals"]
    assert (signals["events"], signals["errors"]) == (2, [])
    assert {e["reason"] for e in fake.events} == {"PredopsDrain", "PredopsSkip"}
    lines = (tmp_path / "ws" / "audit.jsonl").read_text().splitlines()
    published = [e for e in map(json.loads, lines) if e["outcome"] == "published"]
    assert [e["mode"] for e in published] == ["execute"]
