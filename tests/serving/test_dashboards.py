"""The dashboard pages through the app (no browser): every page answers with its data or
an empty state that says why, plotly.js comes from the server itself, everything taken
from data is escaped, and ids from URLs are validated."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from predops.core.clock import FixedClock
from predops.models.demand.selection import WEIGHTINGS
from predops.pipelines.workspace.lake import Lake
from predops.serving.app import create_app
from predops.serving.dashboards.demand import WEIGHTING_TEXT
from tests.serving.conftest import settings_for

PAGES = ("/", "/demand", "/capacity", "/plans/latest", "/models")


@pytest.fixture(scope="module")
def client(served_workspace: Path, shared_data: Path) -> Iterator[TestClient]:
    settings = settings_for(served_workspace, shared_data)
    end = Lake(settings.lake_dir).scan("telemetry").select(pl.col("ts").max()).collect().item()
    app = create_app(
        settings, clock=FixedClock(end + timedelta(minutes=5)), reload_in_background=False
    )
    with TestClient(app) as c:
        yield c


def _figures(html: str) -> dict[str, dict]:
    """The plotly figures a page embeds, by chart id."""
    found = re.findall(
        r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', html, re.S
    )
    return {k: json.loads(v) for k, v in found}


def test_pages_answer_with_nav_and_local_plotly(client: TestClient) -> None:
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:500])
        assert all(f'href="{href}"' in r.text for href in ("/", "/demand", "/models")), path
        scripts = re.findall(r'<script[^>]+src="([^"]+)"', r.text)
        assert "/static/plotly.min.js" in scripts
        assert not [s for s in scripts if "//" in s], f"{path} loads scripts from elsewhere"
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and "plotly.js" in js.text[:500]
    assert client.get("/static/../app.py").status_code == 404


def test_fleet_board_scores_every_fresh_node(client: TestClient) -> None:
    html = client.get("/").text
    heat = _figures(html)["rack-heatmap"]["data"][0]
    cells = [z for row in heat["z"] for z in row if z is not None]
    assert heat["type"] == "heatmap" and len(cells) >= 4
    assert "60 of 60 nodes scored" in html
    table = html.split('id="top-nodes"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<a href="/nodes/([^"]+)">', table)
    assert len(rows) == 25


def test_fleet_board_filters_are_in_the_url(client: TestClient) -> None:
    html = client.get("/").text
    pools = re.findall(r'<select name="pool"[^>]*>(.*?)</select>', html, re.S)[0]
    pool = re.findall(r'<option value="([^"]+)"', pools)[0]
    filtered = client.get("/", params={"pool": pool}).text
    assert f'<option value="{pool}" selected>' in filtered and 'href="/">clear filters' in filtered
    table = filtered.split('id="top-nodes"', 1)[1].split("</table>", 1)[0]
    cells = re.findall(
        r"<tr><td>\d+</td><td><a[^>]+>[^<]+</a></td>\s*<td[^>]*>[^<]+</td><td>([^<]+)</td>", table
    )
    assert cells and set(cells) == {pool}, cells
    heat = _figures(filtered)["rack-heatmap"]["data"][0]
    assert all(pool in t for row in heat["text"] for t in row if t)
    assert _figures(filtered)["rack-heatmap"]["layout"]["meta"] == {"link": "rack"}
    none = client.get("/", params={"pool": "no-such-pool"}, headers={"accept": "text/html"})
    assert none.status_code == 400 and "pool: &#39;no-such-pool&#39; is not offered" in none.text


def test_node_page_and_id_validation(client: TestClient) -> None:
    node_id = re.findall(r'<a href="/nodes/([^"]+)">', client.get("/").text)[0]
    r = client.get(f"/nodes/{node_id}")
    figs = _figures(r.text)
    assert len(figs["risk-history"]["data"][0]["y"]) >= 24
    assert figs["telemetry"]["data"]
    assert client.get("/nodes/node-does-not-exist").status_code == 404
    bad = client.get("/nodes/%3Cscript%3Ealert(1)")
    assert bad.status_code == 422 and "<script>" not in bad.text


def test_demand_series_fan_chart_and_unknown_series(client: TestClient) -> None:
    series = re.findall(r'<a href="/demand/([^"]+)">', client.get("/demand").text)
    assert len(series) >= 3
    fan = _figures(client.get(f"/demand/{series[0]}").text)["fan"]["data"]
    names = {t["name"]: t for t in fan}
    assert len(names["p50 forecast"]["y"]) == 48  # the hourly config's 48 steps
    assert all(
        lo <= mid <= hi
        for lo, mid, hi in zip(
            names["p10"]["y"], names["p50 forecast"]["y"], names["p10–p90"]["y"], strict=True
        )
    )
    assert client.get("/demand/no/such/series").status_code == 404
    assert client.get("/demand/a/../b").status_code in (404, 422)


def test_demand_series_shows_how_the_combination_weighs_its_candidates(
    client: TestClient,
) -> None:
    series = re.findall(r'<a href="/demand/([^"]+)">', client.get("/demand").text)
    page = client.get(f"/demand/{series[0]}").text
    table = re.search(r'<table class="data" id="selection">(.*?)</table>', page, re.S)
    assert table is not None, "the served combination's weights are on the series page"
    head = re.findall(r"<th>([^<]+)</th>", table.group(1))
    assert head == [
        "hours ahead",
        "LightGBM",
        "ETS",
        "seasonal naive (shortest season)",
        "seasonal naive (longest season)",
        "Theta",
        "persistence (last value)",
    ]
    rows = re.findall(r"<tr><td>(\d+-\d+)</td>(.*?)</tr>", table.group(1))
    assert [b for b, _ in rows] == ["1-6", "7-12", "13-24", "25-48"]
    for bucket, cells in rows:
        shown = [float(x) for x in re.findall(r">(\d+)%</td>", cells)]
        # six weights, each rounded to a whole percent, summing to 100 +- rounding
        assert len(shown) == 6 and abs(sum(shown) - 100) <= 3, (bucket, shown)
    assert "validation windows issued at" in page
    # every weighting has its words; the default's: LightGBM against the classical
    # methods' combination, own errors shrunk toward the pool's
    assert set(WEIGHTING_TEXT) == set(WEIGHTINGS)
    assert "then LightGBM against their combination" in page
    assert "taken halfway toward its error relative to the others on every series" in page


def test_capacity_shows_sizing_and_explains_missing_buys(client: TestClient) -> None:
    html = client.get("/capacity").text
    sizing = _figures(html)["sizing-chart"]["data"]
    assert [t["name"] for t in sizing] == ["current nodes", "target nodes", "planned nodes"]
    assert all(v is not None for t in sizing for v in t["y"])
    # The simulated lake has stock positions; the hourly demand model reaches 48 h, not
    # their lead times, so each SKU is a typed skip and no purchase is invented.
    assert 'id="buy-skips"' in html and "no_forecast" in html and 'id="buys"' not in html
    assert "gpu-" in html and "No purchases considered" not in html


def test_plan_page_escapes_what_it_shows(client: TestClient, served_workspace: Path) -> None:
    settings = settings_for(served_workspace, Path("."))
    path = sorted(settings.plans_dir.glob("*.json"))[0]
    body = json.loads(path.read_text())
    body["plan_id"] = "plan-hostile"
    body["skips"] = [
        *body["skips"][:1],
        {
            "kind": "drain",
            "target": "n1",
            "reason": "stale_data",
            "detail": "<script>alert('x')</script>",
        },
    ]
    (settings.plans_dir / "plan-hostile.json").write_text(json.dumps(body))
    try:
        r = client.get("/plans/plan-hostile")
        assert r.status_code == 200
        assert "<script>alert" not in r.text
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in r.text
        assert client.get("/plans/no-such-plan").status_code == 404
        assert client.get("/plans/bad%20id").status_code == 422
    finally:
        (settings.plans_dir / "plan-hostile.json").unlink()


def test_models_page_metrics_and_calibration(client: TestClient) -> None:
    html = client.get("/models").text
    rel = _figures(html)["reliability"]["data"][1]
    assert len(rel["x"]) >= 2 and all(0 <= y <= 1 for y in rel["y"])
    assert "pr_auc_24h" in html and "predops.demand" in html
    assert "no scheduler has run in this workspace yet" in html
    # The served workspace's first versions are champion and challenger at once: the
    # page says there is no challenger rather than showing v1 twice.
    assert "challenger: <b>none</b> (v1 is the champion" in html


def test_empty_workspace_pages_say_why(tmp_path: Path, shared_data: Path) -> None:
    app = create_app(settings_for(tmp_path / "ws", shared_data), reload_in_background=False)
    with TestClient(app) as c:
        for path in PAGES:
            r = c.get(path)
            assert r.status_code == 200, (path, r.text[:500])
            assert 'class="empty"' in r.text, path
        assert "no failure model is served" in c.get("/").text
