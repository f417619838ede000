"""The scheduler's Prometheus metrics and the small HTTP server that exposes them.

- ``predops_scheduler_job_runs_total{job_name,outcome}``: fires of ``pipeline``, ``retrain``
  and ``ingest`` (the pipeline's own ingest run) by outcome: ``done``; ``up_to_date``
  (the cutoff or input was already done: nothing new); ``skipped`` (not started: another
  live attempt, no data yet, no ingest source); ``failed``. Every pair starts at 0.
- ``predops_scheduler_job_duration_seconds{job_name}``: a histogram of runs that did work
  (``done`` or ``failed``); a pipeline run's time includes its ingest.
- ``predops_scheduler_job_last_success_timestamp_seconds{job_name}``: when the job last ended
  ``done`` or ``up_to_date``, Unix seconds; at start, the newest ``done`` of the run
  table, so a restart does not forget it (absent until a job ever succeeded).
- ``predops_ingest_rows_total{source,table}``: rows read from the source (good and bad);
  ``predops_ingest_written_rows_total{source,table}``: rows new to the lake;
  ``predops_ingest_quarantined_rows_total{source,table}``: rows set aside with reasons;
  ``predops_ingest_unmatched_series_total{source}``: source series no inventory node
  matched (the report's ``identity.unmatched`` where the adapter counts it, else 0).

The label is ``job_name``, not ``job``: Prometheus owns ``job`` (the scrape job) and
would rename ours to ``exported_job``.

The runner reports to :class:`SchedulerMetrics` when the job context carries one;
:func:`serve_metrics` exposes its registry on ``/metrics`` (the scheduler binds
127.0.0.1 unless told otherwise: the endpoint has no authentication).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from predops.pipelines.workspace.runs import ALREADY_DONE, DONE, FAILED, RunStore

JOBS = ("pipeline", "retrain", "ingest", "lake_maintenance")
UP_TO_DATE, SKIPPED = "up_to_date", "skipped"
OUTCOMES = (DONE, UP_TO_DATE, SKIPPED, FAILED)
SUCCESS = frozenset({DONE, UP_TO_DATE})
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
"""Seconds: a pipeline run takes seconds to minutes, a retrain minutes to an hour."""


def outcome_of(result: Mapping[str, Any]) -> str:
    """The outcome label of one runner result (``run_job`` or ``run_ingest``)."""
    status = str(result.get("status", ""))
    if status in (DONE, FAILED):
        return status
    reason = str(result.get("reason", "")) or status.partition("skipped: ")[2]
    return UP_TO_DATE if reason == ALREADY_DONE else SKIPPED


class SchedulerMetrics:
    """The scheduler's registry and instruments (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter(
            "predops_scheduler_job_runs",
            "Scheduled job fires by outcome",
            ["job_name", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "predops_scheduler_job_duration_seconds",
            "Time of job runs that did work (done or failed), seconds",
            ["job_name"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.last_success = Gauge(
            "predops_scheduler_job_last_success_timestamp_seconds",
            "When the job last ended done or up to date, Unix seconds",
            ["job_name"],
            registry=r,
        )
        self.rows = Counter(
            "predops_ingest_rows",
            "Rows read by ingest (good and bad)",
            ["source", "table"],
            registry=r,
        )
        self.written = Counter(
            "predops_ingest_written_rows",
            "Rows ingest added to the lake",
            ["source", "table"],
            registry=r,
        )
        self.quarantined = Counter(
            "predops_ingest_quarantined_rows",
            "Rows ingest quarantined",
            ["source", "table"],
            registry=r,
        )
        self.unmatched = Counter(
            "predops_ingest_unmatched_series",
            "Source series no inventory node matched",
            ["source"],
            registry=r,
        )
        for job in JOBS:
            self.duration.labels(job)
            for outcome in OUTCOMES:
                self.runs.labels(job, outcome)

    def seed(self, runs: RunStore, source: str | None = None) -> None:
        """Last successes from the run table; with ``source`` (the configured ingest's
        lake source), zeros for the tables its last ingest wrote, so the first increase
        after a restart is seen."""
        for job, ended in runs.last_done().items():
            self.last_success.labels(job).set(datetime.fromisoformat(ended).timestamp())
        if source is None:
            return
        self.unmatched.labels(source)
        for run in runs.runs("ingest", limit=20):
            if run["status"] != DONE:
                continue
            for step in run["steps"]:
                for table in (step.get("detail") or {}).get("tables", {}):
                    self.ingest_counters(source, table)
            break

    def ingest_counters(self, source: str, table: str) -> tuple[Any, Any, Any]:
        """The (rows, written, quarantined) counters of one source and table."""
        return (
            self.rows.labels(source, table),
            self.written.labels(source, table),
            self.quarantined.labels(source, table),
        )

    def job_finished(
        self, job: str, result: Mapping[str, Any], seconds: float, at: datetime
    ) -> None:
        """Count one fire of ``job`` from the runner's ``result``."""
        outcome = outcome_of(result)
        self.runs.labels(job, outcome).inc()
        if outcome in (DONE, FAILED):
            self.duration.labels(job).observe(seconds)
        if outcome in SUCCESS:
            self.last_success.labels(job).set(at.timestamp())

    def ingested(self, report: Mapping[str, Any]) -> None:
        """Count one ingest report (``IngestReport.to_dict()``)."""
        source = str(report["source"])
        tables: Mapping[str, Mapping[str, Any]] = report.get("tables", {})
        for table, t in tables.items():
            rows, written, quarantined = self.ingest_counters(source, table)
            rows.inc(int(t.get("rows_in", 0)))
            written.inc(int(t.get("rows_written", 0)))
            quarantined.inc(int(t.get("rows_quarantined", 0)))
        identity = report.get("identity") or {}
        self.unmatched.labels(source).inc(int(identity.get("unmatched", 0) or 0))


def serve_metrics(registry: CollectorRegistry, address: str, port: int) -> Any:
    """Serve ``registry`` on ``http://address:port/metrics`` in a daemon thread; returns
    the server (``shutdown()`` stops it). Port 0 picks a free one (``server_port``)."""
    server, _thread = start_http_server(port, addr=address, registry=registry)
    return server
