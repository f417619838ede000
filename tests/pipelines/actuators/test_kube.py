"""The Kubernetes actuator against the local fake API server: cordon patch, eviction
with PDB 429 backoff, timeouts, skipped DaemonSet / mirror pods, failure accounting."""

from __future__ import annotations

from pathlib import Path

import pytest

from predops.core.actions import Cordon, Uncordon
from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import ActionFailed, apply_plan
from predops.pipelines.actuators.kube import KEY_ANNOTATION, OWNER_ANNOTATION
from predops.pipelines.workspace.audit import AuditLog
from predops.policy.config import Budgets, DisruptionBudget
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_pdb, make_pod
from tests.pipelines.actuators.conftest import T0, drain, kube_for, plan_of

LOOSE = Budgets((DisruptionBudget("pool", max_nodes=100),))


def _evictions(fake: FakeKubeAPI) -> list[str]:
    return [r.path.split("/")[-2] for r in fake.seen("POST", "/api/v1/namespaces/")]


def test_cordon_patches_spec_unschedulable_with_owner_and_key(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    action = Cordon(target="n00", reason="test", not_before=T0)
    report = apply_plan(
        plan_of([action]),
        state=state,
        actuators={"cordon": actuator},
        audit=audit,
        clock=clock,
        execute=True,
    )
    assert report.counts() == {"done": 1}
    node = fake.node("n00")
    assert node["spec"]["unschedulable"] is True
    notes = node["metadata"]["annotations"]
    assert notes[OWNER_ANNOTATION] == "predops"
    assert notes[KEY_ANNOTATION] == action.idempotency_key
    (patch,) = fake.seen("PATCH", "/api/v1/nodes/n00")
    assert "merge-patch+json" in patch.headers["content-type"]
    assert patch.body["spec"] == {"unschedulable": True}
    assert all(not n.get("spec", {}).get("unschedulable") for n in fake.nodes[1:])


def test_drain_evicts_and_retries_429_until_the_pdb_allows_it(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.pods = [
        make_pod("web-0", node="n00", labels={"app": "web"}),
        make_pod("batch-0", node="n00"),
        make_pod("elsewhere", node="n10"),
    ]
    fake.pdbs = [make_pdb("web", match_labels={"app": "web"}, disruptions_allowed=0)]
    _, actuator, state, sleeper = kube_for(fake, tmp_path, clock, backoff_initial=2)

    def replacement_becomes_healthy(n: int) -> None:
        if n == 3:  # after three waits the PDB has headroom again
            fake.pdbs[0]["status"]["disruptionsAllowed"] = 1

    sleeper.hooks.append(replacement_becomes_healthy)
    report = apply_plan(
        plan_of([drain("n00")]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    (out,) = report.outcomes
    assert out.outcome == "done", out
    pods = {p["pod"]: p for p in out.report["pods"]}
    assert pods["default/batch-0"]["outcome"] == "evicted"
    web = pods["default/web-0"]
    assert web["outcome"] == "evicted" and web["attempts"] == 4
    assert sleeper.waits == [2, 4, 8]  # exponential backoff
    assert web["waited_s"] == 14
    assert sorted(_evictions(fake)) == ["batch-0"] + ["web-0"] * 4
    assert fake.pod("default", "web-0")["metadata"].get("deletionTimestamp")
    assert not fake.pod("default", "elsewhere")["metadata"].get("deletionTimestamp")
    assert fake.node("n00")["spec"]["unschedulable"] is True


def test_429_until_timeout_fails_rolls_back_and_releases_the_budget(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    # n00 and n01 share rack r0, whose budget allows one disrupted node at a time.
    fake.pods = [
        make_pod("web-0", node="n00", labels={"app": "web"}),
        make_pod("job-1", node="n01"),
    ]
    fake.pdbs = [make_pdb("web", match_labels={"app": "web"}, disruptions_allowed=0)]
    _, actuator, state, sleeper = kube_for(
        fake, tmp_path, clock, timeout=60, backoff_initial=1, backoff_max=16
    )
    rack_one = Budgets((DisruptionBudget("rack", max_nodes=1),))
    report = apply_plan(
        plan_of([drain("n00"), drain("n01")]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=rack_one,
    )
    first, second = report.outcomes
    assert first.outcome == "failed"
    assert "disruption budget after 60 s" in first.detail
    assert sum(sleeper.waits) == 60 and max(sleeper.waits) == 16
    assert first.report["rollback"] == "uncordoned"
    assert not fake.node("n00")["spec"].get("unschedulable")
    # The failed drain did not use up rack r0's budget: the second one ran.
    assert second.outcome == "done"
    assert fake.node("n01")["spec"]["unschedulable"] is True
    entries = list(audit.entries())
    failed = [e for e in entries if e["outcome"] == "failed"]
    assert len(failed) == 1 and failed[0]["key"] == first.key
    assert "429" in failed[0]["detail"] and failed[0]["who"] == "tester"
    assert failed[0]["report"]["pods"][0]["outcome"] == "failed"


def test_daemonset_and_mirror_pods_are_skipped(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.pods = [
        make_pod("node-exporter-x", "monitoring", node="n00", owner=("DaemonSet", "exp")),
        make_pod(
            "kube-proxy-n00",
            "kube-system",
            node="n00",
            annotations={"kubernetes.io/config.mirror": "abc"},
        ),
        make_pod("done-job", node="n00", phase="Succeeded"),
        make_pod("trainer-0", node="n00", owner=("Job", "trainer")),
    ]
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    report = apply_plan(
        plan_of([drain("n00")]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    (out,) = report.outcomes
    assert out.outcome == "done"
    by = {p["pod"]: p for p in out.report["pods"]}
    assert by["monitoring/node-exporter-x"]["outcome"] == "skipped"
    assert "DaemonSet" in by["monitoring/node-exporter-x"]["why"]
    assert by["kube-system/kube-proxy-n00"]["outcome"] == "skipped"
    assert "mirror" in by["kube-system/kube-proxy-n00"]["why"]
    assert by["default/done-job"]["outcome"] == "skipped"
    assert by["default/trainer-0"]["outcome"] == "evicted"
    assert _evictions(fake) == ["trainer-0"]
    assert (out.report["evicted"], out.report["skipped"], out.report["failed"]) == (1, 3, 0)


def test_two_pdbs_on_one_pod_fail_the_drain_at_once(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.pods = [make_pod("web-0", node="n00", labels={"app": "web"})]
    fake.pdbs = [
        make_pdb("a", match_labels={"app": "web"}),
        make_pdb("b", match_labels={"app": "web"}),
    ]
    _, actuator, state, sleeper = kube_for(fake, tmp_path, clock)
    report = apply_plan(
        plan_of([drain("n00")]),
        state=state,
        actuators={"drain": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    (out,) = report.outcomes
    assert out.outcome == "failed" and "HTTP 500" in out.detail
    assert sleeper.waits == []  # a 500 is not retried
    assert not fake.node("n00")["spec"].get("unschedulable")


def test_api_errors_on_the_node_patch_fail_the_action(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    for _ in range(4):  # one more than the retries of a transient error
        fake.fail_next("PATCH", r"/api/v1/nodes/n00", 503, "ServiceUnavailable", "etcd is slow")
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    report = apply_plan(
        plan_of([Cordon(target="n00", reason="t", not_before=T0)]),
        state=state,
        actuators={"cordon": actuator},
        audit=audit,
        clock=clock,
        execute=True,
        budgets=LOOSE,
    )
    (out,) = report.outcomes
    assert out.outcome == "failed" and "503" in out.detail and "etcd is slow" in out.detail
    assert audit.done_keys() == set()


def test_uncordon_clears_our_cordon_and_stamps_the_time(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    _, actuator, state, _ = kube_for(fake, tmp_path, clock)
    apply_plan(
        plan_of([Cordon(target="n00", reason="t", not_before=T0)], "p1"),
        state=state,
        actuators={"cordon": actuator},
        audit=audit,
        clock=clock,
        execute=True,
    )
    from datetime import timedelta

    clock.advance(timedelta(hours=7))  # past the hysteresis hold
    later = clock.now()
    report = apply_plan(
        plan_of([Uncordon(target="n00", reason="repaired", not_before=later)], "p2"),
        state=state,
        actuators={"uncordon": actuator},
        audit=audit,
        clock=clock,
        execute=True,
    )
    assert report.counts() == {"done": 1}
    node = fake.node("n00")
    assert not node["spec"].get("unschedulable")
    notes = node["metadata"]["annotations"]
    assert OWNER_ANNOTATION not in notes and notes["predops.io/uncordoned-at"] == later.isoformat()


@pytest.mark.parametrize(
    ("owner", "key", "found"),
    [
        (None, None, "already cordoned"),  # a human's cordon
        ("predops", "cordon:n00:another", "already cordoned"),  # another action's
        ("someone-else", "this drain's", "already cordoned"),  # another owner's
        ("predops", "this drain's", "resumed"),  # what a run killed after its cordon leaves
    ],
)
def test_a_failed_drain_undoes_its_own_cordon_only(
    fake: FakeKubeAPI,
    tmp_path: Path,
    clock: FixedClock,
    owner: str | None,
    key: str | None,
    found: str,
) -> None:
    action = drain("n00")
    notes = {OWNER_ANNOTATION: owner, KEY_ANNOTATION: key}
    if key == "this drain's":
        notes[KEY_ANNOTATION] = action.idempotency_key
    fake.node("n00")["spec"]["unschedulable"] = True
    fake.node("n00")["metadata"].setdefault("annotations", {}).update(
        {k: v for k, v in notes.items() if v is not None}
    )
    fake.pods = [make_pod("web-0", node="n00", labels={"app": "web"})]
    fake.pdbs = [  # two budgets select the pod: its eviction fails at once
        make_pdb("a", match_labels={"app": "web"}),
        make_pdb("b", match_labels={"app": "web"}),
    ]
    _, actuator, _, _ = kube_for(fake, tmp_path, clock)
    with pytest.raises(ActionFailed) as failed:
        actuator.run(action, "plan-test")
    report = failed.value.report
    assert report["cordon"] == found
    if found == "resumed":
        assert report["rollback"] == "uncordoned"
        assert not fake.node("n00")["spec"].get("unschedulable")
    else:
        assert "rollback" not in report
        assert fake.node("n00")["spec"]["unschedulable"] is True
        assert fake.seen("PATCH", "/api/v1/nodes/n00") == []
