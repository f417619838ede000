"""The scheduled ``lake_maintenance`` job: retention and compaction from ``[lake]``,
recorded like every job, once per data cutoff."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from predops.pipelines.scheduler.runner import run_job
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.scheduler.conftest import START, make_context
from tests.pipelines.workspace.lake_ingests import ingest_every

TOML = """
[jobs.lake_maintenance]
cron = "40 * * * *"

[lake]
compact_min_files = 4

[lake.retention]
telemetry = "60d"
"""


def test_the_job_compacts_settled_days_and_runs_once_per_cutoff(workspace: Path) -> None:
    lake = Lake(workspace / "lake")
    every = timedelta(minutes=30)
    ingest_every(lake, nodes=3, start=START, end=START + timedelta(days=2), every=every)
    before = lake.scan("telemetry").collect().sort("source", "node_id", "ts")
    small = [f for f in lake.files("telemetry") if f.parent.parent.name == "source=prometheus"]
    assert len(small) == 96
    ctx = make_context(workspace, TOML)
    assert ctx.config.lake.retention == {"telemetry": timedelta(days=60)}
    out = run_job("lake_maintenance", ctx)
    assert out["status"] == "done", out
    (step,) = out["steps"]
    assert step["step"] == "lake_maintenance"
    assert step["detail"]["files_replaced"] == 96  # the simulator wrote one file a day
    after = Lake(lake.root)
    mine = [f for f in after.files("telemetry") if f.parent.parent.name == "source=prometheus"]
    assert len(mine) == 2
    assert after.scan("telemetry").collect().sort("source", "node_id", "ts").equals(before)
    again = run_job("lake_maintenance", make_context(workspace, TOML))
    assert again["status"] == "not_started" and "already" in again["reason"]
