"""Random: any node that can host the pod, uniformly (the FGD paper's Random baseline)."""

from __future__ import annotations

import numpy as np

from allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from allocator.requests import PodRequest
from allocator.snapshot import ClusterSnapshot


class RandomFit(PolicyBase):
    """Every feasible node scores the same; the allocator's tie-break picks one at random."""

    name = "random"

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        return NodeScores(np.zeros(len(rows), dtype=np.int64), unit="none")

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        return f"{snap.node_ids[row]}: any feasible node is as good as another"
