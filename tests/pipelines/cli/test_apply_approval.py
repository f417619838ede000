"""``predops apply --execute`` obeys the one approval record: refused without it (nothing
runs, nothing audited as started), allowed after ``predops approve`` or the API's
approve, four eyes when configured, break glass audited, exit status non-zero when an
action failed or had no actuator."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from predops.core.actions import Buy
from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.approvals import ApprovalStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.plans import write_plan
from predops.pipelines.workspace.settings import load_settings
from tests.pipelines.actuators.conftest import plan_of

START = datetime(2026, 1, 5, tzinfo=UTC)
AT = START + timedelta(days=1) - timedelta(minutes=30)  # the last telemetry sample


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated lake that re-validation reads (copied for each test)."""
    ws = tmp_path_factory.mktemp("fleet")
    cfg = SimConfig(nodes=8, days=1, interval=timedelta(minutes=30), seed=5, start=START)
    simulate_to_lake(Lake(ws / "lake"), cfg, clock=FixedClock(AT), progress=False)
    return ws


def buy() -> Buy:
    return Buy(
        target="gpu-h800-8x",
        region="rg-1",
        quantity=2,
        by_date=date(2026, 5, 1),
        reason="forecast demand over supply",
    )


@pytest.fixture
def ws(fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PREDOPS_CONFIG", raising=False)
    ws = tmp_path / "ws"
    shutil.copytree(fleet, ws)
    write_plan(load_settings(ws).plans_dir, plan_of([buy()], plan_id="plan-gov"))
    return ws


def run(ws: Path, who: str, *args: str, config: Path | None = None) -> tuple[int, dict[str, Any]]:
    env = {"PREDOPS_OPERATOR": who, "PREDOPS_CONFIG": str(config) if config else None}
    res = CliRunner().invoke(main, ["--workspace", str(ws), *args, "--json"], env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output  # one JSON object, in failure too
    return res.exit_code, json.loads(lines[0])


def execute(ws: Path, who: str, *extra: str, config: Path | None = None) -> tuple[int, Any]:
    return run(ws, who, "apply", "plan-gov", "--at", AT.isoformat(), "--execute", *extra,
               config=config)  # fmt: skip


def audit(ws: Path) -> list[dict[str, Any]]:
    path = ws / "audit.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def purchases(ws: Path) -> bool:
    return (ws / "purchases" / "plan-gov.csv").exists()


def test_an_unapproved_plan_is_refused_and_nothing_runs(ws: Path) -> None:
    code, out = execute(ws, "bob")
    assert code == 1 and out["type"] == "ApprovalRequired"
    assert "not approved" in out["error"] and "predops approve plan-gov" in out["error"]
    assert not purchases(ws) and audit(ws) == []
    # A dry-run needs no approval.
    code, dry = run(ws, "bob", "apply", "plan-gov", "--at", AT.isoformat())
    assert code == 0 and dry["counts"] == {"would_run": 1} and dry["authorised"]["dry_run"]


def test_approved_on_the_cli_it_executes_and_says_what_allowed_it(ws: Path) -> None:
    code, rec = run(ws, "alice", "approve", "plan-gov", "--comment", "capacity review 12")
    assert code == 0 and rec["subject"] == "alice" and rec["comment"] == "capacity review 12"
    assert (ws / "plan_approvals" / "plan-gov.json").stat().st_mode & 0o777 == 0o600
    code, out = execute(ws, "bob")
    assert code == 0 and out["counts"] == {"done": 1} and out["problems"] == []
    assert out["authorised"]["approval"]["subject"] == "alice" and purchases(ws)
    assert [e["outcome"] for e in audit(ws)] == ["approved", "started", "done"]


def test_the_api_record_is_the_same_record(ws: Path) -> None:
    """An approval the API wrote (token subject) lets the CLI execute."""
    ApprovalStore(ws).approve("plan-gov", by="tok-alice", role="approver", at=AT,
                              subject="alice@example.org")  # fmt: skip
    code, out = execute(ws, "bob")
    assert code == 0 and out["authorised"]["approval"]["approved_by"] == "tok-alice"


def test_four_eyes_refuses_the_approver_and_lets_another_apply(ws: Path, tmp_path: Path) -> None:
    config = tmp_path / "predops.toml"
    config.write_text("[policy.approval]\nfour_eyes = true\n")
    assert run(ws, "alice", "approve", "plan-gov")[0] == 0
    code, out = execute(ws, "alice", config=config)
    assert code == 1 and out["type"] == "ApprovalRequired" and "four eyes" in out["error"]
    assert not purchases(ws)
    # Without the rule the approver may apply; with it, someone else may.
    code, out = execute(ws, "bob", config=config)
    assert code == 0 and out["authorised"]["four_eyes"] is True and purchases(ws)


def test_approval_can_be_switched_off_only_by_configuration(ws: Path, tmp_path: Path) -> None:
    config = tmp_path / "predops.toml"
    config.write_text("[policy.approval]\nrequired = false\n")
    code, out = execute(ws, "bob", config=config)
    assert code == 0 and out["authorised"] == {"approval": None, "required": False}
    bad = tmp_path / "bad.toml"
    bad.write_text("[policy.approval]\nfour_eye = true\n")
    code, out = execute(ws, "bob", config=bad)
    assert code == 1 and "four_eye" in out["error"]


def test_break_glass_executes_and_is_audited_first(ws: Path) -> None:
    code, out = execute(ws, "carol", "--break-glass", "INC-4411: rack on fire")
    assert code == 0 and out["authorised"]["break_glass"] == "INC-4411: rack on fire"
    entries = audit(ws)
    assert [e["outcome"] for e in entries] == ["break_glass", "started", "done"]
    assert entries[0]["why"] == "INC-4411: rack on fire" and entries[0]["who"] == "carol"
    code, out = execute(ws, "carol", "--break-glass", "  ")
    assert code == 1 and "needs a reason" in out["error"]


def test_a_damaged_approval_record_is_refused_by_name(ws: Path) -> None:
    (ws / "plan_approvals").mkdir()
    (ws / "plan_approvals" / "plan-gov.json").write_text('{"plan_id": "another"}')
    code, out = execute(ws, "bob")
    assert code == 1 and "not an approval of plan 'plan-gov'" in out["error"]
