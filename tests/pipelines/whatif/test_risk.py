"""Which feature rows a weekly retrain of the what-if's failure model reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from predops.pipelines.whatif.risk import RiskConfig, training_rows

CUT = datetime(2026, 3, 1, tzinfo=UTC)


def _hourly(days: int) -> pl.DataFrame:
    """One node's feature rows every hour for ``days`` days before and one day after CUT."""
    ts = pl.datetime_range(
        CUT - timedelta(days=days), CUT + timedelta(days=1), "1h", time_zone="UTC", eager=True
    )
    return pl.DataFrame({"node_id": "n0", "ts": ts})


def test_a_retrain_reads_all_history_before_its_cutoff_by_default() -> None:
    frame = _hourly(40)
    rows = training_rows(frame, CUT, RiskConfig())
    ts = rows["ts"]
    assert ts.max() < CUT  # nothing at or after the cutoff
    assert ts.min() == CUT - timedelta(days=40)  # all of the history, not the last weeks
    assert rows.height == 40 * 24 // 2  # every 2 h
    trailing = training_rows(frame, CUT, RiskConfig(train_window=timedelta(days=21)))
    assert trailing["ts"].min() == CUT - timedelta(days=21)
    assert trailing.height == 21 * 24 // 2
