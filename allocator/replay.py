"""Trace replay the way the FGD paper's artifact evaluates a policy.

1. The workload (an openb pod list) arrives in a random order drawn from the seed.
2. It is inflated (or thinned) until the GPU request that has arrived reaches
   ``tune`` x the cluster's GPU capacity: pods sampled uniformly with replacement from
   the workload are appended until one more would overshoot (tune = 1.3 in the paper;
   the artifact compares the next pod's *per-GPU* request there, we compare its total —
   a difference of at most one pod at the very end).
3. Pods are placed one by one and never leave. After each arrival the allocated and
   the arrived milli-GPU are recorded.
4. :meth:`ReplayResult.curve` reports the GPU allocation ratio at each whole percent of
   arrived load as the artifact's analysis does: the mean ratio (each rounded to 0.01
   %) over the arrivals whose arrived load rounds to that percent, or over the
   neighbouring percents when none does.

Fragmentation is measured against the workload's own pod-type distribution, which is
also what FGD optimises. The seed drives two independent streams: the arrival order
(identical for every policy given a seed) and the allocator's tie-breaks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.engine import Allocator
from predops.allocator.fragmentation import FragmentationIndex
from predops.allocator.policies import Policy, make_policy
from predops.allocator.requests import PodBatch
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, Topology

DEFAULT_TUNE = 1.3
DEFAULT_POPULARITY = 0.95


def arrival_order(
    workload: PodBatch, capacity_milli: int, tune: float, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """Row indices of ``workload`` in arrival order, inflated / thinned to ``tune`` x
    ``capacity_milli``; returns (order, number of rows that are original pods)."""
    n = len(workload)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    req = workload.total_gpu_milli
    order = rng.permutation(n)
    target = tune * capacity_milli
    total = int(req.sum())
    if total > target:
        keep = list(order.tolist())
        while total > target and keep:
            j = int(rng.integers(len(keep)))
            total -= int(req[keep.pop(j)])
        return np.array(keep, dtype=np.int64), len(keep)
    extra: list[np.ndarray] = []
    while True:
        draw = rng.integers(n, size=4096)
        cum = total + np.cumsum(req[draw])
        over = np.flatnonzero(cum > target)
        if over.size:
            extra.append(draw[: over[0]])
            break
        extra.append(draw)
        total = int(cum[-1])
    return np.concatenate([order, *extra]).astype(np.int64), n


def discretize(
    arrived_milli: np.ndarray, value_pct: np.ndarray, total_gpus: int, points: range = range(0, 131)
) -> dict[int, float]:
    """Mean of ``value_pct`` (rounded to 0.01) per whole percent of arrived load."""
    arrive = np.round(arrived_milli / total_gpus / 10.0)
    vals = np.round(value_pct, 2)
    out: dict[int, float] = {}
    for x in points:
        sel = arrive == x
        if not sel.any():
            sel = (arrive >= x - 1) & (arrive <= x + 1)
            if not sel.any():
                continue
        out[x] = round(float(vals[sel].mean()), 2)
    return out


@dataclass(frozen=True)
class ReplayResult:
    """Per-arrival series of one replay and its summary."""

    policy: str
    seed: int
    tune: float
    total_gpus: int
    arrived_milli: np.ndarray
    used_milli: np.ndarray
    frag_milli: np.ndarray
    idle_milli: np.ndarray
    pods_original: int
    placed: int
    unplaced_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def pods_arrived(self) -> int:
        return len(self.arrived_milli)

    def curve(self, points: range = range(0, 131)) -> dict[int, float]:
        """GPU allocation ratio (%) per percent of arrived load (the artifact's CSV)."""
        return discretize(
            self.arrived_milli, self.used_milli / self.total_gpus / 10.0, self.total_gpus, points
        )

    def frag_curve(self, points: range = range(0, 131)) -> dict[int, float]:
        """Fragmented share of the idle GPUs (%) per percent of arrived load."""
        ratio = (
            np.divide(
                self.frag_milli,
                self.idle_milli,
                out=np.zeros_like(self.frag_milli),
                where=self.idle_milli > 0,
            )
            * 100.0
        )
        return discretize(self.arrived_milli, ratio, self.total_gpus, points)

    def frag_amount_curve(self, points: range = range(0, 131)) -> dict[int, float]:
        """Fragmented GPUs as % of the capacity per percent of arrived load."""
        return discretize(
            self.arrived_milli, self.frag_milli / self.total_gpus / 10.0, self.total_gpus, points
        )

    def to_dict(self, step: int = 10) -> dict[str, Any]:
        pts = range(0, round(self.tune * 100) + 1, step)
        curve = self.curve(pts)
        frag = self.frag_curve(pts)
        return {
            "policy": self.policy,
            "seed": self.seed,
            "tune": self.tune,
            "total_gpus": self.total_gpus,
            "pods_arrived": self.pods_arrived,
            "pods_original": self.pods_original,
            "pods_placed": self.placed,
            "unplaced_by_reason": dict(self.unplaced_by_reason),
            "gpu_allocation_pct": {str(k): v for k, v in curve.items()},
            "frag_ratio_pct": {str(k): v for k, v in frag.items()},
            "final_gpu_allocation_pct": round(float(self.used_milli[-1]) / self.total_gpus / 10, 2)
            if self.pods_arrived
            else 0.0,
            "final_frag_ratio_pct": round(float(self.frag_milli[-1] / self.idle_milli[-1] * 100), 2)
            if self.pods_arrived and self.idle_milli[-1] > 0
            else 0.0,
        }


def replay(
    topology: Topology,
    workload: PodBatch,
    policy: str | Policy,
    *,
    seed: int,
    tune: float = DEFAULT_TUNE,
    distribution: PodTypeDistribution | None = None,
    popularity: float = DEFAULT_POPULARITY,
    track_fragmentation: bool = True,
    tie_break: str = "rank",
) -> ReplayResult:
    """Replay ``workload`` onto an empty cluster of ``topology`` with ``policy`` (a name
    or a fresh policy instance); see the module docstring."""
    dist = distribution or PodTypeDistribution.from_batch(workload, popularity)
    order_rng, tie_rng, policy_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    pol = make_policy(policy, dist, policy_rng) if isinstance(policy, str) else policy
    snap = ClusterSnapshot(topology)
    total_gpus = snap.total_gpu_milli // GPU_MILLI
    if total_gpus == 0:
        raise ValueError("the node list has no GPUs; a GPU trace replay needs GPU nodes")
    order, n_orig = arrival_order(workload, snap.total_gpu_milli, tune, order_rng)
    allocator = Allocator(snap, pol, tie_rng, tie_break=tie_break, explain=False)
    index = FragmentationIndex(dist) if track_fragmentation else None
    n = len(order)
    arrived = np.empty(n)
    used = np.empty(n)
    frag = np.zeros(n)
    idle = np.zeros(n)
    req = workload.total_gpu_milli
    reasons: Counter[str] = Counter()
    placed = 0
    so_far = 0
    for e, i in enumerate(order.tolist()):
        pod_id = workload.pod_id[i] if e < n_orig else f"{workload.pod_id[i]}#tune-{e - n_orig}"
        decision = allocator.place(workload.request(i, pod_id))
        so_far += int(req[i])
        arrived[e] = so_far
        used[e] = snap.used_gpu_milli
        if decision.placed:
            placed += 1
        else:
            reasons[decision.reason] += 1
        if index is not None:
            frag[e] = index.cluster_frag_milli(snap)
            idle[e] = snap.total_gpu_milli - snap.used_gpu_milli
    return ReplayResult(
        pol.name, seed, tune, total_gpus, arrived, used, frag, idle, n_orig, placed, dict(reasons)
    )
