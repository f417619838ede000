"""Filters and time ranges in a real Chromium: choosing a filter reloads the page with it
in the URL and changes what is drawn; the node page's range picker bounds its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.serving.browser.test_dashboards_browser import _chart, _open, page

pytestmark = pytest.mark.integration
__all__ = ["page"]

POINTS = """id => document.getElementById(id).data[0].y.filter(v => v !== null).length"""


def _choose(pg: Any, name: str, value: str) -> None:
    pg.select_option(f"select[name={name}]", value)
    pg.wait_for_url(lambda url: f"{name}=" in url, timeout=30_000)
    pg.wait_for_load_state("networkidle")


def test_demand_filter_narrows_the_series(page: Any, artifacts: Path) -> None:
    _open(page, "/demand", artifacts / "demand_index_all.png")
    every = page.locator("#series tbody tr").count()
    inner, card = page.evaluate(
        "() => [document.querySelector('#series').parentElement, "
        "document.querySelector('#series').closest('.card')]"
        ".map(e => e.getBoundingClientRect().right)"
    )
    assert inner <= card  # the table stays inside its card (it scrolls there when wider)
    resource = page.locator("select[name=resource] option").nth(1).get_attribute("value")
    _choose(page, "resource", resource)
    assert parse_qs(urlsplit(page.url).query)["resource"] == [resource]
    page.screenshot(path=str(artifacts / "demand_index_filtered.png"), full_page=True)
    cells = page.locator("#series tbody tr td:nth-child(3)").all_inner_texts()
    assert cells and all(c.startswith(resource) for c in cells) and len(cells) < every
    assert page.errors == []


def test_capacity_filter_keeps_one_pool(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/capacity", artifacts / "capacity_all.png")
    before = len([c for c in charts if c["id"].startswith("pool-")])
    pool = page.locator("select[name=pool] option").nth(1).get_attribute("value")
    _choose(page, "pool", pool)
    assert page.locator("#sizing tbody tr td:first-child").all_inner_texts() == [pool]
    charts = _open(page, page.url, artifacts / "capacity_pool.png")
    after = [c for c in charts if c["id"].startswith("pool-")]
    assert 0 < len(after) < before


def test_plan_filter_by_action_kind(page: Any, artifacts: Path) -> None:
    _open(page, "/plans/latest", artifacts / "plan_all.png")
    kinds = page.locator("select[name=kind] option").all_inner_texts()[1:]
    assert len(kinds) >= 2
    _choose(page, "kind", kinds[0])
    page.screenshot(path=str(artifacts / "plan_kind.png"), full_page=True)
    tags = set(page.locator("#actions .tag").all_inner_texts())
    groups = {t.split(":")[0] for t in page.locator("details.skip-group .pill").all_inner_texts()}
    assert tags | groups == {kinds[0]}
    assert "Showing" in page.locator("#plan-filtered").inner_text()
    page.click("a.clear")  # clear filters: every kind again
    page.wait_for_load_state("networkidle")
    assert "kind=" not in page.url and page.locator("#plan-filtered").count() == 0


def test_node_range_picker_bounds_the_charts(page: Any, artifacts: Path) -> None:
    page.goto("/")
    node_id = page.locator("#top-nodes tbody tr a").first.inner_text()
    _open(page, f"/nodes/{node_id}", artifacts / "node_3d.png")
    three_days = page.evaluate(POINTS, "risk-history")
    page.click("#range-picker a[data-range='24h']")
    page.wait_for_url(lambda url: "range=24h" in url, timeout=30_000)
    charts = _open(page, page.url, artifacts / "node_24h.png")
    assert _chart(charts, "risk-history")["drawn"]
    day = page.evaluate(POINTS, "risk-history")
    assert 0 < day < three_days
    # a custom range typed into the picker
    page.fill("#range-picker input[name=from]", "2026-01-12T00:00")
    page.fill("#range-picker input[name=to]", "2026-01-12T06:00")
    page.click("#range-picker button")
    page.wait_for_url(lambda url: "range=custom" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    q = parse_qs(urlsplit(page.url).query)  # typed in this browser's zone (UTC), sent as UTC
    assert q["from"] == ["2026-01-12T00:00Z"] and q["to"] == ["2026-01-12T06:00Z"]
    xs = page.evaluate("() => document.getElementById('risk-history').data[0].x")
    assert xs and all("2026-01-12 00:00:00" <= x <= "2026-01-12 06:00:00" for x in xs), xs[:3]
    assert page.errors == []


def _counts(pg: Any) -> dict[str, int]:
    found = pg.locator("#range-events .pill").evaluate_all(
        "ps => ps.map(p => [p.dataset.kind, p.querySelector('b').textContent])"
    )
    return {k: int(n.replace(",", "")) for k, n in found}


def test_board_range_and_filters_keep_each_other(page: Any, artifacts: Path) -> None:
    charts = _open(page, "/", artifacts / "fleet_7d.png")
    assert _chart(charts, "range-events-chart")["drawn"]
    week = _counts(page)
    assert week["failure"] > 0 and page.locator("#recent-events tbody tr").count() > 0
    page.click("#range-picker a[data-range='24h']")
    page.wait_for_url(lambda url: "range=24h" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    day = _counts(page)
    assert all(n <= week[k] for k, n in day.items()) and sum(day.values()) < sum(week.values())
    rack = page.locator("select[name=rack] option").nth(1).get_attribute("value")
    _choose(page, "rack", rack)  # the filter keeps the range, and the range the filter
    q = parse_qs(urlsplit(page.url).query)
    assert q["rack"] == [rack] and q["range"] == ["24h"]
    page.screenshot(path=str(artifacts / "fleet_rack_24h.png"), full_page=True)
    page.click("#range-picker a[data-range='3d']")
    page.wait_for_url(lambda url: "range=3d" in url, timeout=30_000)
    assert parse_qs(urlsplit(page.url).query)["rack"] == [rack]
    # every listed node state names its pods (busy) or says idle / out of service
    states = page.locator("#top-nodes td.state").all_inner_texts()
    assert states and all(s.endswith(("pods", "1 pod")) for s in states), states
    assert page.errors == []


def test_models_page_filter_and_range(page: Any, artifacts: Path) -> None:
    _open(page, "/models", artifacts / "models_all.png")
    every = page.locator("section.model").count()
    model = page.locator("select[name=model] option").nth(1).get_attribute("value")
    _choose(page, "model", model)
    assert page.locator("section.model").count() == 1 < every
    assert page.locator("section.model h2").inner_text() == model
    page.click("#range-picker a[data-range='24h']")
    page.wait_for_url(lambda url: "range=24h" in url, timeout=30_000)
    assert parse_qs(urlsplit(page.url).query)["model"] == [model]
    page.screenshot(path=str(artifacts / "models_one.png"), full_page=True)
    assert page.errors == []


def test_a_buy_candidate_links_to_its_capacity_row_and_back(page: Any, artifacts: Path) -> None:
    _open(page, "/plans/latest", artifacts / "plan_buys.png")
    page.locator("details.skip-group").evaluate_all("ds => ds.forEach(d => d.open = true)")
    link = page.locator("a[href*='#buy-']").first
    target = link.inner_text()
    link.click()
    page.wait_for_url(lambda url: "/capacity?plan_id=" in url and "#buy-" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    row = page.locator(f"[id='buy-{target}']")
    assert row.is_visible() and "target" in (row.get_attribute("class") or "")
    page.screenshot(path=str(artifacts / "capacity_at_buy.png"), full_page=True)
    row.locator("a").first.click()  # back to the plan, at the candidate's row
    page.wait_for_url(lambda url: "/plans/" in url and "#c-buy-" in url, timeout=30_000)
    page.wait_for_load_state("networkidle")
    back = page.locator(f"[id='c-buy-{target}']")
    assert back.is_visible() and "target" in (back.get_attribute("class") or "")
    assert page.errors == []
