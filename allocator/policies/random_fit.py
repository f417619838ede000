"""Random: any node that can host the pod, uniformly (the FGD paper's Random baseline)."""

from __future__ import annotations

import numpy as np

from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


class RandomFit(PolicyBase):
    """Each decision draws fresh random scores from ``rng``, so the best is a uniform
    pick among the feasible nodes whatever the allocator's tie-break; a GPU share goes
    to a uniformly random GPU that fits (the artifact's "random" GPU selection)."""

    name = "random"

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        scores = self.rng.random(len(rows))
        if not pod.is_share:
            return NodeScores(scores, unit="random draw")
        fits = snap.gpu_free[rows] >= pod.gpu_milli
        keys = np.where(fits, self.rng.random(fits.shape), -1.0)
        return NodeScores(scores, gpu=keys.argmax(axis=1), unit="random draw")

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        return f"{snap.node_ids[row]}: drawn at random among the feasible nodes"
