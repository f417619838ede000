"""Inputs and targets of the usage forecaster at (series, origin) pairs of a grid.

All values are shares of the node's allocatable. At an origin column ``c`` (the
decision is made at the end of step ``c``; nothing after it is read):

- levels: the last usage, the mean over the last 1 h / 6 h / 24 h, the standard
  deviation over 1 h / 24 h;
- peaks: the highest usage over the last 1 h, and the 50th / 95th / 99th percentiles
  and the maximum of the hourly peaks over the last 24 h and 7 days (the node's own
  quantiles), the 95th / 99th percentiles of the 5-minute usage over the last 24 h;
- the in-step maxima (when the history has ``max``): their highest over 1 h / 24 h
  and the mean max-minus-usage gap over 24 h;
- seasonality: the peak of the same window one day and one week earlier;
- calendar: hour of day and day of week of the origin (UTC).

The target is the peak usage over the next ``window`` steps ``(c, c + window]``,
minus the origin's 1 h mean (the trees learn the excursion, not the level).

Pure numpy, on :mod:`features.windows` kernels.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from predops.features.windows import Windowed, forward_fill, window_max
from predops.models.usage.grid import UsageGrid

FEATURES = (
    "usage_last",
    "mean_1h",
    "mean_6h",
    "mean_24h",
    "std_1h",
    "std_24h",
    "max_1h",
    "hpeak_p50_24h",
    "hpeak_p95_24h",
    "hpeak_max_24h",
    "hpeak_p50_7d",
    "hpeak_p95_7d",
    "hpeak_p99_7d",
    "hpeak_max_7d",
    "usage_p95_24h",
    "usage_p99_24h",
    "inmax_1h",
    "inmax_24h",
    "inmax_gap_24h",
    "same_window_1d",
    "same_window_7d",
    "hour_of_day",
    "day_of_week",
)
BATCH = 20_000
"""Origins whose trailing windows are gathered at once (bounds the gather arrays)."""
SCALE_FLOOR = 0.005
"""Floor of the conformal scale (share of allocatable), so a flat node's band is not 0."""
FILL_LIMIT_H = 1
"""A missing sample is carried forward from the last one for at most this many hours."""


class Design:
    """Trailing statistics of one grid, computed once, read at any origins."""

    def __init__(self, grid: UsageGrid, window: int) -> None:
        self.grid = grid
        self.window = int(window)
        step_s = grid.step_us / 1e6
        self.hour = max(1, round(3600 / step_s))
        self.day = 24 * self.hour
        self.week = 7 * self.day
        if self.window > self.day:
            raise ValueError(f"window of {self.window} steps is longer than a day")
        a = grid.allocatable[:, None]
        self.raw = grid.usage / a
        self.u = forward_fill(self.raw, limit=FILL_LIMIT_H * self.hour)
        ok = np.isfinite(self.u)
        x0 = np.where(ok, self.u, 0.0)
        self.sums = Windowed(x0)
        self.sq = Windowed(x0 * x0)
        self.cnt = Windowed(ok.astype(np.float64))
        self._ms: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.hpeak = window_max(self.u, self.hour)
        # Peak over (c - window, c]: read at c + window it is the future window's peak.
        self.fpeak = window_max(self.raw, self.window)
        self.inmax_1h: np.ndarray | None = None
        self.inmax_24h: np.ndarray | None = None
        self.gap: np.ndarray | None = None
        if grid.peak is not None:
            pk = forward_fill(grid.peak / a, limit=FILL_LIMIT_H * self.hour)
            self.inmax_1h = window_max(pk, self.hour)
            self.inmax_24h = window_max(pk, self.day)
            both = np.isfinite(pk) & ok
            with np.errstate(invalid="ignore", divide="ignore"):
                self.gap = Windowed(np.where(both, pk - self.u, 0.0)).sum(self.day) / Windowed(
                    both.astype(np.float64)
                ).sum(self.day)

    def mean_std(self, k: int, r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the usage over the last ``k`` steps."""
        if k not in self._ms:  # whole-grid arrays, once per window length
            n = self.cnt.sum(k)
            with np.errstate(invalid="ignore", divide="ignore"):
                m = self.sums.sum(k) / n
                v = np.maximum(self.sq.sum(k) / n - m * m, 0.0)
            self._ms[k] = (m, np.sqrt(v))
        m, s = self._ms[k]
        return m[r, c], s[r, c]

    def inputs(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(pairs, len(FEATURES)) float32 inputs at origins (rows[i], cols[i])."""
        out = np.empty((rows.size, len(FEATURES)), dtype=np.float32)
        for lo in range(0, rows.size, BATCH):
            sl = slice(lo, lo + BATCH)
            out[sl] = self._batch(rows[sl], cols[sl])
        return out

    def trailing(
        self, x: np.ndarray, r: np.ndarray, c: np.ndarray, n: int, every: int = 1
    ) -> np.ndarray:
        """(pairs, n) values of ``x`` at c, c - every, ..., NaN before the grid."""
        back = c[:, None] - every * np.arange(n)[None, :]
        vals = x[r[:, None], np.maximum(back, 0)]
        out: np.ndarray = np.where(back >= 0, vals, np.nan)
        return out

    def _batch(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        h, d = self.hour, self.day
        cols: list[np.ndarray] = [self.u[r, c]]
        m1, s1 = self.mean_std(h, r, c)
        m6, _ = self.mean_std(6 * h, r, c)
        m24, s24 = self.mean_std(d, r, c)
        cols += [m1, m6, m24, s1, s24, self.hpeak[r, c]]
        with np.errstate(invalid="ignore"), quiet():
            hp24 = self.trailing(self.hpeak, r, c, 24, h)
            cols += [*list(row_quantiles(hp24, [0.5, 0.95], axis=1)), np.nanmax(hp24, axis=1)]
            hp7 = self.trailing(self.hpeak, r, c, 168, h)
            cols += [*list(row_quantiles(hp7, [0.5, 0.95, 0.99], axis=1)), np.nanmax(hp7, axis=1)]
            u24 = self.trailing(self.u, r, c, d, 1)
            cols += list(row_quantiles(u24, [0.95, 0.99], axis=1))
        if self.inmax_1h is not None and self.inmax_24h is not None and self.gap is not None:
            cols += [self.inmax_1h[r, c], self.inmax_24h[r, c], self.gap[r, c]]
        else:
            cols += [np.full(r.size, np.nan)] * 3
        w = self.window
        for lag in (d, self.week):
            at = c - lag + w
            cols.append(np.where(at >= 0, self.fpeak[r, np.maximum(at, 0)], np.nan))
        ts_s = self.grid.ts_us(c) / 1e6 + self.grid.step_us / 1e6  # end of the origin step
        cols.append(((ts_s % 86400) / 3600).astype(np.float64))
        cols.append((((ts_s // 86400) + 3) % 7).astype(np.float64))  # 1970-01-01 was a Thursday
        return np.column_stack(cols).astype(np.float32)

    def reference(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The origin's 1 h mean usage (share; the last usage when the hour is empty)."""
        m, _ = self.mean_std(self.hour, rows, cols)
        out: np.ndarray = np.where(np.isfinite(m), m, self.u[rows, cols])
        return out

    def scale(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The conformal scale at the origin: its 24 h usage standard deviation + a floor."""
        _, s = self.mean_std(self.day, rows, cols)
        out: np.ndarray = np.nan_to_num(s, nan=0.0) + SCALE_FLOOR
        return out

    def target(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Peak usage (share) over ``(c, c + window]``; NaN past the grid or unobserved."""
        at = cols + self.window
        inside = at < self.grid.steps
        out: np.ndarray = np.where(
            inside, self.fpeak[rows, np.minimum(at, self.grid.steps - 1)], np.nan
        )
        return out

    def step_usage(self, rows: np.ndarray, cols: np.ndarray, ahead: np.ndarray) -> np.ndarray:
        """Usage (share) ``ahead`` steps after the origin; NaN past the grid."""
        at = cols + ahead
        inside = at < self.grid.steps
        out: np.ndarray = np.where(
            inside, self.raw[rows, np.minimum(at, self.grid.steps - 1)], np.nan
        )
        return out

    def current(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Usage (share) at the origin, carried forward over a short gap."""
        out: np.ndarray = self.u[rows, cols]
        return out


def row_quantiles(x: np.ndarray, q: float | list[float], axis: int = 1) -> np.ndarray:
    """``np.nanquantile(x, q, axis=1)`` (linear interpolation) of a 2-D array, in one
    vectorised pass: numpy's NaN path loops row by row in Python. NaN for a row with
    no finite value."""
    if axis != 1:
        raise ValueError("row_quantiles works along axis 1")
    s = np.sort(x, axis=1)  # NaN sort last
    n = np.isfinite(x).sum(axis=1)
    r = np.arange(x.shape[0])
    qs = np.atleast_1d(np.asarray(q, dtype=np.float64))
    out = np.empty((qs.size, x.shape[0]))
    for k, v in enumerate(qs):
        pos = v * np.maximum(n - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        a, b = s[r, lo], s[r, hi]
        out[k] = np.where(n > 0, a + (pos - lo) * (b - a), np.nan)
    return out[0] if np.ndim(q) == 0 else out


@contextmanager
def quiet() -> Iterator[None]:
    """Silence numpy's all-NaN-slice warnings (a new node has no 7-day history)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
