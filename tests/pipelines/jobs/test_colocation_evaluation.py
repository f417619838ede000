"""``predops eval colocation``'s accounting, by hand, and its pieces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from predops.models.usage.baselines import Rule, peaks, reclaimable
from predops.models.usage.design import Design
from predops.models.usage.grid import UsageGrid
from predops.pipelines.jobs import colocation_evaluation as ce

NAN = float("nan")


def test_account_by_hand() -> None:
    """Node A (10 cores) uses 20 / 50 / 30 %, node B (4 cores) 10 % / missing / 90 %; the
    rule lends 40 % or 60 % of each for the round of three 5-minute steps."""
    future = np.array([[0.2, 0.5, 0.3], [0.1, NAN, 0.9]])
    lent = np.array([[0.4, 0.6], [0.4, 0.6]])
    acc = ce.account(future, lent, np.array([10.0, 4.0]), 5 / 60)
    # 40 %: left 60 %: only B's 90 % exceeds. 60 %: left 40 %: A's 50 % and B's 90 %.
    assert acc["violations"].tolist() == [1, 2]
    assert int(acc["steps"]) == 5  # B's missing step is neither scored nor lent
    # 0.4 x 10 cores x 15 min + 0.4 x 4 cores x 10 min = 1.0 + 0.2667 core-hours.
    np.testing.assert_allclose(acc["reclaimed"], [1.0 + 0.4 * 4 / 6, 1.5 + 0.6 * 4 / 6])
    np.testing.assert_allclose(float(acc["allocatable"]), 2.5 + 4 / 6)
    pts = ce.curve(acc, (0.4, 0.6))
    assert pts[1]["violation_rate"] == pytest.approx(2 / 5)
    assert pts[0]["reclaimed_share"] == pytest.approx((1.0 + 0.4 * 4 / 6) / (2.5 + 4 / 6))


def test_lending_exactly_to_the_peak_is_no_violation() -> None:
    future = np.array([[0.3, 0.7, 0.1]])
    lent = reclaimable(np.array([[0.7]]), np.array([0.1]))
    assert ce.account(future, lent, np.array([1.0]), 1.0)["violations"].tolist() == [0]


def test_at_rate_interpolates_on_the_curve() -> None:
    pts = [
        {"violation_rate": 0.0, "reclaimed_share": 0.1, "reclaimed_core_hours": 1.0},
        {"violation_rate": 0.02, "reclaimed_share": 0.5, "reclaimed_core_hours": 5.0},
        {"violation_rate": 0.1, "reclaimed_share": 0.8, "reclaimed_core_hours": 8.0},
    ]
    assert ce.at_rate(pts, 0.01) == pytest.approx(0.3)
    assert ce.at_rate(pts, 0.05) == pytest.approx(0.5 + 0.3 * 0.03 / 0.08)
    assert ce.at_rate(pts, 0.05, "reclaimed_core_hours") == pytest.approx(5 + 3 * 0.03 / 0.08)
    assert ce.at_rate(pts, 0.0) == pytest.approx(0.1)
    assert ce.at_rate(pts, 0.3) == pytest.approx(0.8)  # past the curve's end: its last point
    # A curve that starts with violations rises from lend-nothing (0, 0).
    late = [{"violation_rate": 0.02, "reclaimed_share": 0.4}]
    assert ce.at_rate(late, 0.01) == pytest.approx(0.2)


def test_rounds_cover_the_window() -> None:
    cols = ce.round_origins(12, 48, 12)
    assert cols.tolist() == [11, 23, 35]  # rounds cover steps 12..23, 24..35, 36..47


@given(
    arrays(np.float64, 8, elements=st.floats(-0.5, 2.0)),
    arrays(np.float64, 8, elements=st.floats(0.0, 1.0)),
)
def test_reclaimable_never_exceeds_what_is_unused(peak: np.ndarray, now: np.ndarray) -> None:
    r = reclaimable(peak[:, None], now)
    assert (r >= 0).all()
    assert (r[:, 0] <= 1.0 - now + 1e-12).all()
    assert (reclaimable(peak[:, None], np.full(8, NAN)) == 0).all()


def _grid(values: np.ndarray) -> UsageGrid:
    n = values.shape[0]
    return UsageGrid([f"s{i}" for i in range(n)], 0, 300_000_000, values, None, np.ones(n))


def test_rules_by_hand() -> None:
    u = np.tile(np.r_[np.full(11, 0.2), 0.5], 24)[None, :]  # one 50 % step per hour
    d = Design(_grid(u), 12)
    rows, cols = np.array([0]), np.array([200])
    tmax = peaks(Rule("trailing_max", {"hours": 1.0}, "margin", (0.5, 0.0)), d, rows, cols)
    np.testing.assert_allclose(tmax, [[0.75, 0.5]])
    koord = Rule("koordinator", {"percentile": 0.5, "hours": 1.0}, "reclaim_ratio", (0.6, 1.0))
    np.testing.assert_allclose(peaks(koord, d, rows, cols), [[0.6, 0.2]])  # 0.2 + (1 - ratio)
    m, s = u[0, 189:201].mean(), u[0, 189:201].std()
    ns = peaks(Rule("nsigma", {"hours": 1.0}, "n_sigma", (2.0,)), d, rows, cols)
    np.testing.assert_allclose(ns, [[m + 2 * s]])
