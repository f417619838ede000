"""GPU clustering: keep pods of one GPU shape together on the same nodes.

Shapes: GPU share, 1 GPU, 2 GPUs, ... A node scores (the artifact's integers, with
``base = 25 * (GPU_MAX - idle_milli) // GPU_MAX``): ``base + 75`` when it runs only the
pod's shape, ``base + 50`` when it runs that shape among others, ``base + 25`` when it
runs no GPU pod, ``base`` otherwise. CPU-only pods score 0 everywhere (random).
"""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


def shape_bit(pod: PodRequest) -> int:
    """Bit of the pod's GPU shape: bit 0 share, bit k for k whole GPUs (0 for no GPU)."""
    if pod.num_gpu == 0:
        return 0
    return 1 if pod.is_share else 1 << min(pod.num_gpu, 62)


class GpuClustering(PolicyBase):
    name = "gpu_clustering"

    def __init__(self) -> None:
        self._shapes = np.zeros(0, dtype=np.int64)
        self._version = np.zeros(0, dtype=np.int64)

    def _node_shapes(self, snap: ClusterSnapshot) -> np.ndarray:
        n = snap.n_nodes
        if len(self._shapes) != n:
            self._shapes = np.zeros(n, dtype=np.int64)
            self._version = np.zeros(n, dtype=np.int64)
        for i in np.flatnonzero(self._version != snap.version).tolist():
            bits = 0
            for pod_id in snap.pods_on[i]:
                bits |= shape_bit(snap.placements[pod_id].pod)
            self._shapes[i] = bits
            self._version[i] = snap.version[i]
        return self._shapes

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        bit = shape_bit(pod)
        if bit == 0:
            return NodeScores(np.zeros(len(rows), dtype=np.int64), unit="clustering 0-100")
        _, gpu_max = snap.largest_node()
        shapes = self._node_shapes(snap)[rows]
        base = 25 * (int(gpu_max) - snap.gpu_free_total[rows]) // int(gpu_max)
        has = (shapes & bit) != 0
        only = shapes == bit
        empty = shapes == 0
        bonus = np.where(has, np.where(only, 75, 50), np.where(empty, 25, 0))
        return NodeScores((base + bonus).astype(np.int64), unit="clustering 0-100")
