"""Reclaimable capacity: how much of each node batch (best-effort) work may use.

Per node, every planning round:

    batch = min(allocatable - peak - margin,     # the forecast peak of online usage
                allocatable - used_now - margin,  # never above what is unused now
                max_share x allocatable), floored at 0

``peak`` is the node's :class:`~core.contracts.UsageForecast` quantile exceeded with
probability ``risk`` over the forecast window (p99 at the default 1 %), ``used_now``
the high-priority usage measured now, ``margin`` the larger of ``margin_share`` of
allocatable and ``margin_cores``. The same for memory when both the forecast and the
measurement carry it (None otherwise: the actuator then publishes 0).

- **Shrinks at once**: a value below the one published is always an action, whatever
  its size, never held back by a budget — usage rising now lowers ``allocatable -
  used_now`` in the very round that sees it.
- **Grows carefully**: an increase smaller than the deadband is not worth an action
  (``not_needed``), and at most ``max_grow_percent`` of a pool's nodes may grow per
  round (``budget_exhausted``: the node keeps its lower value).
- **Nothing blind**: a node cordoned, draining or in repair, or without a current usage
  measurement or a current forecast covering the round, is set to 0 (when something
  else is published) with the reason in the evidence.

The published values come in as ``published`` (node -> (cpu_milli, memory_bytes));
a node missing from it is treated as unknown and always gets an action. Pure: no I/O,
no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from predops.allocator.topology import NodeSpec
from predops.core.actions import SetReclaimable, Skip, SkipReason
from predops.core.contracts import Provenance, UsageForecast, _require_utc
from predops.policy.config import ReclaimConfig
from predops.policy.disruption import Decisions
from predops.policy.fleet import FleetState

MIB = 1 << 20
KIND = SetReclaimable.kind


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """High-priority (online) usage of one node measured at ``at``: cores, and bytes of
    memory when known."""

    node_id: str
    at: datetime
    cpu_cores: float
    memory_bytes: float | None = None

    def __post_init__(self) -> None:
        _require_utc("at", self.at)
        for name in ("cpu_cores", "memory_bytes"):
            v = getattr(self, name)
            if v is not None and (not math.isfinite(v) or v < 0):
                raise ValueError(f"node usage {self.node_id}: {name} must be finite and >= 0")


@dataclass(frozen=True, slots=True)
class Reclaim:
    """One node's decision: the value, what bound it, and the inputs (for evidence)."""

    cpu_milli: int
    memory_bytes: int | None
    evidence: dict[str, Any]


def reclaimable(
    spec: NodeSpec,
    forecast: UsageForecast | None,
    usage: NodeUsage | None,
    cfg: ReclaimConfig,
    now: datetime,
    *,
    disrupted: bool = False,
) -> Reclaim:
    """The batch capacity of one node (module docstring); 0 with ``why`` in the
    evidence when an input is missing or stale."""
    alloc = spec.cpu_milli / 1000
    why = _withheld(spec, forecast, usage, cfg, now, disrupted)
    if why is not None:
        return Reclaim(0, 0, {"withheld": why, "allocatable_cores": alloc})
    assert forecast is not None and usage is not None
    margin = max(cfg.margin_share * alloc, cfg.margin_cores)
    peak = forecast.cpu_at(cfg.risk)
    bounds = {
        "forecast": alloc - peak - margin,
        "unused_now": alloc - usage.cpu_cores - margin,
        "max_share": cfg.max_share * alloc,
    }
    binding = min(bounds, key=lambda k: (bounds[k], k))
    cpu_milli = max(0, math.floor(bounds[binding] * 1000 + 1e-9))
    evidence: dict[str, Any] = {
        "allocatable_cores": alloc,
        "used_now_cores": round(usage.cpu_cores, 4),
        "used_at": usage.at.isoformat(),
        "peak_cores": round(peak, 4),
        "risk": cfg.risk,
        "window_h": forecast.window.total_seconds() / 3600,
        "forecast_as_of": forecast.as_of.isoformat(),
        "margin_cores": round(margin, 4),
        "bound": binding,
    }
    memory = _memory(spec, forecast, usage, cfg, evidence)
    return Reclaim(cpu_milli, memory, evidence)


def _withheld(
    spec: NodeSpec,
    forecast: UsageForecast | None,
    usage: NodeUsage | None,
    cfg: ReclaimConfig,
    now: datetime,
    disrupted: bool,
) -> str | None:
    if disrupted:
        return "node cordoned, draining or in repair"
    if usage is None:
        return "no usage measurement"
    if now - usage.at > cfg.max_usage_age or usage.at > now + cfg.max_usage_age:
        return f"usage measured at {usage.at.isoformat()} is not current"
    if forecast is None:
        return "no usage forecast"
    if now - forecast.as_of > cfg.max_forecast_age or forecast.as_of > now + cfg.hold:
        return f"usage forecast as of {forecast.as_of.isoformat()} is not current"
    if forecast.as_of + forecast.window < now + cfg.hold:
        return "the usage forecast's window ends before the next planning round"
    if spec.cpu_milli <= 0:
        return "no allocatable CPU"
    return None


def _memory(
    spec: NodeSpec,
    forecast: UsageForecast,
    usage: NodeUsage,
    cfg: ReclaimConfig,
    evidence: dict[str, Any],
) -> int | None:
    peak = forecast.memory_at(cfg.risk)
    if peak is None or usage.memory_bytes is None or spec.memory_mib <= 0:
        return None
    alloc = spec.memory_mib * MIB
    margin = cfg.margin_share * alloc
    value = min(alloc - peak - margin, alloc - usage.memory_bytes - margin, cfg.max_share * alloc)
    evidence["memory_peak_bytes"] = round(peak)
    evidence["memory_used_now_bytes"] = round(usage.memory_bytes)
    return max(0, math.floor(value))


class ReclaimPolicy:
    """A ``set_reclaimable`` candidate per node of the fleet; see the module docstring."""

    def __init__(self, config: ReclaimConfig) -> None:
        self.config = config

    def decide(
        self,
        forecasts: Sequence[UsageForecast],
        usage: Mapping[str, NodeUsage],
        fleet: FleetState,
        published: Mapping[str, tuple[int, int | None]],
        now: datetime,
    ) -> Decisions:
        cfg = self.config
        out = Decisions()
        latest: dict[str, UsageForecast] = {}
        for fc in forecasts:
            if fc.as_of <= now + cfg.hold and (
                fc.node_id not in latest or fc.as_of > latest[fc.node_id].as_of
            ):
                latest[fc.node_id] = fc
        used_prov: dict[tuple[str, str, str], Provenance] = {}
        for pool, nodes in sorted(fleet.pool_nodes().items()):
            grow_left = max(1, math.floor(len(nodes) * cfg.max_grow_percent / 100))
            grown = 0
            for spec in sorted(nodes, key=lambda n: n.node_id):
                node = spec.node_id
                st = fleet.nodes.get(node)
                f = latest.get(node)
                r = reclaimable(
                    spec,
                    f,
                    usage.get(node),
                    cfg,
                    now,
                    disrupted=st is not None and st.disrupted,
                )
                before = published.get(node)
                change = _change(r, before, cfg)
                if change == "same":
                    detail = f"{r.cpu_milli} m published already"
                    if "withheld" in r.evidence:
                        detail += f" ({r.evidence['withheld']})"
                    out.skips.append(Skip(KIND, node, SkipReason.NOT_NEEDED, detail))
                    continue
                if change == "small":
                    detail = f"increase {before[0] if before else 0} -> {r.cpu_milli} m "
                    detail += "within the deadband"
                    out.skips.append(Skip(KIND, node, SkipReason.NOT_NEEDED, detail))
                    continue
                if change == "grow":
                    if grown >= grow_left:
                        detail = f"{grow_left} node(s) of pool {pool} grew this round already"
                        out.skips.append(Skip(KIND, node, SkipReason.BUDGET_EXHAUSTED, detail))
                        continue
                    grown += 1
                if f is not None and f.provenance is not None and "withheld" not in r.evidence:
                    p = f.provenance
                    used_prov.setdefault((p.model_name, p.model_version, p.feature_set_hash), p)
                out.actions.append(self._action(node, r, before, now))
            out.budgets_used[f"reclaim_grow:{pool}"] = grown
        out.provenance.extend(used_prov[k] for k in sorted(used_prov))
        return out

    def _action(
        self, node: str, r: Reclaim, before: tuple[int, int | None] | None, now: datetime
    ) -> SetReclaimable:
        cfg = self.config
        ev = {**r.evidence, "published_before": list(before) if before else None}
        cores = r.cpu_milli / 1000
        if "withheld" in r.evidence:
            reason = f"reclaim nothing: {r.evidence['withheld']}"
        else:
            reason = (
                f"{cores:g} of {ev['allocatable_cores']:g} cores for batch work: bound by "
                f"{ev['bound']} (p{_pct(cfg.risk)} peak {ev['peak_cores']:g}, used now "
                f"{ev['used_now_cores']:g}, margin {ev['margin_cores']:g})"
            )
        if before is not None and r.cpu_milli < before[0]:
            reason += f"; shrunk from {before[0]} m"
        hours = cfg.hold.total_seconds() / 3600
        return SetReclaimable(
            target=node,
            cpu_milli=r.cpu_milli,
            memory_bytes=r.memory_bytes,
            reason=reason,
            evidence=ev,
            not_before=now,
            expires=now + cfg.expires_after,
            expected_benefit=round(cores * hours * cfg.costs.cpu_core_hour, 6),
            expected_cost=0.0,
        )


def _pct(risk: float) -> int:
    return round((1 - risk) * 100)


def _change(r: Reclaim, before: tuple[int, int | None] | None, cfg: ReclaimConfig) -> str:
    """'same', 'small' (an increase under the deadband), 'grow' or 'shrink'."""
    if before is None:
        return "grow" if r.cpu_milli > 0 else "shrink"
    cpu0, mem0 = before
    mem_new, mem_old = r.memory_bytes or 0, mem0 or 0
    if r.cpu_milli < cpu0 or mem_new < mem_old:
        return "shrink"
    if r.cpu_milli == cpu0 and mem_new == mem_old:
        return "same"
    small_cpu = r.cpu_milli - cpu0 < cfg.grow_deadband_milli
    small_mem = mem_new - mem_old < cfg.grow_deadband_mib * MIB
    return "small" if small_cpu and small_mem else "grow"
