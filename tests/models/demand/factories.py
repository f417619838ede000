"""Small demand panels for the forecaster tests: daily and weekly shapes, noise, an
optional capacity that caps what runs (the rest is pending), gaps and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import CALENDAR, DEMAND

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday


def series_frame(
    series_id: str,
    values: np.ndarray,
    *,
    start: datetime = T0,
    step: timedelta = timedelta(hours=1),
    capacity: float | None = None,
    pool: str = "train",
) -> pl.DataFrame:
    """Demand rows of one series: ``values`` is the unconstrained demand; with a
    ``capacity`` the running part is capped there and the rest is pending."""
    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    running = v if capacity is None else np.minimum(v, capacity)
    return (
        pl.DataFrame(
            {
                "series_id": series_id,
                "ts": [start + step * (i + 1) for i in range(v.size)],
                "value": v,
                "running": running,
                "pending": v - running,
                "capacity": capacity,
                "pool": pool,
                "resource": "gpus",
                "gpu_model": None,
            }
        )
        .cast(DEMAND.polars_schema())
        .select(DEMAND.names)
    )


def daily_shape(n: int, rng: np.random.Generator, *, level: float, noise: float) -> np.ndarray:
    """Hourly demand with a daily and a weekly cycle and AR(1) noise (values >= 0)."""
    t = np.arange(n)
    day = 1 + 0.3 * np.sin(2 * np.pi * (t % 24) / 24 - np.pi / 2)
    week = np.where((t // 24) % 7 >= 5, 0.8, 1.0)
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = 0.7 * e[i - 1] + rng.normal(0, noise)
    return np.clip(level * day * week * (1 + e), 0, None)


def panel(
    rng: np.random.Generator,
    *,
    n_series: int = 4,
    hours: int = 24 * 21,
    noise: float = 0.05,
) -> pl.DataFrame:
    """``n_series`` hourly series of different scales (5 to 5,000 units)."""
    levels = np.geomspace(5, 5000, n_series)
    return pl.concat(
        [
            series_frame(
                f"pool{k}/gpus", daily_shape(hours, rng, level=lv, noise=noise), pool=f"pool{k}"
            )
            for k, lv in enumerate(levels)
        ]
    )


def calendar(events: list[tuple[str, datetime, timedelta, str | None, float]]) -> pl.DataFrame:
    """Calendar rows from (name, start, duration, scope, magnitude)."""
    return pl.DataFrame(
        {
            "name": [e[0] for e in events],
            "kind": ["promotion"] * len(events),
            "starts_at": [e[1] for e in events],
            "ends_at": [e[1] + e[2] for e in events],
            "scope": [e[3] for e in events],
            "magnitude": [e[4] for e in events],
        }
    ).cast(CALENDAR.polars_schema())
