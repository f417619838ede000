"""The scheduler's metrics: job runs by outcome, durations, last success (kept across a
restart through the run table), ingest rows / quarantined rows / unmatched series, the
HTTP endpoint of ``predops schedule start --metrics-port``, and ``promtool check
metrics`` clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import requests
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from predops.pipelines.scheduler.metrics import (
    JOBS,
    OUTCOMES,
    SchedulerMetrics,
    outcome_of,
    serve_metrics,
)
from predops.pipelines.scheduler.runner import run_ingest, run_job
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import Begun, RunStore
from tests.processes import free_port, stop

from .conftest import make_context


def values(metrics: SchedulerMetrics | str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples called ``name`` by their sorted labels."""
    text = metrics if isinstance(metrics, str) else generate_latest(metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


def runs(m: SchedulerMetrics, job: str) -> dict[str, float]:
    found = values(m, "predops_scheduler_job_runs_total")
    return {dict(k)["outcome"]: v for k, v in found.items() if dict(k)["job_name"] == job}


def telemetry_drop(workspace: Path, path: Path, bad: int) -> int:
    """A CSV of telemetry newer than the lake's, with ``bad`` rows of unreadable CPU
    utilisation; returns the number of rows."""
    lake = Lake(workspace / "lake")
    tail = lake.scan("telemetry").sort("ts").tail(6).drop("source").collect()
    rows = tail.with_columns(pl.col("ts") + timedelta(minutes=5))
    text = rows.with_columns(pl.col(c).cast(pl.String) for c in rows.columns)
    text = text.with_columns(
        pl.when(pl.int_range(pl.len()) < bad)
        .then(pl.lit("not-a-number"))
        .otherwise(pl.col("cpu_util_pct"))
        .alias("cpu_util_pct")
    )
    text.write_csv(path)
    return rows.height


def test_outcomes_of_runner_results() -> None:
    assert outcome_of({"status": "done"}) == "done"
    assert outcome_of({"status": "failed", "error": "x"}) == "failed"
    assert outcome_of({"status": "not_started", "reason": "already done"}) == "up_to_date"
    assert outcome_of({"status": "skipped: already done"}) == "up_to_date"
    assert outcome_of({"status": "not_started", "reason": "running in h:1:2"}) == "skipped"
    assert outcome_of({"status": "skipped: no [ingest] source configured"}) == "skipped"


def test_runs_ingest_and_last_success_are_counted(workspace: Path, tmp_path: Path) -> None:
    drop = tmp_path / "telemetry.csv"
    n = telemetry_drop(workspace, drop, bad=2)
    toml = (
        f'[ingest]\nsource = "files"\npath = "{drop}"\ntable = "telemetry"\nsource_name = "drop"\n'
    )
    m = SchedulerMetrics()
    ctx = make_context(workspace, toml, metrics=m)
    assert run_job("pipeline", ctx)["status"] == "done"
    assert run_job("pipeline", ctx)["status"] == "not_started"  # same input, same cutoff
    assert runs(m, "pipeline") == {"done": 1, "up_to_date": 1, "skipped": 0, "failed": 0}
    assert runs(m, "ingest") == {"done": 1, "up_to_date": 1, "skipped": 0, "failed": 0}
    labels = (("source", "drop"), ("table", "telemetry"))
    assert values(m, "predops_ingest_rows_total")[labels] == n
    assert values(m, "predops_ingest_quarantined_rows_total")[labels] == 2
    assert values(m, "predops_ingest_written_rows_total")[labels] == n - 2
    assert values(m, "predops_ingest_unmatched_series_total") == {(("source", "drop"),): 0}
    count = values(m, "predops_scheduler_job_duration_seconds_count")
    assert count[(("job_name", "pipeline"),)] == 1 and count[(("job_name", "ingest"),)] == 1
    last = values(m, "predops_scheduler_job_last_success_timestamp_seconds")
    assert last[(("job_name", "pipeline"),)] == ctx.clock.now().timestamp()

    drop.write_text("")  # an unreadable input fails the ingest (the pipeline goes on)
    run_ingest(ctx)[0]
    assert runs(m, "ingest")["failed"] == 1


def test_every_job_and_outcome_starts_at_zero_and_an_error_counts_as_failed(
    workspace: Path,
) -> None:
    m = SchedulerMetrics()
    found = values(m, "predops_scheduler_job_runs_total")
    assert len(found) == len(JOBS) * len(OUTCOMES) and set(found.values()) == {0.0}
    ctx = make_context(workspace, metrics=m)
    with pytest.raises(KeyError):
        run_job("nightly", ctx)
    assert runs(m, "nightly") == {"failed": 1}


def test_unmatched_series_come_from_the_report_when_the_adapter_counts_them() -> None:
    m = SchedulerMetrics()
    report: dict[str, Any] = {"source": "prom", "tables": {}, "identity": {"unmatched": 7}}
    m.ingested(report)
    m.ingested({"source": "prom", "tables": {}})
    assert values(m, "predops_ingest_unmatched_series_total") == {(("source", "prom"),): 7}


def test_seed_restores_last_success_and_zero_ingest_counters(workspace: Path) -> None:
    store = RunStore(workspace / "scheduler.db")
    ctx = make_context(workspace)
    begun = store.begin("ingest", "k1", owner="h:1:1", at=ctx.clock.now())
    assert isinstance(begun, Begun)
    detail = {"tables": {"telemetry": {}}}
    store.add_step(begun.run_id, {"step": "ingest", "status": "done", "detail": detail})
    store.finish(begun.run_id, "done", at=ctx.clock.now())
    m = SchedulerMetrics()
    m.seed(store, "prometheus")
    last = values(m, "predops_scheduler_job_last_success_timestamp_seconds")
    assert last == {(("job_name", "ingest"),): ctx.clock.now().timestamp()}
    labels = (("source", "prometheus"), ("table", "telemetry"))
    assert values(m, "predops_ingest_quarantined_rows_total") == {labels: 0.0}


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found (Debian's prometheus package)"
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )


def test_the_endpoint_serves_what_promtool_accepts(workspace: Path, tmp_path: Path) -> None:
    drop = tmp_path / "telemetry.csv"
    telemetry_drop(workspace, drop, bad=1)
    toml = f'[ingest]\nsource = "files"\npath = "{drop}"\ntable = "telemetry"\n'
    m = SchedulerMetrics()
    run_job("pipeline", make_context(workspace, toml, metrics=m))
    server = serve_metrics(m.registry, "127.0.0.1", 0)
    try:
        r = requests.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10)
    finally:
        server.shutdown()
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    assert values(r.text, "predops_ingest_quarantined_rows_total")
    res = promtool_check(r.text)
    assert res.returncode == 0 and not (res.stdout + res.stderr).strip(), res.stdout + res.stderr


def test_schedule_start_serves_metrics_on_the_given_port(workspace: Path, tmp_path: Path) -> None:
    ctx = make_context(workspace)
    store = ctx.runs
    begun = store.begin("pipeline", "c1", owner="h:1:1", at=ctx.clock.now())
    assert isinstance(begun, Begun)
    store.finish(begun.run_id, "done", at=ctx.clock.now())
    cfg = tmp_path / "predops.toml"
    cfg.write_text("[jobs.pipeline]\nenabled = false\n[jobs.retrain]\nenabled = false\n")
    port = free_port()
    cmd = [sys.executable, "-m", "predops", "--workspace", str(workspace), "schedule", "start"]
    cmd += ["--config", str(cfg), "--metrics-port", str(port)]
    log = tmp_path / "scheduler.log"
    env = dict(os.environ)
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline, text = time.monotonic() + 60, None
        while time.monotonic() < deadline and text is None:
            assert proc.poll() is None, log.read_text()
            try:
                text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except requests.ConnectionError:
                time.sleep(0.2)
        assert text is not None, log.read_text()
        last = values(text, "predops_scheduler_job_last_success_timestamp_seconds")
        assert last == {(("job_name", "pipeline"),): ctx.clock.now().timestamp()}
        assert f"metrics at http://127.0.0.1:{port}/metrics" in log.read_text()
    finally:
        stop(proc)
    assert proc.returncode == 0, log.read_text()
