"""Metrics on hand-made cases whose answers are worked out in the comments."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from predops.models.failure import metrics as M
from tests.models.failure.factories import T0


def test_pr_auc_of_a_perfect_and_a_reversed_ranking() -> None:
    y = np.array([0, 0, 1, 0, 1])
    assert M.pr_auc(y, np.array([0.1, 0.2, 0.9, 0.3, 0.8])) == pytest.approx(1.0)
    # Reversed: positives ranked 4th and 5th -> AP = (1/4 + 2/5) / 2.
    assert M.pr_auc(y, np.array([0.9, 0.8, 0.1, 0.7, 0.2])) == pytest.approx((0.25 + 0.4) / 2)
    assert math.isnan(M.pr_auc(np.zeros(3), np.arange(3.0)))


def test_threshold_at_fpr_never_exceeds_the_target_even_with_ties() -> None:
    # 10 negatives, three tied at the top: at FPR 0.2 (2 allowed) the tie cannot be
    # split, so the threshold sits above it and no negative alarms.
    y = np.array([0] * 10 + [1, 1])
    s = np.array([0.9, 0.9, 0.9, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0, 0.95, 0.6])
    t = M.threshold_at_fpr(y, s, 0.2)
    out = M.at_threshold(y, s, t)
    assert out["false_alarm_rate"] == 0.0
    assert out["recall"] == 0.5
    t3 = M.threshold_at_fpr(y, s, 0.3)  # three allowed: the tie fits
    assert M.at_threshold(y, s, t3)["false_alarm_rate"] == pytest.approx(0.3)
    assert M.at_threshold(y, s, t3)["recall"] == 1.0


def test_brier_and_reliability() -> None:
    y = np.array([0, 0, 0, 1])
    p = np.array([0.0, 0.0, 0.5, 0.5])
    assert M.brier(y, p) == pytest.approx((0.25 + 0.25) / 4)
    table = M.reliability(y, p, bins=2)
    assert [b["rows"] for b in table] == [2, 2]
    assert table[1]["p_mean"] == 0.5 and table[1]["observed"] == 0.5
    assert M.expected_calibration_error(table) == 0.0


def _rows(data: list[tuple[str, int, float, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [d[0] for d in data],
            "ts": [T0 + timedelta(hours=d[1]) for d in data],
            "score": [d[2] for d in data],
            "label": [d[3] for d in data],
        }
    )


def test_daily_budget_takes_each_nodes_best_row_and_the_top_k_nodes_per_day() -> None:
    rows = _rows(
        [
            ("a", 1, 0.9, 1),
            ("a", 2, 0.1, 1),
            ("b", 1, 0.8, 0),
            ("c", 1, 0.2, 1),
            ("a", 25, 0.1, 0),  # next day
            ("b", 25, 0.7, 1),
        ]
    )
    out = M.at_daily_budget(rows, 1)
    # Day 1 alerts a (positive); day 2 alerts b (positive). Positive node-days: a, c, b.
    assert out["alerts"] == 2 and out["precision"] == 1.0
    assert out["recall"] == pytest.approx(2 / 3)


def test_lead_time_is_the_first_alarm_within_the_horizon() -> None:
    rows = _rows(
        [
            ("a", 0, 0.9, 0),  # 30 h before the failure: outside the 24 h horizon
            ("a", 10, 0.2, 1),
            ("a", 20, 0.7, 1),  # first alarm inside: 10 h before
            ("a", 28, 0.9, 1),
            ("b", 5, 0.1, 1),  # b's failure is never alarmed
        ]
    )
    fails = pl.DataFrame(
        {"node_id": ["a", "b", "c"], "at": [T0 + timedelta(hours=h) for h in (30, 6, 40)]}
    )
    out = M.lead_times(rows, fails, threshold=0.5, horizon=timedelta(hours=24))
    assert out["failures_observable"] == 2  # c has no scored row before its failure
    assert out["failures_caught"] == 1
    assert out["lead_hours"]["median"] == pytest.approx(10.0)
