"""Every dashboard page in a real Chromium against a real server: the charts are drawn
with data (traces with points, not empty plots), nothing fails in the page, and approving
a plan works end to end. Screenshots go to ``test-artifacts/browser``."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.serving.browser.conftest import APPROVER_SECRET, OPERATOR_SECRET

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
    # this series' own backtest (in its units), the served model first, baselines below
    rows = page.locator("#backtest tbody tr")
    assert rows.count() >= 3
    assert rows.first.inner_text().startswith("served model (v")
    labels = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert any(t.startswith("seasonal naive (24 h season)") for t in labels), labels
    assert any(t.startswith("seasonal naive (168 h season)") for t in labels), labels
    unit = "GPUs" if "/gpus" in series_id else "cores" if "cpu_cores" in series_id else "nodes"
    assert f"MAE ({unit})" in page.locator("#backtest thead").inner_text()
    assert f" {unit}" in rows.first.locator("td").nth(1).inner_text()


def test_demand_index_sparklines_headroom_units(page: Any, artifacts: Path) -> None:
    _open(page, "/demand", artifacts / "demand_index.png")
    rows = page.locator("#series tbody tr")
    n = rows.count()
    assert n >= 3
    # one inline SVG sparkline per series; a capacity line where the pool has capacity
    assert page.locator("#series svg.spark polyline").count() == n
    no_capacity = page.locator("#series td.headroom", has_text="no capacity").count()
    assert page.locator("#series svg.spark line").count() == n - no_capacity
    for i in range(n):
        cells = rows.nth(i).locator("td")
        sid, resource = cells.nth(0).inner_text(), cells.nth(2).inner_text()
        unit = {"gpus": "GPUs", "cpu_cores": "cores", "nodes": "nodes"}[resource.split()[0]]
        last, capacity = cells.nth(4).inner_text(), cells.nth(5).inner_text()
        assert last.endswith(f" {unit}") and capacity.endswith(f" {unit}"), (sid, last, capacity)
        assert ".0 " not in capacity, capacity  # integers as integers
        headroom = cells.nth(9).inner_text()
        assert headroom.endswith((" days (the horizon)", " days", "capacity now", "in the pool"))
        if "in the pool" not in headroom:
            assert cells.nth(8).inner_text().endswith("%"), cells.nth(8).inner_text()


def test_capacity_page_sizing_and_buy_plan(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/capacity", artifacts / "capacity.png")
    sizing = _chart(charts, "sizing-chart")
    assert _with_data(sizing) and len(sizing["traces"]) == 3
    pools = [c for c in charts if c["id"].startswith("pool-")]
    assert pools and all(_with_data(c) for c in pools)
    assert page.locator("#sizing tbody tr").count() >= 1
    # the simulated lake's stock positions: each SKU is bought or skipped with a reason
    assert page.locator("#buys").count() or page.locator("#buy-skips tbody tr").count()
    # units on the sizing figures and on every number of the resize evidence
    assert "current (nodes)" in page.locator("#sizing thead").inner_text()
    assert page.locator("#sizing tbody td.num").first.inner_text().endswith(" nodes")
    page.locator("#sizing details.evidence summary").first.click()
    evidence = page.locator("#sizing details.evidence table.kv").first.inner_text()
    for figure in ("current", "target", "failure_buffer", "usage_floor"):
        line = next(x for x in evidence.splitlines() if x.startswith(figure + "\t"))
        assert line.endswith(" nodes"), line
    assert any(x.startswith("window_h\t") and x.endswith(" h") for x in evidence.splitlines())
    # the buy plan says how far the forecasts reach, or that no weekly model is registered
    if page.locator("#buys").count() == 0:
        no_buy = page.locator("#no-buy").inner_text()
        assert ("forecasts" in no_buy and "lead time" in no_buy) or (
            "predops train demand --config weekly" in no_buy
        ), no_buy
    if page.locator("#buy-reach").count():
        for row in page.locator("#buy-reach tbody tr").all():
            assert row.locator("td").nth(2).inner_text().endswith(("weeks", "days", " h"))


def test_models_page_metrics_calibration_freshness(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/models", artifacts / "models.png")
    rel = _chart(charts, "reliability")
    assert _with_data(rel) and rel["traces"][1]["x"] >= 2
    text = page.locator("main").inner_text()
    assert "predops.node_failure" in text and "predops.demand" in text
    assert "pr_auc_24h" in text
    assert page.locator("#freshness tbody tr").count() >= 5
    # each version's MLflow run: no tracking UI configured, so the run id and artifact URI
    run_cells = page.locator("table.metrics tr", has_text="MLflow run").first.locator("td.run")
    assert run_cells.count() >= 1
    assert "mlartifacts" in run_cells.first.inner_text() or "file:" in run_cells.first.inner_text()
    # the failure model's metrics beside the reactive rule scored on the same rows
    assert page.locator("span.baseline", has_text="reactive rule:").count() >= 1
    # the demand model's backtest beside its seasonal naives
    assert page.locator("span.baseline", has_text="seasonal naive 24:").count() >= 1


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
    assert page.evaluate("() => sessionStorage.getItem('predops.token')") == APPROVER_SECRET
    # the result in words (who, role), not raw JSON, and the audit trail refreshed in place
    result = page.locator("#approve-result").inner_text()
    assert "Approved by browser-test (approver)" in result and "{" not in result, result
    page.wait_for_selector("#audit-card[data-refreshed]")
    assert "approved" in page.locator("#audit").inner_text()
    page.screenshot(path=str(artifacts / "plan_approved.png"), full_page=True)
    # the API agrees
    with urllib.request.urlopen(f"{dashboard_url}/v1/plans/{plan_id}") as r:
        body = json.loads(r.read())
    assert body["approval"]["approved_by"] == "browser-test", body["approval"]
    # an approver may not apply: the API's message is shown, not a JSON body
    page.evaluate("() => document.getElementById('audit-card').removeAttribute('data-refreshed')")
    page.click("#apply")
    page.wait_for_selector("#approve-result.fail >> text=Not applied (HTTP 403)")
    assert "{" not in page.locator("#approve-result").inner_text()
    # an operator applies (this server: dry-run): each action's outcome in a table
    page.fill("#token", OPERATOR_SECRET)
    page.click("#apply")
    page.wait_for_selector("#approve-result.ok >> text=Applied:", timeout=60_000)
    result = page.locator("#approve-result").inner_text()
    assert "dry-run (nothing touched)" in result and "{" not in result, result
    n_actions = int(page.locator(".facts div").nth(3).inner_text().split()[-1])
    assert page.locator("#approve-result table.result-table tbody tr").count() == n_actions
    page.wait_for_selector("#audit-card[data-refreshed]")
    trail = page.locator("#audit").inner_text()
    assert "apply_requested" in trail and "browser-operator" in trail, trail
    page.screenshot(path=str(artifacts / "plan_applied.png"), full_page=True)
    # the plan history lists the plan with its outcome, and links back to it
    page.errors.clear()  # the refused calls above logged their 401 / 403, as they should
    page.click("nav.top a[href='/plans']")
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("/plans")
    _open(page, "/plans", artifacts / "plan_history.png")
    row = page.locator(f"#history tr[data-plan-id='{plan_id}']")
    text = row.inner_text()
    assert "applied (dry-run)" in text and "browser-test" in text, text
    assert "browser-operator" in text, text
    row.locator("a").first.click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#approve-card").get_attribute("data-plan-id") == plan_id


TOP_BIN = """() => { const t = document.getElementById('reliability').data
  .find(d => d.name === 'champion'); return {x: t.x[t.x.length - 1], y: t.y[t.y.length - 1]}; }"""


def test_calibration_caveat_beside_the_risks_it_qualifies(page: Any, artifacts: Path) -> None:
    _open(page, "/models", artifacts / "models_calibration.png")
    caveat = page.locator("#calibration #calibration-caveat").inner_text()
    assert "as a ranking, not a probability" in caveat, caveat
    # computed from the served model's reliability table: the plot's top bin, in words
    top = page.evaluate(TOP_BIN)
    assert f"top bin predicted {top['x']:.1%} and observed {top['y']:.1%}" in caveat, (caveat, top)
    # the same caveat on the risk board, beside the riskiest nodes
    _open(page, "/", artifacts / "fleet_caveat.png")
    board = page.locator("#calibration-caveat").inner_text()
    assert board == caveat
    assert page.locator("section.card:has(#top-nodes) #calibration-caveat").count() == 1
    # and on a node's page exactly when its risk is above the calibrated range
    first = page.locator("#top-nodes tbody tr").first
    node_id = first.locator("a").first.inner_text()
    p_fail = float(first.locator("td").nth(2).inner_text().rstrip("%")) / 100
    up_to = re.match(r".*?calibrated up to ([0-9.]+)%", caveat)
    above = up_to is None or p_fail > float(up_to[1]) / 100  # "not calibrated": any risk
    _open(page, f"/nodes/{node_id}", artifacts / "node_caveat.png")
    shown = page.locator("#calibration-caveat")
    assert shown.count() == int(above)
    if above:
        assert shown.inner_text() == caveat
