"""Run one scheduled job once: idempotent per (job, cutoff), recorded, crash-safe.

A run's cutoff is the lake's data cutoff (the latest telemetry time, else the latest
demand time) after the run's ingest — so re-firing on unchanged data is a no-op
(``already done``), and a run killed part-way is picked up by the next fire at the same
cutoff. The attempt is ``done`` only after every step's output is in place and the
run's manifest (``<workspace>/scheduled/<job>/<cutoff>/manifest.json``) is written.

Ingest is recorded as its own run (job ``ingest``) keyed by what was read: the sha256 of
a local input, or the end of the range window for a URL source; the lake's writes are
atomic and key-deduplicated, so a killed ingest is completed by the next one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from predops.core.redaction import redact_url
from predops.pipelines.scheduler.config import IngestConfig
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.scheduler.steps import (
    LAKE_MAINTENANCE_STEPS,
    PIPELINE_STEPS,
    RETRAIN_STEPS,
    Step,
    StepOutcome,
    StepSkipped,
)
from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.runs import DONE, FAILED, NotStarted, process_owner
from predops.pipelines.workspace.settings import Settings

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


def cutoff_stamp(cutoff: datetime) -> str:
    return cutoff.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def output_dir(settings: Settings, job: str, cutoff: datetime) -> Path:
    """Where a run writes the outputs that have no other home (risk, forecasts, manifest)."""
    return settings.workspace / "scheduled" / job / cutoff_stamp(cutoff)


def data_cutoff(settings: Settings) -> datetime | None:
    """The latest telemetry time in the lake, else the latest demand time, else None."""
    from predops.pipelines.workspace.lake import Lake

    lake = Lake(settings.lake_dir)
    for table in ("telemetry", "demand"):
        t = lake.latest_time(table)  # reads the newest day partition only
        if isinstance(t, datetime):
            return t.astimezone(UTC)
    return None


def run_steps(
    ctx: JobContext,
    job: str,
    cutoff: datetime,
    steps: tuple[tuple[str, Step], ...],
    *,
    before: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run ``steps`` as one attempt of (job, cutoff) unless it is done or running.

    A step that raises :class:`StepSkipped` is recorded ``skipped: <reason>`` and the
    chain goes on; any other error fails the attempt (the next fire retries the cutoff).
    """
    key = cutoff.isoformat()
    begun = ctx.runs.begin(job, key, owner=process_owner(), at=ctx.clock.now())
    if isinstance(begun, NotStarted):
        return {"job": job, "cutoff": key, "status": "not_started", "reason": begun.reason}
    if begun.abandoned:
        log.warning("%s at %s: %d earlier attempt(s) abandoned", job, key, begun.abandoned)
    ctx = dataclasses.replace(ctx, carried={})  # this run's own hand-overs between steps
    out = output_dir(ctx.settings, job, cutoff)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tmp"):  # a killed attempt's unfinished temporary files
        stale.unlink(missing_ok=True)
    for earlier in before or []:
        ctx.runs.add_step(begun.run_id, earlier)
    records: list[dict[str, Any]] = list(before or [])
    outputs: list[str] = []
    rows = 0
    for name, fn in steps:
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"step": name}
        try:
            outcome: StepOutcome = fn(ctx, cutoff, out)
        except StepSkipped as skip:
            rec.update(status=f"skipped: {skip}", rows=0)
        except Exception as exc:
            rec.update(status="failed", error=f"{type(exc).__name__}: {exc}")
            rec["seconds"] = round(time.perf_counter() - t0, 3)
            ctx.runs.add_step(begun.run_id, rec)
            error = f"{name}: {type(exc).__name__}: {exc}"
            ctx.runs.finish(begun.run_id, FAILED, at=ctx.clock.now(), rows=rows, error=error)
            log.exception("%s at %s failed in step %s", job, key, name)
            return {
                "job": job,
                "cutoff": key,
                "status": FAILED,
                "error": error,
                "steps": [*records, rec],
            }
        else:
            rec.update(status="done", rows=outcome.rows, detail=outcome.detail)
            if outcome.carry is not None:
                ctx.carried[name] = outcome.carry
            rows += outcome.rows
            outputs.extend(outcome.outputs)
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        ctx.runs.add_step(begun.run_id, rec)
        records.append(rec)
        if name in ctx.pause_after:
            ctx.sleep(ctx.pause_after[name])
    manifest = {
        "job": job,
        "cutoff": key,
        "run_id": begun.run_id,
        "attempt": begun.attempt,
        "rows": rows,
        "outputs": outputs,
        "steps": [{k: v for k, v in r.items() if k != "detail"} for r in records],
    }
    # The manifest goes last and atomically: its presence means every output is in place.
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    ctx.runs.finish(begun.run_id, DONE, at=ctx.clock.now(), rows=rows)
    return {"job": job, "cutoff": key, "status": DONE, "rows": rows, "steps": records}


# ---------------------------------------------------------------- ingest
def _ingest_key(
    cfg: IngestConfig, now: datetime, several: bool
) -> tuple[str, datetime | None, datetime | None]:
    """The ingest run's key and the range window (for URL sources); with several sources
    the key starts with the source's lake name, so each is recorded on its own."""
    from predops.pipelines.ingest.run import file_digest

    prefix = f"{cfg.source_name or cfg.source}@" if several else ""
    local = Path(cfg.path)
    if local.exists():
        return prefix + "sha256:" + file_digest(local), None, None
    step = cfg.step or timedelta(minutes=1)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    end = epoch + ((now - epoch) // step) * step  # one key per step of wall time
    start = end - cfg.lookback if cfg.lookback else None
    return prefix + end.isoformat(), start, end


def run_ingest(ctx: JobContext) -> list[dict[str, Any]]:
    """Re-read every configured source into the lake, in order (one recorded run per
    source and input key): e.g. the inventory from Kubernetes, so nodes the autoscaler
    added are known, then telemetry from Prometheus. Each is counted in the context's
    metrics as job ``ingest``."""
    if not ctx.config.ingests:
        return [{"step": "ingest", "status": "skipped: no [ingest] source configured", "rows": 0}]
    several = len(ctx.config.ingests) > 1
    out = []
    for cfg in ctx.config.ingests:
        t0 = time.perf_counter()
        result, report = _ingest_one(ctx, cfg, several)
        if ctx.metrics is not None:
            if report is not None:
                ctx.metrics.ingested(report)
            ctx.metrics.job_finished("ingest", result, time.perf_counter() - t0, ctx.clock.now())
        out.append(result)
    return out


def _ingest_one(
    ctx: JobContext, cfg: IngestConfig, several: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One source's ingest: what :func:`run_ingest` lists for it, and the ingest report
    when one was written."""
    from predops.pipelines.ingest.identity import known_nodes
    from predops.pipelines.ingest.registry import IngestOptions, adapter
    from predops.pipelines.ingest.run import ingest
    from predops.pipelines.workspace.lake import Lake

    now = ctx.clock.now()
    shown = redact_url(cfg.path)  # what records and logs quote: the path without credentials
    key, start, end = _ingest_key(cfg, now, several)
    begun = ctx.runs.begin("ingest", key, owner=process_owner(), at=now)
    if isinstance(begun, NotStarted):
        return {"step": "ingest", "status": f"skipped: {begun.reason}", "key": key, "rows": 0}, None
    t0 = time.perf_counter()
    try:
        mod = adapter(cfg.source)
        lake = Lake(ctx.settings.lake_dir)
        writes = cfg.source_name or mod.SOURCE
        opts = IngestOptions(
            clock=ctx.clock,
            table=cfg.table,
            start=start,
            end=end,
            step_s=cfg.step.total_seconds() if cfg.step else None,
            extra=dict(cfg.options),
            source=writes,
            inventory=lambda name: known_nodes(lake, name),
        )
        report = ingest(
            lake,
            writes,
            mod.read(cfg.path, opts),
            clock=ctx.clock,
            input_name=shown,
        )
    except Exception as exc:
        error = redact_url(f"{type(exc).__name__}: {exc}")
        ctx.runs.finish(begun.run_id, FAILED, at=ctx.clock.now(), error=error)
        trace = redact_url("".join(traceback.format_exception(exc)))
        log.error("ingest of %s failed\n%s", shown, trace)
        return {"step": "ingest", "status": "failed", "error": error, "key": key, "rows": 0}, None
    rows = sum(t.rows_written for t in report.tables.values())
    detail = report.to_dict()
    ctx.runs.add_step(begun.run_id, {"step": "ingest", "status": "done", "detail": detail})
    ctx.runs.finish(begun.run_id, DONE, at=ctx.clock.now(), rows=rows)
    return {
        "step": "ingest",
        "status": "done",
        "key": key,
        "rows": rows,
        "run_id": begun.run_id,
        "seconds": round(time.perf_counter() - t0, 3),
    }, detail


# ---------------------------------------------------------------- jobs
def run_job(job: str, ctx: JobContext) -> dict[str, Any]:
    """Run ``job`` (``pipeline``, ``retrain`` or ``lake_maintenance``) once now; returns
    what happened (and counts it in the context's metrics)."""
    t0 = time.perf_counter()
    result: dict[str, Any] = {"job": job, "status": FAILED}  # what an escaping error counts as
    try:
        result = _run(job, ctx)
    finally:
        if ctx.metrics is not None:
            ctx.metrics.job_finished(job, result, time.perf_counter() - t0, ctx.clock.now())
    return result


def _run(job: str, ctx: JobContext) -> dict[str, Any]:
    if job == "pipeline":
        before = run_ingest(ctx)
        steps = PIPELINE_STEPS
    elif job == "retrain":
        before, steps = [], RETRAIN_STEPS
    elif job == "lake_maintenance":
        before, steps = [], LAKE_MAINTENANCE_STEPS
    else:
        raise KeyError(f"unknown job {job!r}; known: pipeline, retrain, lake_maintenance")
    cutoff = data_cutoff(ctx.settings)
    if cutoff is None:
        return {
            "job": job,
            "status": "not_started",
            "reason": "the lake has no telemetry or demand yet",
            "steps": before,
        }
    return run_steps(ctx, job, cutoff, steps, before=before)
