"""Names from data show literally in the charts of a real Chromium: a rack named like a
link and a spine named like bold text (plotly draws a subset of HTML in tick labels and
hover text) give no link and no bold in the fleet board's heat map, only their text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.pipelines.workspace.fleet_state import latest_as_of
from predops.pipelines.workspace.lake import Lake
from predops.serving.config import ServeConfig
from tests.serving.browser.conftest import _app, _serving, browser_page
from tests.serving.conftest import settings_for

pytestmark = pytest.mark.integration

RACK = '<a href="https://evil.example/phish">x</a>'
SPINE = "<b>sp-bold</b>"

CHART = """() => {
  const chart = document.getElementById('rack-heatmap');
  const links = Array.from(chart.querySelectorAll('a')).map(a =>
    a.getAttribute('href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '');
  const ticks = Array.from(chart.querySelectorAll('.xtick text, .ytick text'))
    .map(t => t.textContent);
  const bold = chart.querySelectorAll('.xtick tspan[style*="bold"], .ytick tspan[style*="bold"]');
  return {drawn: chart.querySelector('svg.main-svg') !== null, links, ticks, bold: bold.length};
}"""


HOVER_CELL = """(rack) => {
  const gd = document.getElementById('rack-heatmap');
  const trace = gd.data[0], rows = trace.customdata;
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const box = gd.getBoundingClientRect();
  for (let i = 0; i < rows.length; i++) {
    const j = rows[i].indexOf(rack);
    if (j >= 0) {
      return {x: box.left + xa._offset + xa.d2p(trace.x[j]),
              y: box.top + ya._offset + ya.d2p(trace.y[i])};
    }
  }
  return null;
}"""


def _rename_one_rack(ws: Path, shared_data: Path) -> str:
    """A later inventory snapshot of one rack's nodes, the rack and spine renamed;
    returns one of its nodes."""
    lake = Lake(settings_for(ws, shared_data).lake_dir)
    end = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    inventory = latest_as_of(lake, "inventory", end, "node_id").collect()
    rack = inventory["rack"].sort()[0]
    moved = inventory.filter(pl.col("rack") == rack).with_columns(
        ts=pl.lit(end).cast(inventory.schema["ts"]), rack=pl.lit(RACK), spine=pl.lit(SPINE)
    )
    lake.write("inventory", "renamed", moved)
    return str(moved["node_id"][0])


@pytest.fixture(scope="module")
def hostile_url(served_workspace: Path, shared_data: Path) -> Iterator[str]:
    _rename_one_rack(served_workspace, shared_data)
    app = _app(served_workspace, shared_data, ServeConfig())
    with _serving(app) as url:
        yield url


def test_a_rack_named_like_a_link_shows_as_text(
    browser: Any, hostile_url: str, artifacts: Path
) -> None:
    with browser_page(browser, hostile_url) as (_, page, errors):
        assert page.goto("/").status == 200
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(artifacts / "fleet_hostile_names.png"), full_page=True)
        chart = page.evaluate(CHART)
        assert errors == [] and chart["drawn"], (errors, chart)
        assert not [h for h in chart["links"] if "evil.example" in h], chart["links"]
        assert chart["links"] == [] and chart["bold"] == 0, chart
        assert RACK in chart["ticks"] and SPINE in chart["ticks"], chart["ticks"]
        # the hover text too: the renamed rack's cell names it literally
        # the mouse on the renamed rack's cell (found by the raw rack name a click
        # carries; its centre from plotly's axes), not a sweep: probing points could
        # miss one cell of a grid that grows with what other tests add to the workspace
        page.locator("#rack-heatmap").scroll_into_view_if_needed()
        cell = page.evaluate(HOVER_CELL, RACK)
        assert cell is not None, "the renamed rack has no cell"
        page.mouse.move(cell["x"], cell["y"])
        hover = page.locator("#rack-heatmap .hoverlayer")
        hovered = ""
        for _ in range(50):  # plotly draws the label on a later frame
            hovered = (hover.first.text_content() or "") if hover.count() else ""
            if RACK in hovered:
                break
            page.wait_for_timeout(40)
        assert hover.locator("a").count() == 0
        assert RACK in hovered, "no hover label named the renamed rack"
