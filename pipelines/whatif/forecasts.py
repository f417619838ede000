"""Demand forecasts for the what-if loop.

- :class:`ModelForecasts`: the real :class:`~models.demand.forecaster.DemandForecaster`
  (hourly config, conformal p10 / p50 / p90), refitted every ``retrain_every`` on the
  demand series up to that moment only (with the promotion calendar, which is known in
  advance), and asked at each sizing tick for the next hours from the data up to the
  tick.
- :class:`TrueForecasts`: the oracle — the demand that will actually arrive, as
  p10 = p50 = p90.

Both hand the engine the demand measured at the tick too (:func:`observed`, valid now),
so pool sizing covers what is placed and queued now as well as the next hour's p90.
:class:`ModelForecasts` also hands in the trailing week of measurements (one per hour,
each issued at its own time), from which the sizing anchors the next hour on the
demand now plus the p90 of the week's hour-to-hour changes (:mod:`policy.anchoring`);
the oracle's next hour is the truth and gets no history.

Series (:func:`loop_demand`): per pool, the unconstrained demand *the loop replays* —
at tick ``k`` the GPUs (GPU pools) or CPU cores (CPU pools) of every pod with
``arrive <= k < leave`` under the loop's hour quantisation, placed or pending — over
the warm-up and the evaluated days. The synthetic fleet's own demand table counts the
pods that live between two ticks too (invisible to the loop: a quarter of big-data's
CPU-hours) and its own scheduling delays, so a forecast of it sized the pools for
another workload than the one they run (25-40 % off per hour on big-data). Ids follow
the demand contract, ``<pool>/gpus/<model>`` (models joined by ``+`` for a pool of
several) and ``<pool>/cpu_cores``, the naming the pool sizing policy reads.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.contracts import Forecast, Provenance
from predops.models.demand.forecaster import DemandForecaster
from predops.pipelines.jobs.demand import forecasts_from_frame
from predops.pipelines.whatif.world import HOUR_S, World, seconds_since
from predops.policy.config import SizingConfig

DEMAND_MODEL = "demand"
HOURS_AHEAD = 8
"""Forecast steps handed to the engine: pool sizing reads lead (30 min) + hold (6 h)."""
MEASURED_HISTORY = SizingConfig().anchor_history
"""Trailing measurements handed in with the forecasts: what the sizing anchors on."""


def loop_demand(world: World) -> pl.DataFrame:
    """Hourly demand per pool as the loop replays it (module docstring): columns
    ``series_id``, ``ts``, ``value`` for ticks 0 .. the last evaluated tick."""
    cfg = world.cfg
    pods = world.sim.pods_frame
    created = seconds_since(pods["created_at"], cfg.start)
    deleted = seconds_since(pods["deleted_at"], cfg.start)
    deleted = np.where(np.isnan(deleted), np.inf, deleted)
    n = cfg.last_tick + 1
    arrive = np.maximum(np.ceil(created / HOUR_S), 0.0)
    leave = np.ceil(np.minimum(deleted, n * HOUR_S) / HOUR_S)
    keep = (leave > arrive) & (arrive < n)
    gpus = (pods["num_gpu"].to_numpy() * pods["gpu_milli"].to_numpy() / 1000.0)[keep]
    cores = (pods["cpu_milli"].to_numpy() / 1000.0)[keep]
    pool = pods["pool"].to_numpy()[keep]
    a, b = arrive[keep].astype(np.int64), leave[keep].astype(np.int64)
    models: dict[str, set[str]] = {}
    for s in world.specs:
        models.setdefault(s.pool, set())
        if s.gpus and s.gpu_model:
            models[s.pool].add(s.gpu_model)
    ts = pl.datetime_range(
        cfg.at(0), cfg.at(n - 1), interval="1h", time_zone="UTC", eager=True
    ).cast(pl.Datetime("us", "UTC"))
    frames = []
    for name in sorted(models):
        gpu_pool = bool(models[name])
        sid = f"{name}/gpus/{'+'.join(sorted(models[name]))}" if gpu_pool else f"{name}/cpu_cores"
        m = pool == name
        v = (gpus if gpu_pool else cores)[m]
        diff = np.zeros(n + 1)
        np.add.at(diff, a[m], v)
        np.add.at(diff, np.minimum(b[m], n), -v)
        value = np.round(np.cumsum(diff)[:n], 6)
        frames.append(pl.DataFrame({"series_id": sid, "ts": ts, "value": value}))
    return pl.concat(frames)


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
        history: timedelta = MEASURED_HISTORY,
    ) -> None:
        self.demand = demand.select("series_id", "ts", "value").sort("series_id", "ts")
        self.measured = Measured(self.demand)
        self.history = history
        self.calendar = calendar
        self.retrain_every = retrain_every
        self.seed = seed
        self.n_estimators = n_estimators
        self._model: DemandForecaster | None = None
        self._fitted_at: datetime | None = None
        self.fits = 0

    def _fit(self, now: datetime) -> DemandForecaster:
        """Refit when ``retrain_every`` has passed. One LightGBM thread: the series are
        a handful, so a second thread only spin-waits (80 CPU-s against 2.2 for one fit
        on a loaded 2-core machine; the figures of the pinned run are the same)."""
        if (
            self._model is None
            or self._fitted_at is None
            or now - self._fitted_at >= (self.retrain_every)
        ):
            past = self.demand.filter(pl.col("ts") <= now)
            self._model = DemandForecaster(
                "hourly", n_estimators=self.n_estimators, random_state=self.seed, n_jobs=1
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
        return self.measured.observed(now, self.history) + forecasts_from_frame(frame, prov)


class TrueForecasts:
    """The demand that will arrive, as a degenerate forecast (the oracle)."""

    def __init__(self, demand: pl.DataFrame) -> None:
        self.demand = demand.select("series_id", "ts", "value").sort("series_id", "ts")
        self.measured = Measured(self.demand)

    def at(self, now: datetime) -> list[Forecast]:
        prov = Provenance(DEMAND_MODEL, "truth", "truth", now)
        m = self.measured
        ahead = m.rows(now, now + timedelta(hours=HOURS_AHEAD), closed_low=False)
        return m.observed(now) + m.forecasts(ahead, now, "truth", prov)


class Measured:
    """The demand series as arrays, for the per-tick forecasts of the measured and the
    true demand without a frame query per tick: :meth:`observed` equals
    :func:`observed` on the same frame, row for row (the same order, values and times)."""

    def __init__(self, demand: pl.DataFrame) -> None:
        frame = demand.select("series_id", "ts", "value").sort("series_id", "ts")
        self.series: list[str] = frame["series_id"].to_list()
        self.ts_us = frame["ts"].dt.epoch("us").to_numpy()
        self.times: list[datetime] = frame["ts"].to_list()
        self.value = frame["value"].cast(pl.Float64).to_list()
        sid = frame["series_id"].to_numpy()
        cuts = np.flatnonzero(sid[1:] != sid[:-1]) + 1 if len(sid) else np.zeros(0, np.int64)
        self.starts = np.concatenate([[0], cuts]).astype(np.int64) if len(sid) else cuts
        self.ends = np.append(self.starts[1:], len(sid)).astype(np.int64)
        self.tz = self.times[0].tzinfo if self.times else None

    def rows(self, lo: datetime, hi: datetime, *, closed_low: bool = True) -> list[int]:
        """Row numbers with ``lo <= ts <= hi`` (``lo < ts`` when not ``closed_low``),
        series by series, in time order."""
        a, b = _us(lo), _us(hi)
        out: list[int] = []
        for s, e in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            ts = self.ts_us[s:e]
            i = int(np.searchsorted(ts, a, side="left" if closed_low else "right"))
            j = int(np.searchsorted(ts, b, side="right"))
            out.extend(range(s + i, s + j))
        return out

    def observed(self, now: datetime, history: timedelta = timedelta(0)) -> list[Forecast]:
        """:func:`observed` of the series."""
        prov = Provenance(DEMAND_MODEL, "observed", "observed", now)
        return self.forecasts(self.rows(now - history, now), None, "observed", prov)

    def forecasts(
        self, rows: list[int], issued: datetime | None, method: str, prov: Provenance
    ) -> list[Forecast]:
        """:func:`_degenerate` of ``rows``."""
        at = None if issued is None else issued.astimezone(self.tz)
        out = []
        for r in rows:
            v, ts = self.value[r], self.times[r]
            out.append(
                Forecast(
                    series_id=self.series[r],
                    issued_at=ts if at is None else at,
                    valid_at=ts,
                    p10=v,
                    p50=v,
                    p90=v,
                    method=method,
                    provenance=prov,
                )
            )
        return out


def _us(t: datetime) -> int:
    """Microseconds since the epoch, as polars' ``dt.epoch("us")`` counts them."""
    return (t - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def observed(
    demand: pl.DataFrame, now: datetime, history: timedelta = timedelta(0)
) -> list[Forecast]:
    """The demand measured at ``now`` (placed and queued pods) and at every hour of the
    ``history`` before it, each as a forecast issued and valid at its own time with
    p10 = p50 = p90 (method ``observed``): pool sizing then never holds less than what
    is asked for already, whatever the model says about the next hour, and can anchor
    the next hour on the recent measurements (:mod:`policy.anchoring`)."""
    prov = Provenance(DEMAND_MODEL, "observed", "observed", now)
    rows = demand.filter((pl.col("ts") <= now) & (pl.col("ts") >= now - history))
    return _degenerate(rows, None, "observed", prov)


def _degenerate(
    rows: pl.DataFrame, issued: datetime | None, method: str, prov: Provenance
) -> list[Forecast]:
    """``rows`` as forecasts with p10 = p50 = p90 = value, issued at ``issued`` (None:
    at each row's own time)."""
    at = pl.col("ts") if issued is None else pl.lit(issued, dtype=pl.Datetime("us", "UTC"))
    frame = rows.select(
        "series_id",
        at.alias("issued_at"),
        pl.col("ts").alias("valid_at"),
        pl.col("value").alias("p10"),
        pl.col("value").alias("p50"),
        pl.col("value").alias("p90"),
        pl.lit(method).alias("method"),
    )
    return forecasts_from_frame(frame, prov)
