"""GPU packing: fill partly used GPUs first, then used nodes, then idle nodes.

The artifact's integer score, high to low: (1) a share fits on a partly used GPU:
``max(100 - free_pct_of_that_gpu // 10, 50)``; (2) the pod needs idle GPUs of a node
already in use: ``max(50 - idle_gpus_taken, 33)``; (3) the node is idle:
``max(33 - idle_gpus, idle_gpus)``. CPU-only pods score 0 everywhere (random).
"""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI


class GpuPacking(PolicyBase):
    name = "gpu_packing"

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        n = len(rows)
        if pod.num_gpu == 0:
            return NodeScores(np.zeros(n, dtype=np.int64), unit="packing 0-100")
        free = snap.gpu_free[rows]
        idle = (free == GPU_MILLI).sum(axis=1)
        whole_node_idle = idle == snap.gpu_count[rows]
        case3 = np.maximum(33 - idle, idle)
        if pod.is_share:
            best = np.where(free >= pod.gpu_milli, free, GPU_MILLI + 1).min(axis=1)
            case1 = np.maximum(100 - (best * 100 // GPU_MILLI) // 10, 50)
            case2 = np.full(n, max(50 - 1, 33))
            other = np.where(best >= GPU_MILLI, case2, case1)
        else:
            other = np.full(n, max(50 - pod.num_gpu, 33))
        return NodeScores(
            np.where(whole_node_idle, case3, other).astype(np.int64), unit="packing 0-100"
        )
