"""One run per (job, cutoff): recorded, idempotent, retried after failure or death."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from predops.pipelines.scheduler.runner import (
    JobContext,
    data_cutoff,
    output_dir,
    run_ingest,
    run_job,
    run_steps,
)
from predops.pipelines.scheduler.steps import StepOutcome, StepSkipped
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import process_owner

from .conftest import make_context


def test_pipeline_runs_once_per_cutoff(workspace: Path) -> None:
    ctx = make_context(workspace)
    first = run_job("pipeline", ctx)
    assert first["status"] == "done", first
    steps = {s["step"]: s["status"] for s in first["steps"]}
    assert steps["ingest"] == "skipped: no [ingest] source configured"
    assert steps["features"] == "done"
    # Nothing registered yet: these say why instead of writing anything.
    assert steps["score"].startswith("skipped: ")
    assert steps["forecast"].startswith("skipped: ")
    assert steps["plan"] == "done"

    second = run_job("pipeline", ctx)
    assert second["status"] == "not_started" and second["reason"] == "already done"
    runs = ctx.runs.runs("pipeline")
    assert len(runs) == 1 and runs[0]["status"] == "done"
    assert runs[0]["rows"] == first["rows"] > 0
    assert runs[0]["started_at"] <= runs[0]["ended_at"]
    plans = list(ctx.settings.plans_dir.glob("*.json"))
    assert len(plans) == 1
    cutoff = data_cutoff(ctx.settings)
    assert cutoff is not None and runs[0]["cutoff"] == cutoff.isoformat()
    out = output_dir(ctx.settings, "pipeline", cutoff)
    manifest = json.loads((out / "manifest.json").read_text())
    assert str(plans[0]) in manifest["outputs"]
    assert not (output_dir(ctx.settings, "pipeline", cutoff) / "risk.json").exists()


def test_new_data_is_a_new_cutoff(workspace: Path) -> None:
    ctx = make_context(workspace)
    assert run_job("pipeline", ctx)["status"] == "done"
    lake = Lake(ctx.settings.lake_dir)
    last = lake.scan("telemetry").sort("ts").tail(1).drop("source").collect()
    later = last.with_columns(pl.col("ts") + timedelta(minutes=5))
    lake.write("telemetry", "synthetic", later)
    again = run_job("pipeline", ctx)
    assert again["status"] == "done"
    runs = ctx.runs.runs("pipeline")
    assert [r["status"] for r in runs] == ["done", "done"]
    assert runs[0]["cutoff"] > runs[1]["cutoff"]


def _ok(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    return StepOutcome(rows=3)


def test_a_failed_step_fails_the_run_and_the_next_fire_retries(workspace: Path) -> None:
    ctx = make_context(workspace)
    cutoff = datetime.fromisoformat("2026-01-06T00:00:00+00:00")
    calls = {"n": 0}

    def flaky(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        return StepOutcome(rows=2)

    def never(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
        raise StepSkipped("no model yet")

    steps = (("a", _ok), ("b", flaky), ("c", never))
    failed = run_steps(ctx, "job", cutoff, steps)
    assert failed["status"] == "failed" and "b: OSError: disk full" in failed["error"]
    assert not (output_dir(ctx.settings, "job", cutoff) / "manifest.json").exists()
    done = run_steps(ctx, "job", cutoff, steps)
    assert done["status"] == "done" and done["rows"] == 5
    assert [s["status"] for s in done["steps"]] == ["done", "done", "skipped: no model yet"]
    runs = ctx.runs.runs("job")
    assert [(r["attempt"], r["status"]) for r in runs] == [(2, "done"), (1, "failed")]
    assert runs[1]["error"] == "b: OSError: disk full"


def test_a_dead_running_attempt_is_abandoned_and_redone(workspace: Path) -> None:
    ctx = make_context(workspace)
    cutoff = datetime.fromisoformat("2026-01-06T00:00:00+00:00")
    # A record left by a process on this host that no longer exists (pid far above max).
    dead = ctx.runs.begin(
        "job",
        cutoff.isoformat(),
        owner=f"{process_owner().split(':')[0]}:999999999:1",
        at=ctx.clock.now(),
    )
    out = output_dir(ctx.settings, "job", cutoff)
    out.mkdir(parents=True)
    (out / ".risk.json.deadbeef.tmp").write_text('{"half": ')  # a killed atomic write
    done = run_steps(ctx, "job", cutoff, (("a", _ok),))
    assert done["status"] == "done"
    runs = ctx.runs.runs("job")
    assert [r["status"] for r in runs] == ["done", "abandoned"]
    assert runs[1]["id"] == dead.run_id and "is gone" in runs[1]["error"]
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))


def test_a_live_running_attempt_is_not_doubled(workspace: Path) -> None:
    ctx = make_context(workspace)
    key = "2026-01-06T00:00:00+00:00"
    ctx.runs.begin("job", key, owner=process_owner(), at=ctx.clock.now())
    res = run_steps(ctx, "job", datetime.fromisoformat(key), (("a", _ok),))
    assert res["status"] == "not_started" and res["reason"].startswith("running in ")
    assert len(ctx.runs.runs("job")) == 1


def test_only_one_done_per_job_and_cutoff_in_the_table(workspace: Path) -> None:
    import sqlite3

    ctx = make_context(workspace)
    key = "2026-01-06T00:00:00+00:00"
    run_steps(ctx, "job", datetime.fromisoformat(key), (("a", _ok),))
    with sqlite3.connect(ctx.settings.scheduler_db) as db, pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO runs (job, cutoff, attempt, status, started_at, owner) "
            "VALUES ('job', ?, 9, 'done', 'x', 'y')",
            (key,),
        )


def test_pause_hook_waits_after_the_named_step(workspace: Path) -> None:
    slept: list[float] = []
    ctx = make_context(workspace, pause_after={"a": 1.5}, sleep=slept.append)
    run_steps(ctx, "job", datetime.fromisoformat("2026-01-06T00:00:00+00:00"), (("a", _ok),))
    assert slept == [1.5]


def test_ingest_reads_the_configured_files_once_per_input(workspace: Path, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    lake = Lake(workspace / "lake")
    inv = lake.scan("inventory").drop("source").collect()
    inv.write_parquet(drop / "inventory.parquet")
    toml = (
        f'[ingest]\nsource = "files"\npath = "{drop}"\ntable = "inventory"\nsource_name = "drop"\n'
    )
    ctx = make_context(workspace, toml)
    first = run_ingest(ctx)[0]
    assert first["status"] == "done" and first["rows"] == inv.height
    assert lake.scan("inventory", "drop").collect().height == inv.height
    assert run_ingest(ctx)[0]["status"] == "skipped: already done"
    inv.head(3).write_parquet(drop / "more.parquet")  # a changed drop is a new input
    third = run_ingest(ctx)[0]
    assert third["status"] == "done" and third["rows"] == 0  # keys already present
    assert [r["status"] for r in ctx.runs.runs("ingest")] == ["done", "done"]


def test_ingest_failure_is_recorded(workspace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("")
    toml = f'[ingest]\nsource = "files"\npath = "{bad}"\ntable = "telemetry"\n'
    ctx = make_context(workspace, toml)
    res = run_ingest(ctx)[0]
    assert res["status"] == "failed" and str(bad) in res["error"]
    assert ctx.runs.runs("ingest")[0]["status"] == "failed"


def test_several_sources_are_read_in_order_each_recorded_on_its_own(
    workspace: Path, tmp_path: Path
) -> None:
    """[[ingest]]: the inventory first (nodes an autoscaler added become known), then
    telemetry; each source keeps its own run record, so one changing re-reads only it."""
    lake = Lake(workspace / "lake")
    inv = lake.scan("inventory").drop("source").collect()
    inv.write_parquet(tmp_path / "inventory.parquet")
    tel = lake.scan("telemetry").drop("source").collect().head(50)
    tel.write_parquet(tmp_path / "telemetry.parquet")
    toml = "".join(
        f'[[ingest]]\nsource = "files"\npath = "{tmp_path / f"{t}.parquet"}"\n'
        f'table = "{t}"\nsource_name = "drop-{t}"\n'
        for t in ("inventory", "telemetry")
    )
    ctx = make_context(workspace, toml)
    first = run_ingest(ctx)
    assert [r["status"] for r in first] == ["done", "done"]
    assert [r["rows"] for r in first] == [inv.height, tel.height]
    assert first[0]["key"].startswith("drop-inventory@sha256:")
    assert first[1]["key"].startswith("drop-telemetry@sha256:")
    inv.head(3).write_parquet(tmp_path / "inventory.parquet")  # only the inventory changed
    again = run_ingest(ctx)
    assert [r["status"] for r in again] == ["done", "skipped: already done"]
    assert lake.scan("telemetry", "drop-telemetry").collect().height == tel.height
