"""Inspection outcomes in the lake: ``predops apply --execute`` records each drain it ran
as unknown, ``predops inspect NODE --outcome ...`` records what was found (and lists a
node's records), a ticket export goes in with ``ingest files --table inspections`` with
its bad rows quarantined by file, row and field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.actions import Drain
from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import ActionOutcome, ApplyReport
from predops.pipelines.cli.main import main
from predops.pipelines.jobs import plan as plan_jobs
from predops.pipelines.jobs.inspections import (
    InspectionError,
    node_records,
    record_applied,
    record_outcome,
    training_inspections,
)
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import load_settings
from tests.pipelines.actuators.conftest import plan_of

DRAINED = datetime(2026, 3, 2, 10, tzinfo=UTC)


def run(ws: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["--workspace", str(ws), *args, "--json"])
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    return res.exit_code, json.loads(lines[0])


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PREDOPS_CONFIG", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "ws"


def lake_of(ws: Path) -> Lake:
    return Lake(load_settings(ws).lake_dir)


def test_an_executed_apply_records_its_drains_as_unknown(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drain = Drain(target="gpu-1", reason="p_fail 0.6 over 24 h")
    plan = plan_of([drain], plan_id="plan-insp")

    def applied(p: Any, **kw: Any) -> ApplyReport:
        outcomes = (
            ActionOutcome("k1", "drain", "gpu-1", "done", why=drain.reason),
            ActionOutcome("k2", "drain", "gpu-2", "dropped", "budget_exhausted"),
        )
        return ApplyReport(p.plan_id, "execute", outcomes)

    monkeypatch.setattr(plan_jobs, "apply_plan", applied)
    # the cluster as the lake knows it is not read by the stand-in apply above
    monkeypatch.setattr(plan_jobs, "fleet_from_lake", lambda lake, now: SimpleNamespace(fleet=None))
    settings = load_settings(ws)
    out = plan_jobs.apply_in_workspace(
        settings,
        plan,
        execute=True,
        clock=FixedClock(DRAINED),
        sleep=lambda s: None,
        who="ops",
        break_glass="test",
    )
    assert out["inspections"]["rows_written"] == 1  # the dropped drain did not run
    rec = node_records(Lake(settings.lake_dir), "gpu-1")
    assert rec.select("drained_at", "outcome", "recorded_at", "source").rows() == [
        (DRAINED, "unknown", DRAINED, "predops")
    ]
    assert not node_records(Lake(settings.lake_dir), "gpu-2").height


def test_inspect_records_the_outcome_of_the_latest_drain_and_lists_it(ws: Path) -> None:
    lake = lake_of(ws)
    for at in (DRAINED - timedelta(days=3), DRAINED):
        ran = [{"kind": "drain", "target": "gpu-1", "outcome": "done"}]
        record_applied(lake, ran, at, FixedClock(at))
    later = (DRAINED + timedelta(hours=5)).isoformat()
    code, out = run(ws, "inspect", "gpu-1", "--outcome", "fault_found", "--cause", "gpu_xid",
                    "--detail", "INC-1: GPU 3 replaced", "--at", later)  # fmt: skip
    assert code == 0, out
    assert out["drained_at"] == DRAINED.isoformat() and out["outcome"] == "fault_found"
    assert out["rows_written"] == 1
    code, listed = run(ws, "inspect", "gpu-1")
    assert code == 0
    assert [(r["outcome"], r["cause"]) for r in listed["records"]] == [
        ("unknown", None),
        ("unknown", None),
        ("fault_found", "gpu_xid"),
    ]
    # an earlier drain by its time; the same record again writes nothing new
    args = ["inspect", "gpu-1", "--outcome", "no_fault_found", "--at", later,
            "--drained-at", (DRAINED - timedelta(days=3)).isoformat()]  # fmt: skip
    assert run(ws, *args)[1]["rows_written"] == 1
    assert run(ws, *args)[1]["rows_already_present"] == 1
    insp = training_inspections(lake)
    assert insp is not None and insp.collect().height == 4


def test_inspect_refuses_what_it_cannot_record(ws: Path) -> None:
    code, out = run(ws, "inspect", "gpu-9", "--outcome", "no_fault_found")
    assert code == 1 and "no drain or cordon of gpu-9" in out["error"]
    lake = lake_of(ws)
    with pytest.raises(InspectionError, match="a cause goes with outcome fault_found"):
        record_outcome(lake, "gpu-1", "unknown", cause="psu", clock=FixedClock(DRAINED),
                       drained_at=DRAINED)  # fmt: skip
    with pytest.raises(InspectionError, match="after now"):
        record_outcome(lake, "gpu-1", "no_fault_found", clock=FixedClock(DRAINED),
                       drained_at=DRAINED + timedelta(hours=1))  # fmt: skip
    res = CliRunner().invoke(
        main, ["--workspace", str(ws), "inspect", "gpu-1", "--outcome", "fixed"]
    )
    assert res.exit_code == 2 and "fault_found" in res.output  # the choices are named
    assert training_inspections(lake) is None  # nothing was written


def test_a_ticket_export_goes_in_with_its_bad_rows_named(ws: Path, tmp_path: Path) -> None:
    csv = tmp_path / "tickets.csv"
    csv.write_text(
        "node_id,drained_at,action,outcome,cause,recorded_at,detail\n"
        "gpu-1,2026-03-02T10:00:00Z,drain,fault_found,disk,2026-03-02T15:00:00Z,INC-7\n"
        "gpu-2,2026-03-02T11:00:00Z,drain,fixed,,2026-03-02T15:00:00Z,INC-8\n"
        "gpu-3,2026-03-02T11:00:00Z,drain,fault_found,flux,2026-03-02T15:00:00Z,INC-9\n"
    )
    code, out = run(ws, "ingest", "files", str(csv), "--table", "inspections",
                    "--source-name", "tickets")  # fmt: skip
    assert code == 0, out
    t = out["tables"]["inspections"]
    assert t["rows_written"] == 1 and t["rows_quarantined"] == 2
    q = pl.concat(
        [pl.read_parquet(p) for p in (load_settings(ws).lake_dir).rglob("*.parquet")
         if "quarantine" in str(p)],
        how="diagonal_relaxed",
    )  # fmt: skip
    reasons = dict(zip(q["field"].to_list(), q["reason"].to_list(), strict=True))
    assert set(reasons) == {"outcome", "cause"}
    assert "fixed not one of" in reasons["outcome"] and "flux not one of" in reasons["cause"]
    assert sorted(q["row"].to_list()) == [2, 3]
