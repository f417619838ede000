"""The lending actuator against the fake API server: a node lent is cordoned, drained
through the Eviction API, relabelled and retainted for the borrower and uncordoned; its
return round-trips it to its pool; dry-run and re-validation write nothing; a PDB that
never yields leaves the node where it was; every call is granted to the applying
component."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from predops.core.actions import LendNodes, ReturnNodes
from predops.core.clock import FixedClock
from predops.pipelines.actuators.kube import UNCORDONED_AT_ANNOTATION
from predops.pipelines.actuators.lending import (
    LEND_KEY,
    LENT_FROM,
    LENT_UNTIL,
    LendActuator,
    loans_of,
)
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_node, make_pdb, make_pod
from tests.pipelines.actuators.conftest import T0, apply_by, assert_role_grants, kube_for

POOL = "karpenter.sh/nodepool"
TAINT_KEY = "example.com/pool"
PERSONS_TAINT = {"key": "team.example/hold", "value": "ask-ana", "effect": "PreferNoSchedule"}


def pool_taint(pool: str) -> dict[str, str]:
    return {"key": TAINT_KEY, "value": pool, "effect": "NoSchedule"}


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    nodes = [
        make_node(f"web-{i}", pool="web", taints=[pool_taint("web"), dict(PERSONS_TAINT)])
        for i in range(3)
    ] + [make_node(f"batch-{i}", pool="batch", taints=[pool_taint("batch")]) for i in range(2)]
    with FakeKubeAPI(nodes=nodes) as api:
        api.pods = [
            make_pod("front-0", node="web-2", labels={"app": "front"}),
            make_pod("front-1", node="web-1", labels={"app": "front"}),
            make_pod("agent", node="web-2", owner=("DaemonSet", "agent")),
        ]
        yield api


def lend(*nodes: str, **kw: object) -> LendNodes:
    kw.setdefault("not_before", T0)
    kw.setdefault("expires", T0 + timedelta(hours=8))
    return LendNodes(
        target="web", to_pool="batch", nodes=len(nodes), node_ids=nodes, reason="night", **kw
    )  # type: ignore[arg-type]


def back(*nodes: str, at: timedelta = timedelta(hours=8)) -> ReturnNodes:
    return ReturnNodes(
        target="web",
        from_pool="batch",
        node_ids=nodes,
        reason="loan expired",
        not_before=T0 + at,
        expires=T0 + at + timedelta(hours=1),
    )


def apply(fake, tmp_path, clock, audit, action, execute=True):  # type: ignore[no-untyped-def]
    api, _, state, sleeper = kube_for(fake, tmp_path, clock, timeout=60)
    act = LendActuator(api, clock, sleeper, pool_taint_key=TAINT_KEY)
    plan_id = f"plan-{action.kind}-{clock.now():%H%M}"
    return apply_by(act, state, audit, clock, action, plan_id, execute)


def test_lending_round_trips_a_node_to_its_pool(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    before = copy.deepcopy(fake.node("web-2"))
    out = apply(fake, tmp_path, clock, audit, lend("web-2"))
    assert out.outcome == "done", out.detail
    (row,) = out.report["nodes"]
    assert row == {"node": "web-2", "outcome": "moved", "evicted": 1, "skipped": 1}
    node = fake.node("web-2")
    assert node["metadata"]["labels"][POOL] == "batch"
    assert node["spec"]["taints"] == [pool_taint("batch"), PERSONS_TAINT]
    assert not node["spec"].get("unschedulable")
    notes = node["metadata"]["annotations"]
    assert notes[LENT_FROM] == "web" and notes[LENT_UNTIL] == (T0 + timedelta(hours=8)).isoformat()
    assert notes[LEND_KEY] == lend("web-2").idempotency_key
    assert "deletionTimestamp" in fake.pod("default", "front-0")["metadata"]  # evicted
    assert "deletionTimestamp" not in fake.pod("default", "agent")["metadata"]  # DaemonSet
    (evict,) = fake.seen("POST", "/api/v1/namespaces/default/pods/front-0/eviction")
    assert evict.body["kind"] == "Eviction"
    (loan,) = loans_of(fake.nodes)
    assert (loan.node_id, loan.lender, loan.borrower) == ("web-2", "web", "batch")
    # the borrower's pod lands there meanwhile; at expiry the node goes back
    fake.pods.append(make_pod("job-0", node="web-2", labels={"app": "job"}))
    clock.advance(timedelta(hours=8))
    out = apply(fake, tmp_path, clock, audit, back("web-2"))
    assert out.outcome == "done", out.detail
    assert out.report["nodes"][0]["evicted"] == 1
    after = fake.node("web-2")
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"]["taints"] == before["spec"]["taints"]
    assert not after["spec"].get("unschedulable")
    notes = after["metadata"]["annotations"]
    assert not {LENT_FROM, LEND_KEY, LENT_UNTIL} & set(notes)
    assert set(notes) <= {UNCORDONED_AT_ANNOTATION}
    assert loans_of(fake.nodes) == []
    assert_role_grants(
        fake,
        {
            ("", "nodes", "get"),
            ("", "nodes", "patch"),
            ("", "pods", "list"),
            ("", "pods/eviction", "create"),
        },
    )


def test_a_second_apply_of_the_same_lend_moves_nothing(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    assert apply(fake, tmp_path, clock, audit, lend("web-0")).outcome == "done"
    patches = len(fake.seen("PATCH", "/api"))
    act = LendActuator(kube_for(fake, tmp_path, clock)[0], clock, lambda s: None)
    assert act.run(lend("web-0"), "plan-again")["nodes"] == [
        {"node": "web-0", "outcome": "already moved"}
    ]
    assert len(fake.seen("PATCH", "/api")) == patches


def test_dry_run_and_revalidation_touch_nothing(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    assert apply(fake, tmp_path, clock, audit, lend("web-0"), execute=False).outcome == "would_run"
    fake.node("web-1")["metadata"]["labels"][POOL] = "gpu"  # someone moved it
    out = apply(fake, tmp_path, clock, audit, lend("web-1"))
    assert (out.outcome, out.reason) == ("dropped", "pool_changed")
    fake.node("web-1")["metadata"]["labels"][POOL] = "batch"  # there already, no loan of ours
    out = apply(fake, tmp_path, clock, audit, lend("web-1"))
    assert (out.outcome, out.reason) == ("dropped", "pool_changed")
    fake.node("web-0")["metadata"]["labels"][POOL] = "batch"  # moved by hand, no loan
    out = apply(fake, tmp_path, clock, audit, back("web-0", at=timedelta(0)))
    assert (out.outcome, out.reason) == ("dropped", "not_owned")
    assert not fake.seen("PATCH", "/api") and not fake.seen("POST", "/api")


def test_a_pdb_that_never_yields_leaves_the_node_in_its_pool(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    fake.pdbs = [make_pdb("front", match_labels={"app": "front"}, disruptions_allowed=0)]
    out = apply(fake, tmp_path, clock, audit, lend("web-0", "web-1"))
    assert out.outcome == "failed" and "web-1" in out.detail
    assert [r["node"] for r in out.report["nodes"]] == ["web-0"]  # web-0 (no pods) moved
    node = fake.node("web-1")
    assert node["metadata"]["labels"][POOL] == "web"
    assert not node["spec"].get("unschedulable")  # the drain's cordon undone
    assert fake.node("web-0")["metadata"]["labels"][POOL] == "batch"
