"""How a pool's running pods fill its nodes now, and where a demand increase would land.

Pool sizing needs the nodes a demand forecast takes *with fragmentation*. Packing the
whole forecast from scratch (the allocator's :class:`~allocator.estimator.NodeCountEstimator`
on every pod of the demand) costs seconds a round on thousands of nodes, so sizing could
not run every hour. The live snapshot already holds the answer for the demand that runs
now — the scheduler packed it there — so only the *change* is packed:

- a demand at or below what runs now needs the busy nodes scaled by the binding
  resource's share (:meth:`LiveFill.shrunk`; used only to report how far below usage
  the forecast is — the usage floor keeps those nodes);
- a demand above it: the increase is sampled from the pool's pod mix, placed by the
  allocator onto the free room of the pool's busy, schedulable nodes first
  (:meth:`LiveFill.place`, in a what-if: the snapshot is unchanged), and the pods that
  do not fit are packed onto new nodes by the estimator.

The cost is the hour's growth in pods, not the pool's whole demand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from predops.allocator.engine import Allocator
from predops.allocator.policies import make_policy
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, NodeSpec


@dataclass(frozen=True, slots=True)
class LiveFill:
    """The pool's nodes with pods (snapshot rows) and the GPUs / cores those pods hold."""

    busy_rows: np.ndarray
    gpus: float
    cpu_cores: float

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, nodes: Sequence[NodeSpec]) -> LiveFill:
        """The fill of ``nodes`` on ``snapshot``, read off its free-capacity arrays."""
        rows = np.array(sorted(snapshot.index_of(n.node_id) for n in nodes), dtype=np.int64)
        busy = np.array([r for r in rows.tolist() if snapshot.pods_on[r]], dtype=np.int64)
        if busy.size == 0:
            return cls(busy, 0.0, 0.0)
        gpu_used = snapshot.gpu_count[busy] * GPU_MILLI - snapshot.gpu_free_total[busy]
        cpu_used = snapshot.cpu_cap[busy] - snapshot.cpu_free[busy]
        return cls(busy, float(gpu_used.sum()) / GPU_MILLI, float(cpu_used.sum()) / 1000)

    def shrunk(self, gpus: float, cpu_cores: float) -> int:
        """Busy nodes in proportion to the binding resource's share of what runs now."""
        share = max(
            gpus / self.gpus if self.gpus > 0 else 0.0,
            cpu_cores / self.cpu_cores if self.cpu_cores > 0 else 0.0,
        )
        return math.ceil(len(self.busy_rows) * min(share, 1.0) - 1e-9)

    def place(
        self, snapshot: ClusterSnapshot, pods: PodBatch, policy: str, seed: int
    ) -> list[PodRequest]:
        """Place ``pods`` on the busy, schedulable nodes (a what-if; ``snapshot`` is
        unchanged afterwards); returns the pods that did not fit, in order."""
        rows = self.busy_rows[snapshot.schedulable[self.busy_rows]] if self.busy_rows.size else []
        left: list[PodRequest] = []
        if len(rows) == 0:
            return [pods.request(i) for i in range(len(pods))]
        alloc = Allocator(
            snapshot,
            make_policy(policy, rng=np.random.default_rng(seed + 1)),
            np.random.default_rng(seed),
            explain=False,
        )
        failed: set[tuple[int, int, int, int, str]] = set()
        with snapshot.what_if():
            for i in range(len(pods)):
                pod = pods.request(i)
                shape = (
                    pod.cpu_milli,
                    pod.memory_mib,
                    pod.num_gpu,
                    pod.gpu_milli,
                    pods.gpu_spec[i],
                )
                # capacity only shrinks in the pass: a shape that failed fails again
                if shape in failed or not alloc.place(pod, rows=np.asarray(rows)).placed:
                    failed.add(shape)
                    left.append(pod)
        return left

    def to_dict(self) -> dict[str, Any]:
        return {
            "busy_nodes": int(self.busy_rows.size),
            "running_gpus": round(self.gpus, 4),
            "running_cpu_cores": round(self.cpu_cores, 4),
        }
