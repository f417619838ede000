"""Elastic pool sizing: how many nodes each pool should hold.

Per pool, over the window ``now .. now + scale_up_lead + hold`` (capacity ordered now
arrives after the lead time and must cover the demand until the next sizing round,
``hold``; the engine is meant to run every hour):

1. the peak of the pool's p90 demand — GPU series summed per target time, likewise CPU
   cores (a sum of p90s overstates the p90 of the sum: the cautious side);
2. the nodes that peak needs, fragmentation included (:mod:`policy.packing`): the pods
   running now stay where the scheduler packed them on the live snapshot; only the
   increase over them is sampled from the pool's pod mix, placed by the allocator onto
   the free room of the busy nodes, and the rest packed onto new nodes by the
   allocator's estimator (:class:`~allocator.estimator.NodeCountEstimator`; at most
   ``max_packed_pods`` of them, the new nodes scaled by the resource of the rest) —
   cheap enough to run every hour;
3. plus a buffer for the failures in the window — the ``failure_service_level``
   quantile (0.9) of a Poisson count whose mean is the nodes' p_fail rescaled to the
   window and summed (failures of different nodes are rare and near independent; the
   Poisson bounds their Poisson-binomial count from above) — and the nodes already
   cordoned / in repair;
4. never below current usage (nodes hosting pods, plus those out of service): a
   prediction alone never takes away nodes that run work;
5. a scale-in waits ``scale_in_cooldown`` after the last scale-up (the last resize
   when the pool state does not tell them apart); changes within ``deadband_nodes`` are
   not worth an action;
6. a scale-in names the nodes to remove first (``evidence["scale_in_order"]``): the
   idle nodes in service, the likeliest to fail in the window first (a node that fails
   out of service interrupts nothing), nodes without a score after the scored ones.

When the caller hands in the recent measured demand (``method == "observed"``
forecasts, :mod:`policy.anchoring`), the first step after now is the demand measured
now plus the p90 of the trailing week's hour-to-hour changes instead of the model's
p90 (``anchor_history``; a persistence forecast beat the forecaster's next hour on
every pool of the simulated fleet).

Series ids are ``<pool>/gpus/<gpu_model>`` and ``<pool>/cpu_cores`` (the demand
contract's series naming). Lending between pools with opposite peaks: :mod:`policy.lending`.

Step 2 is a function of the snapshot, the pool's nodes, the two peaks and the config
alone. A caller that keeps the snapshot between rounds (the incremental cycle) hands in
a ``memo`` bound to that snapshot, and an unchanged pool with unchanged peaks reads its
node count from it instead of packing again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from predops.allocator.estimator import Estimate, NodeCountEstimator, sample_pods
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, NodeSpec
from predops.core.actions import ResizePool, Skip, SkipReason
from predops.core.contracts import FailureRisk, Forecast, Provenance
from predops.policy.anchoring import ANCHORED, anchor_next_hour
from predops.policy.config import SizingConfig
from predops.policy.disruption import Decisions, latest_risk
from predops.policy.fleet import FleetState
from predops.policy.forecast_window import latest_in_window
from predops.policy.packing import LiveFill

HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class PoolDemand:
    """p10/p50/p90 of a pool's GPU and CPU-core demand per target time."""

    gpus: dict[datetime, tuple[float, float, float]]
    cpu_cores: dict[datetime, tuple[float, float, float]]
    forecasts: tuple[Forecast, ...]


def parse_series(series_id: str) -> tuple[str, str] | None:
    """``pool/gpus/model`` -> (pool, 'gpus'); ``pool/cpu_cores`` -> (pool, 'cpu_cores')."""
    parts = series_id.split("/")
    if len(parts) >= 2 and parts[1] in ("gpus", "cpu_cores"):
        return parts[0], parts[1]
    return None


def pool_demand(
    forecasts: Sequence[Forecast], start: datetime, end: datetime
) -> dict[str, PoolDemand]:
    """Forecasts valid in ``[start, end]``, summed per pool, resource and target time.
    When a series has several forecasts for one target time the latest issue wins."""
    latest = latest_in_window(forecasts, start, end, lambda s: parse_series(s) is not None)
    out: dict[str, PoolDemand] = {}
    for (sid, at), f in sorted(latest.items()):
        parsed = parse_series(sid)
        assert parsed is not None
        pool, res = parsed
        pd = out.setdefault(pool, PoolDemand({}, {}, ()))
        table = pd.gpus if res == "gpus" else pd.cpu_cores
        a, b, c = table.get(at, (0.0, 0.0, 0.0))
        table[at] = (a + f.p10, b + f.p50, c + f.p90)
        out[pool] = PoolDemand(pd.gpus, pd.cpu_cores, (*pd.forecasts, f))
    return out


def _peak(table: Mapping[datetime, tuple[float, float, float]]) -> tuple[float, datetime | None]:
    if not table:
        return 0.0, None
    at = max(sorted(table), key=lambda t: table[t][2])
    return table[at][2], at


def scale_in_order(idle: Sequence[str], p_window: Mapping[str, float]) -> list[str]:
    """The idle nodes ``idle`` in the order to remove them: the highest probability of
    failing in the window first, unscored nodes last, ties by node id."""
    return sorted(idle, key=lambda n: (n not in p_window, -p_window.get(n, 0.0), n))


def window_probability(p: float, horizon: timedelta, window: timedelta) -> float:
    """p_fail over ``horizon`` rescaled to ``window`` (a constant hazard in between)."""
    if p >= 1.0:
        return 1.0
    return float(1.0 - (1.0 - p) ** (window / horizon))


def poisson_quantile(mean: float, level: float) -> int:
    """The smallest ``k`` with ``P(N <= k) >= level`` for ``N ~ Poisson(mean)``."""
    if not (math.isfinite(mean) and mean >= 0) or not 0.0 < level < 1.0:
        raise ValueError(f"poisson_quantile: mean {mean} must be >= 0, level {level} in (0, 1)")
    if mean == 0:
        return 0
    k, cdf = 0, 0.0
    while True:  # pmf in log space: no underflow for a large mean
        cdf += math.exp(-mean + k * math.log(mean) - math.lgamma(k + 1))
        if cdf >= level - 1e-12:
            return k
        k += 1


def _templates(nodes: Sequence[NodeSpec]) -> list[NodeSpec]:
    """One template node per SKU of ``nodes``, the most common SKU first."""
    counts = Counter(n.sku or n.node_id for n in nodes)
    templates: dict[str, NodeSpec] = {}
    for n in nodes:
        templates.setdefault(n.sku or n.node_id, n)
    return [
        replace(templates[s], node_id=f"template-{s}", sku=s)
        for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def _resource_ratio(pods: Sequence[PodRequest], part: Sequence[PodRequest]) -> float:
    """How many times ``part`` the pods ``pods`` are, by GPUs (CPU cores when none)."""
    if len(part) == len(pods):
        return 1.0
    gpu = sum(p.total_gpu_milli for p in part)
    if gpu > 0:
        return sum(p.total_gpu_milli for p in pods) / gpu
    cpu = sum(p.cpu_milli for p in part)
    return sum(p.cpu_milli for p in pods) / cpu if cpu > 0 else 1.0


class PoolSizingPolicy:
    """Node counts per pool; see the module docstring."""

    def __init__(self, config: SizingConfig, memo: MutableMapping[str, Any] | None = None) -> None:
        """``memo``: node counts already worked out on this very snapshot (see the
        module docstring); entries are added to it."""
        self.config = config
        self.memo = memo

    def decide(
        self,
        forecasts: Sequence[Forecast],
        risks: Sequence[FailureRisk],
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        now: datetime,
    ) -> Decisions:
        cfg = self.config
        out = Decisions()
        window = cfg.scale_up_lead + cfg.hold
        anchored = anchor_next_hour(forecasts, now, cfg.anchor_history, cfg.anchor_min_changes)
        demand = pool_demand(anchored, now, now + window)
        by_risk = latest_risk(risks)
        pools = fleet.pool_nodes()
        pods_by_node: dict[str, list[PodRequest]] = {}
        for pod_id in sorted(snapshot.placements):
            pl = snapshot.placements[pod_id]
            pods_by_node.setdefault(snapshot.node_ids[pl.node], []).append(pl.pod)
        used_prov: dict[tuple[str, str, str], Provenance] = {}
        for pool in sorted(pools):
            nodes = pools[pool]
            pd = demand.get(pool)
            if pd is None:
                out.skips.append(
                    Skip(
                        "resize_pool", pool, SkipReason.NO_FORECAST, "no demand forecast in window"
                    )
                )
                continue
            bad = self._bad_forecast(pd.forecasts, now)
            if bad is not None:
                out.skips.append(Skip("resize_pool", pool, bad[0], bad[1]))
                continue
            for f in pd.forecasts:
                assert f.provenance is not None
                p = f.provenance
                used_prov.setdefault((p.model_name, p.model_version, p.feature_set_hash), p)
            self._size(pool, nodes, pd, snapshot, pods_by_node, by_risk, fleet, now, window, out)
        out.provenance.extend(used_prov[k] for k in sorted(used_prov))
        return out

    def _bad_forecast(
        self, forecasts: Sequence[Forecast], now: datetime
    ) -> tuple[SkipReason, str] | None:
        for f in forecasts:
            if f.provenance is None:
                return SkipReason.NO_PROVENANCE, f"forecast {f.series_id} has no provenance"
            if now - f.issued_at > self.config.max_forecast_age or f.issued_at > now + HOUR:
                return SkipReason.STALE_DATA, (
                    f"forecast {f.series_id} issued at {f.issued_at.isoformat()} is not current"
                )
        return None

    def nodes_for(
        self,
        snapshot: ClusterSnapshot,
        nodes: Sequence[NodeSpec],
        mix: Sequence[PodRequest],
        gpus: float,
        cpu_cores: float,
    ) -> tuple[int, dict[str, Any]]:
        """Nodes of the pool that ``gpus`` GPUs and ``cpu_cores`` cores of demand need,
        given the pods ``mix`` the pool runs now on ``snapshot`` (see :class:`LiveFill`).
        With a memo (bound to ``snapshot``), read from it when worked out before."""
        if self.memo is None:
            return self._nodes_for(snapshot, nodes, mix, gpus, cpu_cores)
        h = hashlib.sha256(repr(self.config).encode())
        h.update("\0".join(n.node_id for n in nodes).encode())
        key = f"{h.hexdigest()}:{gpus!r}:{cpu_cores!r}"
        hit = self.memo.get(key)
        if hit is not None:
            need, evidence = hit
            return int(need), json.loads(evidence)
        need, evidence = self._nodes_for(snapshot, nodes, mix, gpus, cpu_cores)
        self.memo[key] = [need, json.dumps(evidence, sort_keys=True)]
        return need, evidence

    def _nodes_for(
        self,
        snapshot: ClusterSnapshot,
        nodes: Sequence[NodeSpec],
        mix: Sequence[PodRequest],
        gpus: float,
        cpu_cores: float,
    ) -> tuple[int, dict[str, Any]]:
        fill = LiveFill.of(snapshot, nodes)
        if gpus <= fill.gpus and cpu_cores <= fill.cpu_cores:
            # the demand fits in what runs now: the busy nodes at their current fill
            need = fill.shrunk(gpus, cpu_cores)
            return need, {"method": "live_fill", **fill.to_dict(), "total_nodes": need}
        grow_g, grow_c = max(0.0, gpus - fill.gpus), max(0.0, cpu_cores - fill.cpu_cores)
        skus = _templates(nodes)
        batch = PodBatch.of(list(mix)) if mix else None
        has_gpu_pods = batch is not None and bool((batch.num_gpu > 0).any())
        has_cpu_pods = batch is not None and bool(
            ((batch.num_gpu == 0) & (batch.cpu_milli > 0)).any()
        )
        if batch is None or (grow_g > 0 and not has_gpu_pods):
            # No pod mix to sample: divide by the capacity of the most common SKU.
            t = skus[0]
            need = max(
                math.ceil(gpus / t.gpus) if gpus > 0 and t.gpus else 0,
                math.ceil(cpu_cores / (t.cpu_milli / 1000)) if cpu_cores > 0 else 0,
            )
            return need, {"method": "capacity_division", "sku": t.sku, "total_nodes": need}
        if not has_cpu_pods:
            grow_c = 0.0  # the GPU pods sampled bring their CPU with them
        rng = np.random.default_rng(self.config.seed)
        growth = sample_pods(batch, rng, gpu_milli=grow_g * GPU_MILLI, cpu_milli=grow_c * 1000)
        left = fill.place(snapshot, growth, self.config.packing_policy, self.config.seed)
        # Pack at most ``max_packed_pods`` of them (in the sample's random order) and
        # scale the new nodes by the binding resource of all over the packed ones.
        packed = left[: self.config.max_packed_pods]
        est: Estimate = NodeCountEstimator(
            skus, self.config.packing_policy, seed=self.config.seed, order="random"
        ).estimate(PodBatch.of(packed))
        scale = _resource_ratio(left, packed)
        new_nodes = math.ceil(est.total_nodes * scale - 1e-9)
        need = len(fill.busy_rows) + new_nodes
        evidence = {
            "method": "allocator_packing",
            **fill.to_dict(),
            "growth_gpus": round(grow_g, 4),
            "growth_cpu_cores": round(grow_c, 4),
            "growth_pods": len(growth),
            "growth_on_busy_nodes": len(growth) - len(left),
            **est.to_dict(),
            "packed_pods": len(packed),
            "new_nodes": new_nodes,
            "total_nodes": need,
        }
        return need, evidence

    def _size(
        self,
        pool: str,
        nodes: Sequence[NodeSpec],
        pd: PoolDemand,
        snapshot: ClusterSnapshot,
        pods_by_node: Mapping[str, Sequence[PodRequest]],
        by_risk: Mapping[str, FailureRisk],
        fleet: FleetState,
        now: datetime,
        window: timedelta,
        out: Decisions,
    ) -> None:
        cfg = self.config
        gpu_peak, gpu_at = _peak(pd.gpus)
        cpu_peak, cpu_at = _peak(pd.cpu_cores)
        mix = [p for n in nodes for p in pods_by_node.get(n.node_id, ())]
        needed, estimate = self.nodes_for(snapshot, nodes, mix, gpu_peak, cpu_peak)
        p_window = {
            n.node_id: window_probability(r.p_fail, r.horizon, window)
            for n in nodes
            if (r := by_risk.get(n.node_id)) is not None and r.provenance is not None
        }
        exp_fail = sum(p_window.values(), 0.0)
        out_of_service = sorted(
            n.node_id
            for n in nodes
            if (st := fleet.nodes.get(n.node_id)) is not None and st.disrupted
        )
        busy = {n.node_id for n in nodes if pods_by_node.get(n.node_id)}
        floor = len(busy | set(out_of_service))
        fail_buffer = poisson_quantile(exp_fail, cfg.failure_service_level)
        target = needed + fail_buffer + len(out_of_service)
        current = len(nodes)
        to = max(target, floor)
        evidence: dict[str, Any] = {
            "window_h": window / HOUR,
            "p90_gpus_peak": round(gpu_peak, 4),
            "p90_gpus_peak_at": gpu_at,
            "p90_cpu_cores_peak": round(cpu_peak, 4),
            "p90_cpu_cores_peak_at": cpu_at,
            "allocator": estimate,
            "nodes_for_demand": needed,
            "expected_failures": round(exp_fail, 4),
            "failure_buffer": fail_buffer,
            "anchored": sorted(f.series_id for f in pd.forecasts if f.method == ANCHORED),
            "out_of_service": len(out_of_service),
            "usage_floor": floor,
            "target": target,
            "current": current,
        }
        delta = to - current
        if abs(delta) <= cfg.deadband_nodes:
            why = SkipReason.USAGE_FLOOR if target < floor else SkipReason.NOT_NEEDED
            detail = f"hold {current} nodes (target {target}, usage floor {floor})"
            out.skips.append(Skip("resize_pool", pool, why, detail))
            return
        if delta < 0:
            last = fleet.pools.get(pool)
            last_at = None
            if last is not None:
                last_at = last.last_scale_up_at or last.last_resize_at
            if last_at is not None and now - last_at < cfg.scale_in_cooldown:
                detail = (
                    f"last scale-up at {last_at.isoformat()}; scale-in waits "
                    f"{cfg.scale_in_cooldown}"
                )
                out.skips.append(Skip("resize_pool", pool, SkipReason.COOLDOWN, detail))
                return
        if delta < 0:
            taken = busy | set(out_of_service)
            idle = [n.node_id for n in nodes if n.node_id not in taken]
            evidence["scale_in_order"] = scale_in_order(idle, p_window)
        template = nodes[0]
        node_h = cfg.costs.hourly(template.gpus, template.cpu_milli / 1000) * (cfg.hold / HOUR)
        reason = (
            f"p90 peak {gpu_peak:g} GPUs / {cpu_peak:g} cores in the next {window / HOUR:g} h "
            f"needs {needed} nodes by packing, + {fail_buffer} for failures "
            f"(expected {exp_fail:.2f}) + {len(out_of_service)} out of service"
        )
        if to != target:
            reason += f"; held at usage floor {floor}"
        out.actions.append(
            ResizePool(
                target=pool,
                reason=reason,
                evidence=evidence,
                from_nodes=current,
                to_nodes=to,
                not_before=now,
                expires=now + cfg.scale_up_lead + HOUR,
                # scale-up: pays for capacity to avoid pending work; scale-in: saves it
                expected_benefit=round(max(0, -delta) * node_h, 4),
                expected_cost=round(max(0, delta) * node_h, 4),
            )
        )
