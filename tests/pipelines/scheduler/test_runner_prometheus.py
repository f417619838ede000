"""The scheduler's ingest step against a Prometheus URL: a slow server cannot stall it
(the adapter's deadlines apply, set or defaulted), and credentials in the configured URL
reach no run record, log line or lake file."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.scheduler.runner import run_ingest
from tests.fakes.misbehaving_http import MisbehavingServer, trickle
from tests.fakes.prometheus_api import FakePrometheus, always
from tests.pipelines.cli.test_ingest_credentials import (
    SECRET,
    hot_node,
    secrets_in,
    with_credentials,
)
from tests.pipelines.ingest.test_prometheus import INSTANCES, T0
from tests.pipelines.ingest.test_prometheus import options as prom_options
from tests.pipelines.scheduler.conftest import make_context


def ingest_toml(url: str, **options: str) -> str:
    """An [ingest] table reading only gpu_temp_c from ``url``."""
    only_temp = prom_options(1, FixedClock(T0), **options).extra
    opts = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in only_temp.items())
    return (
        f'[ingest]\nsource = "prometheus"\npath = {json.dumps(url)}\n'
        f'lookback = "20m"\nstep = "5m"\noptions = {{ {opts} }}\n'
    )


def test_a_trickling_prometheus_fails_the_ingest_within_its_deadline(workspace: Path) -> None:
    with MisbehavingServer(trickle(0.2)) as slow:
        ctx = make_context(
            workspace, ingest_toml(slow.url, nodes="gpu-01.dc1", request_deadline="1s", retries="1")
        )
        t0 = time.monotonic()
        res = run_ingest(ctx)[0]
        took = time.monotonic() - t0
    assert res["status"] == "failed" and took < 8, (took, res)
    assert "request deadline of 1s" in res["error"] and "gpu_temp_c" in res["error"]
    assert ctx.runs.runs("ingest")[0]["status"] == "failed"


def test_configured_credentials_reach_no_record(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with FakePrometheus(INSTANCES, value_fn=hot_node) as fake:
        url = with_credentials(fake.url)
        ctx = make_context(workspace, ingest_toml(url))
        done = run_ingest(ctx)[0]
        assert done["status"] == "done" and done["rows"] > 0, done
        report = ctx.runs.runs("ingest")[0]["steps"][0]["detail"]
        assert report["tables"]["telemetry"]["rows_quarantined"] > 0
        fake.script = always("500")
        ctx = make_context(workspace, ingest_toml(url, retries="0"))
        assert isinstance(ctx.clock, FixedClock)
        ctx.clock.advance(timedelta(minutes=5))  # a new range: a new run
        failed = run_ingest(ctx)[0]
        assert failed["status"] == "failed", failed
    records = json.dumps([done, failed, ctx.runs.runs("ingest")], default=str)
    assert "***" in records
    assert secrets_in(workspace, records, caplog.text) == []


def test_schedule_check_shows_the_configured_url_masked(tmp_path: Path) -> None:
    config = tmp_path / "predops.toml"
    config.write_text(ingest_toml(with_credentials("http://prometheus:9090")))
    res = CliRunner().invoke(
        main, ["--workspace", str(tmp_path / "ws"), "schedule", "check", "--config", str(config)]
    )
    assert res.exit_code == 0, res.output
    assert "http://***@prometheus:9090/?token=***" in res.output
    assert SECRET not in res.output
