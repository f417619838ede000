"""DotProduct (Tetris): prefer the node whose free vector aligns least with the pod.

As configured in the FGD paper's runs: node vector (free CPU, summed idle milli-GPU)
and pod vector (CPU, milli-GPU), both divided by the largest node's capacity; score
``int(100 * (1 - dot / 2))``. GPU shares go to the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


class DotProduct(PolicyBase):
    name = "dot_product"

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        cpu_max, gpu_max = snap.largest_node()
        node_cpu = snap.cpu_free[rows] / cpu_max
        node_gpu = snap.gpu_free_total[rows] / gpu_max
        dot = node_cpu * (pod.cpu_milli / cpu_max) + node_gpu * (pod.total_gpu_milli / gpu_max)
        return NodeScores((100.0 * (1.0 - dot / 2.0)).astype(np.int64), unit="1 - alignment")

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        return (
            f"{snap.node_ids[row]}: free {snap.cpu_free[row] / 1000:g} cores, "
            f"{snap.gpu_free[row].sum() / 1000:g} GPUs; lower alignment with the pod wins"
        )
