"""Filters and time ranges of the dashboard pages through the app (no browser): each
filter narrows what the page draws, each range what its charts cover, and a value the
page cannot use is a 400 naming the parameter (a page for a browser, the JSON error body
with ``field: query.<param>`` for anyone else)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from predops.serving.dashboards import node_state
from tests.serving.test_dashboards import _figures, client

__all__ = ["client"]  # the module's app (fixture shared with test_dashboards)

HTML = {"accept": "text/html"}


def _options(html: str, name: str) -> list[str]:
    found = re.findall(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert found, f"no {name} filter"
    return [v for v in re.findall(r'<option value="([^"]*)"', found[0]) if v]


def _table(html: str, table_id: str) -> str:
    """The body rows of table ``table_id``."""
    return html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0].split("<tbody>", 1)[1]


def test_demand_index_filters_narrow_the_series(client: TestClient) -> None:
    html = client.get("/demand").text
    every = re.findall(r'<a href="/demand/([^"]+)">', _table(html, "series"))
    resources = _options(html, "resource")
    assert len(resources) >= 2 and _options(html, "pool")
    for resource in resources:
        shown = client.get("/demand", params={"resource": resource}).text
        rows = re.split(r"<tr[ >]", _table(shown, "series"))[1:]
        assert rows and all(f"<td>{resource}" in r for r in rows), resource
        assert f'<option value="{resource}" selected>' in shown
        assert len(rows) < len(every)


def test_capacity_filters_keep_one_pool(client: TestClient) -> None:
    html = client.get("/capacity").text
    sized = re.findall(r'<tr id="sizing-([^"]+)">', html)
    assert sized and set(sized) <= set(_options(html, "pool"))
    pool = sized[0]
    shown = client.get("/capacity", params={"pool": pool}).text
    sizing = re.findall(r'<tr id="sizing-[^"]+"><td>([^<]+)</td>', _table(shown, "sizing"))
    assert sizing == [pool]
    titles = [
        f["layout"]["title"]["text"] for k, f in _figures(shown).items() if k.startswith("pool-")
    ]
    assert titles and all(t.startswith(f"{pool}/") for t in titles)
    assert len(titles) < len([k for k in _figures(html) if k.startswith("pool-")])


def test_plan_filters_by_kind_pool_and_state(client: TestClient) -> None:
    html = client.get("/plans/latest").text
    kinds = _options(html, "kind")
    assert len(kinds) >= 2 and _options(html, "state") == list(node_state.WORDS)
    for kind in kinds:
        shown = client.get("/plans/latest", params={"kind": kind}).text
        tags = set(re.findall(r'<span class="tag tag-([a-z_]+)">', shown))
        groups = set(re.findall(r'<span class="pill">([a-z_]+):', shown))
        assert tags | groups == {kind}, (kind, tags, groups)
        assert 'id="plan-filtered"' in shown
    pool = _options(html, "pool")[0]
    pooled = client.get("/plans/latest", params={"pool": pool, "state": "ready"}).text
    assert 'id="plan-filtered"' in pooled and "Showing" in pooled


def test_node_and_series_ranges_bound_the_charts(client: TestClient) -> None:
    node_id = re.findall(r'<a href="/nodes/([^"]+)">', client.get("/").text)[0]
    points = {}
    for preset in ("6h", "24h", "3d"):
        page = client.get(f"/nodes/{node_id}", params={"range": preset}).text
        points[preset] = len([y for y in _figures(page)["risk-history"]["data"][0]["y"] if y])
        assert f'class="preset active" data-range="{preset}"' in page
    assert 0 < points["6h"] < points["24h"] < points["3d"], points
    default = client.get(f"/nodes/{node_id}").text
    assert 'class="preset active" data-range="3d"' in default  # 3 days unless asked
    series = re.findall(r'<a href="/demand/([^"]+)">', client.get("/demand").text)[0]
    actual = {}
    for preset in ("24h", "7d"):
        page = client.get(f"/demand/{series}", params={"range": preset}).text
        fan = {t["name"]: t for t in _figures(page)["fan"]["data"]}
        actual[preset] = len(fan["actual"]["x"])
    assert 0 < actual["24h"] < actual["7d"], actual


@pytest.mark.parametrize(
    ("path", "params", "param"),
    [
        ("/demand", {"resource": "tpus"}, "resource"),
        ("/capacity", {"gpu_model": "nope"}, "gpu_model"),
        ("/plans/latest", {"state": "asleep"}, "state"),
        ("/plans/latest", {"kind": "reboot"}, "kind"),
        ("/", {"rack": "rack-none"}, "rack"),
        ("/models", {"refresh": "soon"}, "refresh"),
        ("/demand", {"refresh": "-5"}, "refresh"),
    ],
)
def test_bad_filter_values_are_a_400_naming_them(
    client: TestClient, path: str, params: dict[str, str], param: str
) -> None:
    page = client.get(path, params=params, headers=HTML)
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
    assert "Not a valid view" in page.text and f"{param}: " in page.text
    api = client.get(path, params=params, headers={"accept": "application/json"})
    assert api.status_code == 400 and api.json()["field"] == f"query.{param}"


def test_bad_node_range_is_a_400_naming_it(client: TestClient) -> None:
    node_id = re.findall(r'<a href="/nodes/([^"]+)">', client.get("/").text)[0]
    page = client.get(f"/nodes/{node_id}", params={"range": "forever"}, headers=HTML)
    assert page.status_code == 400 and "range: one of 6h, 24h, 3d, 7d or custom" in page.text
    later = client.get(
        f"/nodes/{node_id}", params={"from": "2026-01-10T00:00", "to": "2026-01-09"}, headers=HTML
    )
    assert later.status_code == 400 and "to: must be after from=" in later.text
