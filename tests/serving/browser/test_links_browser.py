"""Links, refresh, the viewer's time zone and the node page's event markers in a real
Chromium: clicks land on the right page, a page reloads itself on the interval its URL
sets (and stops when paused), times and chart axes show in the browser's zone with the
offset, failures and repairs are drawn on the node's charts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import polars as pl
import pytest

from predops.pipelines.workspace.lake import Lake
from tests.serving.browser.test_dashboards_browser import _open, page
from tests.serving.conftest import settings_for
from tests.serving.offender import add_repeat_offender

pytestmark = pytest.mark.integration
__all__ = ["page"]

BERLIN = "Europe/Berlin"  # UTC+01:00 in winter (the fixture's fleet runs in January)


@pytest.fixture(scope="module")
def offender(served_workspace: Path, shared_data: Path) -> str:
    lake = Lake(settings_for(served_workspace, shared_data).lake_dir)
    end = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    return add_repeat_offender(served_workspace, shared_data, end)


@pytest.fixture
def berlin(browser: Any, dashboard_url: str) -> Iterator[Any]:
    ctx = browser.new_context(
        viewport={"width": 1366, "height": 768}, base_url=dashboard_url, timezone_id=BERLIN
    )
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()


def test_plan_action_links_to_the_node_and_back(page: Any, artifacts: Path) -> None:
    _open(page, "/plans/latest", artifacts / "plan_links.png")
    page.locator("details.skip-group").evaluate_all("ds => ds.forEach(d => d.open = true)")
    link = page.locator("#actions a[href^='/nodes/'], table.skips a[href^='/nodes/']").first
    node_id = link.text_content().strip()
    link.click()
    page.wait_for_url(lambda url: url.endswith(f"/nodes/{node_id}"), timeout=30_000)
    page.wait_for_load_state("networkidle")
    decision = page.locator("#plan-decision a")
    assert decision.count() == 1
    decision.click()  # the node's newest plan decision, at its row
    page.wait_for_url(lambda url: "/plans/" in url and "#c-" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    anchor = unquote(urlsplit(page.url).fragment)
    row = page.locator(f"[id='{anchor}']")
    assert row.is_visible() and "target" in (row.get_attribute("class") or "")
    assert row.locator("a").first.inner_text() == node_id
    page.screenshot(path=str(artifacts / "plan_at_node_row.png"), full_page=True)


def test_series_links_to_its_pool_and_models_to_their_version(page: Any, artifacts: Path) -> None:
    page.goto("/demand")
    page.locator("#series tbody a[href^='/demand/']").first.click()
    page.wait_for_load_state("networkidle")
    series_id = page.locator("h1").inner_text()
    page.click("#capacity-link")
    page.wait_for_url(lambda url: "/capacity?pool=" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    pool = parse_qs(urlsplit(page.url).query)["pool"][0]
    assert series_id.startswith(f"{pool}/")
    assert set(page.locator("#sizing tbody tr td:first-child").all_inner_texts()) <= {pool}
    page.goto("/")
    model = page.locator("a.model-link").first
    label = model.inner_text()  # e.g. "predops.node_failure v1"
    model.click()
    page.wait_for_url(lambda url: "/models#model-" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    anchor = unquote(urlsplit(page.url).fragment)
    header = page.locator(f"[id='{anchor}']")
    assert header.count() == 1 and header.inner_text().startswith(label.rsplit(" ", 1)[1])
    assert page.errors == []


def _document_requests(pg: Any, path: str) -> list[float]:
    seen: list[float] = []
    pg.on(
        "request",
        lambda r: (
            seen.append(time.monotonic())
            if r.resource_type == "document" and urlsplit(r.url).path == path
            else None
        ),
    )
    return seen


def test_pages_refresh_on_their_own_keeping_the_url(page: Any, artifacts: Path) -> None:
    page.goto("/demand")
    resource = page.locator("select[name=resource] option").nth(1).get_attribute("value")
    seen = _document_requests(page, "/demand")
    page.goto(f"/demand?resource={resource}&refresh=2")
    page.wait_for_load_state("networkidle")
    assert "refreshes in" in page.locator("#refresh-status").inner_text()
    deadline = time.monotonic() + 30
    while len(seen) < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert len(seen) >= 3, seen  # the visit and two reloads on its own
    q = parse_qs(urlsplit(page.url).query)
    assert q == {"resource": [resource], "refresh": ["2"]}  # filters kept
    page.wait_for_load_state("networkidle")
    page.click("#refresh-pause")
    assert page.locator("#refresh-status").inner_text() == "refresh paused"
    before = len(seen)
    page.wait_for_timeout(4500)
    assert len(seen) == before  # paused: no reload
    page.click("#refresh-pause")  # resume
    page.wait_for_timeout(3500)
    assert len(seen) > before
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / "demand_refresh.png"))


def test_times_and_axes_in_the_viewers_zone(berlin: Any, artifacts: Path) -> None:
    berlin.goto("/")
    node_id = berlin.locator("#top-nodes tbody tr a").first.inner_text()
    berlin.goto(f"/nodes/{node_id}")
    berlin.wait_for_load_state("networkidle")
    berlin.screenshot(path=str(artifacts / "node_berlin.png"), full_page=True)
    times = berlin.evaluate(
        "() => Array.from(document.querySelectorAll('time[datetime]'))"
        ".map(t => [t.getAttribute('datetime'), t.textContent, t.title])"
    )
    assert times
    for iso, shown, utc in times:
        at = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        assert shown == f"{at + timedelta(hours=1):%Y-%m-%d %H:%M} (UTC+01:00)", (iso, shown)
        assert utc == f"{at:%Y-%m-%d %H:%M} UTC"
    served = json.loads(berlin.locator("#risk-history-data").text_content())
    drawn = berlin.evaluate("() => document.getElementById('risk-history').data[0].x")
    first = datetime.fromisoformat(served["data"][0]["x"][0])
    assert drawn[0] == f"{first + timedelta(hours=1):%Y-%m-%d %H:%M:%S}"
    title = berlin.evaluate("() => document.getElementById('risk-history')._fullLayout.title.text")
    assert title.endswith("times in your zone (UTC+01:00)"), title
    assert berlin.errors == []


def test_node_charts_mark_failures_and_the_repeat_offender(
    page: Any, artifacts: Path, offender: str
) -> None:
    _open(page, f"/nodes/{offender}?range=7d", artifacts / "node_repeat_offender.png")
    hint = page.locator("#repeat-offender").inner_text()
    assert "3 XID 48 (gpu_xid) failures in 4 days" in hint and "RMA" in hint
    for chart in ("risk-history", "telemetry"):
        shapes = page.evaluate(
            "id => document.getElementById(id)._fullLayout.shapes.map(s => s.name)", chart
        )
        assert shapes.count("event-failure") == 3 and shapes.count("event-repair") == 3, chart
        drawn = page.evaluate(
            "id => document.querySelectorAll('#' + id + ' .shapelayer path').length", chart
        )
        assert drawn >= 6, (chart, drawn)
    legend = page.evaluate(
        "() => Array.from(document.querySelectorAll('#risk-history .legendtext'))"
        ".map(t => t.textContent)"
    )
    assert "failure (3)" in legend and "repair (3)" in legend
    assert page.errors == []


def test_custom_range_and_hover_times_in_the_viewers_zone(berlin: Any, artifacts: Path) -> None:
    berlin.goto("/")
    node_id = berlin.locator("#top-nodes tbody tr a").first.inner_text()
    berlin.goto(f"/nodes/{node_id}?range=custom&from=2026-01-12T00:00&to=2026-01-12T06:00")
    berlin.wait_for_load_state("networkidle")
    shown = berlin.evaluate(
        "() => ['from', 'to'].map(n => "
        "document.querySelector('#range-picker input[name=' + n + ']').value)"
    )
    assert shown == ["2026-01-12T01:00", "2026-01-12T07:00"]  # Berlin's wall clock
    assert berlin.locator("#range-picker .range-zone").inner_text() == "(your zone, UTC+01:00)"
    berlin.fill("#range-picker input[name=from]", "2026-01-12T03:00")
    berlin.click("#range-picker button")
    berlin.wait_for_url(lambda url: "from=2026-01-12T02%3A00Z" in url, timeout=30_000)
    berlin.wait_for_load_state("networkidle")
    q = parse_qs(urlsplit(berlin.url).query)
    assert q["from"] == ["2026-01-12T02:00Z"] and q["to"] == ["2026-01-12T06:00Z"]
    xs = berlin.evaluate("() => document.getElementById('risk-history').data[0].x")
    assert xs and all("2026-01-12 03:00:00" <= x <= "2026-01-12 07:00:00" for x in xs), xs[:3]
    # hover text (title attributes) with a UTC time names it in Berlin's time too
    berlin.goto("/demand")
    berlin.wait_for_load_state("networkidle")
    titles = berlin.evaluate(
        "() => Array.from(document.querySelectorAll('[data-local-title]')).map(e => e.title)"
    )
    assert titles and all("(UTC+01:00)" in t and " UTC " not in f"{t} " for t in titles), titles
    berlin.screenshot(path=str(artifacts / "demand_berlin.png"), full_page=True)
    assert berlin.errors == []
