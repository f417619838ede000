"""Metrics recomputed by hand on a small table."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from predops.models.demand.config import HOURLY_CONFIG
from predops.models.demand.metrics import as_nested, mase_scale, score


def rows() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["m"] * 4,
            "series_id": ["a", "a", "b", "b"],
            "cutoff": [datetime(2026, 1, 1, tzinfo=UTC)] * 4,
            "horizon": [1, 7, 1, 30],
            "p10": [8.0, 0.0, 1.0, 5.0],
            "p50": [10.0, 4.0, 2.0, 6.0],
            "p90": [12.0, 5.0, 3.0, 9.0],
            "actual": [11.0, 6.0, 2.0, 10.0],
            "mase_scale": [2.0, 2.0, 1.0, 1.0],
        }
    )


def test_scores_by_hand() -> None:
    t = as_nested(score(rows(), HOURLY_CONFIG))["m"]
    a = t["all"]
    assert a["mase"] == pytest.approx(np.mean([1 / 2, 2 / 2, 0 / 1, 4 / 1]))
    assert a["smape"] == pytest.approx(np.mean([200 / 21, 400 / 10, 0, 800 / 16]))
    assert a["coverage"] == pytest.approx(2 / 4)  # 11 in [8,12], 2 in [1,3]
    assert a["under_provisioning"] == pytest.approx(2 / 4)  # 6 > 5, 10 > 9
    assert a["rmse"] == pytest.approx(np.sqrt(np.mean([1, 4, 0, 16])))
    pins = [
        0.1 * 3 + 0.5 * 1 + 0.9 * 0 + (1 - 0.9) * 1,  # y=11: p10 8, p50 10, p90 12
        0.1 * 6 + 0.5 * 2 + 0.9 * 1,  # y=6 above all three
        0.1 * 1 + 0 + 0.1 * 1,  # y=2: p10 1 (under), p90 3 (over)
        0.1 * 5 + 0.5 * 4 + 0.9 * 1,
    ]
    assert a["wql"] == pytest.approx(2 * sum(pins) / 3 / (11 + 6 + 2 + 10))
    assert set(t) == {"1-6", "7-12", "25-48", "all"}
    assert t["1-6"]["rows"] == 2 and t["25-48"]["series"] == 1


def test_zero_scale_rows_are_left_out_of_mase_and_counted() -> None:
    r = rows().with_columns(pl.Series("mase_scale", [0.0, 2.0, 1.0, 1.0]))
    a = as_nested(score(r, HOURLY_CONFIG))["m"]["all"]
    assert a["mase"] == pytest.approx(np.mean([1.0, 0.0, 4.0]))
    assert a["mase_rows_skipped"] == 1


def test_mase_scale() -> None:
    y = np.array([1.0, 2, 4, 7, np.nan, 16])
    assert mase_scale(y, 1) == pytest.approx(2.0)  # |1|, |2|, |3|; gaps skipped
    assert mase_scale(np.array([3.0, 5.0]), 24) == pytest.approx(2.0)  # falls back to m = 1
    assert np.isnan(mase_scale(np.array([3.0]), 24))
