"""Run the what-if: one world, the chosen policies on it, figures side by side.
Over 500 lines: the one entry point of every policy, sizing variant and label mode on a
world, with the comparisons and the pooling of their figures beside the figures they read.

:func:`simulate_ops` builds the world once (same seed: same fleet, failures, workload
and telemetry for every policy), prepares what each policy reads (the retrained
failure model and demand forecaster for ``predictive``, the truth for ``oracle``),
runs one :class:`~pipelines.whatif.loop.Loop` per policy and compares them with
:func:`compare`. The :data:`SIZING_VARIANTS` are the predictive policy with its pool
resizes acted on another way (placeholders and a node autoscaler, the autoscaler
alone, none); :func:`compare_sizing` sets their pending and idle hours beside the
ideal resize's. Stage timings (wall and CPU seconds) are reported apart from the
figures, so the figures of one seed are byte-identical between runs.
"""

from __future__ import annotations

import logging
import multiprocessing
import resource
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

from predops.pipelines.whatif.forecasts import ModelForecasts, TrueForecasts, loop_demand
from predops.pipelines.whatif.loop import POLICIES, Loop, LoopConfig, retrained_loop
from predops.pipelines.whatif.risk import RiskConfig, RiskTable, oracle_risk, predicted_risk
from predops.pipelines.whatif.world import World, WorldConfig, build_world
from predops.policy.config import CostModel, DisruptionConfig, PolicyConfig, SizingConfig

SIM_COSTS = CostModel(capacity_value=0.1, price_by_headroom=False)
"""The engine's cost model for the simulated fleet: the documented defaults except a
flat ``capacity_value`` 0.1 in every pool instead of the engine's pricing by pool
headroom (:mod:`policy.headroom`). The loop's pools are elastic (parked nodes come back
within the hour), so a drained node's hour is mostly spare capacity: the unreplaced
count finds 5-16 % of a needless drain's hours bit on seed 11. A node running one
8-GPU job is drained above p_fail 0.30 (with the headroom price: 0.14 / 0.33 / 0.74
with an idle / a parked / no spare node). On seed 11 the headroom price averted more
failures (1,000 x 21: 31 against 20; 500 x 21: 22 against 4) but saved no more lost
GPU-hours, at a higher unreplaced cost (docs/whatif.md), so it is not the simulator's
setting; ``price_by_headroom=True`` (the engine default) turns it on."""


SIM_SCALE_IN_COOLDOWN = timedelta(hours=1)
"""The engine's scale-in cooldown in the simulator: one sizing round (the engine sizes
every hour, so a scale-in may follow a scale-up at the next round). The reactive
autoscaler it is compared with has none; the loop's scale-ups cost only the 30 min
lead (no boot or warm-up cost that flapping would waste), and the usage floor already
keeps every node that runs work. With the default 2 h, each hourly scale-up on a pool
whose demand moves in steps (training's gangs) held its nodes a second hour: on seed
11 1 h cut the predictive idle node-hours 14 % at 500 x 21 (training 11,172 -> 9,689)
and 1,000 x 21 (22,775 -> 19,674) for 1-2 % more pending pod-hours."""


SIZING_VARIANTS = {
    "predictive-placeholders": "placeholders",
    "predictive-autoscaler": "autoscaler",
    "predictive-static": "static",
}
"""The predictive policy (same engine, models, drains) with its resizes acted on
otherwise (:data:`~pipelines.whatif.loop.POOL_ACTUATIONS`): placeholder pods that a node
autoscaler with a lead time honours; the autoscaler alone (predops resizes nothing);
every node kept (no resizing at all). ``predictive`` itself is the ideal resize."""
RUNNABLE = (*POLICIES, *SIZING_VARIANTS)


def sim_policy_config(pacing: str = "slow_start") -> PolicyConfig:
    """The engine's configuration in the simulator, with drains paced by ``pacing``
    (``DisruptionConfig.pacing``)."""
    return PolicyConfig(
        disruption=DisruptionConfig(costs=SIM_COSTS, pacing=pacing),
        sizing=SizingConfig(costs=SIM_COSTS, scale_in_cooldown=SIM_SCALE_IN_COOLDOWN),
    )


@dataclass(frozen=True)
class OpsConfig:
    """A what-if run: the world, the policies, and the loop and model knobs."""

    world: WorldConfig
    policies: tuple[str, ...] = POLICIES
    risk: RiskConfig = field(default_factory=RiskConfig)
    sizing_every: int = 1
    reactive_sizing_every: int = 1
    reactive_headroom: float = 0.10
    demand_retrain_every: timedelta = timedelta(days=7)
    soft_taint_p: float | None = None
    """Soft-taint nodes at or above this p_fail (predictive / oracle); None: off."""
    autoscaler_lead: timedelta = timedelta(minutes=10)
    """The node autoscaler's provisioning delay (the :data:`SIZING_VARIANTS`)."""
    labels: str = "oracle"  # what the retrains learn from: LoopConfig.labels
    inspection_find_rate: float = 0.7  # LoopConfig.inspection_find_rate
    inspection_unknown_rate: float = 0.2  # LoopConfig.inspection_unknown_rate
    pacing: str = "slow_start"
    """How the engine paces drains against bursts (``DisruptionConfig.pacing``)."""

    def __post_init__(self) -> None:
        bad = [p for p in self.policies if p not in RUNNABLE]
        if bad or not self.policies:
            raise ValueError(f"policies must be among {RUNNABLE}, got {list(self.policies)}")

    def to_dict(self) -> dict[str, Any]:
        w = asdict(self.world)
        w["start"] = self.world.start.isoformat()
        return {
            "world": w,
            "policies": list(self.policies),
            "risk": {
                "horizon_h": self.risk.horizon / timedelta(hours=1),
                "retrain_every_days": self.risk.retrain_every / timedelta(days=1),
                "train_window_days": (
                    None
                    if self.risk.train_window is None
                    else self.risk.train_window / timedelta(days=1)
                ),
                "train_row_every_h": self.risk.train_row_every / timedelta(hours=1),
                "n_estimators": self.risk.params.get("n_estimators"),
            },
            "sizing_every_h": self.sizing_every,
            "reactive_sizing_every_h": self.reactive_sizing_every,
            "reactive_headroom": self.reactive_headroom,
            "demand_retrain_every_days": self.demand_retrain_every / timedelta(days=1),
            "soft_taint_p": self.soft_taint_p,
            "autoscaler_lead_h": self.autoscaler_lead / timedelta(hours=1),
            "labels": self.labels,
            "inspection_find_rate": self.inspection_find_rate,
            "inspection_unknown_rate": self.inspection_unknown_rate,
            "pacing": self.pacing,
            "cost_model": {
                "capacity_value": SIM_COSTS.capacity_value,
                "inspection_window_h": SIM_COSTS.inspection_window / timedelta(hours=1),
                "checkpoint_interval_h": SIM_COSTS.checkpoint_interval / timedelta(hours=1),
            },
        }


class Stopwatch:
    """Wall and CPU seconds per stage."""

    def __init__(self) -> None:
        self.stages: dict[str, dict[str, float]] = {}

    def __call__(self, name: str) -> Stopwatch:
        self._name = name
        return self

    def __enter__(self) -> None:
        self._t = time.perf_counter()
        self._c = _cpu()

    def __exit__(self, *exc: object) -> None:
        self.stages[self._name] = {
            "wall": round(time.perf_counter() - self._t, 2),
            "cpu": round(_cpu() - self._c, 2),
        }


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _loop_config(cfg: OpsConfig, policy: str) -> LoopConfig:
    return LoopConfig(
        policy="predictive" if policy in SIZING_VARIANTS else policy,
        pool_actuation=SIZING_VARIANTS.get(policy, "ideal"),
        autoscaler_lead=cfg.autoscaler_lead,
        policy_config=sim_policy_config(cfg.pacing),
        horizon=cfg.risk.horizon,
        sizing_every=cfg.sizing_every,
        reactive_sizing_every=cfg.reactive_sizing_every,
        reactive_headroom=cfg.reactive_headroom,
        soft_taint_p=cfg.soft_taint_p,
        seed=cfg.world.seed,
        labels=cfg.labels,
        inspection_find_rate=cfg.inspection_find_rate,
        inspection_unknown_rate=cfg.inspection_unknown_rate,
    )


def progress_bar(label: str, hours: int, *, enabled: bool) -> Any:
    """A tqdm line on stderr counting the simulated hours of one run (redrawn every 2 s
    on a terminal, every 30 s into a file); a no-op when not ``enabled``."""
    from tqdm import tqdm

    return tqdm(
        total=hours,
        desc=label,
        unit="h",
        file=sys.stderr,
        disable=not enabled,
        mininterval=2.0 if sys.stderr.isatty() else 30.0,
        ascii=not sys.stderr.isatty(),
    )


def _figures(loop: Loop, cfg: OpsConfig, progress: bool = False) -> dict[str, Any]:
    """Run ``loop``; its figures, with the soft-tainted node-hours when the option is on
    (never for the reactive policy, which reads no risk). ``progress``: a progress bar
    on stderr."""
    wc = loop.world.cfg
    bar = progress_bar(
        f"seed {wc.seed} {loop.cfg.policy}", wc.last_tick - wc.first_tick, enabled=progress
    )
    try:
        out = loop.run(on_tick=bar.update if progress else None).to_dict()
    finally:
        bar.close()
    if cfg.soft_taint_p is not None and loop.cfg.policy != "reactive":
        out["soft_tainted_node_hours"] = loop.soft_tainted_node_hours
    if loop.autoscaler is not None:
        out.update(loop.autoscaler.figures())
    return out


def run_policy(
    world: World,
    cfg: OpsConfig,
    policy: str,
    watch: Stopwatch,
    risks: dict[str, RiskTable] | None = None,
    *,
    progress: bool = False,
) -> dict[str, Any]:
    """Run ``policy`` on ``world``; ``risks`` keeps the failure model's table for the
    next predictive run on the same world (the models are refitted on the same past:
    the same table), so the sizing variants fit it once."""
    sim = world.sim
    if policy == "predictive" or policy in SIZING_VARIANTS:
        demand = ModelForecasts(loop_demand(world), sim.calendar(), cfg.demand_retrain_every)
        lcfg = _loop_config(cfg, policy)
        if cfg.labels != "oracle":  # retrained as the loop goes, on its own labels
            with watch("failure_features"):
                loop = retrained_loop(world, lcfg, cfg.risk, demand.at)
        else:
            risks = {} if risks is None else risks
            if "predictive" not in risks:
                with watch("failure_model"):
                    risks["predictive"] = predicted_risk(world, cfg.risk)
            loop = Loop(world, lcfg, risks["predictive"], demand.at)
        risk = loop.risk
        assert risk is not None  # a predictive loop always has one
        with watch(f"loop_{policy}"):
            out = _figures(loop, cfg, progress)
        out["failure_model_fits"] = risk.fits
        out["demand_model_fits"] = demand.fits
        return out
    if policy == "oracle":
        risk = oracle_risk(world, cfg.risk.horizon)
        truth = TrueForecasts(loop_demand(world))
        with watch("loop_oracle"):
            return _figures(Loop(world, _loop_config(cfg, policy), risk, truth.at), cfg, progress)
    with watch("loop_reactive"):
        return _figures(Loop(world, _loop_config(cfg, policy)), cfg, progress)


def _share(part: float, whole: float) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def compare(figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's targets, for each proactive policy against ``reactive``."""
    base = figures.get("reactive")
    if base is None:
        return {}
    out: dict[str, Any] = {}
    for name in ("predictive", "oracle"):
        f = figures.get(name)
        if f is None:
            continue
        saved = base["lost_gpu_hours"] - f["lost_gpu_hours"]
        cost = f["drain_cost_gpu_hours"]
        full = f["drain_cost_gpu_hours_full_capacity"]
        bit = f["drain_cost_gpu_hours_unreplaced"]
        idle_cut = _share(base["idle_node_hours"] - f["idle_node_hours"], base["idle_node_hours"])
        out[name] = {
            "lost_gpu_hours_avoided_share": _share(saved, base["lost_gpu_hours"]),
            "lost_gpu_hours_saved": round(saved, 4),
            "drain_cost_over_savings": _share(cost, saved) if saved > 0 else None,
            "drain_cost_full_capacity_over_savings": _share(full, saved) if saved > 0 else None,
            "drain_cost_unreplaced_over_savings": _share(bit, saved) if saved > 0 else None,
            "budget_violations": f["budget_violations"],
            "pending_pod_hours_ratio": _share(f["pending_pod_hours"], base["pending_pod_hours"]),
            "idle_node_hours_reduction": idle_cut,
            "targets_met": {
                "avoid_40pct_lost_gpu_hours": bool(saved >= 0.4 * base["lost_gpu_hours"]),
                # the drain-cost target of record counts the capacity that bit
                # (unreplaced); the engine's own valuation is reported beside it
                "drain_cost_engine_valued_under_25pct_of_savings": bool(
                    saved > 0 and cost < 0.25 * saved
                ),
                "drain_cost_unreplaced_under_25pct_of_savings": bool(
                    saved > 0 and bit < 0.25 * saved
                ),
                "zero_budget_violations": f["budget_violations"] == 0,
                "pending_not_higher": bool(f["pending_pod_hours"] <= base["pending_pod_hours"]),
                "idle_15pct_lower": bool(idle_cut is not None and idle_cut >= 0.15),
            },
        }
    return out


POOLED_FIGURES = (
    "lost_gpu_hours",
    "drain_cost_gpu_hours",
    "drain_cost_gpu_hours_full_capacity",
    "drain_cost_gpu_hours_unreplaced",
    "budget_violations",
    "pending_pod_hours",
    "idle_node_hours",
    "drains",
    "drains_needless",
    "failures_averted_by_drains",
    "failures_on_busy_nodes",
)
"""The figures :func:`pooled` sums over worlds (all that :func:`compare` reads)."""


def pooled(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per policy, the :data:`POOLED_FIGURES` summed over several worlds' runs (each a
    ``policies`` mapping of :func:`simulate_ops`), for :func:`compare`: a ratio of sums,
    so a world with more at stake weighs more. One world's lost GPU-hours hang on which
    gangs its failures meet; pooling seeds shows how much of a figure is the world."""
    if not runs:
        raise ValueError("no runs to pool")
    names = [p for p in POLICIES if all(p in r for r in runs)]
    return {p: {k: sum(r[p][k] for r in runs) for k in POOLED_FIGURES} for p in names}


def describe(world: World) -> dict[str, Any]:
    """What the world holds over the evaluated days."""
    summary = world.sim.summary()
    at = world.failures.at
    lo, hi = world.cfg.first_tick * 3600.0, world.cfg.last_tick * 3600.0
    return {
        "nodes_by_pool": summary["nodes_by_pool"],
        "gpus": summary["gpus"],
        "failures_in_evaluation": int(((at > lo) & (at <= hi)).sum()),
        "workload_entries": len(world.workload),
        "workload_pods": int(world.workload.members.sum()),
        "pods_between_ticks_dropped": world.dropped_pods,
    }


def compare_sizing(figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pending pod-hours and idle node-hours of the ideal resize (``predictive``) and of
    each sizing variant that ran, side by side; each variant also as a ratio of the
    ideal's (empty when no variant ran)."""
    names = [p for p in ("predictive", *SIZING_VARIANTS) if p in figures]
    if not any(p in SIZING_VARIANTS for p in names):
        return {}
    ideal = figures.get("predictive")
    out: dict[str, Any] = {}
    for name in names:
        f = figures[name]
        row: dict[str, Any] = {
            k: f[k] for k in ("pending_pod_hours", "idle_node_hours", "provisioned_node_hours")
        }
        if ideal is not None and name != "predictive":
            row["pending_vs_ideal"] = _share(f["pending_pod_hours"], ideal["pending_pod_hours"])
            row["idle_vs_ideal"] = _share(f["idle_node_hours"], ideal["idle_node_hours"])
        out[name] = row
    return out


def _policy_in_process(
    cfg: OpsConfig, policy: str, log_level: int, progress: bool = False
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One policy in a process of its own: it draws the same world from the seed."""
    logging.basicConfig(
        level=log_level, format=f"%(asctime)s [{cfg.world.seed} {policy}] %(message)s"
    )
    watch = Stopwatch()
    with watch(f"world_{policy}"):
        world = build_world(cfg.world)
    return run_policy(world, cfg, policy, watch, progress=progress), watch.stages, describe(world)


ENGINES = ("local", "dask")


def _result(
    cfg: OpsConfig,
    world_figures: dict[str, Any],
    figures: dict[str, dict[str, Any]],
    stages: dict[str, dict[str, float]],
) -> dict[str, Any]:
    return {
        "config": cfg.to_dict(),
        "world": world_figures,
        "policies": figures,
        "comparison": compare(figures),
        "sizing_comparison": compare_sizing(figures),
        "seconds": stages,
    }


def _seed_config(cfg: OpsConfig, seed: int) -> OpsConfig:
    return replace(cfg, world=replace(cfg.world, seed=seed))


def simulate_seeds(
    cfg: OpsConfig,
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    engine: str = "local",
    scheduler: str | Any | None = None,
    progress: bool = False,
) -> dict[int, dict[str, Any]]:
    """:func:`simulate_ops` for each of ``seeds`` (``cfg.world.seed`` replaced): one
    task per (seed, policy), each drawing its world from the seed, so the figures are
    the same however the tasks run. ``engine`` ``local``: ``jobs`` spawned processes
    (1: one after the other, in this process); ``dask``: tasks on the Dask cluster at
    ``scheduler`` (an address ``tcp://host:8786`` or a ``distributed.Client``)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use local or dask")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    policies = [p for p in RUNNABLE if p in cfg.policies]
    cfgs = {s: _seed_config(cfg, s) for s in seeds}
    tasks = [(s, p) for s in seeds for p in policies]
    level = logging.getLogger().getEffectiveLevel()
    if engine == "dask":
        if scheduler is None:
            raise ValueError("--engine dask needs --scheduler tcp://host:port")
        done = _on_dask(scheduler, [(cfgs[s], p, level) for s, p in tasks])
    elif jobs > 1 and len(tasks) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=ctx) as pool:
            futures = [
                pool.submit(_policy_in_process, cfgs[s], p, level, progress) for s, p in tasks
            ]
            done = [f.result() for f in futures]
    else:
        return {s: simulate_ops(cfgs[s], progress=progress) for s in seeds}
    out: dict[int, dict[str, Any]] = {}
    for s in seeds:
        mine = [d for (seed, _), d in zip(tasks, done, strict=True) if seed == s]
        stages: dict[str, dict[str, float]] = {}
        for _, st, _ in mine:
            stages.update(st)
        figures = {p: f for p, (f, _, _) in zip(policies, mine, strict=True)}
        out[s] = _result(cfgs[s], mine[0][2], figures, stages)
    return out


def _on_dask(
    scheduler: str | Any, calls: list[tuple[OpsConfig, str, int]]
) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Each call of :func:`_policy_in_process` as one Dask task (no progress bars: the
    workers' stderr is not the caller's)."""
    from distributed import Client

    # distributed is untyped: keep the client as Any.
    client: Any = scheduler if isinstance(scheduler, Client) else Client(scheduler)  # type: ignore[no-untyped-call]
    try:
        futures = [
            client.submit(_policy_in_process, c, p, level, False, pure=False)
            for c, p, level in calls
        ]
        return list(client.gather(futures))
    finally:
        if client is not scheduler:
            client.close()


def simulate_ops(
    cfg: OpsConfig, *, world: World | None = None, jobs: int = 1, progress: bool = False
) -> dict[str, Any]:
    """Run ``cfg``; with ``jobs`` > 1 the policies run in that many spawned processes
    (each draws the same world from the seed; the figures are the same either way).
    ``progress``: a progress bar per policy on stderr."""
    policies = [p for p in RUNNABLE if p in cfg.policies]
    if jobs > 1 and len(policies) > 1 and world is None:
        return simulate_seeds(cfg, [cfg.world.seed], jobs=jobs, progress=progress)[cfg.world.seed]
    watch = Stopwatch()
    if world is None:
        with watch("world"):
            world = build_world(cfg.world)
    risks: dict[str, RiskTable] = {}
    figures = {p: run_policy(world, cfg, p, watch, risks, progress=progress) for p in policies}
    return _result(cfg, describe(world), figures, watch.stages)


def parse_seeds(text: str) -> list[int]:
    """``7,11,13`` -> ``[7, 11, 13]`` (a clear error naming the bad item)."""
    out = []
    for item in text.split(","):
        try:
            out.append(int(item.strip()))
        except ValueError:
            raise ValueError(f"--seeds: {item.strip()!r} is not an integer (in {text!r})") from None
    return out


def seeds_report(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Several worlds' results: each seed's, and the comparison of their sums
    (:func:`pooled`)."""
    seeds = list(runs)
    return {
        "seeds": {str(s): r for s, r in runs.items()},
        "pooled": {
            "seeds": seeds,
            "comparison": compare(pooled([r["policies"] for r in runs.values()])),
        },
    }


def parse_policies(values: Sequence[str]) -> tuple[str, ...]:
    if not values or "all" in values:
        return POLICIES
    return tuple(p for p in RUNNABLE if p in values)
