"""Baselines the forecaster must beat, and the fallback for series too short to model.
Over 500 lines: each method is a small array function plus a small estimator around it
sharing one plumbing class; split, the estimators would import their functions back.

Array level (one series, NaN = missing bucket, horizons in steps):

- :func:`seasonal_naive` — the value one season back at the target's phase (same hour
  yesterday: m = 24; same hour last week: m = 168), with an interval from the
  empirical quantiles of the in-sample seasonal differences, widened by sqrt(k) for
  the k-th season ahead (as a random walk over seasons).
- :func:`naive` — the last value, interval from first differences x sqrt(h).
- :func:`persistence` — the last value too, its interval per horizon from the
  series' own h-step changes over a recent window (demand that moves in steps
  mostly does not move in an hour, so first differences x sqrt(h) say too little).
- :func:`fit_ets` / :func:`ets_forecast` — statsmodels' ETS (additive error, damped
  additive trend, additive season of the config's period when there are two full
  seasons, else none), with its analytical 80 % prediction interval; the forecasts from
  estimated parameters come from statsmodels' compiled smoother without a model object
  each (:mod:`predops.models.demand.ets_filter`: statsmodels' forecast to the bit, its
  band to rounding).
- :func:`theta_forecast` — the Theta method (SES with drift on the additively
  deseasonalised series, season = the config's shortest when two full seasons are
  seen), with its 80 % prediction interval; re-estimated at every forecast, every
  series of a call at once (:mod:`predops.models.demand.theta`: a closed form plus one
  least-squares SES search, cheap, so "updated" is "refit").
- :func:`short_series` — what a series too short for the model gets: seasonal naive if
  two seasons are seen, else naive, else the one value; the method name says which.

Frame level: :class:`SeasonalNaiveForecaster`, :class:`ETSForecaster` and
:class:`ThetaForecaster` follow the
same ``fit(demand)`` / ``predict(history)`` contract as the model, so a backtest runs
them side by side. ETS estimation and every ``predict`` run under
:func:`one_blas_thread` (statsmodels' small BLAS calls cost twice the CPU on OpenBLAS's
spinning pool, for no less wall time).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from predops.models.demand.config import ForecastConfig, config_named
from predops.models.demand.ets_filter import EtsFit, _ets_class, _ets_model, ets_forecasts
from predops.models.demand.grid import Grid, Resampled, resample_grid
from predops.models.demand.panel import forecast_frame, step_us
from predops.models.demand.quantiles import Quantiles
from predops.models.demand.theta import THETA_MIN, theta_forecasts


def observed(y: np.ndarray) -> np.ndarray:
    """``y`` from its first observed bucket, gaps carried forward (a missing bucket is
    unknown, not zero)."""
    y = np.asarray(y, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(y))
    if ok.size == 0:
        return y[:0]
    y = y[ok[0] :].copy()
    idx = np.where(np.isfinite(y), np.arange(y.size), 0)
    np.maximum.accumulate(idx, out=idx)
    out: np.ndarray = y[idx]
    return out


def _residual_band(resid: np.ndarray) -> tuple[float, float]:
    resid = resid[np.isfinite(resid)]
    if resid.size == 0:
        return 0.0, 0.0
    lo, hi = np.quantile(resid, [0.1, 0.9])
    return float(lo), float(hi)


def seasonal_naive(y: np.ndarray, horizons: np.ndarray, m: int) -> Quantiles:
    """Forecast ``y[n-1+h-m*ceil(h/m)]``; needs at least ``m`` observed buckets."""
    z = observed(y)
    n = z.size
    if n < m:
        raise ValueError(f"seasonal naive with m={m} needs {m} buckets, got {n}")
    h = np.asarray(horizons, dtype=np.int64)
    k = np.ceil(h / m).astype(np.int64)
    p50 = z[n - 1 + h - m * k]
    lo, hi = _residual_band(z[m:] - z[:-m]) if n > m else (0.0, 0.0)
    w = np.sqrt(k)
    return Quantiles(p50 + lo * w, p50, p50 + hi * w, f"seasonal_naive_{m}")


def naive(y: np.ndarray, horizons: np.ndarray) -> Quantiles:
    """The last observed value; needs one observed bucket."""
    z = observed(y)
    if z.size == 0:
        raise ValueError("naive forecast of a series with no observed bucket")
    h = np.asarray(horizons, dtype=np.float64)
    p50 = np.full(h.size, z[-1])
    lo, hi = _residual_band(np.diff(z)) if z.size > 1 else (0.0, 0.0)
    w = np.sqrt(h)
    return Quantiles(p50 + lo * w, p50, p50 + hi * w, "naive" if z.size > 1 else "constant")


PERSISTENCE_WINDOW = 504
"""Buckets of recent history whose h-step changes give :func:`persistence` its band
(three weeks hourly, the window the stacked Holt-Winters reads)."""


def persistence(y: np.ndarray, horizons: np.ndarray, window: int = PERSISTENCE_WINDOW) -> Quantiles:
    """The last observed value, with a band per horizon from the 10th / 90th
    percentiles of the changes ``z[t+h] - z[t]`` over the last ``window`` buckets
    (first differences x sqrt(h) while fewer than ``h + 1`` buckets are seen)."""
    z = observed(y)
    if z.size == 0:
        raise ValueError("persistence forecast of a series with no observed bucket")
    h = np.asarray(horizons, dtype=np.int64)
    p50 = np.full(h.size, z[-1])
    recent = z[-int(window) :]
    seen = h < recent.size
    steps = np.unique(np.concatenate([h[seen], [1]])) if recent.size > 1 else h[:0]
    lo_k, hi_k = change_quantiles(recent, steps)
    first = (lo_k[0], hi_k[0]) if steps.size else (0.0, 0.0)
    at = np.searchsorted(steps, h[seen])
    root = np.sqrt(h)
    lo = np.where(seen, 0.0, first[0] * root)
    hi = np.where(seen, 0.0, first[1] * root)
    lo[seen], hi[seen] = lo_k[at], hi_k[at]
    return Quantiles(p50 + lo, p50, p50 + hi, "persistence")


def change_quantiles(z: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step ``k`` of ``steps`` (each in ``[1, z.size)``), the 10th and 90th
    percentiles of ``z[k:] - z[:-k]``: the numbers ``np.quantile`` (linear
    interpolation) gives, to the bit, from one sort of every step's changes at once
    (a row per step, padded past its last change with +inf, which sorts last)."""
    n = z.size
    k = np.asarray(steps, dtype=np.int64)
    if k.size == 0:
        return np.empty(0), np.empty(0)
    j = np.arange(n)[None, :] + k[:, None]
    d = np.where(j < n, z[np.minimum(j, n - 1)] - z[None, :], np.inf)
    d.sort(axis=1)
    count = n - k
    rows = np.arange(k.size)
    out = []
    for q in (0.1, 0.9):
        # np.quantile's arithmetic: virtual index (n - 1) q, its floor and the next
        # index (both the last at or past it), and numpy's two-sided lerp.
        virtual = (count - 1) * q
        below = np.floor(virtual)
        past = virtual >= count - 1
        prev = np.where(past, count - 1, below).astype(np.intp)
        nxt = np.where(past, count - 1, below + 1).astype(np.intp)
        a, b = d[rows, prev], d[rows, nxt]
        gamma = virtual - np.where(past, -1.0, below)
        diff = b - a
        out.append(np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma))
    return out[0], out[1]


def short_series(y: np.ndarray, horizons: np.ndarray, seasons: tuple[int, ...]) -> Quantiles:
    """The fallback chain for a series too short to model (see the module docstring)."""
    n = observed(y).size
    for m in sorted(seasons):
        if n >= 2 * m:
            q = seasonal_naive(y, horizons, m)
            return Quantiles(q.p10, q.p50, q.p90, f"fallback_{q.method}")
    q = naive(y, horizons)
    return Quantiles(q.p10, q.p50, q.p90, f"fallback_{q.method}")


def fit_ets(y: np.ndarray, season: int) -> EtsFit | None:
    """Estimate ETS on the observed part of ``y``; None if even the simplest form fails
    or there are fewer than 10 buckets. The seasonal form needs two full seasons."""
    z = observed(y)
    forms = []
    if season and z.size >= 2 * season + 2:
        forms.append((season, True))
    forms += [(0, True), (0, False)]
    if z.size < 10:
        return None
    _ets_class()  # imported outside the block (see there)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter on flat series
        for s, trend in forms:
            try:
                res = _ets_model(z, s, trend).fit(disp=False, maxiter=200)
            except (ValueError, np.linalg.LinAlgError):
                continue
            if np.all(np.isfinite(res.params)):
                return EtsFit(np.asarray(res.params, dtype=np.float64), s, trend)
    return None


def ets_forecast(y: np.ndarray, horizons: np.ndarray, fit: EtsFit) -> Quantiles:
    """Forecast from the end of ``y`` with ``fit``'s parameters (no re-estimation: the
    states are filtered through the new buckets, as a deployed model is updated; see
    :mod:`predops.models.demand.ets_filter`, which does many series at once)."""
    q = ets_forecasts([observed(y)], np.asarray(horizons, dtype=np.int64), [fit])[0]
    if q is None:
        raise ValueError("ETS produced a non-finite forecast")
    return q


def theta_forecast(y: np.ndarray, horizons: np.ndarray, season: int) -> Quantiles:
    """Theta from the end of ``y`` (:mod:`predops.models.demand.theta`, which does many
    series at once); ValueError under :data:`THETA_MIN` observed buckets or for a
    forecast that is not finite."""
    z = observed(y)
    if z.size < THETA_MIN:
        raise ValueError(f"theta needs {THETA_MIN} observed buckets, got {z.size}")
    q = theta_forecasts([z], np.asarray(horizons, dtype=np.int64), season)[0]
    if q is None:
        raise ValueError("theta produced a non-finite forecast")
    return q


class _OneBlasThread:
    """Process-wide, reference-counted: the first block in sets the BLAS pools to one
    thread, the last one out restores what was there. (threadpoolctl's own context
    manager, entered from two threads at once, can restore the wrong limit.)"""

    def __init__(self, limit: Callable[[], Any] | None = None) -> None:
        self._limit = limit or (lambda: threadpool_limits(limits=1, user_api="blas"))
        self._lock = threading.Lock()
        self._depth = 0
        self._limits: Any = None

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._limits = self._limit()
            self._depth += 1

    def exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limits is not None:
                self._limits.restore_original_limits()
                self._limits = None


_ONE_BLAS_THREAD = _OneBlasThread()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with one BLAS thread. statsmodels' estimation makes many small BLAS
    calls, each handed to OpenBLAS's thread pool, whose idle threads spin between
    calls: on two cores an ETS fit cost twice the CPU for no less wall time
    (docs/demand.md). While any thread is inside such a block the limit is
    process-wide (BLAS pools are); the setting found before is back once none is."""
    _ONE_BLAS_THREAD.enter()
    try:
        yield
    finally:
        _ONE_BLAS_THREAD.exit()


class _GridForecaster(BaseEstimator):  # type: ignore[misc]
    """Shared plumbing: read series off the grid, forecast each, return one frame."""

    config: str | ForecastConfig
    reads_grid = True
    """``fit`` and ``predict`` also take a :class:`grid.Resampled` (the grids resampled
    once for every candidate that reads them)."""

    def _config(self) -> ForecastConfig:
        return self.config if isinstance(self.config, ForecastConfig) else config_named(self.config)

    def _value(self) -> str:
        """The resampled column this candidate reads (see :data:`grid.GRID_VALUES`)."""
        return "value"

    def _grid(self, demand: pl.DataFrame | pl.LazyFrame | Resampled) -> Grid:
        if isinstance(demand, Resampled):  # resampled once for every candidate
            return demand.grid(self.config_, self._value())
        return resample_grid(demand, self.config_, value=self._value())

    def _forecast_one(self, series_id: str, y: np.ndarray, h: np.ndarray) -> Quantiles:
        raise NotImplementedError

    def _forecast_many(
        self, series_ids: list[str], ys: list[np.ndarray], h: np.ndarray
    ) -> list[Quantiles]:
        """Every series' forecast (one at a time unless a candidate does better)."""
        return [self._forecast_one(sid, y, h) for sid, y in zip(series_ids, ys, strict=True)]

    def predict(
        self,
        X: pl.DataFrame | pl.LazyFrame | Resampled | None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> pl.DataFrame:
        """Forecasts from the end of every series in ``X`` (default: the fit data)."""
        check_is_fitted(self, "config_")
        grid = self.grid_ if X is None else self._grid(X)
        h = np.asarray(self.config_.horizons, dtype=np.int64)
        ids: list[str] = []
        issued: list[np.ndarray] = []
        hs: list[np.ndarray] = []
        qs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        methods: list[str] = []
        keep = [k for k in range(len(grid.series)) if observed(grid.values(k)).size]
        with one_blas_thread():
            forecasts = self._forecast_many(
                [grid.series[k] for k in keep], [grid.values(k) for k in keep], h
            )
        for k, q in zip(keep, forecasts, strict=True):
            ids += [grid.series[k]] * h.size
            issued.append(np.full(h.size, grid.last_ts_us(k)))
            hs.append(h)
            qs.append((q.p10, q.p50, q.p90))
            methods += [q.method] * h.size
        if not ids:
            raise ValueError("no series with an observed bucket to forecast")
        cat = [np.concatenate([q[i] for q in qs]) for i in range(3)]
        return forecast_frame(
            ids,
            np.concatenate(issued),
            np.concatenate(hs),
            (cat[0], cat[1], cat[2]),
            methods,
            step_us(self.config_),
        )


class SeasonalNaiveForecaster(_GridForecaster):
    """Seasonal naive per series (``season`` in steps; None: the config's shortest).
    Series shorter than one season get the fallback chain."""

    def __init__(self, config: str | ForecastConfig = "hourly", season: int | None = None):
        self.config = config
        self.season = season

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame | Resampled,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> SeasonalNaiveForecaster:
        self.config_ = self._config()
        m = self.season if self.season is not None else min(self.config_.seasons)
        if m < 1:
            raise ValueError(f"season must be >= 1 step, got {m}")
        self.season_ = int(m)
        self.grid_ = self._grid(X)
        return self

    def _forecast_one(self, series_id: str, y: np.ndarray, h: np.ndarray) -> Quantiles:
        if self.season_ == 1:
            return naive(y, h)
        if observed(y).size >= self.season_ + 1:
            return seasonal_naive(y, h, self.season_)
        return short_series(y, h, self.config_.seasons)


class PersistenceForecaster(_GridForecaster):
    """The last observed bucket per series (:func:`persistence`): demand that moves in
    steps (a job holds its GPUs for hours) is often best forecast by what runs now.
    ``level="mean"`` persists the bucket's mean; ``"last"`` its latest sample
    (``value_last``: the state at the issue time, where the mean of an hour in which a
    job started still lags), banded by the h-step changes of the latest samples."""

    def __init__(self, config: str | ForecastConfig = "hourly", level: str = "mean"):
        self.config = config
        self.level = level

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame | Resampled,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> PersistenceForecaster:
        if self.level not in ("mean", "last"):
            raise ValueError(f"level must be 'mean' or 'last', got {self.level!r}")
        self.config_ = self._config()
        self.grid_ = self._grid(X)
        return self

    def _value(self) -> str:
        return "value" if self.level == "mean" else "value_last"

    def _forecast_one(self, series_id: str, y: np.ndarray, h: np.ndarray) -> Quantiles:
        return persistence(y, h)


class ETSForecaster(_GridForecaster):
    """statsmodels ETS per series; parameters are estimated in ``fit`` and reused by
    ``predict`` on newer history (a series first seen in ``predict`` is estimated
    there). Series ETS cannot fit get the fallback chain."""

    def __init__(self, config: str | ForecastConfig = "hourly", season: int | None = None):
        self.config = config
        self.season = season

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame | Resampled,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> ETSForecaster:
        self.config_ = self._config()
        self.season_ = int(self.config_.ets_season if self.season is None else self.season)
        self.grid_ = self._grid(X)
        with one_blas_thread():
            self.fits_: dict[str, EtsFit | None] = {
                sid: fit_ets(self.grid_.values(k), self.season_)
                for k, sid in enumerate(self.grid_.series)
            }
        return self

    def _forecast_many(
        self, series_ids: list[str], ys: list[np.ndarray], h: np.ndarray
    ) -> list[Quantiles]:
        """The series with parameters from ``fit`` filtered with them
        (:func:`ets_forecasts`); the others (first seen here, or ETS failed on them)
        through :meth:`_forecast_one`."""
        known: list[int] = []
        fits: list[EtsFit] = []
        for i, sid in enumerate(series_ids):
            fit = self.fits_.get(sid)
            if fit is not None:
                known.append(i)
                fits.append(fit)
        batch = ets_forecasts([observed(ys[i]) for i in known], h, fits)
        out: list[Quantiles | None] = [None] * len(ys)
        for i, q in zip(known, batch, strict=True):
            out[i] = q if q is not None else short_series(ys[i], h, self.config_.seasons)
        return [
            q if q is not None else self._forecast_one(sid, y, h)
            for sid, y, q in zip(series_ids, ys, out, strict=True)
        ]

    def _forecast_one(self, series_id: str, y: np.ndarray, h: np.ndarray) -> Quantiles:
        fit = self.fits_[series_id] if series_id in self.fits_ else fit_ets(y, self.season_)
        if fit is not None:
            try:
                return ets_forecast(y, h, fit)
            except (ValueError, np.linalg.LinAlgError):
                pass
        return short_series(y, h, self.config_.seasons)


class ThetaForecaster(_GridForecaster):
    """statsmodels Theta per series, re-estimated on the history it forecasts from
    (see :func:`theta_forecast`). Series Theta cannot fit get the fallback chain."""

    def __init__(self, config: str | ForecastConfig = "hourly", season: int | None = None):
        self.config = config
        self.season = season

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame | Resampled,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> ThetaForecaster:
        self.config_ = self._config()
        self.season_ = int(min(self.config_.seasons) if self.season is None else self.season)
        self.grid_ = self._grid(X)
        return self

    def _forecast_many(
        self, series_ids: list[str], ys: list[np.ndarray], h: np.ndarray
    ) -> list[Quantiles]:
        """Every series in one estimation pass; the fallback chain where Theta has no
        forecast (too short, or not finite)."""
        batch = theta_forecasts([observed(y) for y in ys], h, self.season_)
        return [
            q if q is not None else short_series(y, h, self.config_.seasons)
            for y, q in zip(ys, batch, strict=True)
        ]

    def _forecast_one(self, series_id: str, y: np.ndarray, h: np.ndarray) -> Quantiles:
        return self._forecast_many([series_id], [y], h)[0]


__all__ = [
    "ETSForecaster",
    "EtsFit",
    "PersistenceForecaster",
    "Quantiles",
    "SeasonalNaiveForecaster",
    "ThetaForecaster",
    "change_quantiles",
    "ets_forecast",
    "fit_ets",
    "naive",
    "one_blas_thread",
    "persistence",
    "seasonal_naive",
    "short_series",
    "theta_forecast",
]
