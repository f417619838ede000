"""The two forecasting configurations, from the same code: hourly (elastic pools) and
weekly (procurement).

A :class:`ForecastConfig` says on which grid the series are read (a
:class:`features.demand.DemandFeatureSpec`), which horizons are forecast (in steps of
that grid), which seasonal periods the baselines and the target-aligned lags use, and
how the level and trend are taken out of the target before the trees see it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta

from predops.features.demand import HOURLY, WEEKLY, DemandFeatureSpec

RESOLVED_ANCHORS = ("last", "level")
"""What a fitted model's target is measured from (``"auto"`` resolves to one of them)."""
ANCHORS = (*RESOLVED_ANCHORS, "auto")


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    """What and how far to forecast.

    - ``horizons``: forecast steps, 1-based (hourly: 1..48 h; weekly: 1..26 weeks).
    - ``buckets``: (first, last) horizon ranges the metrics are reported per.
    - ``seasons``: seasonal periods in steps, shortest first (hourly: a day and a week);
      the seasonal-naive baselines and the target-aligned lag features use them.
    - ``ets_season``: the seasonal period of the ETS baseline (0: no seasonal term).
    - ``anchor``: what the target is measured from: ``"last"`` observed value (the trees
      forecast the change; right for step-like hourly demand), ``"level"`` (the
      trailing mean; with a trend term for long horizons, where one bucket is noise) or
      ``"auto"``: chosen at each fit from the fit data (:func:`panel.choose_anchor`:
      the level where, even at the shortest horizons, it forecasts the recent weeks
      far better than the last sample does: series whose hourly values are mostly
      noise). The fitted model's ``config_`` holds the anchor chosen.
    - ``level_window``: trailing buckets averaged into the level that scales the target.
    - ``trend_window``: trailing buckets of the local linear trend extrapolated into the
      target's baseline (0: no trend term, the level alone).
    - ``trend_damping``: per-step damping of that trend (1 = undamped).
    - ``min_history``: buckets a series needs before the model forecasts it (shorter
      series fall back to a simple method that still answers).
    - ``calibration_steps``: the last origins held out inside ``fit`` for conformal
      intervals.
    - ``backtest_every``: default gap between backtest cutoffs, in steps (how often
      production would retrain and re-plan: daily for pools, monthly for purchases).
    - ``stack_window``: buckets of the windowed Holt-Winters forecast (season
      ``ets_season``) the model may take as an input (0: none; see
      :mod:`models.demand.smoothing`).
    """

    name: str
    spec: DemandFeatureSpec
    horizons: tuple[int, ...]
    buckets: tuple[tuple[int, int], ...]
    seasons: tuple[int, ...]
    ets_season: int
    level_window: int
    anchor: str = "level"
    trend_window: int = 0
    trend_damping: float = 1.0
    min_history: int = 48
    calibration_steps: int = 168
    backtest_every: int = 24
    stack_window: int = 0

    def __post_init__(self) -> None:
        if not self.horizons or min(self.horizons) < 1:
            raise ValueError("horizons must be >= 1")
        if list(self.horizons) != sorted(set(self.horizons)):
            raise ValueError("horizons must be increasing and distinct")
        if self.level_window not in self.spec.windows:
            raise ValueError(
                f"level_window {self.level_window} must be one of the spec's windows "
                f"{self.spec.windows}"
            )
        if self.anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {ANCHORS}, got {self.anchor!r}")
        if self.backtest_every < 1:
            raise ValueError("backtest_every must be >= 1 step")
        if self.trend_window == 1 or self.trend_window < 0:
            raise ValueError("trend_window must be 0 (none) or >= 2")
        if not 0 < self.trend_damping <= 1:
            raise ValueError("trend_damping must be in (0, 1]")
        if self.stack_window and not (self.ets_season and self.stack_window >= self.ets_season):
            raise ValueError("stack_window needs an ets_season no longer than it")
        for a, b in self.buckets:
            if not 1 <= a <= b:
                raise ValueError(f"bad horizon bucket {(a, b)}")

    @property
    def freq(self) -> timedelta:
        return self.spec.freq

    @property
    def max_horizon(self) -> int:
        return max(self.horizons)

    def bucket_of(self, h: int) -> str:
        """The label of the bucket holding horizon ``h`` (``"1-6"``), or ``"other"``."""
        for a, b in self.buckets:
            if a <= h <= b:
                return f"{a}-{b}"
        return "other"

    @property
    def hash(self) -> str:
        """Feature-set hash: the feature spec plus everything that shapes the inputs."""
        body = json.dumps(
            {
                "spec": self.spec.hash,
                "horizons": self.horizons,
                "seasons": self.seasons,
                "level_window": self.level_window,
                "anchor": self.anchor,
                "trend_window": self.trend_window,
                "trend_damping": self.trend_damping,
                "stack_window": self.stack_window,
            }
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]


HOURLY_CONFIG = ForecastConfig(
    name="hourly",
    spec=HOURLY,
    horizons=tuple(range(1, 49)),
    buckets=((1, 6), (7, 12), (13, 24), (25, 48)),
    seasons=(24, 168),
    ets_season=24,
    level_window=24,
    # The last sample for step-like demand (Helios, Philly, DataCenter), the level for
    # VMs whose hours are mostly noise (Azure): chosen per fit, docs/demand.md.
    anchor="auto",
    min_history=48,
    # Short against the history so the held-out model is nearly the final one: a week
    # held out of three weeks' history gave bands ~1.4x too wide on Helios.
    calibration_steps=72,
    # Three weeks: Holt-Winters restarted on the last week forecast Helios' validation
    # cutoffs at MASE 0.693 alone, on all the history they had (<= 18 days) at 0.555
    # (docs/demand.md).
    stack_window=504,
)
"""Elastic pools: hours ahead, a daily and a weekly season; the target is the change
from the last observed bucket, or from the 24 h level where the hours are mostly noise
(``anchor="auto"``; no trend term: a day's growth is not worth extrapolating)."""

WEEKLY_CONFIG = ForecastConfig(
    name="weekly",
    spec=WEEKLY,
    horizons=tuple(range(1, 27)),
    buckets=((1, 3), (4, 13), (14, 26)),
    seasons=(52,),
    ets_season=0,
    level_window=4,
    trend_window=13,
    trend_damping=0.98,
    min_history=16,
    calibration_steps=26,
    backtest_every=4,
)
"""Procurement: 4-26 weeks ahead on weekly peaks. Trees cannot extrapolate a growing
fleet, so the target is the deviation from level + damped local linear trend."""

CONFIGS = {c.name: c for c in (HOURLY_CONFIG, WEEKLY_CONFIG)}


def config_named(name: str) -> ForecastConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"unknown forecast config {name!r}; known: {sorted(CONFIGS)}") from None
