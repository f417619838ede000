"""The next hour's demand anchored on the demand measured now.

Pool sizing holds the peak of the demand over the scale-up lead plus one hour. For the
first forecast step, the demand measured at the tick is a better predictor than a
model's level: hour-to-hour demand is persistent (pods already running stay), and on
the simulated fleet the last hour's value had a smaller error than the demand
forecaster's p50 on every pool, while the forecaster's p90 ran 6-19 % above the next
hour's demand and still covered it only 78 % of the hours on the pool of gang jobs.

So, when the caller hands in the pool's recent measurements, the first step after now
is replaced by *the demand now plus the empirical quantiles of the hour-to-hour change
over the trailing history* (p10 / p50 / p90 of the change; at least ``min_changes``
changes of consecutive hours, else the model's forecast stands). It is a persistence
forecast with an empirical spread, calibrated per series on past hours only; later
steps keep the model's forecast.

Measurements are :class:`~core.contracts.Forecast` rows with ``method == "observed"``
and ``issued_at == valid_at`` (a measurement is a degenerate forecast issued at its own
time; p50 is the value). Units are those of the series (GPUs, CPU cores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np

from predops.core.contracts import Forecast

HOUR = timedelta(hours=1)
OBSERVED = "observed"
ANCHORED = "anchored"


def measurements(
    forecasts: Sequence[Forecast], now: datetime, history: timedelta
) -> dict[str, dict[datetime, float]]:
    """The measured demand per series at the times in ``[now - history, now]``."""
    out: dict[str, dict[datetime, float]] = {}
    for f in forecasts:
        if f.method == OBSERVED and now - history <= f.valid_at <= now:
            out.setdefault(f.series_id, {})[f.valid_at] = f.p50
    return out


def hourly_changes(values: dict[datetime, float]) -> np.ndarray:
    """``y(t) - y(t - 1 h)`` for every measured ``t`` whose previous hour is measured."""
    return np.array(
        [v - values[t - HOUR] for t, v in sorted(values.items()) if t - HOUR in values],
        dtype=np.float64,
    )


def anchor_next_hour(
    forecasts: Sequence[Forecast],
    now: datetime,
    history: timedelta,
    min_changes: int,
) -> list[Forecast]:
    """``forecasts`` with each series' first step after ``now`` (valid in
    ``(now, now + 1 h]``) replaced by the anchored estimate (module docstring). A series
    without a measurement at ``now`` or with fewer than ``min_changes`` hourly changes
    keeps its forecast; so does everything when ``history`` is zero."""
    if history <= timedelta(0):
        return list(forecasts)
    measured = measurements(forecasts, now, history)
    anchors: dict[str, tuple[float, float, float]] = {}
    for sid, values in measured.items():
        if now not in values:
            continue
        changes = hourly_changes(values)
        if changes.size < min_changes:
            continue
        q10, q50, q90 = np.quantile(changes, [0.1, 0.5, 0.9])
        level = values[now]
        anchors[sid] = (level + float(q10), level + float(q50), level + float(q90))
    out: list[Forecast] = []
    for f in forecasts:
        a = anchors.get(f.series_id)
        if a is None or f.method == OBSERVED or not (now < f.valid_at <= now + HOUR):
            out.append(f)
            continue
        out.append(
            replace(
                f,
                p10=max(0.0, a[0]),
                p50=max(0.0, a[1]),
                p90=max(0.0, a[2]),
                method=ANCHORED,
                extra={**f.extra, "model_p50": f.p50, "model_p90": f.p90},
            )
        )
    return out
