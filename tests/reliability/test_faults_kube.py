"""Injected faults in the Kubernetes API during a drain: 500 / 503, 429 from API
throttling, requests that time out. Transient errors are retried with a doubling backoff
a bounded number of times; past that the action is ``failed`` in the audit log, the drain's
own cordon is undone and its disruption budget is free for the next plan. Against the
fake API server (``tests/fakes/kube_api.py``; no real kube-apiserver runs here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import ApplyReport, apply_plan
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.config import Budgets, DisruptionBudget
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_pod
from tests.pipelines.actuators.conftest import Sleeper, cluster_nodes, drain, plan_of
from tests.pipelines.actuators.conftest import kube_for as connect_to

ONE_PER_RACK = Budgets((DisruptionBudget("rack", max_nodes=1),))
EVICT = r"/api/v1/namespaces/default/pods/job-0/eviction"
REQUEST_TIMEOUT = 1.0
"""Seconds per API call: held requests are held longer; other calls, on a busy CI
machine, stay well under it."""


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    # n00 and n01 share rack r0 (one disrupted node at a time); one pod on each.
    pods = [make_pod("job-0", node="n00"), make_pod("job-1", node="n01")]
    with FakeKubeAPI(nodes=cluster_nodes(racks=1, per_rack=2), pods=pods) as api:
        yield api


def apply_drains(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog, *nodes: str
) -> tuple[ApplyReport, Sleeper]:
    _, actuator, state, sleeper = connect_to(
        fake, tmp_path, clock, request_timeout=REQUEST_TIMEOUT, timeout=120
    )
    report = apply_plan(
        plan_of([drain(n) for n in nodes], plan_id=f"plan-{'-'.join(nodes)}"),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=ONE_PER_RACK,
    )
    return report, sleeper


def evictions(fake: FakeKubeAPI, pod: str = "job-0") -> int:
    return sum(r.path.endswith(f"/{pod}/eviction") for r in fake.seen("POST", "/api/v1/"))


@pytest.mark.parametrize(
    ("code", "reason"),
    [(500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout")],
)
def test_transient_eviction_errors_are_retried_with_backoff(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog, code: int, reason: str
) -> None:
    for _ in range(2):
        fake.fail_next("POST", EVICT, code, reason, "etcd leader changed")
    report, sleeper = apply_drains(fake, tmp_path, clock, audit, "n00")
    (out,) = report.outcomes
    assert out.outcome == "done", out.detail
    (pod,) = out.report["pods"]
    assert (pod["outcome"], pod["attempts"]) == ("evicted", 3)
    assert sleeper.waits == [1.0, 2.0]  # doubling backoff
    assert fake.pod("default", "job-0")["metadata"].get("deletionTimestamp")


def test_persistent_500_fails_after_bounded_retries_and_releases_the_budget(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    for _ in range(10):
        fake.fail_next("POST", EVICT, 500, "InternalError", "etcdserver: request timed out")
    report, sleeper = apply_drains(fake, tmp_path, clock, audit, "n00")
    (out,) = report.outcomes
    assert out.outcome == "failed"
    assert "HTTP 500: etcdserver: request timed out after 4 attempts" in out.detail
    assert sleeper.waits == [1.0, 2.0, 4.0] and evictions(fake) == 4  # 1 + 3 retries
    # Marked failed in the audit log (and never done); the drain's cordon was undone.
    outcomes = [(e["outcome"], e["key"]) for e in audit.entries()]
    assert outcomes == [("started", out.key), ("failed", out.key)]
    assert out.report["rollback"] == "uncordoned"
    assert not fake.node("n00")["spec"].get("unschedulable")
    # The budget is free: the next plan drains the other node of the same rack.
    later, _ = apply_drains(fake, tmp_path, clock, audit, "n01")
    assert later.counts() == {"done": 1}
    assert fake.node("n01")["spec"]["unschedulable"] is True


def test_eviction_timeouts_are_retried_and_a_lost_answer_is_not_evicted_twice(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    # The API evicts the pod, but its answer comes after the client gave up.
    fake.stall_next("POST", EVICT, REQUEST_TIMEOUT * 3)
    report, sleeper = apply_drains(fake, tmp_path, clock, audit, "n00")
    (out,) = report.outcomes
    assert out.outcome == "done", out.detail
    (pod,) = out.report["pods"]
    assert pod["outcome"] in ("evicted", "gone") and pod["attempts"] == 2
    assert sleeper.waits == [1.0]
    assert [e["outcome"] for e in audit.entries()] == ["started", "done"]


def test_timeouts_on_every_attempt_fail_the_drain_cleanly(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    for _ in range(4):
        fake.stall_next("POST", EVICT, REQUEST_TIMEOUT * 2)
        fake.fail_next("POST", EVICT, 503, "ServiceUnavailable", "too slow")  # served late
    report, sleeper = apply_drains(fake, tmp_path, clock, audit, "n00")
    (out,) = report.outcomes
    assert out.outcome == "failed"
    assert "HTTP None" in out.detail and "timed out" in out.detail.lower()
    assert sleeper.waits == [1.0, 2.0, 4.0]
    assert not fake.node("n00")["spec"].get("unschedulable")  # cordon undone
    assert audit.done_keys() == set()


@pytest.mark.parametrize(
    ("method", "path", "code", "reason"),
    [
        ("PATCH", r"/api/v1/nodes/n00", 429, "TooManyRequests"),  # API priority & fairness
        ("PATCH", r"/api/v1/nodes/n00", 503, "ServiceUnavailable"),
        ("GET", r"/api/v1/pods", 500, "InternalError"),
    ],
)
def test_transient_errors_on_the_other_drain_calls_are_retried(
    fake: FakeKubeAPI,
    tmp_path: Path,
    clock: FixedClock,
    audit: AuditLog,
    method: str,
    path: str,
    code: int,
    reason: str,
) -> None:
    for _ in range(2):
        fake.fail_next(method, path, code, reason, "try again")
    report, sleeper = apply_drains(fake, tmp_path, clock, audit, "n00")
    assert report.counts() == {"done": 1}
    assert sleeper.waits == [1.0, 2.0]
    assert fake.node("n00")["spec"]["unschedulable"] is True
    assert evictions(fake) == 1


def test_a_failed_revalidation_read_drops_the_action_and_a_rerun_applies_it(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    """The node read just before acting fails: never act blind, nothing is touched, the
    action is not done, so applying the plan again runs it."""
    fake.fail_next("GET", r"/api/v1/nodes/n00", 503, "ServiceUnavailable", "apiserver busy")
    report, _ = apply_drains(fake, tmp_path, clock, audit, "n00")
    (out,) = report.outcomes
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "apiserver busy" in out.detail
    assert not fake.seen("PATCH", "/api/v1/nodes/") and evictions(fake) == 0
    again, _ = apply_drains(fake, tmp_path, clock, audit, "n00")
    assert again.counts() == {"done": 1} and evictions(fake) == 1
