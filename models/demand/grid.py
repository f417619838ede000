"""Series on a regular grid as flat numpy arrays: what the baselines and the metrics
read (the model's :class:`models.demand.panel.Panel` adds features on top)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.features.demand import SERIES, DemandFeatureSpec, resample_demand
from predops.models.demand.config import ForecastConfig

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    """A grid time (µs since the epoch, as :attr:`Grid.ts_us`) as a UTC datetime."""
    return EPOCH + timedelta(microseconds=int(us))


def to_us(t: datetime) -> int:
    """A timezone-aware datetime as µs since the epoch (exact, no float)."""
    return (t - EPOCH) // _US


@dataclass(frozen=True, slots=True)
class Grid:
    """``starts[k]:starts[k+1]`` holds series k: bucket ends (µs since the epoch, UTC)
    and values (NaN where a bucket is missing)."""

    series: list[str]
    starts: np.ndarray
    ts_us: np.ndarray
    value: np.ndarray

    def values(self, k: int) -> np.ndarray:
        out: np.ndarray = self.value[self.starts[k] : self.starts[k + 1]]
        return out

    def times(self, k: int) -> np.ndarray:
        out: np.ndarray = self.ts_us[self.starts[k] : self.starts[k + 1]]
        return out

    def last_ts_us(self, k: int) -> int:
        return int(self.ts_us[self.starts[k + 1] - 1])


def demand_columns(demand: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """``demand`` as a LazyFrame with every optional contract column present."""
    lf = demand.lazy() if isinstance(demand, pl.DataFrame) else demand
    cols = lf.collect_schema().names()
    for need in (SERIES, "ts", "value"):
        if need not in cols:
            raise ValueError(f"demand frame lacks column {need!r}; has {', '.join(cols)}")
    for opt, dtype in (
        ("running", pl.Float64),
        ("pending", pl.Float64),
        ("capacity", pl.Float64),
        ("pool", pl.String),
        ("resource", pl.String),
        ("gpu_model", pl.String),
    ):
        if opt not in cols:
            lf = lf.with_columns(pl.lit(None, dtype).alias(opt))
    return lf


def grid_from_frame(df: pl.DataFrame) -> Grid:
    """A resampled frame (sorted by series, ts) as a :class:`Grid`."""
    sizes = df.group_by(SERIES, maintain_order=True).len()
    starts = np.concatenate([[0], np.cumsum(sizes["len"].to_numpy())]).astype(np.int64)
    return Grid(
        series=sizes[SERIES].to_list(),
        starts=starts,
        ts_us=df["ts"].dt.epoch("us").to_numpy().astype(np.int64),
        value=df["value"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
    )


def resampled(demand: pl.DataFrame | pl.LazyFrame, spec: DemandFeatureSpec) -> pl.LazyFrame:
    """``demand`` rows on ``spec``'s grid, complete buckets only (see
    :func:`features.demand.resample_demand`): the first step of every grid and panel, so
    a forecast is a function of this frame (and the calendar and the model) alone."""
    return resample_demand(demand_columns(demand), spec)


GRID_VALUES = ("value", "value_last")
"""The resampled columns a grid can hold: ``"value"`` (the bucket's mean) and
``"value_last"`` (its latest sample; the mean where a bucket has none)."""


def _check_value(value: str) -> None:
    if value not in GRID_VALUES:
        raise ValueError(f"value must be 'value' or 'value_last', got {value!r}")


def resample_grid(
    demand: pl.DataFrame | pl.LazyFrame, config: ForecastConfig, *, value: str = "value"
) -> Grid:
    """``demand`` rows on ``config``'s grid (see :func:`features.demand.resample_demand`).

    ``value``: the resampled column the grid holds (see :data:`GRID_VALUES`)."""
    _check_value(value)
    return resample_grids(demand, config)[value]


def resample_grids(demand: pl.DataFrame | pl.LazyFrame, config: ForecastConfig) -> dict[str, Grid]:
    """Both grids of :data:`GRID_VALUES` from one resampling of ``demand`` (only the
    columns they hold are aggregated)."""
    df = (
        resampled(demand, config.spec)
        .select(SERIES, "ts", "value", pl.coalesce("value_last", "value").alias("value_last"))
        .sort(SERIES, "ts")
        .collect()
    )
    if df.height == 0:
        raise ValueError("no demand rows")
    mean = grid_from_frame(df)
    last = df["value_last"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    return {"value": mean, "value_last": Grid(mean.series, mean.starts, mean.ts_us, last)}


class Resampled:
    """A demand frame whose grids are resampled once, on first use, and then shared.

    A selection hands one to each of its classical candidates (fit, every validation
    origin, every forecast), so the frame is resampled once where it was once per
    candidate. A candidate on another grid step than the frame's ``config`` resamples
    the frame itself, as it would without this."""

    __slots__ = ("_grids", "config", "frame")

    def __init__(self, frame: pl.DataFrame, config: ForecastConfig) -> None:
        self.frame = frame
        self.config = config
        self._grids: dict[str, Grid] | None = None

    def grid(self, config: ForecastConfig, value: str = "value") -> Grid:
        """The ``value`` grid of the frame on ``config``'s grid."""
        _check_value(value)
        if config.spec != self.config.spec:
            return resample_grid(self.frame, config, value=value)
        if self._grids is None:
            self._grids = resample_grids(self.frame, self.config)
        return self._grids[value]
