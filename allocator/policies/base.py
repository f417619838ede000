"""The one interface every placement policy implements.

A policy scores the nodes that can host a pod (higher is better) and may say which GPU
a GPU-share pod should take on each node. It never changes the snapshot; the
:class:`~allocator.engine.Allocator` picks the best score (ties uniformly at random
through the passed-in generator, as the Kubernetes scheduler does), chooses devices
and commits. Scores are on each policy's own scale; many are the artifact's integer
0-100 scores, whose ties are part of the behaviour being reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class PlacementContext:
    """What a policy may know beyond the pod: rows already holding pods of its gang."""

    gang_rows: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeScores:
    """Scores for candidate rows (same order); ``gpu[i]`` is the preferred GPU on row i
    for a share pod (-1 or None: let device picking decide)."""

    scores: np.ndarray
    gpu: np.ndarray | None = None
    unit: str = "score"


@runtime_checkable
class Policy(Protocol):
    """A placement strategy. ``prefers_locality`` asks device picking to keep a pod's
    GPUs inside one NVLink domain / NUMA node when it can."""

    name: str
    prefers_locality: bool

    def score(
        self, snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray, ctx: PlacementContext
    ) -> NodeScores:
        """Score every row in ``rows`` (all can host ``pod``)."""
        ...

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        """One line on what the score of ``row`` means for ``pod`` (for explanations)."""
        ...


class PolicyBase:
    """Defaults shared by the concrete policies."""

    name = "base"
    prefers_locality = False

    def describe(self, snap: ClusterSnapshot, pod: PodRequest, row: int) -> str:
        free_gpu = int(snap.gpu_free[row].sum())
        return (
            f"{snap.node_ids[row]}: {snap.cpu_free[row] / 1000:g} cores, "
            f"{snap.mem_free[row]} MiB, {free_gpu / 1000:g} GPUs free before placement"
        )
