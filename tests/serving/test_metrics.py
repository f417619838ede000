"""/metrics on a served workspace: per-node risk equals /v1/failure/risk, per-node running
pods, demand forecasts at the bounded horizons, plan counts for every reason, the model
reload counter, rendered once per input, and ``promtool check metrics`` clean."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from predops.core.actions import SkipReason
from predops.core.clock import FixedClock
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.pod_snapshot import running_pods
from predops.serving.fleet_metrics import FORECAST_STEPS, escape, number
from tests.serving.api import fresh_clock, make_app


@pytest.fixture(scope="module")
def app(served_workspace: Path, shared_data: Path) -> Any:
    return make_app(served_workspace, shared_data)


@pytest.fixture(scope="module")
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> list[Any]:
    """The samples called ``name`` (a counter's ``_total`` ones included)."""
    found = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
    assert found, f"no {name} samples"
    return found


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found (Debian's prometheus package)"
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )


def test_node_risk_series_equal_the_fleet_risk_endpoint(client: TestClient) -> None:
    text = client.get("/metrics").text
    got = {
        (s.labels["node"], s.labels["horizon"]): s
        for s in samples(text, "predops_node_failure_probability")
    }
    for hours, label in ((24.0, "24h"),):
        page = client.get(f"/v1/failure/risk?limit=1000&reasons=false&horizon_hours={hours}")
        items = page.json()["items"]
        assert items and len(items) == page.json()["total"]
        for it in items:
            s = got[(it["node_id"], label)]
            assert s.labels["pool"] == it["pool"] and s.labels["rack"] == it["rack"]
            assert s.value == pytest.approx(it["p_fail"], rel=1e-5, abs=1e-9)
    horizons = {h for _, h in got}
    assert "24h" in horizons and all(h.endswith(("h", "d")) for h in horizons)
    assert len(got) == len(items) * len(horizons)


def test_running_pods_per_fresh_node_from_the_lake(
    client: TestClient, served_workspace: Path
) -> None:
    text = client.get("/metrics").text
    pods = {s.labels["node"]: s.value for s in samples(text, "predops_node_running_pods")}
    risk = {s.labels["node"] for s in samples(text, "predops_node_failure_probability")}
    assert set(pods) == risk
    as_of = client.app.state.ctx.online.snapshot(  # type: ignore[attr-defined]
        fresh_clock(served_workspace).now(), timedelta(minutes=30)
    ).as_of
    running = running_pods(Lake(served_workspace / "lake"), as_of)
    expected = running.group_by("node_id").len()
    want = dict(zip(expected["node_id"], expected["len"], strict=True))
    assert any(v > 0 for v in pods.values())
    assert pods == {n: float(want.get(n, 0)) for n in pods}


def test_demand_forecast_series_at_the_bounded_horizons(
    client: TestClient, served_workspace: Path
) -> None:
    text = client.get("/metrics").text
    got = samples(text, "predops_demand_forecast")
    body = client.post("/v1/demand/forecast", json={"horizons": list(FORECAST_STEPS)}).json()
    points = [(s["series_id"], s["issued_at"], p) for s in body["series"] for p in s["points"]]
    assert points and len(got) == 3 * len(points)
    by_key = {(s.labels["series"], s.labels["horizon"], s.labels["quantile"]): s.value for s in got}
    for series_id, issued_at, p in points:
        ahead = datetime.fromisoformat(p["valid_at"]) - datetime.fromisoformat(issued_at)
        h = f"{int(ahead.total_seconds() // 3600)}h"
        for q, col in (("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90")):
            assert by_key[(series_id, h, q)] == pytest.approx(p["quantiles"][col], rel=1e-5)
    assert {s.labels["horizon"] for s in got} <= {"1h", "6h", "24h"}
    latest = (
        Lake(served_workspace / "lake")
        .scan("demand")
        .sort("ts")
        .group_by("series_id")
        .agg(pl.col("value").last(), pl.col("capacity").last())
    ).collect()
    observed = {s.labels["series"]: s.value for s in samples(text, "predops_demand_observed")}
    capacity = {s.labels["series"]: s.value for s in samples(text, "predops_demand_capacity")}
    assert set(observed) == set(latest["series_id"])
    for r in latest.iter_rows(named=True):
        assert observed[r["series_id"]] == pytest.approx(r["value"], rel=1e-5)
        if r["capacity"] is not None:
            assert capacity[r["series_id"]] == pytest.approx(r["capacity"], rel=1e-5)


def test_plan_counts_cover_every_skip_reason(client: TestClient) -> None:
    text = client.get("/metrics").text
    skips = {s.labels["reason"]: s.value for s in samples(text, "predops_plan_skips")}
    assert {r.value for r in SkipReason} <= set(skips)
    plan = client.get("/v1/plans/latest").json()
    assert sum(skips.values()) == len(plan["skips"])
    actions = {s.labels["kind"]: s.value for s in samples(text, "predops_plan_actions")}
    assert {"cordon", "drain", "resize_pool", "buy"} <= set(actions)
    assert sum(actions.values()) == len(plan["actions"])


def test_model_reloads_is_a_counter_and_served_models_are_described(
    client: TestClient, app: Any
) -> None:
    text = client.get("/metrics").text
    fams = families(text)
    assert fams["predops_model_reloads"].type == "counter"
    assert "# TYPE predops_model_reloads_total counter" in text
    reloads = {s.labels["model"]: s.value for s in samples(text, "predops_model_reloads_total")}
    assert reloads == {"node_failure": 1.0, "demand": 1.0}
    client.get("/metrics")
    again = client.get("/metrics").text
    assert {
        s.labels["model"]: s.value for s in samples(again, "predops_model_reloads_total")
    } == reloads  # scraping does not count
    loaded = {s.labels["model"]: s.value for s in samples(text, "predops_model_loaded")}
    assert loaded == {"node_failure": 1.0, "demand": 1.0}
    cutoff = samples(text, "predops_model_data_cutoff_timestamp_seconds")
    ctx = app.state.ctx
    want = ctx.failure.current.provenance.data_cutoff.timestamp()
    assert {s.labels["model"]: s.value for s in cutoff}["node_failure"] == want


def test_fleet_families_are_rendered_once_per_input(client: TestClient, app: Any) -> None:
    client.get("/metrics")
    metrics, ctx = app.state.metrics, app.state.ctx
    renders, builds = metrics.fleet.renders, ctx.fleet.builds
    first = client.get("/metrics").text
    second = client.get("/metrics").text
    assert metrics.fleet.renders == renders and ctx.fleet.builds == builds
    node_lines = [ln for ln in second.splitlines() if ln.startswith("predops_node_")]
    assert node_lines == [ln for ln in first.splitlines() if ln.startswith("predops_node_")]


def test_stale_nodes_have_no_risk_series(served_workspace: Path, shared_data: Path) -> None:
    late = FixedClock(fresh_clock(served_workspace).now() + timedelta(days=3))
    with TestClient(make_app(served_workspace, shared_data, clock=late)) as c:
        text = c.get("/metrics").text
    assert families(text)["predops_node_failure_probability"].samples == []
    assert samples(text, "predops_model_info") and samples(text, "predops_demand_forecast")


def test_promtool_accepts_the_exposition(client: TestClient) -> None:
    res = promtool_check(client.get("/metrics").text)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "" and res.stderr.strip() == "", res.stdout + res.stderr


def test_label_values_and_numbers_are_escaped() -> None:
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert number(float("nan")) == "NaN" and number(0.1234567891) == "0.123457"
    text = f'# HELP x t\n# TYPE x gauge\nx{{node="{escape(chr(10) + "q" + chr(34))}"}} 1\n'
    parsed = samples(text, "x")
    assert parsed[0].labels["node"] == '\nq"'


def test_cardinality_at_10000_nodes(served_workspace: Path) -> None:
    """The per-node families of a 10,000-node online store: one series per node and
    horizon plus one per node, about 4 MB of text (0.1 MB gzip); the figures are the
    README's (``benchmarks/bench_metrics.py`` prints them)."""
    from benchmarks.bench_metrics import measure

    report, text = measure(served_workspace, 10_000)
    assert report["nodes"] == 10_000 and report["horizons"] == 3
    assert report["node_series"] == report["node_series_expected"] == 40_000
    assert report["series"]["predops_node_failure_probability"] == 30_000
    assert report["series_total"] < 40_500  # everything else is a few hundred series
    assert report["bytes"] < 5_000_000 and report["bytes_gzip"] < 250_000
    res = promtool_check(text)
    assert res.returncode == 0, (res.stdout + res.stderr)[-2000:]
