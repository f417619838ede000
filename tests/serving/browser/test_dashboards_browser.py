"""Every dashboard page in a real Chromium against a real server: the charts are drawn
with data (traces with points, not empty plots), nothing fails in the page, and approving
a plan works end to end. Screenshots go to ``test-artifacts/browser``."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.serving.browser.conftest import APPROVER_SECRET

pytestmark = pytest.mark.integration

CHARTS = """() => Array.from(document.querySelectorAll('div[data-figure]')).map(d => ({
  id: d.id,
  drawn: d.querySelector('svg.main-svg') !== null,
  traces: (d.data || []).map(t => ({
    type: t.type || 'scatter',
    x: (t.x || []).filter(v => v !== null).length,
    y: (t.y || []).filter(v => v !== null).length,
    z: (t.z || []).flat().filter(v => v !== null && Number.isFinite(v)).length,
  })),
}))"""


@pytest.fixture
def page(browser: Any, dashboard_url: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=dashboard_url)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.errors = errors
    yield pg
    ctx.close()


def _open(page: Any, path: str, shot: Path) -> list[dict[str, Any]]:
    resp = page.goto(path)
    assert resp is not None and resp.status == 200, f"{path}: HTTP {resp and resp.status}"
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(shot), full_page=True)
    assert page.errors == [], f"{path}: errors in the page: {page.errors}"
    assert page.locator("nav.top a").count() >= 5, f"{path}: no navigation bar"
    charts: list[dict[str, Any]] = page.evaluate(CHARTS)
    return charts


def _with_data(chart: dict[str, Any]) -> bool:
    """Drawn, and at least one trace with points (x and y, or a heat map's z)."""
    return chart["drawn"] and any((t["x"] and t["y"]) or t["z"] for t in chart["traces"])


def _chart(charts: list[dict[str, Any]], chart_id: str) -> dict[str, Any]:
    found = [c for c in charts if c["id"] == chart_id]
    assert found, f"no chart {chart_id!r}; charts: {[c['id'] for c in charts]}"
    return found[0]


def test_fleet_board_heat_map_and_top_nodes(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/", artifacts / "fleet.png")
    heat = _chart(charts, "rack-heatmap")
    assert _with_data(heat) and heat["traces"][0]["type"] == "heatmap"
    rows = page.locator("#top-nodes tbody tr")
    assert rows.count() >= 10
    first = rows.first.locator("a")
    node_id = first.inner_text()
    first.click()
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(f"/nodes/{node_id}")


FIRST_CELL = """() => {
  const d = document.getElementById('rack-heatmap');
  const xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis, t = d.data[0];
  for (let i = 0; i < t.z.length; i++) for (let j = 0; j < t.z[i].length; j++)
    if (t.z[i][j] !== null) return {x: xa._offset + xa.l2p(j), y: ya._offset + ya.l2p(i),
                                    rack: t.customdata[i][j]};
  return null;
}"""


def test_heat_map_cell_and_filters_narrow_the_board(page: Any, artifacts: Path) -> None:
    _open(page, "/", artifacts / "fleet_all.png")
    cell = page.evaluate(FIRST_CELL)
    assert cell and cell["rack"]
    box = page.locator("#rack-heatmap").bounding_box()
    page.mouse.click(box["x"] + cell["x"], box["y"] + cell["y"])  # a real click on the cell
    page.wait_for_url(lambda url: "rack=" in url, timeout=30_000)
    assert parse_qs(urlsplit(page.url).query) == {"rack": [cell["rack"]]}
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / "fleet_rack.png"), full_page=True)
    texts = page.evaluate("() => document.getElementById('rack-heatmap').data[0].customdata")
    assert {r for row in texts for r in row if r} == {cell["rack"]}  # only that rack drawn
    assert page.locator("select[name=rack]").input_value() == cell["rack"]
    # a filter chosen in the form lands in the URL too
    page.goto("/")
    pool = page.locator("select[name=pool] option").nth(1).get_attribute("value")
    page.select_option("select[name=pool]", pool)
    page.wait_for_url(lambda url: "pool=" in url, timeout=30_000)
    assert parse_qs(urlsplit(page.url).query)["pool"] == [pool]  # blank filters stay out
    pools = page.locator("#top-nodes tbody tr td:nth-child(4)").all_inner_texts()
    assert pools and set(pools) == {pool}
    assert page.errors == []


def test_node_page_risk_telemetry_and_history(page: Any, artifacts: Path) -> None:
    page.goto("/")
    node_id = page.locator("#top-nodes tbody tr a").first.inner_text()
    charts = _open(page, f"/nodes/{node_id}", artifacts / "node.png")
    risk = _chart(charts, "risk-history")
    assert _with_data(risk) and risk["traces"][0]["y"] >= 24  # a day of hourly scores
    telemetry = _chart(charts, "telemetry")
    assert _with_data(telemetry) and len(telemetry["traces"]) >= 2
    # reasons that raise its risk, or a plain note that fewer than three do
    assert page.locator("#node-reasons li, #reasons-note").count() >= 1


def test_demand_pages_fan_chart(page: Any, artifacts: Path) -> None:
    _open(page, "/demand", artifacts / "demand_index.png")
    links = page.locator("#series tbody a")
    assert links.count() >= 3
    series_id = links.first.inner_text()
    links.first.click()
    page.wait_for_load_state("networkidle")
    charts = _open(page, page.url, artifacts / "demand_series.png")
    fan = _chart(charts, "fan")
    assert _with_data(fan)
    names = page.evaluate("() => document.getElementById('fan').data.map(t => t.name)")
    assert {"actual", "p10–p90", "p50 forecast"} <= set(names), names
    assert series_id in page.locator("h1").inner_text()
    # the fixture registers demand without a backtest: the page says so, not a blank
    backtest = page.locator("#backtest, .empty").last.inner_text()
    assert "backtest" in backtest.lower()


def test_capacity_page_sizing_and_buy_plan(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/capacity", artifacts / "capacity.png")
    sizing = _chart(charts, "sizing")
    assert _with_data(sizing) and len(sizing["traces"]) == 3
    pools = [c for c in charts if c["id"].startswith("pool-")]
    assert pools and all(_with_data(c) for c in pools)
    assert page.locator("#sizing tbody tr").count() >= 1
    # the simulated lake's stock positions: each SKU is bought or skipped with a reason
    assert page.locator("#buys").count() or page.locator("#buy-skips tbody tr").count()


def test_models_page_metrics_calibration_freshness(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/models", artifacts / "models.png")
    rel = _chart(charts, "reliability")
    assert _with_data(rel) and rel["traces"][1]["x"] >= 2
    text = page.locator("main").inner_text()
    assert "predops.node_failure" in text and "predops.demand" in text
    assert "pr_auc_24h" in text
    assert page.locator("#freshness tbody tr").count() >= 5


def _has_approve_endpoint(base: str) -> bool:
    with urllib.request.urlopen(f"{base}/openapi.json") as r:
        return "/v1/plans/{plan_id}/approve" in json.loads(r.read()).get("paths", {})


def test_approve_plan_end_to_end(page: Any, artifacts: Path, dashboard_url: str) -> None:
    assert _has_approve_endpoint(dashboard_url)  # the button's endpoint is in the API
    _open(page, "/plans/latest", artifacts / "plan_before.png")
    plan_id = page.locator("#approve-card").get_attribute("data-plan-id")
    assert plan_id
    assert page.locator("details.skip-group table.skips tbody tr").count() >= 1
    # a wrong token is refused and says so
    page.fill("#token", "not-a-token")
    page.click("#approve")
    page.wait_for_selector("#approve-result.fail")
    assert "Not approved" in page.locator("#approve-result").inner_text()
    page.fill("#token", APPROVER_SECRET)
    page.click("#approve")
    page.wait_for_selector("#approve-result.ok >> text=Approved:")
    page.screenshot(path=str(artifacts / "plan_approved.png"), full_page=True)
    assert page.evaluate("() => sessionStorage.getItem('predops.token')") == APPROVER_SECRET
    # the API agrees, and the plan page's audit trail shows the approval after a reload
    with urllib.request.urlopen(f"{dashboard_url}/v1/plans/{plan_id}") as r:
        body = json.loads(r.read())
    assert "approv" in json.dumps(body).lower(), body
    page.reload()
    page.wait_for_load_state("networkidle")
    assert "approv" in page.locator("#audit").inner_text().lower()
