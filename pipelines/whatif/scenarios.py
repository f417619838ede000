"""Flood scenarios for ``predops simulate-ops --scenario``: correlated alarms, real or not.

Each scenario is one small seeded world (:func:`~pipelines.whatif.world.build_world`)
with an event at ``onset_h`` hours into the evaluation, replayed through the closed
loop (the engine's policy, the true demand forecasts) once per pacing of
:data:`~policy.config.PACINGS`: ``breaker`` (the former per-pool storm breaker) and
``slow_start`` (:mod:`policy.pacing`), on the same world and the same scores.

The scores are a *scenario scorer*, not the retrained failure model (which would take
minutes per world and gives no reasons in the loop): it reads the world's failures and
the event and says what a scorer with reasons would say, so the figures measure the
pacing, not the model. Its base: each real failure is flagged (p 0.9, its cause's
signal as the top reason: ``gpu_ecc`` -> ``ecc_dbe``, ``psu`` -> ``gpu_power_w``, ...)
for 6-18 h before it with probability 0.8; each node raises an unfounded alarm (6 h,
p 0.9, a random hardware signal) with probability 0.01 a day; elsewhere p 0.01. On top:

- ``xid-flood``: one job crash makes one XID code flag up to 7 nodes in each of up to
  11 racks of the largest GPU pool for 24 h (as NVSentinel users reported 77 nodes over
  11 racks); none is faulty. One real fault (ECC, flagged 8 h ahead) strikes an
  unflagged node of the same pool 10 h after the onset.
- ``exporter-outage``: telemetry stops fleet-wide for 6 h. The scorer sees stale
  features: 30 % of the nodes score p 0.8 on ``samples`` (minutes since the last
  sample, missing samples), the others are unscored (no fresh features: no risk), and
  the base's precursors are lost meanwhile. A real ECC fault, flagged from the end of
  the outage, strikes 12 h after the onset.
- ``driver-rollout``: the largest GPU SKU runs driver ``v2`` (the rest ``v1``); 35 %
  of its nodes fail (cause ``driver``, 24 h repair) between 8 and 48 h after the onset,
  each flagged 6-12 h ahead with XID or PCIe-replay errors; another 15 % are flagged
  12 h without failing.
- ``rack-power``: the largest rack of a GPU pool loses power 8 h after the onset: all
  its nodes fail at once (``psu``, 12 h repair), flagged on GPU power from the onset.

Figures per pacing (:func:`run_scenario`): ``needless_drains`` (every drain that found
no fault), ``needless_drains_flagged`` (those of the event's unfounded alarms),
``real_failures`` / ``real_failures_handled`` (the event's real failures, the control
fault included, and those a drain averted), ``lost_gpu_hours`` (the whole run) and
``lost_gpu_hours_event`` (the event's failures), ``hours_to_resume`` (from the onset
to the first drain that caught one of the event's real failures, 0 when one was
caught before: how long real work waited; None when none was), ``budget_violations``
(the independent auditor), drains, alerts and the pacing's skips.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from predops.pipelines.whatif.forecasts import TrueForecasts, loop_demand
from predops.pipelines.whatif.loop import Loop, LoopConfig
from predops.pipelines.whatif.risk import RiskTable
from predops.pipelines.whatif.run import sim_policy_config
from predops.pipelines.whatif.world import HOUR_S, Failures, World, WorldConfig, build_world
from predops.policy.config import PACINGS, PolicyConfig

SCENARIOS = ("xid-flood", "exporter-outage", "driver-rollout", "rack-power")

SIGNAL_OF_CAUSE = {
    "gpu_ecc": "ecc_dbe",
    "gpu_xid": "xid_errors",
    "thermal": "gpu_temp_c",
    "psu": "gpu_power_w",
    "disk": "disk_realloc",
    "nic": "nic_flaps",
    "memory": "mce",
    "cpu": "mce",
    "driver": "xid_errors",
}
"""The telemetry a failure of each cause shows first (others: ``not_ready``)."""
NOISE_SIGNALS = ("ecc_sbe", "pcie_replay", "nic_flaps", "gpu_temp_c")
FLAGGED_P = 0.9
BASE_P = 0.01


@dataclass(frozen=True)
class ScenarioConfig:
    """One scenario run: its world (small by default: a test and a benchmark run it)
    and the event's onset, in hours after the evaluation starts."""

    name: str
    nodes: int = 300
    days: float = 3.0
    warmup_days: float = 1.0
    seed: int = 7
    onset_h: int = 12

    def __post_init__(self) -> None:
        if self.name not in SCENARIOS:
            raise ValueError(f"scenario must be one of {SCENARIOS}, got {self.name!r}")
        if not 0 <= self.onset_h < self.days * 24:
            raise ValueError(f"onset_h must be within the {self.days} evaluated days")

    @property
    def world(self) -> WorldConfig:
        return WorldConfig(self.nodes, self.days, self.seed, self.warmup_days)


@dataclass
class Scenario:
    """A world with its event: the scores, driver versions, the event's unfounded
    alarms (node row -> the ticks ``[start, end)`` it is flagged), its real failures
    ((row, time s)) and its onset tick."""

    cfg: ScenarioConfig
    world: World
    risk: RiskTable
    drivers: list[str | None]
    flagged: dict[int, tuple[int, int]]
    real: set[tuple[int, float]]
    onset: int


class _Scorer:
    """The scenario scorer's table (module docstring), filled tick by tick."""

    def __init__(self, world: World, rng: np.random.Generator) -> None:
        wc = world.cfg
        self.first, self.ticks = wc.first_tick, wc.last_tick - wc.first_tick
        n = len(world.specs)
        self.p = np.full((self.ticks, n), BASE_P)
        self.signal = np.full((self.ticks, n), -1, dtype=np.int16)
        self.names: list[str] = []
        self.rng = rng

    def flag(self, row: int, start: int, end: int, signal: str, p: float = FLAGGED_P) -> None:
        """Flag ``row`` over ticks ``[start, end)`` (absolute ticks, clipped)."""
        lo, hi = max(start - self.first, 0), min(end - self.first, self.ticks)
        if lo >= hi:
            return
        if signal not in self.names:
            self.names.append(signal)
        self.p[lo:hi, row] = p
        self.signal[lo:hi, row] = self.names.index(signal)

    def blank(self, rows: np.ndarray, start: int, end: int) -> None:
        lo, hi = max(start - self.first, 0), min(end - self.first, self.ticks)
        self.p[lo:hi, rows] = np.nan
        self.signal[lo:hi, rows] = -1

    def base(self, world: World) -> None:
        f = world.failures
        for row, at, cause in zip(f.node.tolist(), f.at.tolist(), f.cause, strict=True):
            if self.rng.random() < 0.8:
                tick = int(np.ceil(at / HOUR_S)) - 1
                lead = int(self.rng.integers(6, 19))
                self.flag(row, tick - lead, tick + 1, SIGNAL_OF_CAUSE.get(cause, "not_ready"))
        days = self.ticks / 24
        for row in range(self.p.shape[1]):
            for _ in range(self.rng.poisson(0.01 * days)):
                start = self.first + int(self.rng.integers(0, self.ticks))
                self.flag(row, start, start + 6, str(self.rng.choice(NOISE_SIGNALS)))

    def table(self) -> RiskTable:
        first = self.first
        return RiskTable(
            first,
            self.p,
            np.ones(self.ticks, dtype=np.int64),
            [],
            [],
            signal=self.signal,
            signal_names=tuple(self.names),
        )


def _with_failures(
    world: World, rows: list[int], at: list[float], repair_h: float, cause: str
) -> World:
    f = world.failures
    node = np.concatenate([f.node, np.array(rows, dtype=f.node.dtype)])
    times = np.concatenate([f.at, np.array(at, dtype=np.float64)])
    repair = np.concatenate([f.repair_s, np.full(len(rows), repair_h * HOUR_S)])
    causes = [*f.cause, *([cause] * len(rows))]
    order = np.lexsort((node, times))
    return replace(
        world,
        failures=Failures(node[order], times[order], repair[order], [causes[i] for i in order]),
    )


def _gpu_pools(world: World) -> list[str]:
    """GPU pools, largest first."""
    count: dict[str, int] = {}
    for s in world.specs:
        if s.gpus:
            count[s.pool] = count.get(s.pool, 0) + 1
    return sorted(count, key=lambda p: (-count[p], p))


def _racks(world: World, pool: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row, s in enumerate(world.specs):
        if s.pool == pool:
            out.setdefault("/".join(s.path), []).append(row)
    return out


def build_scenario(cfg: ScenarioConfig) -> Scenario:
    """The world of ``cfg`` with its event (module docstring)."""
    world = build_world(cfg.world)
    rng = np.random.default_rng(cfg.seed + 1009)
    scorer = _Scorer(world, rng)
    scorer.base(world)  # the world's own failures; the event flags its own
    onset = world.cfg.first_tick + cfg.onset_h
    t0 = onset * HOUR_S
    drivers: list[str | None] = [("v1" if s.gpus else None) for s in world.specs]
    pools = _gpu_pools(world)
    if not pools:
        raise ValueError(f"scenario {cfg.name}: the {cfg.nodes}-node world has no GPU pool")
    flagged: set[int] = set()
    real: list[tuple[int, float]] = []
    if cfg.name == "rack-power":
        racks = {r: rows for p in pools for r, rows in _racks(world, p).items()}
        rack = max(sorted(racks), key=lambda r: len(racks[r]))
        rows = racks[rack]
        at = t0 + 8 * HOUR_S
        world = _with_failures(world, rows, [at] * len(rows), 12.0, "psu")
        real = [(r, at) for r in rows]
    elif cfg.name == "driver-rollout":
        skus: dict[str, list[int]] = {}
        for row, s in enumerate(world.specs):
            if s.gpus:
                skus.setdefault(s.sku or str(s.gpu_model), []).append(row)
        sku = max(sorted(skus), key=lambda k: len(skus[k]))
        rows = skus[sku]
        for r in rows:
            drivers[r] = "v2"
        order = rng.permutation(rows).tolist()
        k_fail, k_noise = round(0.35 * len(rows)), round(0.15 * len(rows))
        fails = order[:k_fail]
        times = [t0 + float(rng.uniform(8, 48)) * HOUR_S for _ in fails]
        world = _with_failures(world, fails, times, 24.0, "driver")
        real = list(zip(fails, times, strict=True))
        flagged = set(order[k_fail : k_fail + k_noise])
    elif cfg.name in ("xid-flood", "exporter-outage"):
        pool = pools[0]
        racks = _racks(world, pool)
        if cfg.name == "xid-flood":
            for rack in sorted(racks)[:11]:
                flagged.update(racks[rack][:7])
        own = set(world.failures.node.tolist())  # the control has no failure of its own
        spare = sorted(
            set(np.flatnonzero([s.pool == pool for s in world.specs]).tolist()) - flagged - own
        )
        if not spare:
            raise ValueError(f"scenario {cfg.name}: no unflagged node in pool {pool}")
        control = int(spare[len(spare) // 2])
        at = t0 + (10 if cfg.name == "xid-flood" else 12) * HOUR_S
        world = _with_failures(world, [control], [at], 24.0, "gpu_ecc")
        real = [(control, at)]
    windows: dict[int, tuple[int, int]] = {}
    if cfg.name == "xid-flood":
        for r in sorted(flagged):
            scorer.flag(r, onset, onset + 24, "xid_errors")
            windows[r] = (onset, onset + 24)
        scorer.flag(real[0][0], onset + 2, onset + 10, "ecc_dbe", 0.95)
    elif cfg.name == "exporter-outage":
        n = len(world.specs)
        stale = rng.random(n) < 0.3
        scorer.blank(np.flatnonzero(~stale), onset, onset + 6)
        flagged = set(np.flatnonzero(stale).tolist())
        flagged.discard(real[0][0])
        for r in sorted(flagged):
            scorer.flag(r, onset, onset + 6, "samples", 0.8)
            windows[r] = (onset, onset + 6)
        scorer.flag(real[0][0], onset + 6, onset + 12, "ecc_dbe", 0.95)
    elif cfg.name == "driver-rollout":
        for i, (r, at) in enumerate(real):
            tick = int(np.ceil(at / HOUR_S)) - 1
            lead = int(rng.integers(6, 13))
            scorer.flag(r, tick - lead, tick + 1, ("xid_errors", "pcie_replay")[i % 2])
        for i, r in enumerate(sorted(flagged)):
            start = onset + int(rng.integers(0, 36))
            scorer.flag(r, start, start + 12, ("xid_errors", "pcie_replay")[i % 2])
            windows[r] = (start, start + 12)
    else:
        for r, _ in real:
            scorer.flag(r, onset, onset + 8, "gpu_power_w")
    return Scenario(cfg, world, scorer.table(), drivers, windows, set(real), onset)


def pacing_config(pacing: str) -> PolicyConfig:
    """The simulator's policy configuration with ``pacing``."""
    return sim_policy_config(pacing)


def run_pacing(sc: Scenario, pacing: str) -> dict[str, Any]:
    """The loop over the scenario's world under ``pacing``; its figures."""
    loop = Loop(
        sc.world,
        LoopConfig(
            policy="predictive",
            policy_config=pacing_config(pacing),
            seed=sc.cfg.seed,
            record=True,
        ),
        sc.risk,
        TrueForecasts(loop_demand(sc.world)).at,
        sc.drivers,
    )
    tally = loop.run()
    t0 = sc.onset * HOUR_S
    event_failures = [f for f in loop.failure_log if (f[1], f[0]) in sc.real]
    caught = sorted(t for t, row, _, _, averted in loop.drain_log if (row, averted) in sc.real)
    skips = tally.skips
    return {
        "needless_drains": tally.drains_needless,
        "needless_drains_flagged": sum(
            1
            for _, row, hit, scored, _ in loop.drain_log
            if not hit and _in_window(sc, row, scored)
        ),
        "real_failures": len(sc.real),
        "real_failures_handled": sum(1 for f in event_failures if f[2]),
        "lost_gpu_hours": round(tally.lost_gpu_hours, 4),
        "lost_gpu_hours_event": round(sum(f[3] for f in event_failures), 4),
        "hours_to_resume": None if not caught else round(max(caught[0] - t0, 0) / HOUR_S, 2),
        "budget_violations": tally.budget_violations,
        "drains": tally.drains,
        "alerts": tally.alerts,
        "skips_paced": skips["paced"],
        "skips_domain_paused": skips["domain_paused"],
        "skips_storm_breaker": skips["storm_breaker"],
    }


def _in_window(sc: Scenario, row: int, scored: float) -> bool:
    """Did a drain act on the event's unfounded alarm of ``row``? (the score it acted on,
    at ``scored`` s, falls in the alarm's window)"""
    w = sc.flagged.get(row)
    return w is not None and w[0] * HOUR_S <= scored < w[1] * HOUR_S


def run_scenario(cfg: ScenarioConfig) -> dict[str, Any]:
    """One scenario under every pacing, with the wall and CPU seconds of each stage."""
    stages: dict[str, dict[str, float]] = {}
    w, c = time.perf_counter(), time.process_time()
    sc = build_scenario(cfg)
    stages["world"] = _since(w, c)
    out: dict[str, Any] = {}
    for pacing in PACINGS:
        w, c = time.perf_counter(), time.process_time()
        out[pacing] = run_pacing(sc, pacing)
        stages[pacing] = _since(w, c)
    return {
        "scenario": cfg.name,
        "world": {
            "nodes": cfg.nodes,
            "days": cfg.days,
            "seed": cfg.seed,
            "onset_h": cfg.onset_h,
            "flagged_unfounded": len(sc.flagged),
            "real_failures": len(sc.real),
        },
        "pacing": out,
        "seconds": stages,
    }


def _since(wall: float, cpu: float) -> dict[str, float]:
    return {
        "wall": round(time.perf_counter() - wall, 2),
        "cpu": round(time.process_time() - cpu, 2),
    }
