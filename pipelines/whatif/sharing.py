"""Capacity sharing in the closed loop: co-location on reclaimed capacity, and tidal
lending of whole nodes (``predops simulate-ops --sharing``).
Over 500 lines: one experiment whose two halves share the world, the tuning on another
seed and the report; split, the report's comparison would be spread over modules.

**Co-location.** Each node of the world's ``online`` pool runs its online work (the
synthetic telemetry's hourly CPU use x the node's allocatable cores) and, beside it,
best-effort batch pods of ``batch_pod_cores`` from an endless batch queue on the
capacity the node publishes. Every hour (one planning round) a method publishes a
value, batch pods fill it, and the hour's real online use is compared with what the
batch pods left: online use above ``allocatable - batch`` is a *violation* (the hour's
online work is throttled by that many cores) and batch pods are evicted at once until
it fits (each evicted pod loses its hour). Methods:

- ``predops``: :class:`policy.reclaim.ReclaimPolicy` itself (deadband, growth budget,
  shrink at once) on per-node :class:`~core.contracts.UsageForecast` s from the
  per-node usage model (``models/usage``, what ``predops train usage`` registers),
  fitted on the world's warm-up hours with its conformal and online corrections
  (:mod:`pipelines.whatif.usage_model`);
- ``reclaim_ewma`` (a baseline): the same policy on the simulator-side forecaster used
  before the usage model was wired in — the node's exponentially weighted use
  (``level_alpha`` 0.3) plus the empirical p50 / p95 / p99 of that level's errors over
  the past week, per node;
- ``trailing_max``: the baseline rule, ``allocatable - max(use over the past
  max_hours) - margin``, never above what is unused now;
- ``none``: no co-location.

Each method's knobs (the reclaim policy: risk, margin, growth budget; trailing max: its margin)
are chosen on a *tuning* world (another seed): the most batch core-hours at a
violation rate at or below ``violation_target``; the figures are those of the
evaluation world.

**Tidal lending.** The lender is the world's ``online`` pool (its demand series, cores,
and nodes); the borrower a pool of as many nodes of the same SKU whose demand is the
lender's twelve hours later x ``borrower_scale`` — a day-peaking service and a
night-peaking batch pool (the synthetic fleet's own CPU pools peak 5 h apart, not
opposite). Every hour :class:`policy.lending.TidalLending` sees seasonal-naive p50 / p90
forecasts of both pools (the same hour a day earlier; p90 from the past week's
errors) and a snapshot with the running work as pods of ``lend_pod_cores`` packed on
the nodes; a ``lend_nodes`` moves the named nodes from the next hour on (their pods
evicted back into the lender), a ``return_nodes`` moves them back likewise (the hour
of a move, the node serves neither pool). Reported against no lending: node-hours lent,
lender pending pod-hours, borrower throughput (core-hours served) gained.

Hourly resolution: a violation is an hour, not a 5-minute step. Pure numpy + the
policy code; the world is the what-if's :class:`~pipelines.whatif.world.World`.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np

from predops.allocator.engine import Allocator
from predops.allocator.policies import make_policy
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec, Topology
from predops.core.actions import LendNodes, ReturnNodes, SetReclaimable
from predops.core.contracts import Forecast, Provenance, UsageForecast
from predops.pipelines.whatif.usage_model import model_quantiles
from predops.pipelines.whatif.world import World
from predops.policy.config import ReclaimConfig, SizingConfig
from predops.policy.fleet import FleetState, NodeState
from predops.policy.lending import Loan, TidalLending
from predops.policy.reclaim import NodeUsage, ReclaimPolicy

H = timedelta(hours=1)
LENDER, BORROWER = "online", "night"


@dataclass(frozen=True)
class SharingConfig:
    """Knobs of both experiments (see the module docstring)."""

    risks: tuple[float, ...] = (0.01, 0.05)
    grow_percents: tuple[float, ...] = (25.0, 100.0)
    violation_target: float = 0.01
    batch_pod_cores: float = 4.0
    level_alpha: float = 0.3
    max_hours: int = 24
    predops_margins: tuple[float, ...] = (0.0, 0.02, 0.05, 0.08, 0.12, 0.16, 0.2)
    baseline_margins: tuple[float, ...] = (0.0, 0.02, 0.05, 0.08, 0.12, 0.16, 0.2, 0.25, 0.3)
    borrower_scale: float = 1.8
    lend_pod_cores: float = 8.0


def _provenance(world: World, name: str) -> Provenance:
    return Provenance(name, "simulated", "whatif-sharing", world.cfg.start)


# ---------------------------------------------------------------------- co-location
@dataclass(frozen=True)
class OnlineUse:
    """Hourly online CPU use (cores) of the online pool's nodes: ``use[node, tick]``
    (NaN: the node was down or not sampled), and their allocatable cores."""

    specs: tuple[NodeSpec, ...]
    use: np.ndarray
    alloc: np.ndarray


def online_use(world: World) -> OnlineUse:
    """From the world's hourly telemetry, block by block (bounded memory)."""
    specs = tuple(n for n in world.topology.nodes if n.pool == LENDER)
    row = {n.node_id: i for i, n in enumerate(specs)}
    ticks = world.cfg.last_tick + 1
    use = np.full((len(specs), ticks), np.nan)
    alloc = np.array([n.cpu_milli / 1000 for n in specs])
    start_us = world.cfg.start.timestamp() * 1e6
    for block in world.sim.telemetry_blocks():
        b = block.select("node_id", "ts", "cpu_util_pct").drop_nulls()
        ids = b["node_id"].to_list()
        keep = np.array([i in row for i in ids], dtype=bool)
        if not keep.any():
            continue
        r = np.array([row[i] for i, k in zip(ids, keep, strict=True) if k], dtype=np.int64)
        ts = b["ts"].dt.epoch("us").to_numpy()[keep]
        t = np.rint((ts - start_us) / 3.6e9).astype(np.int64)
        ok = (t >= 0) & (t < ticks)
        use[r[ok], t[ok]] = b["cpu_util_pct"].to_numpy()[keep][ok] / 100 * alloc[r[ok]]
    return OnlineUse(specs, use, alloc)


def level_forecasts(u: OnlineUse, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``level[node, t]``: the exponentially weighted mean (``alpha``) of the node's use
    up to hour ``t - 1``; ``quantiles[node, t, 3]``: p50 / p95 / p99 of the hour's use
    over that level, from the level's errors over the previous week (per node)."""
    n, ticks = u.use.shape
    level = np.full((n, ticks), np.nan)
    for t in range(1, ticks):
        x, prev = u.use[:, t - 1], level[:, t - 1]
        level[:, t] = np.where(
            np.isnan(x), prev, np.where(np.isnan(prev), x, alpha * x + (1 - alpha) * prev)
        )
    err = u.use - level
    q = np.full((n, ticks, 3), np.nan)
    week = 24 * 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a node with no sample that week
        for t in range(week, ticks):
            q[:, t, :] = np.nanquantile(err[:, t - week : t], [0.5, 0.95, 0.99], axis=1).T
    return level, q


@dataclass
class Outcome:
    """One method's co-location figures over the evaluated hours."""

    batch_core_hours: float = 0.0
    batch_core_hours_evicted: float = 0.0
    batch_evictions: int = 0
    violation_node_hours: int = 0
    online_throttled_core_hours: float = 0.0
    node_hours: int = 0
    allocatable_core_hours: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        net = self.batch_core_hours - self.batch_core_hours_evicted
        return {
            "batch_core_hours": round(net, 1),
            "batch_core_hours_placed": round(self.batch_core_hours, 1),
            "batch_core_hours_lost_to_evictions": round(self.batch_core_hours_evicted, 1),
            "batch_evictions": self.batch_evictions,
            "online_throttled_node_hours": self.violation_node_hours,
            "online_throttled_core_hours": round(self.online_throttled_core_hours, 2),
            "violation_rate": round(self.violation_node_hours / max(1, self.node_hours), 5),
            "reclaimed_share_of_allocatable": round(
                net / self.allocatable_core_hours if self.allocatable_core_hours else 0.0, 4
            ),
            "node_hours": self.node_hours,
        }


def _run_hour(out: Outcome, u: OnlineUse, t: int, published_cores: np.ndarray, pod: float) -> None:
    """Batch pods on what is published, the hour's online use against what they left."""
    real = u.use[:, t]
    up = ~np.isnan(real)
    batch = np.floor(np.maximum(published_cores, 0.0) / pod + 1e-9) * pod
    batch = np.where(up, batch, 0.0)
    excess = np.where(up, real + batch - u.alloc, 0.0)
    bad = excess > 1e-9
    evicted = np.where(bad, np.minimum(np.ceil(excess / pod - 1e-9) * pod, batch), 0.0)
    out.batch_core_hours += float(batch.sum())
    out.batch_core_hours_evicted += float(evicted.sum())
    out.batch_evictions += int(np.round(evicted / pod).sum())
    out.violation_node_hours += int(bad.sum())
    out.online_throttled_core_hours += float(np.where(bad, excess, 0.0).sum())
    out.node_hours += int(up.sum())
    out.allocatable_core_hours += float(u.alloc[up].sum())


def ewma_quantiles(u: OnlineUse, alpha: float) -> np.ndarray:
    """The ``reclaim_ewma`` baseline's forecasts: :func:`level_forecasts` as absolute
    p50 / p95 / p99 cores, ``q[node, tick, 3]``."""
    level, err = level_forecasts(u, alpha)
    out: np.ndarray = level[:, :, None] + err
    return out


def run_predops(
    world: World,
    u: OnlineUse,
    fc: np.ndarray,
    cfg: ReclaimConfig,
    pod: float,
    name: str = "usage-model",
) -> Outcome:
    """The reclaim policy every hour over the evaluated ticks, on the forecasts
    ``fc[node, tick, 3]`` (p50 / p95 / p99 cores; NaN: none)."""
    out = Outcome()
    policy = ReclaimPolicy(cfg)
    topo = Topology.of(u.specs)
    prov = _provenance(world, name)
    published: dict[str, tuple[int, int | None]] = {}
    ids = [n.node_id for n in u.specs]
    for t in range(world.cfg.first_tick, world.cfg.last_tick):
        now = world.cfg.at(t)
        forecasts, usage = [], {}
        states = {}
        for i, node in enumerate(ids):
            last = u.use[i, t - 1]
            if math.isnan(u.use[i, t]):
                states[node] = NodeState(node, now, under_repair=True)
            if not math.isnan(last):
                usage[node] = NodeUsage(node, now, float(last))
            qs = fc[i, t]
            if np.isfinite(qs).all():
                p = np.maximum(np.sort(qs), 0.0)
                forecasts.append(
                    UsageForecast(
                        node, now, H, float(p[0]), float(p[1]), float(p[2]), provenance=prov
                    )
                )
        fleet = FleetState(topo, now, states)
        d = policy.decide(forecasts, usage, fleet, published, now)
        for a in d.actions:
            if isinstance(a, SetReclaimable):
                published[a.target] = (a.cpu_milli, a.memory_bytes)
        cores = np.array([published.get(n, (0, None))[0] / 1000 for n in ids])
        _run_hour(out, u, t, cores, pod)
    return out


def run_trailing_max(world: World, u: OnlineUse, hours: int, margin: float, pod: float) -> Outcome:
    out = Outcome()
    for t in range(world.cfg.first_tick, world.cfg.last_tick):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            peak = np.nanmax(u.use[:, max(0, t - hours) : t], axis=1)
        last = u.use[:, t - 1]
        m = margin * u.alloc
        value = np.minimum(u.alloc - peak - m, u.alloc - last - m)
        value = np.where(np.isnan(value), 0.0, np.maximum(value, 0.0))
        _run_hour(out, u, t, np.floor(value * 1000) / 1000, pod)
    return out


K = TypeVar("K", float, tuple[float, float, float])


def _best(results: Mapping[K, Outcome], target: float, cautious: K) -> K:
    """The knob with the most batch core-hours at a violation rate <= ``target``
    (``cautious`` when none reaches it)."""
    ok = [k for k, r in results.items() if r.to_dict()["violation_rate"] <= target]
    if not ok:
        return cautious
    return max(ok, key=lambda k: (results[k].to_dict()["batch_core_hours"], str(k)))


def _forecasts(world: World, u: OnlineUse, cfg: SharingConfig) -> dict[str, Any]:
    """Both forecasters' ``q[node, tick, 3]`` on one world, and the usage model's fit."""
    q, info = model_quantiles(
        [n.node_id for n in u.specs],
        u.use,
        u.alloc,
        world.cfg.start,
        world.cfg.first_tick,
        world.cfg.last_tick,
        seed=world.cfg.seed,
    )
    return {"predops": q, "reclaim_ewma": ewma_quantiles(u, cfg.level_alpha), "fit": info}


def _reclaim_grid(
    world: World, u: OnlineUse, fc: np.ndarray, cfg: SharingConfig, name: str
) -> dict[tuple[float, float, float], Outcome]:
    return {
        (r, m, g): run_predops(
            world,
            u,
            fc,
            ReclaimConfig(risk=r, margin_share=m, max_grow_percent=g),
            cfg.batch_pod_cores,
            name,
        )
        for r in cfg.risks
        for m in cfg.predops_margins
        for g in cfg.grow_percents
    }


def colocation(world: World, tune: World, cfg: SharingConfig) -> dict[str, Any]:
    """Knobs chosen on ``tune``, figures on ``world``; see the module docstring."""
    pod = cfg.batch_pod_cores
    target = cfg.violation_target
    cautious = (min(cfg.risks), max(cfg.predops_margins), min(cfg.grow_percents))
    tu = online_use(tune)
    tfc = _forecasts(tune, tu, cfg)
    tuned = {k: _reclaim_grid(tune, tu, tfc[k], cfg, k) for k in RECLAIMERS}
    knob = {k: _best(tuned[k], target, cautious) for k in RECLAIMERS}
    tuned_b = {m: run_trailing_max(tune, tu, cfg.max_hours, m, pod) for m in cfg.baseline_margins}
    mb = _best(tuned_b, target, max(cfg.baseline_margins))
    u = online_use(world)
    fc = _forecasts(world, u, cfg)

    def reclaim(k: str, margin: float) -> Outcome:
        r, _, g = knob[k]
        rc = ReclaimConfig(risk=r, margin_share=margin, max_grow_percent=g)
        return run_predops(world, u, fc[k], rc, pod, k)

    methods = {k: reclaim(k, knob[k][1]).to_dict() for k in RECLAIMERS}
    methods["trailing_max"] = run_trailing_max(world, u, cfg.max_hours, mb, pod).to_dict()
    none = Outcome()
    for t in range(world.cfg.first_tick, world.cfg.last_tick):
        _run_hour(none, u, t, np.zeros(len(u.specs)), pod)
    methods["none"] = none.to_dict()
    ours = methods["predops"]
    # the trade-off on the evaluation world itself (reported, never used to choose):
    # each method's knob swept, each baseline interpolated at predops' violation rate
    curves = {k: {m: _brief(reclaim(k, m)) for m in cfg.predops_margins} for k in RECLAIMERS}
    curves["trailing_max"] = {
        m: _brief(run_trailing_max(world, u, cfg.max_hours, m, pod)) for m in cfg.baseline_margins
    }
    matched = {
        k: _interpolate(curves[k], ours["violation_rate"]) for k in ("reclaim_ewma", "trailing_max")
    }
    known = {k: v for k, v in matched.items() if v}
    best = max(known, key=lambda k: known[k]) if known else None
    return {
        "nodes": len(u.specs),
        "tuned_on_seed": tune.cfg.seed,
        "violation_target": target,
        "usage_model": {"evaluation": fc["fit"], "tuning": tfc["fit"]},
        "knobs": {
            **{f"{k}_risk_margin_grow": list(knob[k]) for k in RECLAIMERS},
            "trailing_max_margin_share": mb,
            "trailing_max_hours": cfg.max_hours,
        },
        "tuning": {
            **{
                k: {
                    f"risk={a[0]},margin={a[1]},grow={a[2]}": _brief(v) for a, v in tuned[k].items()
                }
                for k in RECLAIMERS
            },
            "trailing_max": {f"margin={k}": _brief(v) for k, v in tuned_b.items()},
        },
        "methods": methods,
        "evaluation_curves": {
            k: {f"margin={m}": v for m, v in c.items()} for k, c in curves.items()
        },
        "baselines_at_predops_violation_rate": matched,
        "best_baseline_at_same_violation_rate": best,
        "batch_gain_vs_best_baseline_at_same_violation_rate": None
        if best is None
        else round(ours["batch_core_hours"] / known[best] - 1, 4),
    }


RECLAIMERS = ("predops", "reclaim_ewma")
"""The reclaim policy on the usage model's forecasts (``predops``) and on the earlier
simulator-side EWMA forecaster (``reclaim_ewma``, a baseline now)."""


def _interpolate(curve: Mapping[float, Mapping[str, float]], rate: float) -> float | None:
    """Batch core-hours of a knob sweep at violation rate ``rate`` (linear between the
    two nearest points of the sweep's upper frontier; None outside its range)."""
    pts = sorted((c["violation_rate"], c["batch_core_hours"]) for c in curve.values())
    frontier: list[tuple[float, float]] = []
    for v, b in pts:
        if frontier and v == frontier[-1][0]:
            frontier[-1] = (v, max(b, frontier[-1][1]))
        elif not frontier or b > frontier[-1][1]:
            frontier.append((v, b))
    if not frontier or not frontier[0][0] <= rate <= frontier[-1][0]:
        return None
    for (v0, b0), (v1, b1) in itertools.pairwise(frontier):
        if v0 <= rate <= v1:
            return round(b0 + (b1 - b0) * (rate - v0) / (v1 - v0), 1) if v1 > v0 else b1
    return frontier[0][1]


def _brief(o: Outcome) -> dict[str, float]:
    d = o.to_dict()
    return {"violation_rate": d["violation_rate"], "batch_core_hours": d["batch_core_hours"]}


# ---------------------------------------------------------------------- lending
def _seasonal(d: np.ndarray, t: int, horizon: int) -> list[tuple[float, float]]:
    """(p50, p90) of ``d`` for ticks ``t .. t + horizon - 1``: the value a day before the
    last known day's same hour, p90 from the past week's relative errors of that rule."""
    errs = [d[s] / d[s - 24] - 1 for s in range(max(24, t - 168), t) if d[s - 24] > 0]
    up = max(0.0, float(np.quantile(errs, 0.9))) if errs else 0.1
    out = []
    for h in range(horizon):
        back = 24 * (1 + h // 24)
        p50 = float(d[t + h - back])
        out.append((p50, p50 * (1 + up)))
    return out


def lending(world: World, cfg: SharingConfig) -> dict[str, Any]:
    """Tidal lending from the online pool to a night pool (module docstring)."""
    series = [i for i, s in enumerate(world.sim.demand.specs) if s.series_id == "online/cpu_cores"]
    d_l = world.sim.demand.value[series[0]].astype(float)
    d_b = np.concatenate([np.full(12, d_l[0]), d_l[:-12]]) * cfg.borrower_scale
    lender = [n for n in world.topology.nodes if n.pool == LENDER]
    borrower = [
        replace(n, node_id=f"night-{i}", pool=BORROWER, rack=f"night-r{i}")
        for i, n in enumerate(lender)
    ]
    cores = lender[0].cpu_milli / 1000
    pod = cfg.lend_pod_cores
    pods_per_node = int(cores // pod)
    policy = TidalLending(SizingConfig())
    prov = _provenance(world, "demand-seasonal")
    loans: dict[str, Loan] = {}
    transit: set[str] = set()
    tl: dict[str, float] = dict.fromkeys(
        (
            "node_hours_lent",
            "lender_pending_pod_hours",
            "borrower_served_core_hours",
            "lender_served_core_hours",
            "lender_pods_evicted",
            "lends",
            "returns",
        ),
        0.0,
    )
    base = dict.fromkeys(
        ("lender_pending_pod_hours", "borrower_served_core_hours", "lender_served_core_hours"), 0.0
    )
    n_l = len(lender)
    for t in range(world.cfg.first_tick, world.cfg.last_tick):
        now = world.cfg.at(t)
        home = [n for n in lender if n.node_id not in loans and n.node_id not in transit]
        away = [n for n in lender if n.node_id in loans and n.node_id not in transit]
        cap_l, cap_b = len(home) * cores, (len(borrower) + len(away)) * cores
        served_l, served_b = min(d_l[t], cap_l), min(d_b[t], cap_b)
        tl["lender_served_core_hours"] += served_l
        tl["borrower_served_core_hours"] += served_b
        tl["lender_pending_pod_hours"] += (d_l[t] - served_l) / pod
        tl["node_hours_lent"] += len(loans)
        base["lender_served_core_hours"] += min(d_l[t], n_l * cores)
        base["borrower_served_core_hours"] += min(d_b[t], n_l * cores)
        base["lender_pending_pod_hours"] += (d_l[t] - min(d_l[t], n_l * cores)) / pod
        transit = set()
        # the planning round at the end of the hour, for the next
        specs = [replace(n, pool=BORROWER) if n.node_id in loans else n for n in lender] + borrower
        snap = ClusterSnapshot(specs)
        alloc = Allocator(
            snap,
            make_policy("best_fit", rng=np.random.default_rng(0)),
            np.random.default_rng(0),
            explain=False,
        )
        _pack(
            snap, alloc, [snap.index_of(n.node_id) for n in home], served_l, pod, pods_per_node, "l"
        )
        b_rows = [snap.index_of(n.node_id) for n in [*away, *borrower]]
        _pack(snap, alloc, b_rows, served_b, pod, pods_per_node, "b")
        forecasts = []
        for sid, d in ((f"{LENDER}/cpu_cores", d_l), (f"{BORROWER}/cpu_cores", d_b)):
            for h, (p50, p90) in enumerate(_seasonal(d, t + 1, 24)):
                at = now + (h + 1) * H
                forecasts.append(
                    Forecast(sid, now, at, p50 * 0.9, p50, max(p50, p90), provenance=prov)
                )
        fleet = FleetState(Topology.of(specs), now, {})
        dec = policy.decide(forecasts, snap, fleet, list(loans.values()), now)
        for a in dec.actions:
            if a.not_before is not None and a.not_before > now + H:
                continue  # a later round decides again
            if isinstance(a, ReturnNodes):
                for node in a.node_ids:
                    loans.pop(node, None)
                    transit.add(node)
                tl["returns"] += 1
            elif isinstance(a, LendNodes):
                assert a.expires is not None
                for node in a.node_ids:
                    loans[node] = Loan(node, LENDER, BORROWER, a.expires)
                    transit.add(node)
                    tl["lender_pods_evicted"] += len(snap.pods_on[snap.index_of(node)])
                tl["lends"] += 1
    out = {k: round(v, 1) for k, v in tl.items()}
    out["borrower_throughput_gained_core_hours"] = round(
        tl["borrower_served_core_hours"] - base["borrower_served_core_hours"], 1
    )
    out["lender_pending_pod_hours_added"] = round(
        tl["lender_pending_pod_hours"] - base["lender_pending_pod_hours"], 1
    )
    return {
        "lender": LENDER,
        "borrower": BORROWER,
        "nodes_each": n_l,
        "borrower_scale": cfg.borrower_scale,
        "with_lending": out,
        "no_lending": {k: round(v, 1) for k, v in base.items()},
    }


def _pack(
    snap: ClusterSnapshot,
    alloc: Allocator,
    rows: list[int],
    cores: float,
    pod: float,
    per_node: int,
    tag: str,
) -> None:
    """``cores`` of running work as pods of ``pod`` cores, packed node by node."""
    n = math.ceil(cores / pod - 1e-9)
    k = 0
    for r in rows:
        for _ in range(per_node):
            if k >= n:
                return
            p = PodRequest(f"{tag}-{k}", cpu_milli=int(pod * 1000), memory_mib=1024)
            alloc.place(p, rows=np.array([r]))
            k += 1


def sharing(world: World, tune: World, cfg: SharingConfig | None = None) -> dict[str, Any]:
    """Both experiments on ``world``, co-location knobs tuned on ``tune``."""
    cfg = cfg or SharingConfig()
    return {
        "seed": world.cfg.seed,
        "colocation": colocation(world, tune, cfg),
        "lending": lending(world, cfg),
        "note": "co-location: predops is the reclaim policy on the per-node usage model "
        "(models/usage, fitted on the warm-up hours); reclaim_ewma the same policy on the "
        "earlier EWMA forecaster; hourly resolution",
    }
