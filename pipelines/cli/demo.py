"""``predops demo``: the main job on the embedded default, end to end.

1. simulate a seeded fleet whose period ends now (so the served data is fresh) and
   ingest it into the lake;
2. the scheduler's ``retrain`` job, run once now: offline features, train + register the
   demand model, promote, train + register the failure model, promote (the first version
   of each becomes ``champion``);
3. the scheduler's ``pipeline`` job, run once now: online features, score every node,
   forecast every demand series, plan (dry run: a plan file and an audit entry);
4. ``predops demo`` then serves the API and dashboards (see ``pipelines/cli/serve.py``).

Steps 2 and 3 are the scheduled jobs themselves (``pipelines/scheduler``), so their runs
are recorded where the dashboards show them and a later ``predops schedule start`` finds
this cutoff already done. Progress (one bar over the steps, plus the simulator's own) goes
to stderr.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from predops.pipelines.scheduler.config import load_config
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.scheduler.runner import data_cutoff, run_steps
from predops.pipelines.scheduler.steps import PIPELINE_STEPS, RETRAIN_STEPS, Step, StepOutcome
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.clock import SystemClock
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import RunStore
from predops.pipelines.workspace.settings import Settings

JOBS = (("retrain", RETRAIN_STEPS), ("pipeline", PIPELINE_STEPS))
DEMO_ENV = {"PREDOPS_RETRAIN__USAGE_ESTIMATORS": "60"}
"""The demo trains the per-node usage model with 60 trees per level (200 by default)."""


class DemoFailed(RuntimeError):
    """A demo step failed; the message names the job, the step and the error."""


def _status_mib(field: str) -> float | None:
    """``field`` (VmHWM, VmRSS) of this process in MiB; None where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class StageMeter:
    """Wall and CPU seconds and the peak RSS of each stage of this process.

    The peak is the kernel's high-water mark (VmHWM), reset at the start of each stage
    (``/proc/self/clear_refs``); where it cannot be reset (not Linux), the figure is the
    process's peak so far, and ``peak_is_per_stage`` says so."""

    def __init__(self) -> None:
        self.stages: dict[str, dict[str, float | None]] = {}
        self.per_stage = True

    def _reset(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.per_stage = False

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._reset()
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.stages[name] = {
                "seconds": round(time.perf_counter() - t, 1),
                "cpu_seconds": round(time.process_time() - c, 1),
                "peak_rss_mib": _status_mib("VmHWM"),
            }

    def report(self) -> dict[str, Any]:
        return {"stages": self.stages, "peak_is_per_stage": self.per_stage}


def _with_progress(
    steps: tuple[tuple[str, Step], ...], bar: tqdm, meter: StageMeter
) -> tuple[tuple[str, Step], ...]:
    def wrap(name: str, fn: Step) -> Step:
        def step(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
            bar.set_description(f"[demo] {name}")
            try:
                with meter.stage(name):
                    return fn(ctx, cutoff, out)
            finally:
                bar.update(1)

        return step

    return tuple((name, wrap(name, fn)) for name, fn in steps)


def run_demo(
    settings: Settings,
    *,
    nodes: int,
    days: float,
    seed: int,
    progress: bool,
    start: datetime | None = None,
    config_path: Path | None = None,
) -> dict[str, Any]:
    """Simulate a fleet from ``start`` (default: ``days`` before now), run
    the retrain and pipeline jobs once, report what happened. Raises :class:`DemoFailed`
    when a job fails (the run table keeps the details)."""
    lake = Lake(settings.lake_dir)
    out: dict[str, Any] = {"workspace": str(settings.workspace), "steps": {}}
    total = 1 + sum(len(steps) for _, steps in JOBS)
    bar = tqdm(total=total, disable=not progress, unit="step", leave=True)

    meter = StageMeter()
    t = time.perf_counter()
    bar.set_description("[demo] simulate fleet")
    clock = SystemClock()
    if start is None:
        wall = clock.now()  # the last sample falls within 5 minutes before now
        start = wall.replace(minute=wall.minute - wall.minute % 5, second=0, microsecond=0)
        start -= timedelta(days=days)
    cfg = SimConfig(nodes=nodes, days=days, interval=timedelta(minutes=5), seed=seed, start=start)
    with meter.stage("simulate"):
        out["simulate"] = simulate_to_lake(lake, cfg, clock=clock, progress=progress)
    bar.update(1)
    out["steps"]["simulate"] = round(time.perf_counter() - t, 2)

    ctx = JobContext(
        settings=settings,
        config=load_config(config_path, DEMO_ENV),
        runs=RunStore(settings.scheduler_db),
        clock=clock,
    )
    cutoff = data_cutoff(settings)
    if cutoff is None:
        raise DemoFailed("the simulated lake has no telemetry")
    out["cutoff"] = cutoff.isoformat()
    out["jobs"] = {}
    for job, steps in JOBS:
        t = time.perf_counter()
        result = run_steps(ctx, job, cutoff, _with_progress(steps, bar, meter))
        out["steps"][job] = round(time.perf_counter() - t, 2)
        out["jobs"][job] = _job_summary(result)
        if result["status"] not in ("done", "not_started"):
            bar.close()
            out["memory"] = meter.report()
            raise DemoFailed(f"{job} job: {result.get('error') or result['status']}")
    bar.close()
    out["lake"] = lake.stats()
    out["memory"] = meter.report()
    return out


def _job_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The run's status and, per step, its status, rows and seconds (details elided)."""
    steps: list[dict[str, Any]] = result.get("steps", [])

    def keep(r: dict[str, Any]) -> dict[str, Any]:
        return {k: r[k] for k in ("status", "rows", "seconds", "error") if k in r}

    summary: dict[str, Any] = {
        "status": result["status"],
        "steps": {r.get("step", "?"): keep(r) for r in steps},
    }
    plan = next((r for r in steps if r.get("step") == "plan"), None)
    if plan is not None and "detail" in plan:
        summary["plan"] = {k: plan["detail"].get(k) for k in ("plan_id", "plan_file", "summary")}
    return summary
