"""Drive splits of ``predops eval failure``: the validation window never reaches the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from predops.core.schemas import DRIVE_SMART, EVENTS
from predops.models.failure.drives import drive_features
from predops.pipelines.jobs.evaluation import (
    DRIVE_HORIZON,
    DriveData,
    drive_splits,
    validation_split,
)

D0 = datetime(2014, 1, 1, tzinfo=UTC)
DAYS = 400


def fleet(drives: int = 60) -> DriveData:
    """``drives`` drives seen weekly for ``DAYS`` days; every fifth fails, spread in time."""
    ids = [f"d{i:02d}" for i in range(drives)]
    fails = {d: D0 + timedelta(days=60 + 5 * i) for i, d in enumerate(ids) if i % 5 == 0}
    rows = [
        (d, D0 + timedelta(days=k), float(k // 100 if d in fails else 0))
        for d in ids
        for k in range(0, DAYS, 7)
        if d not in fails or D0 + timedelta(days=k) <= fails[d]
    ]
    smart = pl.concat(
        [
            DRIVE_SMART.empty(),
            pl.DataFrame(
                {
                    "node_id": [r[0] for r in rows],
                    "ts": [r[1] for r in rows],
                    "model": ["ST4000DM000"] * len(rows),
                    "power_on_hours": [1000.0] * len(rows),
                    "smart_5_raw": [r[2] for r in rows],
                }
            ),
        ],
        how="diagonal_relaxed",
    ).select(DRIVE_SMART.names)
    events = pl.concat(
        [
            EVENTS.empty(),
            pl.DataFrame(
                {
                    "node_id": list(fails),
                    "kind": ["failure"] * len(fails),
                    "at": list(fails.values()),
                }
            ),
        ],
        how="diagonal_relaxed",
    )
    cutoff = D0 + timedelta(days=DAYS)
    frame = drive_features(smart, events, stride=timedelta(days=7), cutoff=cutoff)
    return DriveData(frame, events, (5,), cutoff, timedelta(days=7), {}, 0.0)


@pytest.mark.parametrize("name", ["time", "time+cohort"])
def test_validation_rows_and_labels_end_before_the_test_period(name: str) -> None:
    splits, errors = drive_splits(fleet())
    assert not errors
    split = next(s for s in splits if s.name == name)
    v = validation_split(split)
    assert v.train.height and v.test.height
    # Every validation row, and the failure window that labels it, ends before the test.
    for part in (v.train, v.test):
        assert (part["ts"] + DRIVE_HORIZON <= split.split_at).all()
    assert v.split_at < split.split_at
    assert v.train["ts"].max() < v.split_at - DRIVE_HORIZON  # purged inside too
    if name == "time+cohort":
        test_drives = set(split.test["node_id"].to_list())
        assert not test_drives & set(v.train["node_id"].to_list())
        assert not test_drives & set(v.test["node_id"].to_list())
        assert not set(v.train["node_id"].to_list()) & set(v.test["node_id"].to_list())
