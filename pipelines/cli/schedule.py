"""``predops schedule``: the scheduled jobs (see ``pipelines/scheduler``).

- ``predops schedule start --config predops.toml`` runs the scheduler until SIGTERM;
  ``--metrics-port 9464`` serves its Prometheus metrics (``pipelines.scheduler.metrics``)
  on ``http://127.0.0.1:9464/metrics`` (``--metrics-address`` to bind another address).
- ``predops schedule check --config predops.toml --json`` validates the configuration.
- ``predops schedule run pipeline|retrain --config ... --json`` runs one job once now
  (idempotent per cutoff, recorded like a scheduled run).
- ``predops schedule runs --json`` lists the run table (newest first).

The configuration is one TOML file plus ``PREDOPS_SECTION__KEY`` environment overrides
(:mod:`pipelines.scheduler.config`). This module is the composition root of the
scheduler: it alone reads the environment and the wall clock.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import click

from predops.core.redaction import redact_url
from predops.pipelines.cli.support import current_settings, emit, json_option, reports
from predops.pipelines.scheduler.config import JOB_NAMES, ScheduleConfig, load_config
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.workspace.clock import SystemClock
from predops.pipelines.workspace.config import ConfigError
from predops.pipelines.workspace.policy_config import policy_settings_dict
from predops.pipelines.workspace.runs import RunStore

PAUSE_ENV = "PREDOPS_SCHEDULER_TEST_PAUSE"
"""Test hook: ``step=seconds[,step=seconds]`` waits after those steps, so a test can kill
the scheduler in the middle of a run. Read here only; never set in production."""

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The predops.toml (default: built-in defaults; PREDOPS_SECTION__KEY overrides).",
)


def _pause_hook() -> dict[str, float]:
    text = os.environ.get(PAUSE_ENV, "")
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        step, _, secs = part.partition("=")
        try:
            out[step.strip()] = float(secs)
        except ValueError:
            raise ConfigError(f"{PAUSE_ENV}: {part!r} is not step=seconds") from None
    return out


def _context(config_path: Path | None) -> JobContext:
    config = load_config(config_path, os.environ)
    settings = current_settings()
    return JobContext(
        settings=settings,
        config=config,
        runs=RunStore(settings.scheduler_db),
        clock=SystemClock(),
        pause_after=_pause_hook(),
    )


def _describe(config: ScheduleConfig) -> dict[str, Any]:
    return {
        "origin": config.origin,
        "timezone": config.timezone,
        "misfire_grace_time_s": config.misfire_grace_time.total_seconds(),
        "max_workers": config.max_workers,
        "jobs": {n: {"cron": j.cron, "enabled": j.enabled} for n, j in config.jobs.items()},
        "ingest": [{"source": i.source, "path": redact_url(i.path)} for i in config.ingests],
        "features": {
            "engine": config.features.engine,
            "dask_scheduler": config.features.dask_scheduler,
            "training_window_s": config.features.training_window.total_seconds(),
        },
        "retrain": {
            "demand_config": config.retrain.demand_config,
            "backtest_cutoffs": config.retrain.backtest_cutoffs,
            "labels": config.retrain.labels,
        },
        "policy": policy_settings_dict(config.policy),
        "lake": {
            "compact_min_files": config.lake.min_files,
            "target_file_mb": config.lake.target_file_mb,
            "settle_s": config.lake.settle.total_seconds(),
            "keep_removed_s": config.lake.keep_removed.total_seconds(),
            "retention_s": {t: d.total_seconds() for t, d in config.lake.retention.items()},
        },
    }


@click.group("schedule")
def schedule_group() -> None:
    """Scheduled jobs: ingest -> features -> score -> forecast -> plan, retrain, and the
    lake's retention + compaction."""


@schedule_group.command("check")
@config_option
@json_option
@reports
def check_cmd(config_path: Path | None, as_json: bool) -> None:
    """Validate the configuration and show what would be scheduled."""
    config = load_config(config_path, os.environ)
    _pause_hook()
    emit(_describe(config), as_json)


@schedule_group.command("start")
@config_option
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (default: off; 0 picks a free one).",
)
@click.option(
    "--metrics-address",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds (it has no authentication).",
)
@reports
def start_cmd(config_path: Path | None, metrics_port: int | None, metrics_address: str) -> None:
    """Run the scheduler in the foreground until SIGTERM / SIGINT."""
    from predops.pipelines.scheduler.service import serve

    ctx = _context(config_path)
    server = None
    if metrics_port is not None:
        ctx, server = _with_metrics(ctx, metrics_address, metrics_port)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("signal %d: stopping after the running job", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    click.echo(f"predops scheduler: workspace {ctx.settings.workspace}", err=True)
    try:
        serve(ctx, stop)
    finally:
        if server is not None:
            server.shutdown()


def _with_metrics(ctx: JobContext, address: str, port: int) -> tuple[JobContext, Any]:
    """``ctx`` counting its runs, and the HTTP server exposing the counts."""
    from predops.pipelines.scheduler.metrics import SchedulerMetrics, serve_metrics

    metrics = SchedulerMetrics()
    ingest = ctx.config.ingest
    source = None
    if ingest is not None:
        from predops.pipelines.ingest.registry import adapter

        source = ingest.source_name or adapter(ingest.source).SOURCE
    metrics.seed(ctx.runs, source)
    try:
        server = serve_metrics(metrics.registry, address, port)
    except OSError as exc:
        raise click.UsageError(f"--metrics-port {port} on {address}: {exc}") from None
    url = f"http://{address}:{server.server_port}/metrics"
    click.echo(f"predops scheduler: metrics at {url}", err=True)
    return replace(ctx, metrics=metrics), server


@schedule_group.command("run")
@click.argument("job", type=click.Choice(JOB_NAMES))
@config_option
@json_option
@reports
def run_cmd(job: str, config_path: Path | None, as_json: bool) -> None:
    """Run JOB once now (skipped when its cutoff is already done)."""
    from predops.pipelines.scheduler.runner import run_job

    result = run_job(job, _context(config_path))
    emit(result, as_json, _human_run)
    if result.get("status") == "failed":
        click.get_current_context().exit(2)


def _human_run(r: dict[str, Any]) -> str:
    head = f"{r['job']} at {r.get('cutoff', '-')}: {r['status']}"
    if r.get("reason"):
        head += f" ({r['reason']})"
    lines = [head]
    for s in r.get("steps", []):
        lines.append(f"  {s['step']:<18} {s['status']:<12} rows {s.get('rows', 0)}")
    return "\n".join(lines)


@schedule_group.command("runs")
@click.option("--job", default=None, help="Only this job (pipeline, retrain, ingest).")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@json_option
@reports
def runs_cmd(job: str | None, limit: int, as_json: bool) -> None:
    """The run table, newest first: job, cutoff, status, start, end, rows, error."""
    runs = RunStore(current_settings().scheduler_db).runs(job, limit)

    def human(o: dict[str, Any]) -> str:
        return "\n".join(
            f"{r['id']:>5} {r['job']:<9} {r['cutoff']:<27} {r['status']:<9} "
            f"{r['started_at']} .. {r['ended_at'] or '-'}  rows {r['rows']}"
            + (f"  {r['error']}" if r["error"] else "")
            for r in o["runs"]
        )

    emit({"runs": runs}, as_json, human)
