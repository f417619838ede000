"""Per-pool demand series and the promotion calendar.

One series per pool x resource x GPU model (``training/gpus/H800``,
``online/cpu_cores``). Demand (running + pending, unconstrained) is

    level x nominal capacity x trend x daily x weekly x promotions x exp(AR(1) noise)

with shapes and noise from :mod:`pipelines.synthetic.calibration`. Capacity is what
the series' nodes hold while up and schedulable (failures, maintenance and its cordon
take nodes out). Running = min(demand, capacity); pending = the rest, so pending is
positive exactly when demand exceeds capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import CALENDAR, DEMAND
from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.failures import DAY, Failures, Windows
from predops.pipelines.synthetic.noise import ar1
from predops.pipelines.synthetic.topology import POOLS, SKUS, Fleet

PREWARM_S = 2 * 3600.0


@dataclass(frozen=True, slots=True)
class SeriesSpec:
    """A demand series: which nodes it covers and how much of the resource each holds."""

    series_id: str
    pool: str
    resource: str
    gpu_model: str | None
    nodes: np.ndarray
    per_node: float
    sku: int  # index into SKUS of the series' nodes


@dataclass(frozen=True, slots=True)
class Promotion:
    """A calendar promotion; ``magnitude`` per pool is the planned peak multiplier."""

    name: str
    start: float  # seconds from the simulation start
    duration: float
    magnitude: dict[str, float]


@dataclass(frozen=True, slots=True)
class DemandSeries:
    """Demand per series (rows) and sample (columns), in the series' resource units."""

    specs: list[SeriesSpec]
    value: np.ndarray
    capacity: np.ndarray
    nominal: np.ndarray

    @property
    def running(self) -> np.ndarray:
        out: np.ndarray = np.minimum(self.value, self.capacity)
        return out

    @property
    def pending(self) -> np.ndarray:
        out: np.ndarray = self.value - self.running
        return out

    def node_series(self, n_nodes: int) -> np.ndarray:
        """Series index of each node."""
        out = np.full(n_nodes, -1, dtype=np.int32)
        for i, s in enumerate(self.specs):
            out[s.nodes] = i
        return out

    def load(self) -> np.ndarray:
        """Running / capacity per series and sample (0 when no capacity)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out: np.ndarray = np.where(self.capacity > 0, self.running / self.capacity, 0.0)
        return out


def series_specs(fleet: Fleet) -> list[SeriesSpec]:
    """One series per pool (CPU pools: cores) or per pool x GPU model (GPUs)."""
    specs = []
    for p, pool in enumerate(POOLS):
        in_pool = fleet.pool == p
        model_of = np.array([SKUS[s].gpu_model or "" for s in fleet.sku])
        for model in sorted(set(model_of[in_pool])):
            nodes = np.flatnonzero(in_pool & (model_of == model))
            k = int(fleet.sku[nodes[0]])
            sku = SKUS[k]
            if model:
                specs.append(
                    SeriesSpec(
                        f"{pool}/gpus/{model}", pool, "gpus", model, nodes, float(sku.gpus), k
                    )
                )
            else:
                specs.append(
                    SeriesSpec(
                        f"{pool}/cpu_cores",
                        pool,
                        "cpu_cores",
                        None,
                        nodes,
                        sku.cpu_milli / 1000.0,
                        k,
                    )
                )
    return specs


def promotions(start: datetime, horizon: float, rng: np.random.Generator) -> list[Promotion]:
    """Promotions in the run: Double 11 and 618 when their dates fall inside it, a
    mega-sale when none does (runs of >= 3 days), and weekly flash sales."""
    local = timedelta(hours=cal.LOCAL_UTC_OFFSET_H)
    end = start + timedelta(seconds=horizon)
    out: list[Promotion] = []
    for year in range(start.year, end.year + 1):
        for name, month, day in (("double11", 11, 11), ("618", 6, 18)):
            at = datetime(year, month, day, tzinfo=UTC) - local
            if start <= at and at + timedelta(days=1) <= end:
                out.append(
                    Promotion(
                        f"{name}-{year}",
                        (at - start).total_seconds(),
                        DAY,
                        cal.PROMOTION_MAGNITUDE[name],
                    )
                )
    if not out and horizon >= 3 * DAY:
        day0 = datetime(start.year, start.month, start.day, tzinfo=UTC) - local
        at = day0 + timedelta(days=int(0.6 * horizon / DAY))
        if at < start:
            at += timedelta(days=1)
        out.append(
            Promotion(
                f"mega-sale-{at.date().isoformat()}",
                (at - start).total_seconds(),
                DAY,
                cal.PROMOTION_MAGNITUDE["mega-sale"],
            )
        )
    for week in range(int(horizon // (7 * DAY))):
        if rng.random() < 0.5:
            day = week * 7 + int(rng.integers(0, 7))
            base = datetime(start.year, start.month, start.day, tzinfo=UTC) - local
            at = base + timedelta(days=day, hours=20)
            s = (at - start).total_seconds()
            if (
                s >= 0
                and s + 4 * 3600 <= horizon
                and not any(abs(s - p.start) < 2 * DAY for p in out)
            ):
                out.append(
                    Promotion(
                        f"flash-sale-{at.date().isoformat()}",
                        s,
                        4 * 3600.0,
                        cal.PROMOTION_MAGNITUDE["flash-sale"],
                    )
                )
    return sorted(out, key=lambda p: p.start)


def promotion_shape(t: np.ndarray, promo: Promotion, pool: str) -> np.ndarray:
    """0..1 intensity of a promotion over time: a pre-warm ramp, the opening spike and
    an exponential decay; big data follows two hours later (order processing)."""
    lag = 2 * 3600.0 if pool == "bigdata" else 0.0
    s = promo.start + lag
    x = np.zeros_like(t)
    ramp = (t >= s - PREWARM_S) & (t < s)
    x[ramp] = 0.3 * (t[ramp] - (s - PREWARM_S)) / PREWARM_S
    on = (t >= s) & (t < s + promo.duration)
    x[on] = np.exp(-(t[on] - s) / (promo.duration / 4.0))
    return x


def _capacity(
    specs: list[SeriesSpec], n_nodes: int, t: np.ndarray, failures: Failures, maint: Windows
) -> tuple[np.ndarray, np.ndarray]:
    """(capacity, nominal) per series and sample: nodes down or cordoned hold nothing."""
    step = t[1] - t[0] if t.size > 1 else 1.0
    node_series = np.full(n_nodes, -1, dtype=np.int64)
    per_node = np.zeros(len(specs))
    for i, s in enumerate(specs):
        node_series[s.nodes] = i
        per_node[i] = s.per_node
    nominal = np.array([s.per_node * s.nodes.size for s in specs])
    diff = np.zeros((len(specs), t.size + 1))
    for node, a, b in (
        (failures.node, failures.at, failures.repair_at),
        (maint.node, maint.start - 1800.0, maint.end + 600.0),
    ):
        ia = np.clip(np.ceil(a / step), 0, t.size).astype(np.int64)
        ib = np.clip(np.ceil(b / step), 0, t.size).astype(np.int64)
        sid = node_series[node]
        np.add.at(diff, (sid, ia), -per_node[sid])
        np.add.at(diff, (sid, ib), per_node[sid])
    cap = nominal[:, None] + np.cumsum(diff, axis=1)[:, : t.size]
    return np.maximum(cap, 0.0), nominal


def simulate_demand(
    fleet: Fleet,
    start: datetime,
    t: np.ndarray,
    step_s: float,
    failures: Failures,
    maint: Windows,
    promos: list[Promotion],
    rng: np.random.Generator,
) -> DemandSeries:
    """Demand, running, pending and capacity of every series at sample times ``t``."""
    specs = series_specs(fleet)
    capacity, nominal = _capacity(specs, fleet.n, t, failures, maint)
    epoch = start.timestamp()
    local_h = ((epoch + t) / 3600.0 + cal.LOCAL_UTC_OFFSET_H) % 24.0
    local_day = np.floor((epoch + t) / DAY + cal.LOCAL_UTC_OFFSET_H / 24.0)
    weekend = ((local_day + 3) % 7) >= 5  # 1970-01-01 was a Thursday
    days = t / DAY
    value = np.zeros((len(specs), t.size))
    for i, s in enumerate(specs):
        amp, peak, weekend_ratio, trend = cal.DEMAND_SHAPE[s.pool]
        daily = 1.0 + 0.5 * amp * np.cos(2 * np.pi * (local_h - peak) / 24.0)
        weekly = np.where(weekend, weekend_ratio, 1.0)
        tau = cal.TREND_SATURATION_DAYS
        growth = 1.0 + trend * tau * (1.0 - np.exp(-days / tau))
        growth = growth / growth.mean()  # the calibrated level is the run's mean
        promo = np.ones_like(t)
        for p in promos:
            m = p.magnitude.get(s.pool)
            if m is not None:
                realised = m * float(np.exp(0.1 * rng.standard_normal()))
                promo *= 1.0 + (realised - 1.0) * promotion_shape(t, p, s.pool)
        sd, tau_h = cal.DEMAND_NOISE[s.pool]
        noise = ar1(rng, (1, t.size), step_s=step_s, tau_s=tau_h * 3600.0, sd=sd)[0]
        value[i] = (
            cal.DEMAND_LEVEL[s.pool]
            * nominal[i]
            * growth
            * daily
            * weekly
            * promo
            * np.exp(noise.astype(np.float64) - 0.5 * sd * sd)
        )
    return DemandSeries(specs, np.round(value, 3), np.round(capacity, 3), nominal)


def demand_frame(d: DemandSeries, start: datetime, t: np.ndarray) -> pl.DataFrame:
    """The DEMAND table (one row per series and sample)."""
    ts = pl.Series("ts", (start.timestamp() * 1e6 + t * 1e6).astype(np.int64)).cast(
        pl.Datetime("us", "UTC")
    )
    frames = []
    running, pending = d.running, d.pending
    for i, s in enumerate(d.specs):
        frames.append(
            pl.DataFrame(
                {
                    "series_id": s.series_id,
                    "ts": ts,
                    "value": d.value[i],
                    "running": np.round(running[i], 3),
                    "pending": np.round(pending[i], 3),
                    "capacity": d.capacity[i],
                    "pool": s.pool,
                    "resource": s.resource,
                    "gpu_model": s.gpu_model,
                },
                schema_overrides={"gpu_model": pl.String},
            )
        )
    return pl.concat(frames).select(DEMAND.names).cast(DEMAND.polars_schema())


def calendar_frame(promos: list[Promotion], start: datetime) -> pl.DataFrame:
    """The CALENDAR table: one row per promotion and pool it moves."""
    rows = []
    for p in promos:
        at = start + timedelta(seconds=p.start)
        for pool, m in p.magnitude.items():
            rows.append(
                {
                    "name": f"{p.name}:{pool}",
                    "kind": "promotion",
                    "starts_at": at,
                    "ends_at": at + timedelta(seconds=p.duration),
                    "scope": pool,
                    "magnitude": m,
                }
            )
    if not rows:
        return CALENDAR.empty()
    return pl.DataFrame(rows).select(CALENDAR.names).cast(CALENDAR.polars_schema())
