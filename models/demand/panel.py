"""The demand panel: every series on one regular grid, issue-time features, and the
direct multi-horizon design (one row per origin x horizon).

Frames stay at this edge: :func:`build_panel` resamples the ``demand`` rows (via
:func:`features.demand.resample_demand`), computes the issue-time features
(:func:`features.demand.demand_features`, :func:`features.demand.add_trend_features`)
and hands back flat numpy arrays, series after series. :func:`design` turns (origin
row, horizon) pairs into the model's inputs:

- issue-time features, with every quantity in the series' units divided by the
  origin's *scale* (so one global model serves a 5-GPU pool and a 5,000-core pool);
- the horizon, and target-time calendar features (hour, weekday, known-in-advance
  events at ``valid_at``, from :func:`features.demand.add_calendar_features`);
- target-aligned seasonal lags: the last observed value at the target's phase of each
  season (same hour yesterday / last week for the hourly config);

and the target as the deviation from a *baseline* (the last observed value in the
hourly config: the trees forecast the change, and "no change" is z = 0; the level plus
a damped local linear trend in the weekly config), in units of the scale:
``z = (y[t+h] - base(t, h)) / scale(t)``; a forecast is ``base + scale * z``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from predops.features.demand import (
    SERIES,
    add_calendar_features,
    add_trend_features,
    demand_features,
    trend_feature_name,
)
from predops.models.demand.config import RESOLVED_ANCHORS, ForecastConfig
from predops.models.demand.grid import grid_from_frame, resampled

US_PER_S = 1_000_000
SCALE_FLOOR_SHARE = 0.1
"""The scale is the largest of the level, the mean over the spec's longest window and
this share of the peak over that window, so a pool that idled for a day (or a mostly
idle pool with rare bursts) does not blow its normalised lags up. Trailing windows,
not an expanding mean: a forecast then depends only on the last
:func:`lookback_steps` buckets, however much history is passed."""
# No weekday number: with a few weeks of history a tree splits on "the third Sunday";
# the weekly season enters through the same-hour-last-week lag and is_weekend.
TARGET_CALENDAR = ("hour", "is_weekend", "event_active", "event_magnitude", "hours_to_event")
ISSUE_CALENDAR = ("hour", "is_weekend", "event_active", "event_magnitude", "hours_to_event")
RAW_ISSUE = ("pending__share", "pending__share_mean_24", "capacity__util")


@dataclass(frozen=True, slots=True)
class Panel:
    """Series on a regular grid, concatenated; ``starts[k]:starts[k+1]`` is series k."""

    series: list[str]
    pools: list[str | None]
    starts: np.ndarray  # int64, n_series + 1
    ts_us: np.ndarray  # int64, microseconds since the epoch (bucket end, UTC)
    value: np.ndarray  # float64, NaN where a bucket is missing
    level: np.ndarray  # float64, trailing mean over level_window (NaN before any data)
    last: np.ndarray  # float64, latest sample at or before the row (NaN before any)
    scale: np.ndarray  # float64, > 0
    slope: np.ndarray  # float64, value units per step (0 without a trend term)
    issue: np.ndarray  # float32, n_rows x len(issue_names)
    issue_names: list[str]
    observed: np.ndarray  # int64, observed buckets so far in the series (inclusive)
    noise: np.ndarray  # float64, trailing mean |y[t] - y[t-m]| (m: shortest season), > 0
    outage: np.ndarray  # bool, the bucket lies in a fleet-wide outage (see fleet_outages)

    @property
    def n_rows(self) -> int:
        return int(self.value.shape[0])

    def series_index(self) -> np.ndarray:
        """Series number of every row."""
        return np.repeat(np.arange(len(self.series)), np.diff(self.starts))

    def last_rows(self) -> np.ndarray:
        """Row of the last bucket of every non-empty series."""
        return self.starts[1:] - 1


def _normalised_issue_names(config: ForecastConfig) -> list[str]:
    spec = config.spec
    names = ["value__last", *(f"value__lag_{k}" for k in spec.lags)]
    for w in spec.windows:
        names += [f"value__mean_{w}", f"value__max_{w}", f"value__std_{w}"]
    return [*names, "capacity__value"]


def issue_feature_names(config: ForecastConfig) -> tuple[list[str], list[str]]:
    """(columns divided by the scale, columns kept as they are) at the issue time."""
    raw = list(RAW_ISSUE)
    if config.freq.total_seconds() < 86400:
        raw += list(ISSUE_CALENDAR)
    else:
        raw += [c for c in ISSUE_CALENDAR if c.startswith("event") or c == "hours_to_event"]
    return _normalised_issue_names(config), raw


def target_feature_names(config: ForecastConfig) -> list[str]:
    cal = [
        c
        for c in TARGET_CALENDAR
        if config.freq.total_seconds() < 86400 or c.startswith("event") or c == "hours_to_event"
    ]
    return [f"target__{c}" for c in cal]


def feature_names(config: ForecastConfig) -> list[str]:
    """Every model input, in the order :func:`design` writes them."""
    norm, raw = issue_feature_names(config)
    extra = ["level__log", "horizon"]
    if config.trend_window:
        extra.append("trend__relative")
    seasonal = [f"value__season_{m}" for m in config.seasons]
    return [*norm, *raw, *extra, *seasonal, *target_feature_names(config)]


def build_panel(
    demand: pl.DataFrame | pl.LazyFrame,
    config: ForecastConfig,
    *,
    calendar: pl.DataFrame | None = None,
    outage_gaps: bool = False,
) -> Panel:
    """Resample ``demand`` rows onto ``config``'s grid and compute issue-time features.

    ``value`` is the unconstrained demand (running + pending) of the contract; rows of
    other columns are optional (missing ones are null). With ``outage_gaps`` the buckets
    of a fleet-wide outage (:func:`fleet_outages`) are missing to every issue-time
    feature (window means, peaks and deviations, lags, the last sample, the scale and
    the seasonal noise), as a gap in the trace is; ``Panel.value`` keeps what was read.
    """
    grid = resampled(demand, config.spec)
    if outage_gaps:
        grid = _outages_as_gaps(grid)
    feats = demand_features(grid, config.spec, calendar=calendar)
    if config.trend_window:
        feats = add_trend_features(feats, (config.trend_window,))
    m = min(config.seasons)
    v = pl.col("value")
    feats = feats.with_columns(
        v.is_not_null().cum_sum().over(SERIES).alias("__observed"),
        (v - v.shift(m))
        .abs()
        .rolling_mean(max(config.spec.windows), min_samples=1)
        .over(SERIES)
        .alias("__noise"),
    )
    df = feats.sort(SERIES, "ts").collect()
    if df.height == 0:
        raise ValueError("no demand rows to build a panel from")
    sizes = df.group_by(SERIES, maintain_order=True).agg(pl.len(), pl.col("pool").first())
    starts = np.concatenate([[0], np.cumsum(sizes["len"].to_numpy())]).astype(np.int64)
    read = RAW_VALUE if outage_gaps else "value"
    value = df[read].cast(pl.Float64).fill_null(np.nan).to_numpy()
    level = df[f"value__mean_{config.level_window}"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    last = (
        df.select(pl.col("value_last").forward_fill().over(SERIES))["value_last"]
        .cast(pl.Float64)
        .fill_null(np.nan)
        .to_numpy()
    )
    w = max(config.spec.windows)
    longest = df[f"value__mean_{w}"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    peak = df[f"value__max_{w}"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    scale = np.fmax(np.fmax(np.abs(level), np.abs(longest)), SCALE_FLOOR_SHARE * np.abs(peak))
    scale = np.where(np.isfinite(scale) & (scale > 1e-9), scale, 1.0)
    if config.trend_window:
        slope = df[trend_feature_name(config.trend_window)].cast(pl.Float64).to_numpy()
        slope = np.nan_to_num(slope.astype(np.float64), nan=0.0)
    else:
        slope = np.zeros_like(value)
    norm, raw = issue_feature_names(config)
    issue = np.empty((df.height, len(norm) + len(raw)), dtype=np.float32)
    for j, name in enumerate(norm):
        col = df[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
        issue[:, j] = col / scale
    for j, name in enumerate(raw, start=len(norm)):
        issue[:, j] = df[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
    ts_us = df["ts"].dt.epoch("us").to_numpy().astype(np.int64)
    noise = df["__noise"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    # A series flat over the whole window has no seasonal noise: a tenth of its scale.
    noise = np.where(np.isfinite(noise) & (noise > 1e-9 * scale), noise, SCALE_FLOOR_SHARE * scale)
    return Panel(
        series=sizes[SERIES].to_list(),
        pools=sizes["pool"].to_list(),
        starts=starts,
        ts_us=ts_us,
        value=value,
        level=level,
        last=last,
        scale=scale,
        slope=slope,
        issue=issue,
        issue_names=[*norm, *raw],
        observed=df["__observed"].to_numpy().astype(np.int64),
        noise=noise,
        outage=df[OUTAGE].to_numpy() if outage_gaps else fleet_outages(starts, ts_us, value),
    )


RAW_VALUE = "__value_read"
OUTAGE = "__outage"
GAP_COLUMNS = ("value", "value_last", "running", "pending")
"""Columns that read as missing in an outage bucket with ``outage_gaps`` (the quota,
``capacity``, is still the quota)."""


def _outages_as_gaps(grid: pl.LazyFrame) -> pl.LazyFrame:
    """``grid`` with the demand columns of fleet-outage buckets set missing; the value
    read is kept in ``RAW_VALUE`` and the outage mask in ``OUTAGE``."""
    df = grid.sort(SERIES, "ts").collect()
    g = grid_from_frame(df)
    down = pl.Series(OUTAGE, fleet_outages(g.starts, g.ts_us, g.value))
    cols = [c for c in GAP_COLUMNS if c in df.columns]
    return (
        df.with_columns(pl.col("value").alias(RAW_VALUE), down)
        .with_columns(pl.when(~pl.col(OUTAGE)).then(pl.col(c)).alias(c) for c in cols)
        .lazy()
    )


FLEET_MIN_SERIES = 3
"""Series that must report a bucket for an all-zero bucket to count as an outage."""
OUTAGE_MIN_STEPS = 3
"""Consecutive all-zero buckets that make an outage (shorter runs are idle hours)."""


def fleet_outages(starts: np.ndarray, ts_us: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Rows in a fleet-wide outage: a run of at least ``OUTAGE_MIN_STEPS`` consecutive
    bucket times at which every series reporting (at least ``FLEET_MIN_SERIES``) reads
    exactly 0. Unconstrained demand (running + pending) of a whole fleet does not drop
    to nothing for hours; the trace stopped (the Helios trace reads 0 jobs, running or
    pending, in every VC for all of 10 May 2020). Such buckets are not read as last
    week's (or yesterday's) demand at the same hour."""
    if len(starts) - 1 < FLEET_MIN_SERIES or value.size == 0:
        return np.zeros(value.size, dtype=bool)
    times, inv = np.unique(ts_us, return_inverse=True)
    seen = np.isfinite(value)
    present = np.bincount(inv, weights=seen, minlength=times.size)
    zero = np.bincount(inv, weights=seen & (value == 0), minlength=times.size)
    down = (present >= FLEET_MIN_SERIES) & (zero == present)
    # Runs of consecutive down times (one grid step apart) at least OUTAGE_MIN_STEPS long.
    step = np.min(np.diff(times)) if times.size > 1 else 1
    run_id = np.cumsum(np.concatenate([[True], ~(down[1:] & down[:-1]) | (np.diff(times) != step)]))
    run_len = np.bincount(run_id, weights=down)
    long_down: np.ndarray = down & (run_len[run_id] >= OUTAGE_MIN_STEPS)
    return long_down[inv]


def lookback_steps(config: ForecastConfig) -> int:
    """Buckets of history a forecast reads (lags, windows, seasons, trend, min history)."""
    spec = config.spec
    return 1 + max(
        max(spec.lags, default=0),
        max(spec.windows, default=0),
        max(config.seasons, default=0),
        config.trend_window,
        config.stack_window,
        config.min_history,
        24,  # pending__share_mean_24
        max(spec.windows, default=0) + min(config.seasons),  # the seasonal noise
    )


def trend_offset(config: ForecastConfig, horizons: np.ndarray) -> np.ndarray:
    """Steps of trend between the level (a trailing mean, centred (W-1)/2 steps back)
    and ``t + h``, with per-step damping: (W-1)/2 + sum_{j=1..h} phi^j."""
    phi = config.trend_damping
    h = horizons.astype(np.float64)
    damped = h if phi == 1.0 else phi * (1 - phi**h) / (1 - phi)
    return (config.level_window - 1) / 2 + damped


ANCHOR_CHOICE_DAYS = 14
LEVEL_ANCHOR_RATIO = 2 / 3


def anchor_errors(panel: Panel, config: ForecastConfig) -> tuple[float, float]:
    """Mean absolute error of the last sample and of the level, each taken as the
    forecast, over the horizons of the config's first bucket from every origin the
    model may issue from in the last ``ANCHOR_CHOICE_DAYS`` days of the panel, each
    error in units of its series' noise (so every series weighs alike). NaN where no
    such pair is observed."""
    n = panel.n_rows
    if n == 0:
        return float("nan"), float("nan")
    first, last_h = config.buckets[0] if config.buckets else (1, 1)
    sid = panel.series_index()
    since = int(panel.ts_us.max()) - ANCHOR_CHOICE_DAYS * 86_400 * US_PER_S
    origins = np.flatnonzero((panel.ts_us >= since) & modelable(panel, config))
    sum_last = sum_level = 0.0
    count = 0
    for h in range(first, last_h + 1):
        o = origins[origins + h < n]
        o = o[sid[o + h] == sid[o]]
        y = panel.value[o + h]
        e_last = np.abs(y - panel.last[o]) / panel.noise[o]
        e_level = np.abs(y - panel.level[o]) / panel.noise[o]
        ok = np.isfinite(e_last) & np.isfinite(e_level)
        sum_last += float(e_last[ok].sum())
        sum_level += float(e_level[ok].sum())
        count += int(ok.sum())
    if count == 0:
        return float("nan"), float("nan")
    return sum_last / count, sum_level / count


def choose_anchor(panel: Panel, config: ForecastConfig) -> str:
    """The anchor a fit uses: ``config.anchor``, or under ``"auto"`` the level when its
    error at the shortest horizons (:func:`anchor_errors`) is at most
    ``LEVEL_ANCHOR_RATIO`` of the last sample's (the readings are mostly noise: the
    hour's last reading is one noisy sample of the hourly mean the target is, and a
    target measured from it carries that noise), else the last sample.
    Chosen on the validation cutoffs of every real source (docs/demand.md): Azure's
    VMs 0.44, DataCenter's traces 0.89 and 1.36, Helios 1.72, Philly 1.97."""
    if config.anchor != "auto":
        return config.anchor
    e_last, e_level = anchor_errors(panel, config)
    if np.isfinite(e_last) and e_level <= LEVEL_ANCHOR_RATIO * e_last:
        return "level"
    return "last"


def baseline(
    panel: Panel, config: ForecastConfig, origins: np.ndarray, h: np.ndarray
) -> np.ndarray:
    """``base(t, h)``: the anchor at the origin (last observed value or level), plus
    the extrapolated trend if any (``anchor="auto"`` must be resolved first:
    :func:`choose_anchor`)."""
    if config.anchor not in RESOLVED_ANCHORS:
        raise ValueError(f"anchor {config.anchor!r} must be resolved to one of {RESOLVED_ANCHORS}")
    anchor = panel.last if config.anchor == "last" else panel.level
    base = np.nan_to_num(anchor[origins], nan=0.0)
    if config.trend_window:
        base = base + panel.slope[origins] * trend_offset(config, h)
    out: np.ndarray = base
    return out


def modelable(panel: Panel, config: ForecastConfig) -> np.ndarray:
    """Rows the model may issue from: enough history seen and a level to scale by."""
    out: np.ndarray = (panel.observed >= config.min_history) & np.isfinite(panel.level)
    return out


def training_pairs(
    panel: Panel,
    config: ForecastConfig,
    rng: np.random.Generator,
    *,
    max_rows: int,
    last_target_us: int | None = None,
    skip_outages: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(origin row, horizon) pairs with an observed target inside the same series.

    With more pairs than ``max_rows``, each origin keeps a random subset of horizons
    (and origins are subsampled if even one horizon each is too many). Targets after
    ``last_target_us`` are excluded (the calibration split). With ``skip_outages`` a
    pair whose origin or target lies in a fleet-wide outage is left out: the trace
    stopped there, demand did not drop to nothing.
    """
    hz = np.asarray(config.horizons, dtype=np.int64)
    ok = modelable(panel, config)
    origins = np.flatnonzero(ok)
    if origins.size == 0:
        return origins, origins
    per = max(1, min(hz.size, max_rows // max(origins.size, 1)))
    if origins.size > max_rows:
        origins = np.sort(rng.choice(origins, size=max_rows, replace=False))
    if per == hz.size:
        o = np.repeat(origins, hz.size)
        h = np.tile(hz, origins.size)
    else:
        o = np.repeat(origins, per)
        h = hz[rng.integers(0, hz.size, size=o.size)]
    end = panel.starts[1:][panel.series_index()[o]]
    tgt = o + h
    keep = tgt < end
    o, h, tgt = o[keep], h[keep], tgt[keep]
    keep = np.isfinite(panel.value[tgt])
    if skip_outages:
        keep &= ~(panel.outage[tgt] | panel.outage[o])
    if last_target_us is not None:
        keep &= panel.ts_us[tgt] <= last_target_us
    return o[keep], h[keep]


def targets(panel: Panel, config: ForecastConfig, origins: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Normalised targets ``(y[t+h] - base) / scale``."""
    y = panel.value[origins + h]
    out: np.ndarray = (y - baseline(panel, config, origins, h)) / panel.scale[origins]
    return out


def design(
    panel: Panel,
    config: ForecastConfig,
    origins: np.ndarray,
    h: np.ndarray,
    *,
    calendar: pl.DataFrame | None = None,
) -> np.ndarray:
    """Model inputs (float32, one row per pair, columns as :func:`feature_names`)."""
    n = origins.size
    names = feature_names(config)
    x = np.empty((n, len(names)), dtype=np.float32)
    k = panel.issue.shape[1]
    x[:, :k] = panel.issue[origins]
    scale = panel.scale[origins]
    col = k
    x[:, col] = np.log1p(np.abs(np.nan_to_num(panel.level[origins], nan=0.0)))
    x[:, col + 1] = h
    col += 2
    if config.trend_window:
        x[:, col] = panel.slope[origins] / scale
        col += 1
    first = panel.starts[:-1][panel.series_index()[origins]]
    for m in config.seasons:
        # The latest observed bucket at the target's phase of the season, at or before t.
        src = origins + h - m * np.ceil(h / m).astype(np.int64)
        inside = src >= first
        vals = np.full(n, np.nan)
        vals[inside] = np.where(panel.outage[src[inside]], np.nan, panel.value[src[inside]])
        x[:, col] = vals / scale
        col += 1
    tnames = target_feature_names(config)
    if tnames:
        step_us = int(config.freq.total_seconds() * US_PER_S)
        valid = panel.ts_us[origins] + h * step_us
        pools = np.asarray(panel.pools, dtype=object)[panel.series_index()[origins]]
        frame = pl.DataFrame(
            {
                "valid_at": pl.Series(valid, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
                "pool": pl.Series(pools, dtype=pl.String),
            }
        )
        cal = add_calendar_features(
            frame.lazy(), ts_col="valid_at", prefix="target", calendar=calendar
        ).collect()
        for name in tnames:
            x[:, col] = cal[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
            col += 1
    return x


FORECAST_COLUMNS = ("series_id", "issued_at", "valid_at", "horizon", "p10", "p50", "p90", "method")


def forecast_frame(
    series: list[str],
    issued_us: np.ndarray,
    horizons: np.ndarray,
    quantiles: tuple[np.ndarray, np.ndarray, np.ndarray],
    methods: list[str],
    step_us: int,
) -> pl.DataFrame:
    """Rows of forecasts: series_id, issued_at, valid_at (UTC), horizon (steps of
    ``step_us`` microseconds), p10 <= p50 <= p90 (clipped at 0: demand is never
    negative), and the method that made each row."""
    p10, p50, p90 = (np.clip(np.asarray(q, dtype=np.float64), 0.0, None) for q in quantiles)
    # The band widens to hold the point forecast (never the reverse): p50 stays the
    # method's point forecast, and the three can never cross.
    p10 = np.minimum(p10, p50)
    p90 = np.maximum(p90, p50)
    return pl.DataFrame(
        {
            "series_id": pl.Series(series, dtype=pl.String),
            "issued_at": pl.Series(issued_us, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
            "valid_at": pl.Series(issued_us + horizons * step_us, dtype=pl.Int64).cast(
                pl.Datetime("us", "UTC")
            ),
            "horizon": pl.Series(horizons, dtype=pl.Int32),
            "p10": p10,
            "p50": p50,
            "p90": p90,
            "method": pl.Series(methods, dtype=pl.String),
        }
    )


def step_us(config: ForecastConfig) -> int:
    return int(config.freq.total_seconds() * US_PER_S)
