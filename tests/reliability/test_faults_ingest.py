"""Injected faults while ``predops ingest prometheus`` runs, against a local HTTP server
that answers like Prometheus (``tests/fakes/prometheus_api.py``): Prometheus unreachable,
going away mid-ingest, answering 500, or answering slower than the timeout. Each time:
retries with backoff, then one clear error naming the URL (no traceback), the lake
exactly as before (no partial partition, nothing staged left behind), and the next run,
once Prometheus is back, completes with every row once.

What the adapter does per request (chunking, backoff delays, each fault kind) is tested
in ``tests/pipelines/ingest/test_prometheus.py``; this is the command, end to end."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake
from tests.fakes.prometheus_api import FakePrometheus, Script
from tests.pipelines.ingest.test_prometheus import INSTANCES, STEP, T0, lake_digest, temp_value
from tests.pipelines.ingest.test_prometheus import options as prom_options

STEPS = 12
GOOD_REQUESTS = 8
"""Discovery (one request per node label), kube_node_info and 3 range queries succeed
before the fault (of 5 + 8 requests)."""


def ingest(ws: Path, url: str, staging: Path, *, steps: int = STEPS, **extra: str) -> Result:
    """``predops ingest prometheus`` of ``steps`` steps from T0, in chunks of 2 nodes and
    6 steps, quick retries."""
    knobs = {"node_batch": "2", "max_points": "6", "retries": "2", "backoff": "0.05s"}
    opts = prom_options(steps, FixedClock(T0), **knobs, **extra).extra
    opts["staging_dir"] = str(staging)
    end = T0 + timedelta(seconds=STEP * (steps - 1))
    args = ["--workspace", str(ws), "ingest", "prometheus", url]
    args += ["--start", T0.isoformat(), "--end", end.isoformat(), "--step", "5m", "--json"]
    for k, v in opts.items():
        args += ["-o", f"{k}={v}"]
    return CliRunner().invoke(main, args)


def after(n_good: int, fault: str) -> Script:
    return lambda n, path: fault if n >= n_good else "ok"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace whose lake already holds an earlier ingest (two steps before T0)."""
    ws = tmp_path / "ws"
    staging = tmp_path / "staging"
    staging.mkdir()
    with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
        res = ingest(ws, fake.url, staging, steps=2)
    assert res.exit_code == 0, res.output
    return ws


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_clean_failure(res: Result, url: str) -> str:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    err = json.loads(res.stdout.splitlines()[0])
    assert err["type"] == "IngestError" and url in err["error"]
    assert f"Error: {err['error']}" in res.output
    msg: str = err["error"]
    return msg


def test_unreachable_prometheus_is_one_clear_error(workspace: Path, tmp_path: Path) -> None:
    lake = Lake(workspace / "lake")
    before = lake_digest(lake)
    url = f"http://127.0.0.1:{closed_port()}"
    msg = assert_clean_failure(ingest(workspace, url, tmp_path / "staging"), url)
    assert msg == (
        f"prometheus: GET {url}/api/v1/label/node/values (node discovery by label "
        "node) failed after 3 attempt(s); last error: ConnectionError: "
        "[Errno 111] Connection refused"
    )
    assert lake_digest(lake) == before


@pytest.mark.parametrize(
    ("fault", "last_error"),
    [
        ("down", "ConnectionError: [Errno 111] Connection refused"),
        ("500", "HTTP 500: internal error"),
        ("timeout", "ReadTimeout: HTTPConnectionPool"),
    ],
)
def test_fault_mid_ingest_leaves_the_lake_as_it_was_and_the_next_run_completes(
    workspace: Path, tmp_path: Path, fault: str, last_error: str
) -> None:
    lake = Lake(workspace / "lake")
    before = lake_digest(lake)
    staging = tmp_path / "staging"
    with FakePrometheus(
        INSTANCES, value_fn=temp_value, slow_s=2.5, script=after(GOOD_REQUESTS, fault)
    ) as fake:
        # 1 s against 2.5 s: the good answers before the fault arrive in time under load.
        res = ingest(workspace, fake.url, staging, timeout="1s")
        answers = [s.answer for s in fake.seen]
    msg = assert_clean_failure(res, fake.url)
    assert "query_range (gpu_temp_c for 2 node(s)" in msg
    assert "failed after 3 attempt(s)" in msg and f"last error: {last_error}" in msg
    assert answers[:GOOD_REQUESTS] == ["ok"] * GOOD_REQUESTS
    # No partial partition, no new file of any kind, nothing staged left behind.
    assert lake_digest(lake) == before
    assert list(staging.iterdir()) == []

    with FakePrometheus(INSTANCES, value_fn=temp_value) as back:
        done = ingest(workspace, back.url, staging)
        again = ingest(workspace, back.url, staging)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)["tables"]["telemetry"]
    # 7 nodes x 12 steps; the first 2 steps were there before the fault.
    assert report["rows_in"] == len(INSTANCES) * STEPS
    assert report["rows_already_present"] == len(INSTANCES) * 2
    assert report["rows_written"] == len(INSTANCES) * (STEPS - 2)
    assert json.loads(again.stdout)["tables"]["telemetry"]["rows_written"] == 0
    stored = lake.scan("telemetry").collect()
    assert stored.height == len(INSTANCES) * STEPS
    assert stored.select("node_id", "ts").is_duplicated().sum() == 0
