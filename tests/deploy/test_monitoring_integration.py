"""The monitoring end to end: a real Prometheus (Debian's ``prometheus``, 1 s scrapes,
the alert rules loaded) scrapes a real ``predops serve`` on a served workspace (reads
protected: Prometheus sends a viewer token, as the ServiceMonitor does) and a real
``predops schedule start --metrics-port`` on the same workspace (the pipeline firing
every second, ingesting a CSV drop with bad rows). Then:

- every Grafana variable query, with the variables before it filled in, lists values;
- every dashboard panel's query, with the variables set to real values, returns data;
- every alert expression evaluates without error, every series it reads exists, and
  Prometheus reports every rule healthy after evaluating it.

Bounded: each process gets a deadline to come up, the data a deadline to arrive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import requests
import yaml

from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import Begun, RunStore, process_owner
from predops.serving.config import token_digest
from tests.deploy.monitoring import (
    GRAFANA_BUILTINS,
    RULES,
    alerts,
    dashboard,
    panel_queries,
    selectors,
    substitute,
    used_variables,
    variables,
)
from tests.processes import free_port, stop

pytestmark = pytest.mark.integration

TOKEN = "prometheus-viewer-secret-0123456789"
SCHEDULE = """
[scheduler]
misfire_grace_time = "30s"
[jobs.pipeline]
cron = "* * * * * *"
[jobs.retrain]
enabled = false
[ingest]
source = "files"
path = "{drop}"
table = "telemetry"
source_name = "drop"
"""
SERVE = """
[server]
protect_reads = true
max_data_age = "3650d"   # the served workspace's fleet stopped reporting in January 2026
reload_every_s = 3600

[[tokens]]
name = "prometheus"
role = "viewer"
sha256 = "{digest}"
"""


@dataclass
class Stack:
    prometheus: str
    logs: dict[str, Path]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant query's result (raises on a query error)."""
        r = requests.get(f"{self.prometheus}/api/v1/query", params={"query": expr}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def tail(self) -> str:
        return "\n".join(f"--- {n}\n{p.read_text()[-2000:]}" for n, p in self.logs.items())


def until(
    what: str, ok: Callable[[], Any], procs: dict[str, Any], stack: Stack, limit_s: float
) -> Any:
    """Poll ``ok`` until it returns something truthy; fail after ``limit_s`` or when a
    process exits."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}:\n{stack.tail()}")
        try:
            got = ok()
        except (requests.ConnectionError, AssertionError):
            got = None
        if got:
            return got
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {limit_s}s\n{stack.tail()}")


def write_drop(ws: Path, path: Path) -> None:
    """Telemetry five minutes after the lake's last rows, two of them unreadable."""
    tail = Lake(ws / "lake").scan("telemetry").sort("ts").tail(6).drop("source").collect()
    rows = tail.with_columns(pl.col("ts") + timedelta(minutes=5))
    text = rows.with_columns(pl.col(c).cast(pl.String) for c in rows.columns)
    bad = pl.when(pl.int_range(pl.len()) < 2).then(pl.lit("n/a")).otherwise(pl.col("cpu_util_pct"))
    text.with_columns(bad.alias("cpu_util_pct")).write_csv(path)


def record_earlier_retrain(ws: Path) -> None:
    """A retrain the run table holds from before this scheduler started (its last
    success is restored from there; this test does not train)."""
    from datetime import UTC, datetime

    store = RunStore(ws / "scheduler.db")
    at = datetime.now(UTC) - timedelta(hours=20)
    begun = store.begin("retrain", at.isoformat(), owner=process_owner(), at=at)
    assert isinstance(begun, Begun)
    store.finish(begun.run_id, "done", at=at + timedelta(minutes=10))


@pytest.fixture(scope="module")
def stack(served_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail("prometheus not found: install Debian's prometheus package")
    root = tmp_path_factory.mktemp("monitoring")
    ws = served_workspace
    env = dict(os.environ)
    for key in ("MLFLOW_TRACKING_URI", "PREDOPS_API_TOKEN", "PREDOPS_SCHEDULER_TEST_PAUSE"):
        env.pop(key, None)
    (root / "serve.toml").write_text(SERVE.format(digest=token_digest(TOKEN)))
    write_drop(ws, root / "drop.csv")
    (root / "predops.toml").write_text(SCHEDULE.format(drop=root / "drop.csv"))
    record_earlier_retrain(ws)
    ports = {"server": free_port(), "scheduler": free_port(), "prometheus": free_port()}
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "predops-server",
                "authorization": {"type": "Bearer", "credentials": TOKEN},
                "static_configs": [{"targets": [f"127.0.0.1:{ports['server']}"]}],
            },
            {
                "job_name": "predops-scheduler",
                "static_configs": [{"targets": [f"127.0.0.1:{ports['scheduler']}"]}],
            },
        ],
    }
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    predops = [sys.executable, "-m", "predops", "--workspace", str(ws)]
    serve = ["serve", "--config", str(root / "serve.toml"), "--host", "127.0.0.1"]
    schedule = ["schedule", "start", "--config", str(root / "predops.toml")]
    commands = {
        "server": [*predops, *serve, "--port", str(ports["server"])],
        "scheduler": [*predops, *schedule, "--metrics-port", str(ports["scheduler"])],
        "prometheus": [
            prometheus,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
        ],
    }
    logs = {name: root / f"{name}.log" for name in commands}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    stack = Stack(f"http://127.0.0.1:{ports['prometheus']}", logs)
    try:
        for name, cmd in commands.items():
            with open(logs[name], "wb") as out:
                procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

        def up(job: str) -> bool:
            return [r["value"][1] for r in stack.query(f'up{{job="{job}"}}')] == ["1"]

        until(
            "prometheus ready",
            lambda: requests.get(f"{stack.prometheus}/-/ready", timeout=2).ok,
            procs,
            stack,
            60,
        )
        until("the server scraped", lambda: up("predops-server"), procs, stack, 90)
        until("the scheduler scraped", lambda: up("predops-scheduler"), procs, stack, 90)
        until(
            "a pipeline run done and scraped",
            lambda: stack.query(
                'predops_scheduler_job_runs_total{job_name="pipeline",outcome="done"} > 0'
            ),
            procs,
            stack,
            90,
        )
        until(
            "risk scraped",
            lambda: stack.query("predops_node_failure_probability"),
            procs,
            stack,
            60,
        )
        time.sleep(5)  # a few more scrapes, so rate() and increase() have samples
        yield stack
    finally:
        for proc in procs.values():
            stop(proc)


def real_values(stack: Stack) -> dict[str, str]:
    """A real value for every dashboard variable: the riskiest node, its pool and rack,
    a demand series with capacity."""
    top = stack.query(
        'topk(1, max by (node, pool, rack) (predops_node_failure_probability{horizon="24h"}))'
    )
    series = stack.query(
        "max by (series) (predops_demand_capacity > 0) and on (series) "
        'max by (series) (predops_demand_forecast{horizon="24h"})'
    )
    assert top and series
    node = top[0]["metric"]
    return {
        "datasource": "prometheus",
        "horizon": "24h",
        "pool": node["pool"],
        "rack": node["rack"],
        "node": node["node"],
        "series": series[0]["metric"]["series"],
        "demand_horizon": "24h",
        "__rate_interval": "15s",
        "__interval": "15s",
        "__range": "1h",
    }


def test_every_variable_query_lists_values(stack: Stack) -> None:
    values = real_values(stack)
    for name, v in variables(dashboard()).items():
        if v["type"] != "query":
            continue
        definition = substitute(v["definition"], values)
        inner = definition.removeprefix("label_values(").removesuffix(")")
        selector, _, label = inner.rpartition(",")
        r = requests.get(
            f"{stack.prometheus}/api/v1/label/{label.strip()}/values",
            params={"match[]": selector.strip()},
            timeout=10,
        )
        found = r.json()["data"]
        assert found, (name, definition)
        assert values[name] in found or v["includeAll"], (name, values[name], found)


def test_every_panel_query_returns_data(stack: Stack) -> None:
    values = real_values(stack)
    assert set(GRAFANA_BUILTINS) <= set(values)
    empty = []
    for title, expr in panel_queries(dashboard()):
        assert used_variables(expr) <= set(values), title
        if not stack.query(substitute(expr, values)):
            empty.append((title, substitute(expr, values)))
    assert empty == [], empty


def test_every_alert_evaluates_and_its_series_exist(stack: Stack) -> None:
    missing = []
    for rule in alerts():
        stack.query(rule["expr"])  # evaluates without error
        for sel in selectors(rule["expr"]):
            if not stack.query(sel):
                missing.append((rule["alert"], sel))
    assert missing == [], missing


def test_prometheus_evaluates_every_rule_healthy(stack: Stack) -> None:
    def evaluated() -> list[dict[str, Any]]:
        body = requests.get(f"{stack.prometheus}/api/v1/rules", timeout=10).json()
        rules = [r for g in body["data"]["groups"] for r in g["rules"]]
        done = all(not r["lastEvaluation"].startswith("0001") for r in rules)
        return rules if done else []

    deadline = time.monotonic() + 30
    rules: list[dict[str, Any]] = []
    while not rules and time.monotonic() < deadline:
        rules = evaluated()
        time.sleep(0.5)
    assert sorted(r["name"] for r in rules) == sorted(a["alert"] for a in alerts())
    bad = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert bad == []
