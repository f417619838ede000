"""Node-history rows: hand-checked counts, neighbours, labels, repair and no leakage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from predops.features.labels import label_name
from predops.models.failure.node_history import history_frame

T0 = datetime(2020, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _fails(rows: list[tuple[str, str, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [r[0] for r in rows],
            "group_a": ["site"] * len(rows),
            "group_b": [r[1] for r in rows],
            "at": [T0 + r[2] * DAY + timedelta(hours=12) for r in rows],
            "repair_hours": [r[3] for r in rows],
        }
    )


def _spans() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": ["a", "b", "c"],
            "group_a": ["site"] * 3,
            "group_b": ["c1", "c1", "c2"],
            "start": [T0] * 3,
            "end": [T0 + 40 * DAY] * 3,
            "hw__procs": [2.0, 4.0, 2.0],
        }
    )


def _row(frame: pl.DataFrame, node: str, day: int) -> dict[str, object]:
    return frame.filter((pl.col("node_id") == node) & (pl.col("ts") == T0 + day * DAY)).row(
        0, named=True
    )


def test_counts_neighbours_labels() -> None:
    fails = _fails([("a", "c1", 2, 30.0), ("a", "c1", 20, 1.0), ("b", "c1", 21, 2.0)])
    f = history_frame(fails, _spans(), stride=DAY, horizon=timedelta(days=3))
    assert f.height == 3 * 41
    r = _row(f, "a", 22)
    assert r["node__failures_7d"] == 1 and r["node__failures_30d"] == 2
    assert r["node__failures_total"] == 2
    assert abs(r["node__days_since_failure"] - 1.5) < 1e-6
    assert r["node__repair_hours_last"] == 1.0 and r["node__repair_hours_mean"] == 15.5
    assert r["group_b__failures_1d"] == 1 and r["group_b__failures_7d"] == 1  # b, not a
    assert r["hw__procs"] == 2.0
    # c is in another cluster: sees b's and a's failures site-wide only.
    c = _row(f, "c", 22)
    assert c["group_b__failures_7d"] == 0 and c["group_a__failures_7d"] == 2
    lbl = label_name(timedelta(days=3))
    # a fails at day 20 12:00: in (t, t + 3 d] from day 18 00:00 on, not from day 17.
    assert [_row(f, "a", d)[lbl] for d in (16, 17, 18, 20, 21)] == [0, 0, 1, 1, 0]
    # Inside a's 30-hour repair after day 2 12:00: day 3 00:00 is not usable, day 4 is.
    assert not _row(f, "a", 3)["usable"] and _row(f, "a", 4)["usable"]


def test_features_ignore_later_failures() -> None:
    early = _fails([("a", "c1", 2, 1.0)])
    later = _fails([("a", "c1", 2, 1.0), ("a", "c1", 30, 1.0), ("b", "c1", 30, 1.0)])
    kw = {"stride": DAY, "horizon": timedelta(days=3)}
    f1 = history_frame(early, _spans(), **kw).filter(pl.col("ts") <= T0 + 30 * DAY)
    f2 = history_frame(later, _spans(), **kw).filter(pl.col("ts") <= T0 + 30 * DAY)
    feats = [c for c in f1.columns if "__" in c]
    assert f1.sort("node_id", "ts").select(feats).equals(f2.sort("node_id", "ts").select(feats))
