"""Applying a plan: at most once per idempotency key across a killed run, dry-run
touches nothing, expired / early actions, failed actions and the audit trail."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from predops.core.actions import Action, Cordon
from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import Actuator, apply_plan
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.config import Budgets, DisruptionBudget
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_pod
from tests.pipelines.actuators.conftest import T0, cluster_nodes, drain, kube_for, plan_of

LOOSE = Budgets((DisruptionBudget("pool", max_nodes=100),))


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing on the way catches it."""


class KillAfter:
    """Runs ``inner`` ``n`` times, then the process 'dies' on the next action —
    after the effect reached the API (``after_effect``) or before it."""

    def __init__(self, inner: Actuator, n: int, *, after_effect: bool) -> None:
        self.inner, self.n, self.after_effect = inner, n, after_effect
        self.name = inner.name
        self.calls = 0

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.n:
            return self.inner.run(action, plan_id)
        if self.after_effect:
            self.inner.run(action, plan_id)
        raise Killed


@pytest.mark.parametrize("after_effect", [True, False])
def test_killed_apply_rerun_applies_each_action_at_most_once(
    tmp_path: Path, clock: FixedClock, audit: AuditLog, after_effect: bool
) -> None:
    nodes = cluster_nodes(racks=4, per_rack=1)
    pods = [make_pod(f"job-{r}", node=f"n{r}0") for r in range(4)]
    plan = plan_of([drain(f"n{r}0") for r in range(4)])
    with FakeKubeAPI(nodes=nodes, pods=pods) as fake:
        _, actuator, state, _ = kube_for(fake, tmp_path, clock)
        killer = KillAfter(actuator, 2, after_effect=after_effect)
        with pytest.raises(Killed):
            apply_plan(
                plan,
                state=state,
                actuators={"drain": killer},
                audit=audit,
                clock=clock,
                execute=True,
                budgets=LOOSE,
            )
        assert len(audit.done_keys()) == 2
        # The re-run (a new process: fresh state reader) finishes the plan.
        _, actuator2, state2, _ = kube_for(fake, tmp_path, clock)
        second = apply_plan(
            plan,
            state=state2,
            actuators={"drain": actuator2},
            audit=audit,
            clock=clock,
            execute=True,
            budgets=LOOSE,
        )
        assert second.counts() == {"already_done": 2, "done": 2}
        third = apply_plan(
            plan,
            state=state2,
            actuators={"drain": actuator2},
            audit=audit,
            clock=clock,
            execute=True,
            budgets=LOOSE,
        )
        assert third.counts() == {"already_done": 4}
        done = Counter(e["key"] for e in audit.entries() if e["outcome"] == "done")
        assert done == Counter({a.idempotency_key: 1 for a in plan.actions})
        # The API saw one cordon per node and one eviction per pod.
        patches = Counter(r.path for r in fake.seen("PATCH", "/api/v1/nodes/"))
        assert patches == Counter({f"/api/v1/nodes/n{r}0": 1 for r in range(4)})
        evictions = Counter(r.path for r in fake.seen("POST", "/api/v1/namespaces/"))
        assert sorted(evictions.values()) == [1, 1, 1, 1]
        assert all(fake.node(f"n{r}0")["spec"]["unschedulable"] for r in range(4))


def test_dry_run_touches_nothing_in_the_api(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.pods = [make_pod("job", node="n00")]
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    plan = plan_of([drain("n00"), drain("n10"), Cordon(target="n20", reason="t", not_before=T0)])
    report = apply_plan(
        plan,
        state=state,
        actuators={"drain": actuator, "cordon": actuator},
        audit=audit,
        clock=clock,
        budgets=LOOSE,
    )
    assert report.mode == "dry_run" and report.counts() == {"would_run": 3}
    assert {r.method for r in fake.requests} == {"GET"}
    assert not any(n["spec"].get("unschedulable") for n in fake.nodes)
    entries = list(audit.entries())
    assert [e["outcome"] for e in entries] == ["would_run"] * 3
    assert {e["mode"] for e in entries} == {"dry_run"} and audit.done_keys() == set()


def test_expired_actions_are_dropped_and_early_ones_deferred(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    late = drain("n00", not_before=T0 - timedelta(hours=3), expires=T0 - timedelta(hours=1))
    early = drain("n10", not_before=T0 + timedelta(hours=1), expires=T0 + timedelta(hours=3))
    report = apply_plan(
        plan_of([late, early]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    a, b = report.outcomes
    assert (a.outcome, a.reason) == ("dropped", "revalidation_failed") and "expired" in a.detail
    assert (b.outcome, b.reason) == ("deferred", "wait_for_checkpoint")
    assert not fake.seen("PATCH") and not fake.seen("POST")
    clock.advance(timedelta(hours=1))  # the checkpoint time came: a later run does it
    again = apply_plan(
        plan_of([late, early]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    assert [o.outcome for o in again.outcomes] == ["dropped", "done"]


def test_a_node_cordoned_by_a_human_or_under_another_key_is_dropped(
    tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    nodes = cluster_nodes(racks=2, per_rack=1)
    nodes[0]["spec"]["unschedulable"] = True  # a human cordoned n00
    with FakeKubeAPI(nodes=nodes) as fake:
        _, actuator, state, _ = kube_for(fake, tmp_path, clock)
        mine = drain("n10")
        actuator.run(Cordon(target="n10", reason="x", not_before=T0), "p")  # other key
        report = apply_plan(
            plan_of([drain("n00"), mine]),
            state=state,
            actuators={"drain": actuator},
            audit=audit,
            clock=clock,
            execute=True,
            budgets=LOOSE,
        )
        assert [(o.outcome, o.reason) for o in report.outcomes] == [
            ("dropped", "already_cordoned"),
            ("dropped", "already_cordoned"),
        ]


def test_unsupported_kinds_are_recorded_not_run(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    from predops.core.actions import ResizePool

    resize = ResizePool(target="train", reason="p90", from_nodes=6, to_nodes=8, not_before=T0)
    report = apply_plan(
        plan_of([resize]),
        state=kube_for(fake, tmp_path, clock)[2],
        actuators={},
        audit=audit,
        clock=clock,
        execute=True,
    )
    assert report.counts() == {"unsupported": 1}
    assert audit.done_keys() == set()
