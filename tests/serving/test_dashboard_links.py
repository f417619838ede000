"""Links between the pages, data age and refresh, times as ``<time>`` elements, and the
node page's event markers and repeat-offender hint, through the app (no browser)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from predops.pipelines.workspace.lake import Lake
from tests.serving.conftest import settings_for
from tests.serving.offender import add_repeat_offender
from tests.serving.test_dashboards import _figures, client

__all__ = ["client"]

PAGES = ("/", "/demand", "/capacity", "/plans/latest", "/models")


@pytest.fixture(scope="module")
def offender(served_workspace: Path, shared_data: Path) -> str:
    lake = Lake(settings_for(served_workspace, shared_data).lake_dir)
    end = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    return add_repeat_offender(served_workspace, shared_data, end)


def test_every_page_says_how_old_its_data_is_and_refreshes(client: TestClient) -> None:
    for path in PAGES:
        html = client.get(path).text
        bar = html.split('id="viewbar"', 1)[1].split("</div>", 1)[0]
        assert 'data-refresh="60"' in html, path
        assert re.search(r' as of <time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">', bar), path
        assert 'class="age">(' in bar and 'id="refresh-pause"' in bar, path
        assert '<script src="/static/view.js" defer>' in html
    kept = client.get("/demand", params={"refresh": "5", "resource": "cpu_cores"}).text
    assert 'data-refresh="5"' in kept
    # the interval links keep the page's filters
    assert 'href="/demand?refresh=0&amp;resource=cpu_cores"' in kept or (
        'href="/demand?resource=cpu_cores&amp;refresh=0"' in kept
    )
    assert 'data-refresh="0"' in client.get("/models", params={"refresh": "0"}).text


def test_times_are_time_elements_in_utc(client: TestClient) -> None:
    html = client.get("/plans/latest").text
    times = re.findall(r'<time datetime="([^"]+)">([^<]+)</time>', html)
    assert len(times) >= 3
    for iso, text in times:
        assert iso.endswith("Z") and text.endswith(" UTC")
        assert text[:16] == f"{iso[:10]} {iso[11:16]}"


class _Attributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.bad: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.bad += [(tag, k, v) for k, v in attrs if v and ("<" in v or ">" in v)]


def test_no_markup_ends_up_inside_an_attribute(client: TestClient) -> None:
    """A time's ``<time>`` markup inside a ``title`` ends the attribute and spills into
    the page (it did in the demand index's headroom and history cells)."""
    for path in (*PAGES, "/plans", "/demand/" + _a_series(client)):
        parser = _Attributes()
        parser.feed(client.get(path).text)
        assert parser.bad == [], (path, parser.bad[:3])


class _Nesting(HTMLParser):
    """Cards (``<section>``) inside cards, blocks inside a paragraph, and an id given
    twice: what a block put in the wrong place of a template or an anchor that does not
    name its row does (a browser closes the ``<p>`` or lands on the first id and moves
    on, so nothing fails but the page reads wrong)."""

    BLOCKS = frozenset({"section", "form", "table", "div", "p", "ul", "h2", "details"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.bad: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs).get("id")
        if found is not None and found in self.ids:  # a link to it would land on the first
            self.bad.append(f"id {found!r} twice")
        self.ids.add(found or "")
        if tag == "section" and "section" in self.open:
            self.bad.append(f"section in section ({dict(attrs).get('id')})")
        if tag in self.BLOCKS and self.open and self.open[-1] == "p":
            self.bad.append(f"<{tag}> in <p> ({dict(attrs).get('id')})")
        if tag in self.BLOCKS:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.BLOCKS and tag in self.open:
            while self.open.pop() != tag:
                pass


def test_cards_and_paragraphs_nest_as_written(client: TestClient) -> None:
    node = re.findall(r'<a href="/nodes/([^"]+)">', client.get("/").text)[0]
    for path in (*PAGES, "/plans", "/demand/" + _a_series(client), f"/nodes/{node}"):
        parser = _Nesting()
        parser.feed(client.get(path).text)
        assert parser.bad == [], (path, parser.bad[:3])


def _a_series(client: TestClient) -> str:
    found = re.search(r'<a href="/demand/([^"]+)">', client.get("/demand").text)
    assert found
    return found.group(1)


def test_plan_rows_link_to_nodes_and_pools(client: TestClient) -> None:
    html = client.get("/plans/latest").text
    assert re.search(r'<tr id="c-[a-z_]+-[^"]+"><td>', html)
    nodes = re.findall(r'<a href="/nodes/([^"]+)">', html)
    assert nodes
    for node_id in nodes[:3]:
        assert client.get(f"/nodes/{node_id}").status_code == 200
    pools = re.findall(r'<a href="(/capacity\?pool=[^"#]+)#sizing-([^"]+)">', html)
    for href, pool in pools:
        page = client.get(href.replace("&amp;", "&")).text
        assert f'<tr id="sizing-{pool}">' in page
    models = re.findall(r'<a class="model-link" href="/models#([^"]+)">', html)
    assert models
    page = client.get("/models").text
    assert all(f'id="{m}"' in page for m in models), models


def test_demand_series_links_to_its_pool_capacity(client: TestClient) -> None:
    series = re.findall(r'<a href="/demand/([^"]+)">', client.get("/demand").text)[0]
    html = client.get(f"/demand/{series}").text
    href = re.findall(r'<a id="capacity-link" href="([^"]+)">', html)[0].replace("&amp;", "&")
    pool = series.split("/")[0]
    assert href == f"/capacity?pool={pool}#sizing-{pool}"
    assert client.get(href.split("#")[0]).status_code == 200
    model = re.findall(r'<a class="model-link" href="/models#([^"]+)">', html)[0]
    assert f'id="{model}"' in client.get("/models").text, model


def test_node_page_marks_events_and_flags_a_repeat_offender(
    client: TestClient, offender: str
) -> None:
    html = client.get(f"/nodes/{offender}", params={"range": "7d"}).text
    hint = html.split('id="repeat-offender"', 1)[1].split("</div>", 1)[0]
    assert "3 XID 48 (gpu_xid) failures in 4 days — consider RMA / repair" in hint
    assert "3 or more failures of one signature" in hint and "within 7 days" in hint
    for chart in ("risk-history", "telemetry"):
        meta = _figures(html)[chart]["layout"]["meta"]["events"]
        assert meta["failure"] == 3 and meta["repair"] == 3, (chart, meta)
    # a range that holds only the last failure marks only that one
    day = client.get(f"/nodes/{offender}", params={"range": "24h"}).text
    assert _figures(day)["risk-history"]["layout"]["meta"]["events"]["failure"] == 1
    assert "repeat-offender" in day  # the hint counts the week, whatever range is shown


def test_node_page_names_its_newest_plan_decision(client: TestClient) -> None:
    plan = client.get("/plans/latest").text
    node_id = re.findall(r'<tr id="c-(?:cordon|drain|uncordon|set_reclaimable)-([^"]+)">', plan)[0]
    html = client.get(f"/nodes/{node_id}").text
    fact = html.split('id="plan-decision"', 1)[1].split("</div>", 1)[0]
    href = re.findall(r'<a href="([^"]+)">', fact)[0].replace("&amp;", "&")
    path, anchor = href.split("#")
    target = client.get(path).text
    assert f'<tr id="{anchor}">' in target
