"""The reclaim actuator against the fake API server: Koordinator's batch resources and
predops' annotation on the node, every other resource untouched, idempotent, shrunk,
dry-run writes nothing, and the calls are granted to the applying component."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from predops.core.actions import SetReclaimable
from predops.core.clock import FixedClock
from predops.pipelines.actuators.reclaim import (
    BATCH_CPU,
    BATCH_MEMORY,
    RECLAIM_ANNOTATION,
    ReclaimActuator,
    published,
)
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.pipelines.actuators.conftest import T0, apply_by, assert_role_grants, kube_for

WINDOW = {"not_before": T0, "expires": T0 + timedelta(minutes=15)}


def reclaim(node: str, cpu_milli: int, memory_bytes: int | None = None) -> SetReclaimable:
    return SetReclaimable(
        target=node,
        cpu_milli=cpu_milli,
        memory_bytes=memory_bytes,
        reason="test reclaim",
        evidence={"bound": "forecast"},
        **WINDOW,
    )


def apply(fake, tmp_path, clock, audit, action, plan_id, execute=True, **kw):  # type: ignore[no-untyped-def]
    api, _, state, sleeper = kube_for(fake, tmp_path, clock)
    act = ReclaimActuator(api, clock, sleeper, **kw)
    return apply_by(act, state, audit, clock, action, plan_id, execute)


def test_publishes_batch_resources_and_the_annotation(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    before = json.loads(json.dumps(fake.node("n00")["status"]))
    out = apply(fake, tmp_path, clock, audit, reclaim("n00", 30_800, 64 << 30), "plan-r1")
    assert out.outcome == "done" and out.report["reclaimable"] == "published"
    status = fake.node("n00")["status"]
    for part in ("capacity", "allocatable"):
        assert status[part][BATCH_CPU] == "30800"
        assert status[part][BATCH_MEMORY] == str(64 << 30)
        others = {k: v for k, v in status[part].items() if not k.startswith("kubernetes.io/")}
        assert others == before[part]  # cpu, memory, GPUs, pods: as they were
    assert status["conditions"] == before["conditions"]
    note = json.loads(fake.node("n00")["metadata"]["annotations"][RECLAIM_ANNOTATION])
    assert note["cpu_milli"] == 30_800 and note["plan"] == "plan-r1"
    assert published([fake.node("n00")]) == {"n00": (30_800, 64 << 30)}
    assert_role_grants(
        fake, {("", "nodes/status", "patch"), ("", "nodes", "patch"), ("", "nodes", "get")}
    )
    # the same value again, decided by the next round's plan, writes nothing
    n_patches = len(fake.seen("PATCH", "/api/v1/nodes/n00"))
    clock.advance(timedelta(minutes=5))
    again = SetReclaimable(
        target="n00",
        cpu_milli=30_800,
        memory_bytes=64 << 30,
        reason="next round",
        not_before=clock.now(),
        expires=clock.now() + timedelta(minutes=15),
    )
    out = apply(fake, tmp_path, clock, audit, again, "plan-r2")
    assert out.report["reclaimable"] == "already published"
    assert len(fake.seen("PATCH", "/api/v1/nodes/n00")) == n_patches


def test_shrinks_and_memory_unknown_publishes_zero(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    apply(fake, tmp_path, clock, audit, reclaim("n01", 40_000, 1 << 30), "plan-a")
    out = apply(fake, tmp_path, clock, audit, reclaim("n01", 2_000), "plan-b")
    assert out.outcome == "done"
    alloc = fake.node("n01")["status"]["allocatable"]
    assert (alloc[BATCH_CPU], alloc[BATCH_MEMORY]) == ("2000", "0")
    assert published([fake.node("n01")]) == {"n01": (2_000, None)}


def test_dry_run_and_expired_write_nothing(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    out = apply(fake, tmp_path, clock, audit, reclaim("n10", 10_000), "plan-dry", execute=False)
    assert out.outcome == "would_run"
    clock.advance(timedelta(minutes=20))
    out = apply(fake, tmp_path, clock, audit, reclaim("n10", 10_000), "plan-late")
    assert out.outcome == "dropped" and out.reason == "revalidation_failed"
    assert not fake.seen("PATCH", "/api/v1/nodes/n10")
    assert BATCH_CPU not in fake.node("n10")["status"]["allocatable"]


def test_annotation_only_leaves_node_status_alone(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    out = apply(
        fake, tmp_path, clock, audit, reclaim("n11", 5_000), "plan-note", annotation_only=True
    )
    assert out.report["reclaimable"] == "annotated"
    assert not fake.seen("PATCH", "/api/v1/nodes/n11/status")
    assert published([fake.node("n11")]) == {"n11": (5_000, None)}
