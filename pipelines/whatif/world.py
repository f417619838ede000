"""The exogenous world of a what-if run: one seeded synthetic fleet that every policy sees.

:func:`build_world` draws the fleet once (:func:`pipelines.synthetic.run.build`, hourly
telemetry) and turns it into arrays the loop walks hour by hour:

- the topology (``allocator`` :class:`Topology` from the inventory);
- hardware failures (node, time, repair duration, cause) and rack maintenance windows —
  identical for every policy, so runs with the same seed are paired;
- the workload, hour-quantised: each pod of the synthetic trace arrives at the first
  tick at or after its creation and leaves at the first tick at or after its end; pods
  that live entirely between two ticks are invisible at this resolution and dropped
  (on the 2,000-node fleet they hold ~7 % of training GPU-hours and a quarter of
  big-data CPU-hours; see the package note);
- CPU-only single pods of one pool that arrive and leave at the same ticks are packed
  into *pod groups* of up to ``GROUP_CPU_MILLI`` / ``GROUP_MEMORY_MIB`` (half the
  smaller CPU SKU; one request each, ``members`` pods): big-data runs ~28,000 pods of
  ~14 cores a day, most for a single tick, and placing each through the allocator
  would cost more than the rest of the loop together. GPU pods and gangs stay single.

Times are seconds from the simulation start (``sim.cfg.start``); ticks are whole hours
from it. The evaluation starts after ``warmup_days`` of history (the failure and demand
models need a past to train on) and lasts ``days``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np
import polars as pl

from predops.allocator.requests import parse_gpu_spec
from predops.allocator.topology import NodeSpec, Topology
from predops.pipelines.synthetic.run import SimConfig, Simulation, build

HOUR_S = 3600.0
START = datetime(2026, 1, 5, tzinfo=UTC)
"""Simulation start (a Monday), as in ``predops eval failure --source synthetic``."""


GROUP_CPU_MILLI = 48_000
GROUP_MEMORY_MIB = 192 * 1024


@dataclass(frozen=True)
class WorldConfig:
    """``nodes`` x ``days`` evaluated after ``warmup_days`` of history, from ``seed``."""

    nodes: int
    days: float
    seed: int
    warmup_days: float = 14.0
    start: datetime = START

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.days <= 0 or self.warmup_days < 1:
            raise ValueError("days must be > 0 and warmup_days >= 1")

    @property
    def first_tick(self) -> int:
        return round(self.warmup_days * 24)

    @property
    def last_tick(self) -> int:
        """The tick after the last evaluated hour."""
        return self.first_tick + round(self.days * 24)

    def at(self, tick: float) -> datetime:
        return self.start + timedelta(hours=tick)


@dataclass(frozen=True, eq=False)
class Workload:
    """One entry per visible pod (arrays), sorted by arrival tick then pod id.

    ``job`` numbers jobs (a gang is one job); ``gang`` is -1 for single pods, else the
    gang's index into ``gang_ids``. ``arrive`` / ``leave`` are ticks; ``pool`` indexes
    ``pools``; ``models`` indexes ``model_sets`` (allowed GPU models, None = any)."""

    pod_ids: list[str]
    job: np.ndarray
    gang: np.ndarray
    gang_ids: list[str]
    pool: np.ndarray
    pools: list[str]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    models: np.ndarray
    model_sets: list[frozenset[str] | None]
    arrive: np.ndarray
    leave: np.ndarray
    members: np.ndarray
    """Pods each entry stands for (1, or the size of a CPU pod group)."""

    def __len__(self) -> int:
        return int(self.job.size)

    @cached_property
    def gpus(self) -> np.ndarray:
        """GPUs each pod holds (a share counts as its fraction)."""
        out: np.ndarray = self.num_gpu * self.gpu_milli / 1000.0
        return out


@dataclass(frozen=True)
class Failures:
    """Hardware failures sorted by time: node row, time (s), repair duration (s), cause."""

    node: np.ndarray
    at: np.ndarray
    repair_s: np.ndarray
    cause: list[str]

    def __len__(self) -> int:
        return int(self.node.size)


@dataclass(frozen=True, eq=False)
class World:
    cfg: WorldConfig
    sim: Simulation
    topology: Topology
    failures: Failures
    maintenance: tuple[np.ndarray, np.ndarray, np.ndarray]
    """(node row, start s, end s) of rack maintenance windows."""
    workload: Workload
    dropped_pods: int
    """Pods of the evaluated period that lived entirely between two ticks."""

    @property
    def specs(self) -> tuple[NodeSpec, ...]:
        return self.topology.nodes

    @cached_property
    def node_ids(self) -> list[str]:
        return [n.node_id for n in self.topology.nodes]


def simulate(cfg: WorldConfig) -> Simulation:
    """The synthetic fleet behind ``cfg``, with hourly telemetry."""
    return build(
        SimConfig(
            nodes=cfg.nodes,
            days=cfg.warmup_days + cfg.days,
            interval=timedelta(hours=1),
            seed=cfg.seed,
            start=cfg.start,
        )
    )


def seconds_since(col: pl.Series, start: datetime) -> np.ndarray:
    """A datetime column as float seconds from ``start`` (null: NaN)."""
    us = col.dt.epoch("us").cast(pl.Float64).to_numpy()
    out: np.ndarray = (us - start.timestamp() * 1e6) / 1e6
    return out


def workload_from_pods(pods: pl.DataFrame, cfg: WorldConfig) -> tuple[Workload, int]:
    """Hour-quantise the trace's pods (see the module docstring); only pods alive at a
    tick of the evaluated period are kept."""
    end_s = cfg.last_tick * HOUR_S
    created = seconds_since(pods["created_at"], cfg.start)
    deleted = seconds_since(pods["deleted_at"], cfg.start)
    deleted = np.where(np.isnan(deleted), np.inf, deleted)
    arrive = np.maximum(np.ceil(created / HOUR_S), cfg.first_tick)
    leave = np.ceil(np.minimum(deleted, end_s + HOUR_S) / HOUR_S)
    in_period = (deleted > cfg.first_tick * HOUR_S) & (created < end_s)
    keep = in_period & (leave > arrive) & (arrive < cfg.last_tick)
    dropped = int((in_period & ~keep).sum())
    kept = _grouped(
        pods.filter(pl.Series(keep)).with_columns(
            pl.Series("__arrive", arrive[keep]), pl.Series("__leave", leave[keep])
        )
    )
    arrive_k, leave_k = kept["__arrive"].to_numpy(), kept["__leave"].to_numpy()
    pools = sorted(kept["pool"].unique().to_list())
    pool_ix = {p: i for i, p in enumerate(pools)}
    spec_values = kept["gpu_spec"].to_list()
    model_sets: list[frozenset[str] | None] = []
    seen: dict[str | None, int] = {}
    models = np.empty(kept.height, dtype=np.int32)
    for i, s in enumerate(spec_values):
        if s not in seen:
            seen[s] = len(model_sets)
            model_sets.append(parse_gpu_spec(s))
        models[i] = seen[s]
    job_codes = kept["job_id"].rank("dense").to_numpy()
    gang_col = kept["gang_id"]
    gang_ids = sorted(x for x in gang_col.unique().to_list() if x is not None)
    gang_ix = {g: i for i, g in enumerate(gang_ids)}
    gang = np.array([gang_ix[g] if g is not None else -1 for g in gang_col.to_list()])
    w = Workload(
        pod_ids=kept["pod_id"].to_list(),
        job=job_codes.astype(np.int64),
        gang=gang.astype(np.int64),
        gang_ids=gang_ids,
        pool=np.array([pool_ix[p] for p in kept["pool"].to_list()], dtype=np.int32),
        pools=pools,
        cpu_milli=kept["cpu_milli"].to_numpy().astype(np.int64),
        memory_mib=kept["memory_mib"].to_numpy().astype(np.int64),
        num_gpu=kept["num_gpu"].to_numpy().astype(np.int64),
        gpu_milli=kept["gpu_milli"].to_numpy().astype(np.int64),
        models=models,
        model_sets=model_sets,
        arrive=arrive_k.astype(np.int64),
        leave=leave_k.astype(np.int64),
        members=kept["__members"].to_numpy().astype(np.int64),
    )
    return w, dropped


def _grouped(pods: pl.DataFrame) -> pl.DataFrame:
    """Pack CPU-only single pods with equal pool, arrival and departure into groups
    (see the module docstring); sorted by arrival tick, then pod id."""
    cpu_single = (pl.col("num_gpu") == 0) & pl.col("gang_id").is_null()
    singles = pods.filter(~cpu_single).with_columns(pl.lit(1).alias("__members"))
    cpu = pods.filter(cpu_single).sort("pool", "__arrive", "__leave", "pod_id")
    key = ["pool", "__arrive", "__leave"]
    cpu = cpu.with_columns(
        ((pl.col("cpu_milli").cum_sum().over(key) - pl.col("cpu_milli")) // GROUP_CPU_MILLI).alias(
            "__c"
        ),
        (
            (pl.col("memory_mib").cum_sum().over(key) - pl.col("memory_mib")) // GROUP_MEMORY_MIB
        ).alias("__m"),
    )
    groups = cpu.group_by([*key, "__c", "__m"], maintain_order=True).agg(
        pl.col("pod_id").first(),
        pl.col("job_id").first(),
        pl.col("gang_id").first(),
        pl.col("gpu_spec").first(),
        pl.col("cpu_milli").sum(),
        pl.col("memory_mib").sum(),
        pl.col("num_gpu").first(),
        pl.col("gpu_milli").first(),
        pl.len().alias("__members"),
    )
    cols = [
        "pod_id",
        "job_id",
        "gang_id",
        "pool",
        "gpu_spec",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "__arrive",
        "__leave",
        "__members",
    ]
    out = pl.concat(
        [singles.select(cols), groups.select(cols)], how="vertical_relaxed"
    ).with_columns(pl.col("__members").cast(pl.Int64))
    return out.sort("__arrive", "pod_id")


def build_world(cfg: WorldConfig, sim: Simulation | None = None) -> World:
    """Draw (or take) the simulation and extract what the loop replays."""
    sim = sim or simulate(cfg)
    topology = Topology.from_inventory(sim.inventory())
    row_of = {n.node_id: i for i, n in enumerate(topology.nodes)}
    fleet_row = np.array([row_of[n] for n in sim.fleet.node_id], dtype=np.int64)
    f = sim.failures
    order = np.lexsort((fleet_row[f.node], f.at))
    from predops.pipelines.synthetic.failures import MODES

    failures = Failures(
        node=fleet_row[f.node][order],
        at=f.at[order],
        repair_s=(f.repair_at - f.at)[order],
        cause=[MODES[m] for m in f.mode[order]],
    )
    m = sim.maintenance
    maintenance = (fleet_row[m.node], m.start.copy(), m.end.copy())
    workload, dropped = workload_from_pods(sim.pods_frame, cfg)
    return World(cfg, sim, topology, failures, maintenance, workload, dropped)
