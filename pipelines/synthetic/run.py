"""Run the synthetic fleet: configuration, the assembled simulation, and its outputs.

``build(cfg)`` draws everything except telemetry rows (topology, failures, episodes,
maintenance, demand, pods); telemetry is generated block by block when asked for, so
a 10,000-node fleet never holds all its samples in memory. ``simulate_frames`` returns
every table in memory (small fleets); ``simulate_to_lake`` streams them through the
same ingest path (validation, quarantine, atomic writes) as real data.

Same config and seed -> the same rows in the same order -> byte-identical Parquet.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from predops.core.clock import Clock, FixedClock
from predops.core.schemas import EVENTS
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic import episodes as epi
from predops.pipelines.synthetic import failures as fail
from predops.pipelines.synthetic.demand import (
    DemandSeries,
    Promotion,
    calendar_frame,
    demand_frame,
    promotions,
    simulate_demand,
)
from predops.pipelines.synthetic.noise import stream
from predops.pipelines.synthetic.stock import purchase_orders_frame, stock_frame
from predops.pipelines.synthetic.telemetry import (
    BLOCK_NODES,
    NodeParams,
    TelemetryInputs,
    block_frame,
    n_blocks,
    node_params,
)
from predops.pipelines.synthetic.topology import POOLS, Fleet, build_fleet
from predops.pipelines.synthetic.workload import simulate_pods
from predops.pipelines.workspace.lake import Lake

SOURCE = "synthetic"
TABLES = (
    "inventory",
    "telemetry",
    "events",
    "pods",
    "demand",
    "calendar",
    "stock",
    "purchase_orders",
)


@dataclass(frozen=True)
class SimConfig:
    """What to simulate: ``nodes`` nodes for ``days`` days, one telemetry sample per
    ``interval`` from ``start`` (UTC-aware), all randomness from ``seed``.

    ``failure_rate_scale`` multiplies the calibrated failure rates (see
    ``calibration.FAILURE_RATE_SCALE``); ``chunk_rows`` is about the telemetry rows per
    write: it trades memory (~0.9 GiB per million rows at peak) against the lake's
    per-write key check, which re-reads the keys already in the partition. It does not
    change the output.
    """

    nodes: int
    days: float
    interval: timedelta
    seed: int
    start: datetime
    failure_rate_scale: float = cal.FAILURE_RATE_SCALE
    chunk_rows: int = 3_000_000

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if not self.days > 0:
            raise ValueError(f"days must be > 0, got {self.days}")
        if self.interval.total_seconds() < 1:
            raise ValueError(f"interval must be >= 1 s, got {self.interval}")
        if self.start.tzinfo is None:
            raise ValueError("start must be UTC-aware")
        if self.n_samples < 1:
            raise ValueError(f"{self.days} days hold no {self.interval} interval")
        if self.failure_rate_scale < 0:
            raise ValueError("failure_rate_scale must be >= 0")

    @property
    def step_s(self) -> float:
        return self.interval.total_seconds()

    @property
    def n_samples(self) -> int:
        return int(self.days * 86400.0 // self.interval.total_seconds())

    @property
    def horizon_s(self) -> float:
        return self.n_samples * self.step_s

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.horizon_s)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["interval"] = self.step_s
        d["start"] = self.start.isoformat()
        return d


@dataclass(frozen=True)
class Simulation:
    """A drawn fleet history; telemetry rows are produced on demand by block."""

    cfg: SimConfig
    fleet: Fleet
    failures: fail.Failures
    averted: fail.Failures
    has_precursor: np.ndarray
    maintenance: fail.Windows
    flaps: fail.Windows
    episodes: epi.Episodes
    demand: DemandSeries
    promotions: list[Promotion]
    params: NodeParams
    pods_frame: pl.DataFrame
    _tel: TelemetryInputs = field(repr=False)

    # ------------------------------------------------------------------ tables
    def inventory(self) -> pl.DataFrame:
        return self.fleet.inventory(self.cfg.start)

    def telemetry_blocks(self) -> Iterator[pl.DataFrame]:
        for b in range(n_blocks(self.fleet.n)):
            yield block_frame(self._tel, b)

    def telemetry(self) -> pl.DataFrame:
        return pl.concat(list(self.telemetry_blocks()))

    def events(self) -> pl.DataFrame:
        return events_frame(self)

    def demand_table(self) -> pl.DataFrame:
        return demand_frame(self.demand, self.cfg.start, _times(self.cfg))

    def calendar(self) -> pl.DataFrame:
        return calendar_frame(self.promotions, self.cfg.start)

    def stock(self) -> pl.DataFrame:
        return stock_frame(self.fleet, self.demand.specs, self.cfg.start, self.cfg.horizon_s)

    def purchase_orders(self) -> pl.DataFrame:
        return purchase_orders_frame(self.fleet, self.cfg.start, self.cfg.horizon_s)

    def truth(self) -> dict[str, pl.DataFrame]:
        """Ground truth no real source has: which failures had precursors, every episode."""
        return truth_frames(self)

    def summary(self) -> dict[str, Any]:
        f = self.failures
        by_cause = {fail.MODES[m]: int((f.mode == m).sum()) for m in np.unique(f.mode)}
        kinds = {k: int((self.episodes.kind == i).sum()) for i, k in enumerate(epi.KINDS)}
        return {
            "config": self.cfg.to_dict(),
            "nodes_by_pool": {p: int((self.fleet.pool == i).sum()) for i, p in enumerate(POOLS)},
            "gpus": int(self.fleet.attr("gpus").sum()),
            "racks": self.fleet.n_racks,
            "failures": len(f),
            "failures_by_cause": dict(sorted(by_cause.items())),
            "failures_with_precursor": int(self.has_precursor.sum()),
            "failures_without_precursor": int((~self.has_precursor).sum()),
            "failures_averted_by_maintenance": len(self.averted),
            "episodes_by_kind": kinds,
            "maintenance_windows": int(
                np.unique(
                    np.stack([self.maintenance.start, self.fleet.rack[self.maintenance.node]]),
                    axis=1,
                ).shape[1]
            )
            if len(self.maintenance)
            else 0,
            "node_flaps": len(self.flaps),
            "promotions": [p.name for p in self.promotions],
            "demand_series": [s.series_id for s in self.demand.specs],
        }


def _times(cfg: SimConfig) -> np.ndarray:
    return np.arange(cfg.n_samples, dtype=np.float64) * cfg.step_s


def build(cfg: SimConfig) -> Simulation:
    """Draw the whole fleet history except telemetry rows."""
    horizon, step = cfg.horizon_s, cfg.step_s
    fleet = build_fleet(cfg.nodes, stream(cfg.seed, "topology"))
    rf = stream(cfg.seed, "failures")
    risk = fail.node_risk(fleet, rf, cfg.failure_rate_scale)
    failures = fail.merge_failures(
        fail.renewal_failures(fleet, risk, horizon, rf),
        fail.facilities_failures(fleet, horizon, rf, cfg.failure_rate_scale),
    )
    maint = fail.maintenance_windows(fleet, horizon, rf)
    failures = fail.drop_failures_in_windows(failures, maint)
    maint = fail.drop_windows_of_down_nodes(maint, failures)
    flaps = fail.flaps(fleet, horizon, rf)

    re = stream(cfg.seed, "episodes")
    pre, has = epi.precursors(fleet, failures, re)
    keep, pre = epi.avert_by_maintenance(failures, pre, maint, re)
    averted = failures.select(~keep)
    # Re-index the kept failures' episodes; averted precursors keep no failure index.
    new_index = np.where(keep, np.cumsum(keep) - 1, -1)
    pre = epi.Episodes(
        pre.node,
        pre.signal,
        pre.start,
        pre.end,
        pre.amplitude,
        pre.kind,
        np.where(pre.failure >= 0, new_index[np.maximum(pre.failure, 0)], -1).astype(np.int32),
    )
    failures, has = failures.select(keep), has[keep]
    warm_days = cal.PRECURSOR_LEAD_MAX_H / 24.0
    episodes = epi.Episodes.concat(
        [
            pre,
            epi.terminal(failures, re),
            epi.benign(fleet, risk, horizon, warm_days, re),
            epi.hot_aisles(fleet, horizon, re),
        ]
    )
    inc = epi.counter_increments(episodes, re)
    busy = _windows(
        np.concatenate([failures.node, maint.node]),
        np.concatenate([failures.at, maint.start - 1800.0]),
        np.concatenate([failures.repair_at, maint.end + 600.0]),
    )
    flaps = fail.union_windows([flaps, epi.flap_windows(episodes, re)], horizon, busy)
    order = np.argsort(inc.node, kind="stable")
    inc = epi.Increments(inc.node[order], inc.counter[order], inc.at[order], inc.count[order])

    t = _times(cfg)
    promos = promotions(cfg.start, horizon, stream(cfg.seed, "demand", 1))
    demand = simulate_demand(
        fleet, cfg.start, t, step, failures, maint, promos, stream(cfg.seed, "demand")
    )
    pods = simulate_pods(
        fleet, demand, t, step, failures, maint, stream(cfg.seed, "pods"), cfg.start
    )
    params = node_params(fleet, risk.frailty, stream(cfg.seed, "nodes"))
    down = _windows(
        np.concatenate([failures.node, maint.node]),
        np.concatenate([failures.at, maint.start]),
        np.concatenate([failures.repair_at, maint.end]),
    )
    drained = _windows(
        np.concatenate([maint.node, maint.node]),
        np.concatenate([maint.start - 1200.0, maint.end]),
        np.concatenate([maint.start, maint.end + 600.0]),
    )
    gauge = episodes.signal >= len(epi.COUNTER_SIGNALS)
    gauge_ep = epi.Episodes(*(getattr(episodes, f)[gauge] for f in epi.Episodes.__slots__))
    tel = TelemetryInputs(
        fleet=fleet,
        params=params,
        start=cfg.start,
        step_s=step,
        n_samples=cfg.n_samples,
        load=demand.load(),
        node_series=demand.node_series(fleet.n),
        down=down,
        drained=drained,
        flaps=flaps,
        episodes=gauge_ep,
        increments=inc,
        seed=cfg.seed,
    )
    return Simulation(
        cfg,
        fleet,
        failures,
        averted,
        has,
        maint,
        flaps,
        episodes,
        demand,
        promos,
        params,
        pods,
        tel,
    )


def _windows(node: np.ndarray, a: np.ndarray, b: np.ndarray) -> fail.Windows:
    order = np.lexsort((a, node))
    return fail.Windows(node[order].astype(np.int32), a[order], b[order])


def _at(start: datetime, seconds: np.ndarray) -> pl.Series:
    """Whole seconds from ``start`` as UTC timestamps; NaN becomes null."""
    us = start.timestamp() * 1e6 + np.round(seconds) * 1e6
    out = pl.Series(np.round(us)).fill_nan(None).cast(pl.Int64)
    return out.cast(pl.Datetime("us", "UTC"))


def events_frame(sim: Simulation) -> pl.DataFrame:
    """The EVENTS table: failures, repairs, maintenance sequences and kubelet flaps."""
    cfg, f, m, fl = sim.cfg, sim.failures, sim.maintenance, sim.flaps
    horizon = cfg.horizon_s
    names = np.array(sim.fleet.node_id, dtype=object)
    causes = np.array(fail.MODES, dtype=object)
    details = np.array([fail.MODE_DETAIL[x] for x in fail.MODES], dtype=object)
    parts: list[tuple[np.ndarray, str, np.ndarray, np.ndarray | None, np.ndarray | str]] = [
        (f.node, "failure", f.at, causes[f.mode], details[f.mode]),
        (f.node, "repair", f.repair_at, causes[f.mode], "repaired and returned to service"),
        (m.node, "cordon", m.start - 1800.0, None, "rolling maintenance: kernel and firmware"),
        (m.node, "drain", m.start - 1200.0, None, "rolling maintenance: evicting pods"),
        (m.node, "maintenance_start", m.start, None, "rolling maintenance"),
        (m.node, "maintenance_end", m.end, None, "rolling maintenance"),
        (m.node, "uncordon", m.end + 600.0, None, "rolling maintenance done"),
        (fl.node, "not_ready", fl.start, None, "kubelet stopped posting node status"),
        (fl.node, "ready", fl.end, None, "kubelet ready"),
    ]
    frames = []
    for node, kind, at, cause, detail in parts:
        ok = (at >= 0) & (at < horizon)
        k = int(ok.sum())
        frames.append(
            pl.DataFrame(
                {
                    "node_id": pl.Series(names[node[ok]], dtype=pl.String),
                    "kind": pl.Series([kind] * k, dtype=pl.String),
                    "at": _at(cfg.start, at[ok]),
                    "cause": pl.Series(
                        cause[ok] if cause is not None else [None] * k, dtype=pl.String
                    ),
                    "detail": pl.Series(
                        detail[ok] if isinstance(detail, np.ndarray) else [detail] * k,
                        dtype=pl.String,
                    ),
                }
            )
        )
    out = pl.concat(frames).sort("node_id", "at", "kind")
    return out.unique(subset=list(EVENTS.key), keep="first", maintain_order=True)


def truth_frames(sim: Simulation) -> dict[str, pl.DataFrame]:
    """Failures (with precursor flags; averted ones too) and every signal episode."""
    start, names = sim.cfg.start, np.array(sim.fleet.node_id, dtype=object)
    f, a = sim.failures, sim.averted
    failures = pl.DataFrame(
        {
            "node_id": pl.Series(np.concatenate([names[f.node], names[a.node]]), dtype=pl.String),
            "at": _at(start, np.concatenate([f.at, a.at])),
            "repair_at": _at(start, np.concatenate([f.repair_at, a.repair_at])),
            "cause": [fail.MODES[x] for x in np.concatenate([f.mode, a.mode])],
            "has_precursor": np.concatenate([sim.has_precursor, np.ones(len(a), bool)]),
            "happened": np.concatenate([np.ones(len(f), bool), np.zeros(len(a), bool)]),
        }
    ).sort("node_id", "at")
    e = sim.episodes
    episodes = pl.DataFrame(
        {
            "node_id": pl.Series(names[e.node], dtype=pl.String),
            "signal": [epi.SIGNALS[s] for s in e.signal],
            "kind": [epi.KINDS[k] for k in e.kind],
            "start": _at(start, e.start),
            "end": _at(start, e.end),
            "amplitude": e.amplitude,
            "failure_at": _at(
                start,
                np.where(e.failure >= 0, f.at[np.maximum(e.failure, 0)] if len(f) else 0.0, np.nan),
            ),
        }
    )
    return {"failures": failures, "episodes": episodes}


def simulate_frames(cfg: SimConfig) -> dict[str, pl.DataFrame]:
    """Every table of the run in memory, keyed by table name (small fleets only)."""
    sim = build(cfg)
    return {
        "inventory": sim.inventory(),
        "telemetry": sim.telemetry(),
        "events": sim.events(),
        "pods": sim.pods_frame,
        "demand": sim.demand_table(),
        "calendar": sim.calendar(),
        "stock": sim.stock(),
        "purchase_orders": sim.purchase_orders(),
    }


def simulate_to_lake(lake: Lake, cfg: SimConfig, *, clock: Clock, progress: bool) -> dict[str, Any]:
    """Simulate and ingest every table into ``lake`` under source ``synthetic``.

    Validation quarantines timestamps more than an hour ahead of the ingest clock; when
    the simulated period ends after ``clock.now()`` the ingest runs with a FixedClock at
    the simulation end instead (reported as ``ingest_clock``).
    """
    sim = build(cfg)
    now = clock.now()
    ingest_clock: Clock = clock
    clock_note = "given clock"
    if cfg.end > now:
        ingest_clock = FixedClock(cfg.end)
        clock_note = f"simulation end {cfg.end.isoformat()} (the run ends after {now.isoformat()})"
    input_name = (
        f"synthetic:nodes={cfg.nodes},days={cfg.days},interval={cfg.step_s:g}s,"
        f"seed={cfg.seed},start={cfg.start.isoformat()}"
    )
    report = ingest(
        lake, SOURCE, _batches(sim, progress), clock=ingest_clock, input_name=input_name
    )
    out = sim.summary()
    out["source"] = SOURCE
    out["ingest_clock"] = clock_note
    out["tables"] = {k: v.to_dict() for k, v in sorted(report.tables.items())}
    out["rows_quarantined"] = report.rows_quarantined
    return out


def _batches(sim: Simulation, progress: bool) -> Iterator[Batch]:
    """Inventory first (telemetry and events are checked against it), then telemetry in
    chunks of whole blocks, then the small tables."""
    from tqdm import tqdm

    yield Batch("inventory", sim.inventory())
    cfg = sim.cfg
    per_chunk = max(1, cfg.chunk_rows // max(cfg.n_samples * BLOCK_NODES, 1))
    blocks = n_blocks(sim.fleet.n)
    bar = tqdm(
        total=blocks, desc="telemetry blocks", unit="block", file=sys.stderr, disable=not progress
    )
    first_row = 1
    gen = sim.telemetry_blocks()
    for _ in range(0, blocks, per_chunk):
        frames = [f for _, f in zip(range(per_chunk), gen, strict=False)]
        chunk = pl.concat(frames)
        bar.update(len(frames))
        yield Batch("telemetry", chunk, first_row=first_row)
        first_row += chunk.height
    bar.close()
    yield Batch("events", sim.events())
    yield Batch("pods", sim.pods_frame)
    yield Batch("demand", sim.demand_table())
    yield Batch("calendar", sim.calendar())
    yield Batch("stock", sim.stock())
    yield Batch("purchase_orders", sim.purchase_orders())
