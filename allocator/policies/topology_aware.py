"""Topology-aware scoring: NUMA, NVLink and rack fit on top of another policy.

Each candidate node gets a topology fit in [0, 1], the mean of the terms that apply:

- NUMA: the pod's GPUs (and CPU) fit inside one NUMA node;
- NVLink: a multi-GPU pod's GPUs fit inside one NVLink domain;
- rack: share of the pod's already placed gang siblings in the node's rack.

The score is the base policy's score rescaled to 0-100 over the candidates plus
``weight * 100 * fit``, so with the default weight topology decides between nodes the
base policy rates within ``weight * 100`` points. Device picking is asked to keep GPUs
local (``prefers_locality``).
"""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, Policy, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI


def _group_max(
    usable: np.ndarray, groups: np.ndarray, n_groups: int, group_ok: np.ndarray | None = None
) -> np.ndarray:
    """Per row, the most usable GPUs inside one group (ids 0..n_groups-1); groups where
    ``group_ok[row, id]`` is False count as empty."""
    best = np.zeros(len(usable), dtype=np.int64)
    for gid in range(n_groups):
        count = (usable & (groups == gid)).sum(axis=1)
        if group_ok is not None:
            count = np.where(group_ok[:, gid], count, 0)
        best = np.maximum(best, count)
    return best


def topology_fit(
    snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
) -> np.ndarray:
    """Topology fit in [0, 1] of each row for ``pod`` (see the module docstring)."""
    terms: list[np.ndarray] = []
    if pod.num_gpu:
        free = snap.gpu_free[rows]
        usable = free >= pod.gpu_milli if pod.is_share else free == GPU_MILLI
        numa = snap.gpu_numa[rows].astype(np.int64)
        numa_cpu_ok = snap.numa_cpu_free[rows] >= pod.cpu_milli
        n_numa = numa_cpu_ok.shape[1]
        terms.append(_group_max(usable, numa, n_numa, numa_cpu_ok) >= pod.num_gpu)
        if pod.num_gpu > 1:
            nvl = snap.gpu_nvl[rows].astype(np.int64)
            n_nvl = int(nvl.max()) + 1 if nvl.size else 0
            terms.append(_group_max(usable, nvl, n_nvl) >= pod.num_gpu)
    elif pod.cpu_milli:
        terms.append((snap.numa_cpu_free[rows] >= pod.cpu_milli).any(axis=1))
    if ctx.gang_rows:
        sib_racks = snap.rack[np.array(ctx.gang_rows, dtype=np.int64)]
        racks = snap.rack[rows]
        terms.append((racks[:, None] == sib_racks[None, :]).mean(axis=1))
    if not terms:
        return np.zeros(len(rows))
    return np.asarray(np.mean([t.astype(np.float64) for t in terms], axis=0))


class TopologyAware(PolicyBase):
    """``base`` (BestFit by default) plus a NUMA / NVLink / rack fit bonus."""

    name = "topology_aware"
    prefers_locality = True

    def __init__(self, base: Policy | None = None, weight: float = 0.25) -> None:
        from predops.allocator.policies.best_fit import BestFit

        self.base: Policy = base if base is not None else BestFit()
        self.weight = weight
        self.name = f"topology_aware({self.base.name})"

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        base = self.base.score(snap, pod, rows, ctx)
        s = base.scores.astype(np.float64)
        lo, hi = (float(s.min()), float(s.max())) if len(s) else (0.0, 0.0)
        norm = (s - lo) / (hi - lo) * 100.0 if hi > lo else np.full(len(s), 100.0)
        fit = topology_fit(snap, pod, rows, ctx)
        return NodeScores(
            norm + self.weight * 100.0 * fit, gpu=base.gpu, unit="base 0-100 + topology bonus"
        )

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        fit = topology_fit(snap, pod, np.array([row]), PlacementContext())[0]
        return f"{self.base.describe(snap, pod, row)}; topology fit {fit:.2f}"
