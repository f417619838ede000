"""Cluster metrics: GPU allocation ratio, fragmentation, unplaced pods, stranded capacity.

- GPU allocation ratio: allocated milli-GPU over all milli-GPU (0-1).
- Fragmentation (the FGD paper's): idle milli-GPU that the target workload's pods can
  not use, in milli-GPU, as a share of the idle milli-GPU (``frag_ratio``) and of the
  whole capacity (``frag_of_capacity``, the artifact's "fragmented GPU amount").
- Unplaced pods by reason: counts of :class:`~allocator.engine.Decision` reasons.
- Stranded capacity: free CPU / memory on GPU nodes whose GPUs are all allocated (left
  to CPU-only work at best), and idle milli-GPU on nodes without enough free CPU for the
  smallest GPU pod of the distribution (no pod of it can use them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.engine import Decision
from predops.allocator.fragmentation import FragmentationIndex
from predops.allocator.snapshot import ClusterSnapshot


def gpu_allocation_ratio(snap: ClusterSnapshot) -> float:
    """Allocated share of the cluster's milli-GPU (0 for a GPU-less cluster)."""
    return snap.used_gpu_milli / snap.total_gpu_milli if snap.total_gpu_milli else 0.0


@dataclass(frozen=True, slots=True)
class Fragmentation:
    """Fragmented and idle milli-GPU of the cluster."""

    frag_milli: float
    idle_milli: float
    total_milli: float

    @property
    def frag_ratio(self) -> float:
        return self.frag_milli / self.idle_milli if self.idle_milli else 0.0

    @property
    def frag_of_capacity(self) -> float:
        return self.frag_milli / self.total_milli if self.total_milli else 0.0


def fragmentation(
    snap: ClusterSnapshot,
    target: PodTypeDistribution | FragmentationIndex,
) -> Fragmentation:
    """Cluster fragmentation against a pod-type distribution (or a live index of one)."""
    index = target if isinstance(target, FragmentationIndex) else FragmentationIndex(target)
    frag = float(index.node_frag(snap).sum())
    idle = float(snap.gpu_free.sum())
    return Fragmentation(frag, idle, float(snap.total_gpu_milli))


def unplaced_by_reason(decisions: Iterable[Decision]) -> dict[str, int]:
    return dict(Counter(d.reason for d in decisions if not d.placed))


@dataclass(frozen=True, slots=True)
class Stranded:
    """Stranded capacity (see the module docstring); CPU in milli-cores, memory MiB."""

    cpu_milli: int
    memory_mib: int
    gpu_milli: int


def stranded(snap: ClusterSnapshot, distribution: PodTypeDistribution) -> Stranded:
    gpu_nodes = snap.gpu_count > 0
    idle = snap.gpu_free_total
    gpus_gone = gpu_nodes & (idle == 0)
    gpu_types = distribution.num_gpu > 0
    if gpu_types.any():
        min_cpu = int(distribution.cpu_milli[gpu_types].min())
        unusable = snap.cpu_free < min_cpu
    else:
        unusable = np.zeros(snap.n_nodes, dtype=np.bool_)
    return Stranded(
        cpu_milli=int(snap.cpu_free[gpus_gone].sum()),
        memory_mib=int(snap.mem_free[gpus_gone].sum()),
        gpu_milli=int(idle[unusable].sum()),
    )


def summary(
    snap: ClusterSnapshot, distribution: PodTypeDistribution, decisions: Iterable[Decision] = ()
) -> dict[str, Any]:
    """The metrics above as one JSON-ready dict."""
    fr = fragmentation(snap, distribution)
    return {
        "gpu_allocation_ratio": gpu_allocation_ratio(snap),
        "frag_ratio": fr.frag_ratio,
        "frag_of_capacity": fr.frag_of_capacity,
        "frag_gpus": fr.frag_milli / 1000,
        "idle_gpus": fr.idle_milli / 1000,
        "unplaced_by_reason": unplaced_by_reason(decisions),
        "stranded": asdict(stranded(snap, distribution)),
    }
