"""FGD, fragmentation gradient descent (Weng et al., USENIX ATC '23).

Place each pod where it least increases the expected fragmentation of the cluster for
the target workload's pod-type distribution (:mod:`allocator.fragmentation`). Only the
chosen node's fragmentation changes, so the gradient is that node's change ``dF`` in
milli-GPU. As in the paper's artifact the score is ``int(100 * sigmoid(-dF / 1000))``
(integer, so near-equal moves tie and the tie is broken at random), and a GPU share
goes to the GPU of the chosen node with the best score (lowest index on ties).
"""

from __future__ import annotations

import numpy as np

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.fragmentation import FragmentationIndex
from predops.allocator.policies.base import NodeScores, PlacementContext, PolicyBase
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot

DELTA_DECIMALS = 6
"""The fragmentation change is rounded to 1e-6 milli-GPU before scoring: a change of
exactly nothing, summed in another order, can come out as -1e-13 and truncate to 49
instead of 50 (a property test found it); nothing real is that small."""


def sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    """``int(100 * sigmoid(x / 1000))`` for a fragmentation decrease ``x`` (milli-GPU,
    rounded to :data:`DELTA_DECIMALS`)."""
    x: np.ndarray = np.round(np.asarray(delta_milli, dtype=np.float64), DELTA_DECIMALS)
    return (1.0 / (1.0 + np.exp(-x / 1000.0)) * 100.0).astype(np.int64)


class FGD(PolicyBase):
    """FGD against ``distribution`` (the workload the cluster is expected to serve)."""

    name = "fgd"

    def __init__(self, distribution: PodTypeDistribution) -> None:
        self.distribution = distribution
        self.index = FragmentationIndex(distribution)

    def frag_delta(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(fragmentation increase per row in milli-GPU, preferred GPU per row or None)."""
        before = self.index.node_frag(snap)
        if not pod.is_share:
            return self.index.after_whole(snap, rows, pod) - before[rows], None
        pos, gpu, after = self.index.after_share(snap, rows, pod)
        delta = after - before[rows[pos]]
        # Best (lowest) delta per row; candidates come grouped by row, GPUs ascending.
        starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
        best = np.minimum.reduceat(delta, starts)
        group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(pos)]))
        score = sigmoid_score(-delta)
        row_score = np.maximum.reduceat(score, starts)
        first = np.flatnonzero(score == row_score[group])
        _, at = np.unique(group[first], return_index=True)
        out_delta = np.empty(len(rows))
        out_gpu = np.full(len(rows), -1, dtype=np.int64)
        out_delta[pos[starts]] = best
        out_gpu[pos[starts]] = gpu[first[at]]
        return out_delta, out_gpu

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        delta, gpu = self.frag_delta(snap, pod, rows)
        return NodeScores(sigmoid_score(-delta), gpu=gpu, unit="100*sigmoid(-dF/1000)")

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        delta, _ = self.frag_delta(snap, pod, np.array([row]))
        return (
            f"{snap.node_ids[row]}: expected fragmentation changes by {delta[0] / 1000:+.3f} GPUs"
        )
