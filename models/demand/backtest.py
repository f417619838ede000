"""Rolling-origin backtests: the model and the baselines, side by side, as production
would have run them.

At every cutoff ``c`` each model sees only the demand rows with ``ts <= c`` (the
bucket ending at ``c`` holds nothing later), is refit on them (``refit=True``: a
nightly retrain) — or, with ``refit=False``, is fit once at the first cutoff and then
only *updated*: it forecasts from newer history with the parameters it already has
(how the Philly test fortnight is scored: trained only on what came before it) — and
forecasts every horizon from the end of each series. Forecasts are joined with the
actual bucket values and each origin's MASE scale, ready for
:func:`models.demand.metrics.score`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np
import polars as pl

from predops.features.demand import SERIES
from predops.models.demand.config import ForecastConfig
from predops.models.demand.grid import Grid, from_us, resample_grid, to_us
from predops.models.demand.metrics import mase_scale


class Forecaster(Protocol):
    def fit(
        self, X: pl.DataFrame, y: None = None, *, calendar: pl.DataFrame | None = None
    ) -> Any: ...

    def predict(
        self, X: pl.DataFrame | None = None, *, calendar: pl.DataFrame | None = None
    ) -> pl.DataFrame: ...


@dataclass(frozen=True, slots=True)
class BacktestResult:
    """Forecast rows of every model at every cutoff, with actuals and MASE scales."""

    rows: pl.DataFrame
    cutoffs: tuple[datetime, ...]
    fit_seconds: dict[str, float] = field(default_factory=dict)
    predict_seconds: dict[str, float] = field(default_factory=dict)
    selections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per model that has one, its ``selection()`` (what the served forecast was made
    of) after each refit, or once after the last update without refits."""


def cutoffs_before_end(
    demand: pl.DataFrame,
    config: ForecastConfig,
    *,
    n: int,
    every: timedelta | None = None,
    horizon: int | None = None,
) -> tuple[datetime, ...]:
    """``n`` grid-aligned cutoffs, ``every`` apart (default: the config's
    ``backtest_every`` steps), the last leaving a full ``horizon`` (default: the config's
    max) of actuals after it."""
    if n < 1:
        raise ValueError("need at least one cutoff")
    grid = resample_grid(demand, config)
    end_us = int(grid.ts_us.max())
    h = horizon or config.max_horizon
    step = config.freq
    gap = every or config.backtest_every * step
    last = from_us(end_us) - h * step
    return tuple(last - gap * (n - 1 - i) for i in range(n))


def _scales(grid: Grid, cutoff_us: int, m: int) -> dict[str, float]:
    out = {}
    for k, sid in enumerate(grid.series):
        t = grid.times(k)
        out[sid] = mase_scale(grid.values(k)[t <= cutoff_us], m)
    return out


def rolling_origin(
    demand: pl.DataFrame,
    models: Mapping[str, Callable[[], Forecaster]],
    *,
    config: ForecastConfig,
    cutoffs: Sequence[datetime],
    calendar: pl.DataFrame | None = None,
    refit: bool = True,
) -> BacktestResult:
    """Backtest every model of ``models`` (name -> factory of an unfitted forecaster)
    at every cutoff; see the module docstring."""
    if not cutoffs:
        raise ValueError("no cutoffs")
    cut = sorted(cutoffs)
    grid = resample_grid(demand, config)
    actual = pl.DataFrame(
        {
            SERIES: np.repeat(np.asarray(grid.series, dtype=object), np.diff(grid.starts)),
            "valid_at": pl.Series(grid.ts_us, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
            "actual": grid.value,
        }
    ).with_columns(pl.col(SERIES).cast(pl.String))
    m = min(config.seasons)
    frames: list[pl.DataFrame] = []
    fit_s: dict[str, float] = {}
    pred_s: dict[str, float] = {}
    fitted: dict[str, Forecaster] = {}
    selections: dict[str, list[dict[str, Any]]] = {}
    for i, c in enumerate(cut):
        history = demand.filter(pl.col("ts") <= c)
        if history.height == 0:
            raise ValueError(f"no demand at or before cutoff {c}")
        scales = _scales(grid, to_us(c), m)
        for name, make in models.items():
            t0 = time.perf_counter()
            if refit or i == 0:
                fitted[name] = make().fit(history, calendar=calendar)
            t1 = time.perf_counter()
            pred = fitted[name].predict(history, calendar=calendar)
            t2 = time.perf_counter()
            fit_s[name] = fit_s.get(name, 0.0) + (t1 - t0)
            pred_s[name] = pred_s.get(name, 0.0) + (t2 - t1)
            parts = [pred.with_columns(pl.lit(name).alias("model"))]
            selection = getattr(fitted[name], "selection", None)
            if selection is not None and (refit or i == len(cut) - 1):
                selections.setdefault(name, []).append(selection())
            components = getattr(fitted[name], "component_forecasts", None)
            if components is not None:
                comp = components()
                parts.append(comp.filter(~pl.col("model").is_in(list(models))))
            for part in parts:
                frames.append(
                    part.with_columns(
                        pl.lit(c).cast(pl.Datetime("us", "UTC")).alias("cutoff"),
                        pl.col(SERIES)
                        .replace_strict(scales, default=None, return_dtype=pl.Float64)
                        .alias("mase_scale"),
                    )
                )
    rows = pl.concat(frames).join(actual, on=[SERIES, "valid_at"], how="left")
    return BacktestResult(
        rows=rows,
        cutoffs=tuple(cut),
        fit_seconds=fit_s,
        predict_seconds=pred_s,
        selections=selections,
    )
