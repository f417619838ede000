"""The forecasts the engine reads over a window: the latest issue per target time.

Several runs may have forecast one series for the same target time; the engine acts on
the latest issue. Shared by pool sizing (:mod:`policy.sizing`) and the drain price
(:mod:`policy.headroom`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from predops.core.contracts import Forecast


def latest_in_window(
    forecasts: Sequence[Forecast],
    start: datetime,
    end: datetime,
    series_ok: Callable[[str], bool],
) -> dict[tuple[str, datetime], Forecast]:
    """(series id, valid_at) -> the latest-issued forecast valid in ``[start, end]``,
    for the series ``series_ok`` accepts (on equal issue times the first one given)."""
    latest: dict[tuple[str, datetime], Forecast] = {}
    for f in forecasts:
        if not (start <= f.valid_at <= end) or not series_ok(f.series_id):
            continue
        k = (f.series_id, f.valid_at)
        if k not in latest or latest[k].issued_at < f.issued_at:
            latest[k] = f
    return latest
