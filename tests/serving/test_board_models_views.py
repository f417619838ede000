"""The risk board's time range and node states, the models page's filters and range, and
the buy rows' links, through the app (no browser). Each figure a page shows is checked
against the lake or the run store read directly."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import RunStore
from predops.serving.dashboards import board_history, node_state
from predops.serving.dashboards.fleet import inventory_at
from tests.serving.conftest import settings_for
from tests.serving.test_dashboard_views import _options, _table
from tests.serving.test_dashboards import _figures, client

__all__ = ["client"]


def _lake(served_workspace: Path, shared_data: Path) -> Path:
    return settings_for(served_workspace, shared_data).lake_dir


def _range_of(html: str) -> tuple[datetime, datetime]:
    """The board's events card's [since, until], from its heading's time elements."""
    card = html.split('id="range-events"', 1)[1].split("</h2>", 1)[0]
    since, until = re.findall(r'<time datetime="([^"]+)"', card)
    return datetime.fromisoformat(since), datetime.fromisoformat(until)


def _counts(html: str) -> dict[str, int]:
    found = re.findall(r'data-kind="([a-z_]+)">[^<]*<b>([\d,]+)</b>', html)
    return {k: int(n.replace(",", "")) for k, n in found}


def _lake_counts(lake_dir: Path, since: datetime, until: datetime, nodes: set[str] | None) -> dict:
    ev = Lake(lake_dir).scan("events").collect()
    ev = ev.filter(
        pl.col("kind").is_in(board_history.KINDS) & pl.col("at").is_between(since, until)
    )
    if nodes is not None:
        ev = ev.filter(pl.col("node_id").is_in(sorted(nodes)))
    ev = ev.unique(["node_id", "kind", "at", "cause", "detail"])
    return {k: ev.filter(pl.col("kind") == k).height for k in board_history.KINDS}


def test_board_counts_the_events_of_its_range(
    client: TestClient, served_workspace: Path, shared_data: Path
) -> None:
    lake_dir = _lake(served_workspace, shared_data)
    week = client.get("/").text
    assert 'class="preset active" data-range="7d"' in week  # a week unless asked
    since, until = _range_of(week)
    assert until - since == timedelta(days=7)
    counts = _counts(week)
    assert counts == _lake_counts(lake_dir, since, until, None)
    assert counts["failure"] > 0 and counts["repair"] > 0  # the fixture's fleet fails
    listed = re.findall(r'<td><a href="/nodes/[^"]+">([^<]+)</a></td><td>([a-z_]+)</td>', week)
    assert 0 < len(listed) <= board_history.LISTED
    day = client.get("/", params={"range": "24h"}).text
    assert all(n <= counts[k] for k, n in _counts(day).items())
    assert sum(_counts(day).values()) < sum(counts.values())
    # a custom range and a rack filter: only that rack's nodes' events
    rack = _options(week, "rack")[0]
    racked = client.get(
        "/",
        params={"rack": rack, "from": since.isoformat(), "to": until.isoformat()},
    ).text
    inv = inventory_at(lake_dir, until)
    in_rack = set(inv.filter(pl.col("rack") == rack)["node_id"].to_list())
    assert _counts(racked) == _lake_counts(lake_dir, since, until, in_rack)
    shown = re.findall(r'<td><a href="/nodes/([^"]+)">', _table(racked, "recent-events"))
    assert set(shown) <= in_rack


def test_board_separates_busy_idle_and_out_of_service_nodes(
    client: TestClient, served_workspace: Path, shared_data: Path
) -> None:
    lake_dir = _lake(served_workspace, shared_data)
    html = client.get("/").text
    _, now = _range_of(html)
    rows: dict[str, list[tuple[str, str]]] = {}
    for table in ("top-nodes", "idle-nodes", "out-of-service"):
        if f'id="{table}"' in html:
            body = _table(html, table)
            rows[table] = re.findall(
                r'<a href="/nodes/([^"]+)">.*?<td class="state">(.*?)</td>', body, re.S
            )
    assert rows["top-nodes"], "no busy node listed"
    ids = [n for found in rows.values() for n, _ in found]
    pods = node_state.running_pod_counts(Lake(lake_dir), ids, now)
    assert pods is not None
    for node_id, text in rows["top-nodes"]:
        assert pods[node_id] > 0 and text.startswith(("ready", "lent"))
        assert text.endswith(f"{pods[node_id]:,} pods" if pods[node_id] > 1 else "1 pod")
    for node_id, text in rows.get("idle-nodes", []):
        assert pods[node_id] == 0 and text.endswith("idle")
    for node_id, text in rows.get("out-of-service", []):
        assert text.split(" by ")[0].split(" · ")[0] in (
            "cordoned",
            "draining",
            "drained",
            "in repair",
            "in maintenance",
        ), (node_id, text)


def test_node_page_and_plan_skips_show_node_state(client: TestClient) -> None:
    node_id = re.findall(r'<a href="/nodes/([^"]+)">', client.get("/").text)[0]
    page = client.get(f"/nodes/{node_id}").text
    state = page.split('id="node-state"><span>state</span>', 1)[1].split("</div>", 1)[0]
    assert state.startswith(node_state.WORDS) and ("pod" in state or "idle" in state)
    plan = client.get("/plans/latest").text
    cells = re.findall(r'<td class="state">(.*?)</td>', plan)
    assert cells and all(c == "—" or c.startswith(node_state.WORDS) for c in cells)
    assert any(c != "—" for c in cells)


def _runs(ws: Path, shared_data: Path, end: datetime) -> None:
    """Three runs a day apart, the newest failed, in the workspace's run store."""
    store = RunStore(settings_for(ws, shared_data).scheduler_db)
    for days, job, status in (
        (2, "retrain", "done"),
        (1, "pipeline", "done"),
        (0, "pipeline", "failed"),
    ):
        at = end - timedelta(days=days, hours=1)
        begun = store.begin(job, at.isoformat(), owner="test", at=at)
        store.finish(begun.run_id, status, at=at + timedelta(minutes=5))  # type: ignore[union-attr]


def test_models_page_filters_and_range(
    client: TestClient, served_workspace: Path, shared_data: Path
) -> None:
    html = client.get("/models").text
    assert 'class="preset active" data-range="7d"' in html
    names = _options(html, "model")
    assert len(names) >= 2
    one = client.get("/models", params={"model": names[0]}).text
    sections = re.findall(r'<section class="card model" id="([^"]+)"', one)
    assert len(sections) == 1 and sections[0].endswith(names[0].removeprefix("predops."))
    # a range before every version's data: only the versions an alias points at
    old = client.get("/models", params={"from": "2020-01-01T00:00", "to": "2020-01-02T00:00"}).text
    heads = re.findall(r'<th id="model-[^"]+-v\d+" class="num[^"]*">v\d+( \([^)]*\))?</th>', old)
    assert heads and all(heads)  # each version column shown has an alias
    _, end = _range_of(client.get("/").text)
    _runs(served_workspace, shared_data, end)
    runs = client.get("/models").text
    assert _options(runs, "job") == ["pipeline", "retrain"]
    every = re.findall(r"<tr><td>([a-z_]+)</td>", _table(runs, "runs"))
    assert sorted(every) == ["pipeline", "pipeline", "retrain"]
    failed = client.get("/models", params={"status": "failed"}).text
    assert re.findall(r'class="st-([a-z]+)"', _table(failed, "runs")) == ["failed"]
    day = client.get("/models", params={"range": "24h", "job": "pipeline"}).text
    assert re.findall(r"<tr><td>([a-z_]+)</td>", _table(day, "runs")) == ["pipeline"]


@pytest.mark.parametrize(
    ("params", "param"), [({"model": "predops.nope"}, "model"), ({"status": "asleep"}, "status")]
)
def test_models_page_refuses_what_it_does_not_offer(
    client: TestClient, params: dict[str, str], param: str
) -> None:
    page = client.get("/models", params=params, headers={"accept": "text/html"})
    assert page.status_code == 400 and f"{param}: " in page.text


def test_buy_rows_link_the_plan_and_the_capacity_page(client: TestClient) -> None:
    plan = client.get("/plans/latest").text
    plan_id = re.findall(r'data-plan-id="([^"]+)"', plan)[0]
    hrefs = re.findall(r'<a href="(/capacity\?plan_id=[^"#]+#buy-[^"]+)">([^<]+)</a>', plan)
    assert hrefs, "no buy candidate links to the capacity page"
    for href, target in hrefs:
        page, anchor = href.split("#", 1)
        assert page == f"/capacity?plan_id={plan_id}" and anchor == f"buy-{target}"
        capacity = client.get(page.replace("&amp;", "&")).text
        row = capacity.split(f'id="buy-{target}"', 1)[1].split("</tr>", 1)[0]
        back = f"/plans/{plan_id}#c-buy-{target}"
        assert f'href="{back}"' in row
        assert f'id="c-buy-{target}"' in plan


def _peaks(html: str) -> dict[str, float]:
    """Each demand series' sparkline peak, from its label (``..., peak 12.3 GPUs``)."""
    rows = re.findall(r'<tr data-series="([^"]+)">.*?aria-label="[^"]*, peak ([\d,.]+)', html, re.S)
    return {sid: float(v.replace(",", "")) for sid, v in rows}


def test_demand_index_and_capacity_draw_their_range(client: TestClient) -> None:
    week = client.get("/demand", params={"range": "7d"}).text
    quarter = client.get("/demand", params={"range": "6h"}).text
    assert 'class="preset active" data-range="6h"' in quarter
    a, b = _peaks(week), _peaks(quarter)
    assert a and a.keys() == b.keys()
    assert all(b[k] <= a[k] for k in a) and any(b[k] < a[k] for k in a), (a, b)
    for preset, hours in (("24h", 24), ("6h", 6)):
        page = client.get("/capacity", params={"range": preset}).text
        figs = {k: f for k, f in _figures(page).items() if k.startswith("pool-")}
        assert figs
        for fig in figs.values():
            xs = next(t["x"] for t in fig["data"] if t["name"] == "actual")
            first, last = datetime.fromisoformat(xs[0]), datetime.fromisoformat(xs[-1])
            assert timedelta(0) < last - first <= timedelta(hours=hours), (preset, xs[0], xs[-1])


def test_plan_history_lists_the_plans_of_its_range(client: TestClient) -> None:
    html = client.get("/plans").text
    assert 'class="preset active" data-range="7d"' in html
    listed = re.findall(r'<tr data-plan-id="([^"]+)">', html)
    assert listed
    none = client.get("/plans", params={"from": "2020-01-01T00:00", "to": "2020-01-02T00:00"})
    assert none.status_code == 200 and 'data-plan-id="' not in none.text
    assert "No plans in this range" in none.text and f"{len(listed)} plan(s)" in none.text
