"""BestFit: the node left with the least free resources after placement.

Score (the FGD artifact's): ``int(100 * (1 - 0.5 * (cpu_free - cpu) / CPU_MAX
- 0.5 * (gpu_free - gpu) / GPU_MAX))``, with free CPU in milli-cores and free GPU as the
node's summed idle milli-GPU, normalised by the largest node's capacity. Integer
scores tie often; ties are broken at random. GPU shares go to the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


class BestFit(PolicyBase):
    name = "best_fit"

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        cpu_max, gpu_max = snap.largest_node()
        cpu_left = (snap.cpu_free[rows] - pod.cpu_milli).astype(np.float64)
        gpu_left = (snap.gpu_free_total[rows] - pod.total_gpu_milli).astype(np.float64)
        # Same float operation order as the artifact, so integer ties fall the same way.
        waste = cpu_left / cpu_max * 0.5 + gpu_left / gpu_max * 0.5
        return NodeScores(((1.0 - waste) * 100.0).astype(np.int64), unit="fullness 0-100")

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        cpu = (snap.cpu_free[row] - pod.cpu_milli) / 1000
        gpu = (snap.gpu_free[row].sum() - pod.total_gpu_milli) / 1000
        return f"{snap.node_ids[row]}: leaves {cpu:g} cores and {gpu:g} GPUs free"
