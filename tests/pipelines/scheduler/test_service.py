"""The APScheduler wiring: persistent jobs with max_instances, coalesce, misfire grace."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from predops.pipelines.scheduler.service import (
    JOB_FUNC,
    SchedulerBusy,
    build_scheduler,
    sync_jobs,
    workspace_lock,
)

from .conftest import make_context

TOML = """
[scheduler]
misfire_grace_time = "7m"
[jobs.pipeline]
cron = "*/15 * * * *"
[jobs.retrain]
cron = "30 2 * * *"
"""


def test_jobs_carry_the_safety_options_and_persist(workspace: Path) -> None:
    ctx = make_context(workspace, TOML)
    sched = build_scheduler(ctx)
    sched.start(paused=True)
    try:
        sync_jobs(sched, ctx, ctx.clock.now())
    finally:
        sched.shutdown(wait=False)
    # A new scheduler on the same SQLite store reads the jobs back.
    again = build_scheduler(ctx)
    again.start(paused=True)
    try:
        jobs = {j.id: j for j in again.get_jobs()}
    finally:
        again.shutdown(wait=False)
    assert set(jobs) == {"pipeline", "retrain", "lake_maintenance"}
    for name, job in jobs.items():
        assert job.max_instances == 1
        assert job.coalesce is True
        assert job.misfire_grace_time == 7 * 60
        assert job.func_ref == JOB_FUNC and job.args == (name,)
    assert "*/15" in str(jobs["pipeline"].trigger)


def test_disabled_jobs_are_removed_and_abandoned_jobs_fire_now(workspace: Path) -> None:
    ctx = make_context(workspace, TOML)
    sched = build_scheduler(ctx)
    sched.start(paused=True)
    try:
        sync_jobs(sched, ctx, ctx.clock.now())
    finally:
        sched.shutdown(wait=False)
    ctx2 = make_context(workspace, TOML + "enabled = false\n")  # retrain off
    ctx2.runs.begin("pipeline", "c", owner="another-host:1:1", at=ctx2.clock.now())
    sched = build_scheduler(ctx2)
    sched.start(paused=True)
    try:
        now = ctx2.clock.now()
        out = sync_jobs(sched, ctx2, now)
        jobs = {j.id: j for j in sched.get_jobs()}
    finally:
        sched.shutdown(wait=False)
    assert set(jobs) == {"pipeline", "lake_maintenance"}
    assert out["recovered"] == ["pipeline"]
    assert abs(jobs["pipeline"].next_run_time - now) < timedelta(seconds=1)
    assert ctx2.runs.runs("pipeline")[0]["status"] == "abandoned"


def test_one_scheduler_per_workspace(workspace: Path) -> None:
    ctx = make_context(workspace)
    with (
        workspace_lock(ctx),
        pytest.raises(SchedulerBusy, match=r"scheduler\.lock"),
        workspace_lock(ctx),
    ):
        pass


def test_the_scheduler_settles_its_heap_before_the_first_fire() -> None:
    """``serve`` imports the pipeline's modules and freezes what is alive then: checked
    in a fresh interpreter (a freeze would hold this test process's objects for good)."""
    import subprocess
    import sys

    code = (
        "import gc, sys\n"
        "from predops.pipelines.scheduler.service import settle_heap\n"
        "before = gc.get_freeze_count()\n"
        "n = settle_heap()\n"
        "assert before == 0 and n == gc.get_freeze_count() > 100_000, (before, n)\n"
        "assert 'predops.pipelines.jobs.cycle' in sys.modules and 'lightgbm' in sys.modules\n"
        "from predops.pipelines.scheduler.service import GC_THRESHOLDS\n"
        "assert gc.get_threshold() == GC_THRESHOLDS != (700, 10, 10)\n"
        "print(n)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) > 100_000
