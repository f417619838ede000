"""The risk board's node state: from the lake's events, only for the nodes it lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from predops.core.schemas import EVENTS
from predops.pipelines.workspace.lake import Lake
from predops.serving.dashboards.fleet import node_states

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def _events(rows: list[tuple[str, str, int, str | None]]) -> pl.DataFrame:
    """Rows of (node, kind, hours after T0, cause) in the events contract."""
    frame = pl.DataFrame(
        {
            "node_id": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "at": [T0 + timedelta(hours=r[2]) for r in rows],
            "cause": [r[3] for r in rows],
            "detail": [None] * len(rows),
        },
        schema_overrides={"at": pl.Datetime("us", "UTC"), "detail": pl.String()},
    )
    assert frame.columns == [c.name for c in EVENTS.columns]
    return frame


def test_states_in_words_at_a_time(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lake.write(
        "events",
        "test",
        _events(
            [
                ("n1", "cordon", 1, "predops"),
                ("n2", "failure", 2, "gpu"),
                ("n3", "cordon", 1, "alice"),
                ("n3", "uncordon", 3, None),
                ("n4", "failure", 1, "disk"),
                ("n4", "repair", 5, None),
            ]
        ),
    )
    now = T0 + timedelta(hours=4)
    assert node_states(tmp_path / "lake", ["n1", "n2", "n3", "n4", "n5"], now) == {
        "n1": "cordoned by predops",
        "n2": "in repair",
        "n3": "ready",
        "n4": "in repair",  # the repair is after `now`
        "n5": "ready",
    }
    later = node_states(tmp_path / "lake", ["n4"], T0 + timedelta(hours=6))
    assert later == {"n4": "ready"}
    assert node_states(tmp_path / "empty", ["n1"], now) == {"n1": "ready"}
