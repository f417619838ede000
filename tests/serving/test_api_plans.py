"""/v1/plans: reads, bearer-token auth on approve / apply, approval kept across restarts,
apply through the dry-run machinery with audit entries, plan ids that are not ids."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.plans import plan_path, read_plan
from tests.serving.api import bearer, make_app


def plan_id(ws: Path) -> str:
    (path,) = sorted((ws / "plans").glob("*.json"))
    return path.stem


def test_latest_and_by_id_are_the_plan_file(served_workspace: Path, shared_data: Path) -> None:
    pid = plan_id(served_workspace)
    plan = read_plan(plan_path(served_workspace / "plans", pid))
    with TestClient(make_app(served_workspace, shared_data)) as c:
        latest = c.get("/v1/plans/latest").json()
        assert latest["plan_id"] == pid
        assert latest == c.get(f"/v1/plans/{pid}").json()
        assert [a["idempotency_key"] for a in latest["actions"]] == [
            a.idempotency_key for a in plan.actions
        ]
        assert len(latest["skips"]) == len(plan.skips)
        assert latest["inputs"]["failure_risk"]["status"] in ("ok", "missing")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/plans/..%2F..%2Fetc%2Fpasswd", 404),
        ("/v1/plans/%2E%2E", 422),
        ("/v1/plans/.hidden", 422),
        ("/v1/plans/a%00b", 422),
        ("/v1/plans/no-such-plan", 404),
        ("/v1/plans/" + "a" * 300, 422),
    ],
)
def test_plan_ids_are_checked(
    served_workspace: Path, shared_data: Path, path: str, status: int
) -> None:
    with TestClient(make_app(served_workspace, shared_data)) as c:
        r = c.get(path)
        assert r.status_code == status, r.text
        assert set(r.json()) == {"error", "field"}
        r = c.post(path + "/approve", headers=bearer("approver"))
        assert r.status_code in (404, 422), r.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-secret-0123456789"}, 401),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401),
        (bearer("expired"), 401),
        (bearer("viewer"), 403),
    ],
)
def test_approve_refuses_bad_tokens(
    served_workspace: Path, shared_data: Path, headers: dict[str, str], status: int
) -> None:
    pid = plan_id(served_workspace)
    with TestClient(make_app(served_workspace, shared_data)) as c:
        r = c.post(f"/v1/plans/{pid}/approve", headers=headers)
        assert r.status_code == status
        assert r.json()["field"] == "header.authorization"
        assert "secret" not in r.text
        if status == 401:
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.get(f"/v1/plans/{pid}").json()["approval"] is None


def test_approve_then_apply_end_to_end(served_workspace: Path, shared_data: Path) -> None:
    pid = plan_id(served_workspace)
    audit = AuditLog(served_workspace / "audit.jsonl", who="test")
    before = len(audit.read().entries)
    approvals = served_workspace / "plan_approvals"
    approvals.mkdir(mode=0o755, exist_ok=True)  # as older versions left them: open to all
    audit.path.chmod(0o644)
    with TestClient(make_app(served_workspace, shared_data)) as c:
        r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
        assert r.status_code == 409 and "not approved" in r.json()["error"]
        assert c.post(f"/v1/plans/{pid}/apply", headers=bearer("approver")).status_code == 403
        r = c.post(f"/v1/plans/{pid}/approve", headers=bearer("approver"), json={"comment": "ok"})
        assert r.status_code == 200, r.text
        approval = r.json()["approval"]
        assert approval["approved_by"] == "alice" and approval["comment"] == "ok"
    # a restarted server still knows the approval
    with TestClient(make_app(served_workspace, shared_data)) as c:
        assert c.get("/v1/plans/latest").json()["approval"] == approval
        r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
        assert r.status_code == 200, r.text
        report = r.json()
    plan = read_plan(plan_path(served_workspace / "plans", pid))
    assert report["mode"] == "dry_run" and report["state"] == "lake"
    assert len(report["actions"]) == len(plan.actions)
    assert "done" not in report["counts"]  # a dry-run touches nothing
    new = audit.read().entries[before:]
    outcomes = [e["outcome"] for e in new]
    assert outcomes[:2] == ["approved", "apply_requested"]
    assert new[0]["who"].startswith("alice") and new[1]["who"].startswith("otto")
    assert sorted(outcomes[2:]) == sorted(a["outcome"] for a in report["actions"])
    assert all(e["plan_id"] == pid for e in new)
    assert all(e["mode"] == "dry_run" for e in new[1:])
    stored = json.loads((approvals / f"{pid}.json").read_text())
    assert stored["approved_by"] == "alice"
    # approvals and the audit log recording them are the owner's only
    assert stat.S_IMODE(approvals.stat().st_mode) == 0o700
    assert stat.S_IMODE((approvals / f"{pid}.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(audit.path.stat().st_mode) == 0o600


def test_protected_reads_need_a_viewer_token(served_workspace: Path, shared_data: Path) -> None:
    with TestClient(make_app(served_workspace, shared_data, protect_reads=True)) as c:
        for path in ("/v1/plans/latest", "/v1/failure/risk", "/metrics"):
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers=bearer("viewer")).status_code == 200, path
        assert c.get("/healthz").status_code == 200


def test_apply_errors_are_mapped_by_their_type(
    served_workspace: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another apply holding the workspace lock is a 409; a lake or registry that cannot
    be read during apply is a 503 naming it, never a lock conflict."""
    from predops.pipelines.actuators.apply import apply_lock
    from predops.pipelines.jobs import plan as plan_jobs
    from predops.pipelines.workspace.errors import LakeError, RegistryUnavailable

    pid = plan_id(served_workspace)
    with TestClient(make_app(served_workspace, shared_data)) as c:
        assert c.post(f"/v1/plans/{pid}/approve", headers=bearer("approver")).status_code == 200
        with apply_lock(served_workspace / "audit.jsonl.lock"):  # a real second apply
            r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
        assert r.status_code == 409 and "another apply holds" in r.json()["error"], r.text
        for error in (
            LakeError("lake/inventory/source=x/date=2026-01-05/part-0.parquet: truncated"),
            RegistryUnavailable("the MLflow store sqlite:///m.db is locked"),
        ):

            def failing(*args: object, error: Exception = error, **kwargs: object) -> None:
                raise error

            monkeypatch.setattr(plan_jobs, "apply_in_workspace", failing)
            r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
            assert r.status_code == 503, r.text
            assert r.json() == {"error": str(error), "field": None}


def test_an_unreadable_plan_file_is_a_503_naming_it(
    served_workspace: Path, shared_data: Path
) -> None:
    pid = plan_id(served_workspace)
    path = plan_path(served_workspace / "plans", pid)
    raw = json.loads(path.read_text())
    raw["actions"] = [{"kind": "teleport", "target": "node-1"}]
    path.write_text(json.dumps(raw))
    with TestClient(make_app(served_workspace, shared_data)) as c:
        r = c.get(f"/v1/plans/{pid}")
    assert r.status_code == 503 and str(path) in r.json()["error"], r.text


def test_four_eyes_on_the_api_compares_token_subjects(
    served_template: Path, shared_data: Path, tmp_path: Path
) -> None:
    """Two tokens of one person share a subject: the one that approved may not apply
    with the other; someone else may (executing, four eyes on)."""
    import shutil

    from predops.pipelines.workspace.approvals import ApprovalRule
    from predops.pipelines.workspace.policy_config import PolicySettings
    from predops.serving.config import ApiToken, token_digest
    from tests.serving.api import SECRETS, tokens

    ws = tmp_path / "ws"
    shutil.copytree(served_template, ws)  # its own copy: it executes
    pid = plan_id(ws)
    alias = ApiToken("alice-ops", "operator", token_digest("alice-ops-0123456789"), None, "alice")
    app = make_app(
        ws,
        shared_data,
        tokens=(*tokens(), alias),
        apply_execute=True,
        policy=PolicySettings(approval=ApprovalRule(four_eyes=True)),
    )
    with TestClient(app) as c:
        r = c.post(f"/v1/plans/{pid}/approve", headers=bearer("approver"))
        assert r.status_code == 200, r.text
        mine = {"Authorization": "Bearer alice-ops-0123456789"}
        r = c.post(f"/v1/plans/{pid}/apply", headers=mine)
        assert r.status_code == 409 and "four eyes" in r.json()["error"], r.text
        r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
        assert r.status_code == 200, r.text
        report = r.json()
    assert report["mode"] == "execute" and report["authorised"]["approval"]["subject"] == "alice"
    assert SECRETS["operator"] not in json.dumps(report)
