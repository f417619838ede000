"""The forecasts the engine reads over a window: the latest issue per target time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from predops.core.contracts import Forecast
from predops.policy.forecast_window import latest_in_window

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=1)


def _f(series: str, issued: datetime, valid: datetime, p50: float) -> Forecast:
    return Forecast(series, issued, valid, p50, p50, p50)


def test_the_latest_issue_in_the_window_wins_for_accepted_series() -> None:
    old = _f("a", T0 - 2 * H, T0 + H, 1.0)
    new = _f("a", T0 - H, T0 + H, 2.0)
    tie = _f("a", T0 - H, T0 + H, 3.0)  # same issue time: the first one given stays
    late = _f("a", T0, T0 + 5 * H, 4.0)  # valid after the window
    other = _f("b", T0, T0 + H, 5.0)  # a series the caller does not accept
    got = latest_in_window([new, old, tie, late, other], T0, T0 + 2 * H, lambda s: s == "a")
    assert got == {("a", T0 + H): new}
