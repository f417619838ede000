"""The long-running scheduler: APScheduler 3 with a persistent SQLite job store.

- Job store: ``<workspace>/scheduler.db`` (table ``apscheduler_jobs``; the run table
  lives in the same file). Jobs are stored by reference (``service:fire`` + the job
  name), so a restart picks up the persisted next run times; the configuration (read
  fresh at every start) decides the triggers.
- Every job: ``max_instances=1`` (a run that overruns its next fire is not doubled),
  ``coalesce=True`` (fires missed while down run once, not once each) and
  ``misfire_grace_time`` from the configuration (later than that, the fire is skipped
  and the next one comes).
- One scheduler per workspace: an exclusive lock on ``<workspace>/scheduler.lock``.
- On start, attempts recorded ``running`` whose process is gone are marked
  ``abandoned`` and their job is fired at once, so the interrupted cutoff completes.
- SIGTERM / SIGINT stop taking new fires and wait for the running job.
- Before the first fire the process imports what every pipeline run uses and moves
  everything alive then out of the garbage collector's sight (:func:`settle_heap`).
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from predops.pipelines.scheduler.config import check_cron
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.scheduler.runner import run_job
from predops.pipelines.workspace.errors import LockHeld

log = logging.getLogger(__name__)

JOB_FUNC = "predops.pipelines.scheduler.service:fire"
_context: JobContext | None = None
"""The running scheduler's context (one per process, set by :func:`serve`); jobs in the
persistent store carry only their name, never settings or secrets."""


class SchedulerBusy(LockHeld):
    """Another scheduler already serves this workspace."""


def fire(job: str) -> None:
    """What APScheduler calls: run ``job`` once with the serving context."""
    if _context is None:
        raise RuntimeError("predops scheduler context is not set; start with `predops schedule`")
    result = run_job(job, _context)
    log.info("%s: %s", job, {k: v for k, v in result.items() if k != "steps"})


@contextmanager
def workspace_lock(ctx: JobContext) -> Iterator[None]:
    path = ctx.settings.workspace / "scheduler.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SchedulerBusy(f"another predops scheduler holds {path}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


GC_THRESHOLDS = (20_000, 20, 20)
"""The collector's thresholds in the scheduler's process (Python's are (700, 10, 10))."""


def settle_heap() -> int:
    """Import the modules every pipeline run uses, freeze the heap (``gc.freeze``) and
    space the collections out (:data:`GC_THRESHOLDS`).

    What is alive after the imports (modules, their functions and constants: about
    365,000 objects with LightGBM, polars, MLflow and scikit-learn) lives as long as the
    process, so a full collection need not walk it. A cycle at 10,000 nodes allocates
    millions of short-lived objects (rows as Python values, 10,000 risks with their
    reasons) that reference counting frees; with Python's thresholds they set off a
    young collection every 700 allocations and a full one (walking the snapshot of
    37,000 running pods and everything else kept) about once a cycle, 0.1-0.3 s each.
    With a young collection every 20,000 allocations and a full one after 20 of the
    next generation, a 5-minute cycle runs none. Unreachable cycles are still
    collected, later; what they hold meanwhile is bounded by what 20,000 allocations
    create. Returns the objects frozen."""
    import lightgbm  # noqa: F401
    import polars  # noqa: F401
    import sklearn  # noqa: F401

    import predops.pipelines.jobs.cycle
    import predops.pipelines.jobs.demand
    import predops.pipelines.jobs.failure
    import predops.pipelines.jobs.plan
    import predops.pipelines.scheduler.steps  # noqa: F401

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    return gc.get_freeze_count()


def job_options(ctx: JobContext) -> dict[str, Any]:
    """The options every job is added with (also what tests check)."""
    return {
        "max_instances": 1,
        "coalesce": True,
        "misfire_grace_time": int(ctx.config.misfire_grace_time.total_seconds()),
    }


def build_scheduler(ctx: JobContext) -> Any:
    """A background scheduler on the workspace's job store (not started)."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    url = f"sqlite:///{ctx.settings.scheduler_db}"
    ctx.settings.scheduler_db.parent.mkdir(parents=True, exist_ok=True)
    return BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=url)},
        # One worker by default: retrain and the pipeline share the models and 2 cores.
        executors={"default": ThreadPoolExecutor(ctx.config.max_workers)},
        job_defaults=job_options(ctx),
        timezone=ctx.config.timezone,
    )


def sync_jobs(scheduler: Any, ctx: JobContext, now: datetime) -> dict[str, Any]:
    """Make the store's jobs match the configuration, keeping persisted next run times
    of unchanged jobs (so a fire missed while down is a misfire, run once if within the
    grace time); fire at once the jobs whose last attempt was abandoned."""
    opts = job_options(ctx)
    existing = {j.id: j for j in scheduler.get_jobs()}
    for job_id in set(existing) - {n for n, j in ctx.config.jobs.items() if j.enabled}:
        scheduler.remove_job(job_id)
    recovered = ctx.runs.abandon_dead(now)
    out: dict[str, Any] = {"jobs": {}, "recovered": recovered}
    for name, job in ctx.config.jobs.items():
        if not job.enabled:
            continue
        trigger = check_cron(job.cron, ctx.config.timezone)
        old = existing.get(name)
        if old is not None and str(old.trigger) == str(trigger) and old.args == (name,):
            scheduler.modify_job(name, **opts)
        else:
            scheduler.add_job(
                JOB_FUNC, trigger, args=(name,), id=name, name=name, replace_existing=True, **opts
            )
        if name in recovered:
            scheduler.modify_job(name, next_run_time=now)
        out["jobs"][name] = {"cron": job.cron, **opts}
    return out


def serve(ctx: JobContext, stop: threading.Event) -> dict[str, Any]:
    """Run the scheduler until ``stop`` is set; returns the startup summary."""
    global _context
    with workspace_lock(ctx):
        _context = ctx
        settle_heap()
        scheduler = build_scheduler(ctx)
        scheduler.start(paused=True)
        try:
            summary = sync_jobs(scheduler, ctx, ctx.clock.now())
            for j in scheduler.get_jobs():
                summary["jobs"][j.id]["next_run_time"] = str(j.next_run_time)
            log.info("scheduler started: %s", summary)
            scheduler.resume()
            stop.wait()
        finally:
            scheduler.shutdown(wait=True)
            _context = None
    return summary
