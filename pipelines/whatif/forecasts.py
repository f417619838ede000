"""Demand forecasts for the what-if loop.

- :class:`ModelForecasts`: the real :class:`~models.demand.forecaster.DemandForecaster`
  (hourly config, conformal p10 / p50 / p90), refitted every ``retrain_every`` on the
  demand series up to that moment only (with the promotion calendar, which is known in
  advance), and asked at each sizing tick for the next hours from the data up to the
  tick.
- :class:`TrueForecasts`: the oracle — the demand that will actually arrive, as
  p10 = p50 = p90.

Series are the synthetic fleet's demand contract (``<pool>/gpus/<model>``,
``<pool>/cpu_cores``; value = running + pending, unconstrained), the naming the pool
sizing policy reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from core.contracts import Forecast, Provenance
from models.demand.forecaster import DemandForecaster
from pipelines.demand_jobs import forecasts_from_frame

DEMAND_MODEL = "demand"
HOURS_AHEAD = 8
"""Forecast steps handed to the engine: pool sizing reads lead (30 min) + hold (6 h)."""


class ModelForecasts:
    """Refit weekly on the past, forecast at each sizing tick (module docstring)."""

    def __init__(
        self,
        demand: pl.DataFrame,
        calendar: pl.DataFrame | None,
        retrain_every: timedelta,
        *,
        seed: int = 0,
        n_estimators: int = 200,
    ) -> None:
        self.demand = demand.select("series_id", "ts", "value").sort("series_id", "ts")
        self.calendar = calendar
        self.retrain_every = retrain_every
        self.seed = seed
        self.n_estimators = n_estimators
        self._model: DemandForecaster | None = None
        self._fitted_at: datetime | None = None
        self.fits = 0

    def _fit(self, now: datetime) -> DemandForecaster:
        if (
            self._model is None
            or self._fitted_at is None
            or now - self._fitted_at >= (self.retrain_every)
        ):
            past = self.demand.filter(pl.col("ts") <= now)
            self._model = DemandForecaster(
                "hourly", n_estimators=self.n_estimators, random_state=self.seed, n_jobs=2
            ).fit(past, calendar=self.calendar)
            self._fitted_at = now
            self.fits += 1
        return self._model

    def at(self, now: datetime) -> list[Forecast]:
        model = self._fit(now)
        lookback = (model.lookback + 1) * model.config_.freq
        recent = self.demand.filter((pl.col("ts") <= now) & (pl.col("ts") > now - lookback))
        frame = model.predict(recent, calendar=self.calendar).filter(
            pl.col("horizon") <= HOURS_AHEAD
        )
        assert self._fitted_at is not None
        prov = Provenance(DEMAND_MODEL, f"whatif-{self.fits}", model.config_.hash, now)
        return forecasts_from_frame(frame, prov)


class TrueForecasts:
    """The demand that will arrive, as a degenerate forecast (the oracle)."""

    def __init__(self, demand: pl.DataFrame) -> None:
        self.demand = demand.select("series_id", "ts", "value").sort("series_id", "ts")

    def at(self, now: datetime) -> list[Forecast]:
        ahead = self.demand.filter(
            (pl.col("ts") > now) & (pl.col("ts") <= now + timedelta(hours=HOURS_AHEAD))
        )
        frame = ahead.select(
            "series_id",
            pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("issued_at"),
            pl.col("ts").alias("valid_at"),
            pl.col("value").alias("p10"),
            pl.col("value").alias("p50"),
            pl.col("value").alias("p90"),
            pl.lit("truth").alias("method"),
        )
        prov = Provenance(DEMAND_MODEL, "truth", "truth", now)
        return forecasts_from_frame(frame, prov)
