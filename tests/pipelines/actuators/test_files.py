"""Plan files round-trip, the audit log only grows, purchase requests are idempotent."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from predops.allocator.topology import Topology
from predops.core.actions import (
    Buy,
    Cordon,
    LendNodes,
    Plan,
    ResizePool,
    Skip,
    SkipReason,
    Uncordon,
)
from predops.core.clock import FixedClock
from predops.core.contracts import Provenance
from predops.pipelines.actuators.apply import FleetStateSource, apply_plan
from predops.pipelines.actuators.purchase import PurchaseRequestWriter
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.errors import PlanError, PlanNotFound
from predops.pipelines.workspace.plans import plan_path, read_plan, write_plan
from predops.policy.fleet import FleetState
from tests.pipelines.actuators.conftest import T0, drain


def _plan() -> Plan:
    w = {"not_before": T0, "expires": T0 + timedelta(hours=2)}
    return Plan(
        plan_id="plan-20260502T120000Z-abc",
        created_at=T0,
        data_cutoff=T0 - timedelta(hours=1),
        actions=(
            drain("n1", evidence={"risk": {"p_fail": 0.4, "as_of": T0.isoformat()}}),
            Cordon(target="n2", reason="r", **w),
            Uncordon(target="n3", reason="repaired", **w),
            ResizePool(target="train", reason="p90", from_nodes=5, to_nodes=7, **w),
            LendNodes(target="online", reason="night", to_pool="train", nodes=2, **w),
            Buy(
                target="h100",
                reason="newsvendor",
                region="eu",
                quantity=8,
                by_date=date(2026, 7, 1),
                evidence={"critical_ratio": 0.8},
            ),
        ),
        skips=(Skip("drain", "n9", SkipReason.DO_NOT_DISRUPT, "label"),),
        budgets_used={"rack:a/b/c/r1": 1},
        provenance=(Provenance("predops.node_failure", "3", "fs", T0 - timedelta(hours=1)),),
        alerts=("storm breaker",),
    )


def test_plan_file_round_trips_every_action_kind(tmp_path: Path) -> None:
    plan = _plan()
    path = write_plan(tmp_path / "plans", plan, {"inputs": {"failure_risk": "missing"}})
    assert path == tmp_path / "plans" / f"{plan.plan_id}.json"
    back = read_plan(path)
    assert back.to_dict() == plan.to_dict()
    assert [a.idempotency_key for a in back.actions] == [a.idempotency_key for a in plan.actions]
    assert json.loads(path.read_text())["inputs"] == {"failure_risk": "missing"}
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp debris


def test_an_edited_plan_is_refused(tmp_path: Path) -> None:
    path = write_plan(tmp_path, _plan())
    body = json.loads(path.read_text())
    body["actions"][0]["target"] = "some-other-node"
    path.write_text(json.dumps(body))
    with pytest.raises(PlanError, match=r"actions\[0\]: idempotency key"):
        read_plan(path)
    with pytest.raises(ValueError, match="not a plan id"):
        plan_path(tmp_path, "../etc/passwd")
    with pytest.raises(PlanNotFound, match="predops plan"):
        read_plan(tmp_path / "nope.json")


def test_audit_log_only_appends_and_survives_a_torn_write(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", who="ops@example")
    what = {"kind": "cordon", "target": "n1", "params": {}}
    log.append(at=T0, outcome="started", what=what, why="risk", key="k1")
    before = log.path.read_bytes()
    with open(log.path, "ab") as f:  # a process killed mid-write
        f.write(b'{"at": "2026-05-02T12:00:00+00:00", "who": "ops@exa')
    log.append(at=T0, outcome="done", what=what, why="risk", key="k1")
    after = log.path.read_bytes()
    assert after.startswith(before)  # never rewritten
    read = log.read()
    assert [e["outcome"] for e in read.entries] == ["started", "done"]
    assert read.bad_lines == (2,)
    assert log.done_keys() == {"k1"}
    e = read.entries[1]
    assert (e["who"], e["what"], e["why"], e["at"], e["key"]) == (
        "ops@example",
        what,
        "risk",
        T0.isoformat(),
        "k1",
    )
    with pytest.raises(ValueError, match="outcome"):
        log.append(at=T0, outcome="maybe", what=what, why="x")


def test_purchase_requests_are_written_once_as_json_and_csv(tmp_path: Path) -> None:
    plan = _plan()
    buy = plan.actions[-1]
    fleet = FleetState(Topology(()), T0)
    writer = PurchaseRequestWriter(tmp_path / "purchases", FixedClock(T0))
    audit = AuditLog(tmp_path / "audit.jsonl", who="t")
    buy_plan = Plan(plan.plan_id, T0, T0, actions=(buy,))
    for _ in range(2):
        apply_plan(
            buy_plan,
            state=FleetStateSource(fleet),
            actuators={"buy": writer},
            audit=audit,
            clock=FixedClock(T0),
            execute=True,
        )
    rows = json.loads((tmp_path / "purchases" / f"{plan.plan_id}.json").read_text())
    assert len(rows) == 1 and rows[0]["quantity"] == 8 and rows[0]["by_date"] == "2026-07-01"
    csv = (tmp_path / "purchases" / f"{plan.plan_id}.csv").read_text().splitlines()
    assert csv[0].startswith("idempotency_key,sku,region,quantity,by_date")
    assert len(csv) == 2 and ",h100,eu,8,2026-07-01," in csv[1]
    assert [e["outcome"] for e in audit.entries()] == ["started", "done", "already_done"]
