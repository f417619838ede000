"""The risk board explains every in-service row it lists — also when out-of-service nodes
or a filter push the listed rows below the fleet's riskiest 25 — and the node page
explains a risk by what raises it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from predops.core.clock import FixedClock
from predops.pipelines.workspace.lake import Lake
from predops.serving.app import create_app
from predops.serving.dashboards.why import SHOWN
from tests.serving.conftest import settings_for

NOT_EXPLAINED = "reasons are computed for the riskiest nodes only"


@pytest.fixture(scope="module")
def lake_and_client(served_workspace: Path, shared_data: Path) -> Iterator[tuple[Lake, TestClient]]:
    settings = settings_for(served_workspace, shared_data)
    lake = Lake(settings.lake_dir)
    end = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    app = create_app(
        settings, clock=FixedClock(end + timedelta(minutes=5)), reload_in_background=False
    )
    with TestClient(app) as c:
        yield lake, c


def _rows(html: str, table_id: str) -> list[tuple[str, str]]:
    """(node id, reasons cell) of each row of a board table."""
    if f'id="{table_id}"' not in html:
        return []
    table = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<a href="/nodes/([^"]+)">.*?<td>(.*?)</td></tr>', table, re.S)


def _cordon(lake: Lake, node_ids: list[str], at: object) -> None:
    n = len(node_ids)
    lake.write(
        "events",
        "test-board-reasons",
        pl.DataFrame(
            {
                "node_id": node_ids,
                "kind": ["cordon"] * n,
                "at": [at] * n,
                "cause": ["alice"] * n,
                "detail": [None] * n,
            },
            schema_overrides={"at": pl.Datetime("us", "UTC"), "detail": pl.String()},
        ),
    )


def test_every_listed_in_service_row_has_reasons(
    lake_and_client: tuple[Lake, TestClient],
) -> None:
    lake, client = lake_and_client
    before = _rows(client.get("/").text, "top-nodes")
    assert len(before) == 25
    riskiest = [n for n, _ in before[:4]]
    end = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    _cordon(lake, riskiest, end - timedelta(hours=1))

    html = client.get("/").text
    rows = _rows(html, "top-nodes")
    out = re.findall(r'<a href="/nodes/([^"]+)">', html.split('id="out-of-service"', 1)[1])
    assert set(riskiest) <= set(out)  # listed apart
    assert len(rows) == 25 and not set(riskiest) & {n for n, _ in rows}
    # rows 22-25 are the fleet's 26th-29th riskiest: explained all the same
    assert NOT_EXPLAINED not in html
    assert all('<ul class="reasons"><li' in cell for _, cell in rows), rows[-5:]
    # what raises each risk, or a plain "only k features raise it": never risk-lowering
    assert not [cell for _, cell in rows if "lowers risk" in cell], rows[:3]


def test_a_filtered_board_explains_its_own_rows(
    lake_and_client: tuple[Lake, TestClient],
) -> None:
    _, client = lake_and_client
    html = client.get("/").text
    pools = re.findall(r'<select name="pool"[^>]*>(.*?)</select>', html, re.S)[0]
    # the pool with the fewest nodes among the fleet's riskiest rows
    listed = re.findall(r"</a></td>\s*<td[^>]*>[^<]+</td><td>([^<]+)</td>", html)
    pool = min(re.findall(r'<option value="([^"]+)"', pools), key=listed.count)
    rows = _rows(client.get("/", params={"pool": pool}).text, "top-nodes")
    assert rows
    assert all('<ul class="reasons"><li' in cell for _, cell in rows), rows[-5:]


def test_node_page_lists_what_raises_the_risk(lake_and_client: tuple[Lake, TestClient]) -> None:
    _, client = lake_and_client
    board = client.get("/").text
    for node_id in re.findall(r'<a href="/nodes/([^"]+)">', board.split('id="top-nodes"', 1)[1])[
        :5
    ]:
        html = client.get(f"/nodes/{node_id}").text
        assert "<h2>Why</h2>" in html, node_id
        raising = (
            re.findall(
                r"<li>([^<]*) <span class=\"muted\">\([^,]+, ([+-][\d.]+) log-odds\)",
                html.split('id="node-reasons"', 1)[1].split("</ul>", 1)[0],
            )
            if 'id="node-reasons"' in html
            else []
        )
        values = [float(c) for _, c in raising]
        assert all(v > 0 for v in values) and values == sorted(values, reverse=True), raising
        assert not [t for t, _ in raising if "lowers risk" in t]
        note = re.findall(r'<p class="hint" id="reasons-note">([^<]*)</p>', html)
        assert (len(values) < SHOWN) == bool(note), (node_id, values, note)
        if 'id="node-lowering"' in html:
            lowering = html.split('id="node-lowering"', 1)[1].split("</ul>", 1)[0]
            assert "raises risk" not in lowering
