"""How many nodes of which SKU a demand needs, by simulated packing.

Dividing total demand by node capacity ignores fragmentation, which is real capacity
loss (idle GPU slivers, CPU stranded next to full GPUs). Instead the pods of the demand
are placed one by one with the chosen policy, as the scheduler would: onto the nodes
already open (existing capacity when a base snapshot is given, then nodes added so
far), and when no open node can host a pod a new node is added — of the first SKU in
the given order that can host it (a priority expander, as cluster-autoscaler has). The
answer is the count of added nodes per SKU; pods no SKU can host are reported by reason.

Demand is a pod mix (:class:`~allocator.requests.PodBatch`) or a resource quantity
(a forecast quantile of GPUs and CPU cores) turned into pods by sampling a reference
mix (:func:`sample_pods`). Nodes that can no longer host the smallest pod of the demand
are closed and leave the candidate set, so each decision scores only open nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from predops.allocator.devices import REASONS, pick_devices, unplaced_reason
from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.engine import Allocator
from predops.allocator.fragmentation import FragmentationIndex
from predops.allocator.policies import Policy, make_policy
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, NodeSpec


def sample_pods(
    mix: PodBatch,
    rng: np.random.Generator,
    *,
    gpu_milli: float = 0.0,
    cpu_milli: float = 0.0,
    prefix: str = "demand",
) -> PodBatch:
    """Pods drawn with replacement from ``mix`` until their GPU request reaches
    ``gpu_milli``, then CPU-only pods of the mix until the CPU request reaches
    ``cpu_milli`` (milli-cores). Ids are ``<prefix>-<n>``."""
    if len(mix) == 0:
        raise ValueError("cannot sample demand from an empty pod mix")
    picks: list[int] = []
    gpu_req = mix.total_gpu_milli
    got_gpu = 0
    got_cpu = 0
    if gpu_milli > 0:
        if not (gpu_req > 0).any():
            raise ValueError("GPU demand given but the pod mix has no GPU pods")
        while got_gpu < gpu_milli:
            draw = rng.integers(len(mix), size=4096)
            cum = got_gpu + np.cumsum(gpu_req[draw])
            stop = np.flatnonzero(cum >= gpu_milli)
            take = draw if stop.size == 0 else draw[: stop[0] + 1]
            picks.extend(take.tolist())
            got_gpu = int(cum[len(take) - 1])
            got_cpu += int(mix.cpu_milli[take].sum())
    if got_cpu < cpu_milli:
        cpu_only = np.flatnonzero((gpu_req == 0) & (mix.cpu_milli > 0))
        if cpu_only.size == 0:
            raise ValueError("CPU demand left over but the pod mix has no CPU-only pods")
        while got_cpu < cpu_milli:
            draw = cpu_only[rng.integers(cpu_only.size, size=4096)]
            cum = got_cpu + np.cumsum(mix.cpu_milli[draw])
            stop = np.flatnonzero(cum >= cpu_milli)
            take = draw if stop.size == 0 else draw[: stop[0] + 1]
            picks.extend(take.tolist())
            got_cpu = int(cum[len(take) - 1])
    idx = np.array(picks, dtype=np.int64)
    return PodBatch(
        pod_id=tuple(f"{prefix}-{i}" for i in range(len(idx))),
        cpu_milli=mix.cpu_milli[idx],
        memory_mib=mix.memory_mib[idx],
        num_gpu=mix.num_gpu[idx],
        gpu_milli=mix.gpu_milli[idx],
        gpu_spec=tuple(mix.gpu_spec[i] for i in idx.tolist()),
    )


@dataclass(frozen=True)
class Estimate:
    """Nodes to add per SKU for a demand, and how the packed cluster looks."""

    nodes: dict[str, int]
    pods: int
    placed_on_existing: int
    placed_on_new: int
    unplaceable: dict[str, int] = field(default_factory=dict)
    gpu_allocation_ratio: float = 0.0
    frag_ratio: float = 0.0

    @property
    def total_nodes(self) -> int:
        return sum(self.nodes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": dict(self.nodes),
            "total_nodes": self.total_nodes,
            "pods": self.pods,
            "placed_on_existing": self.placed_on_existing,
            "placed_on_new": self.placed_on_new,
            "unplaceable": dict(self.unplaceable),
            "gpu_allocation_ratio": self.gpu_allocation_ratio,
            "frag_ratio": self.frag_ratio,
        }


class NodeCountEstimator:
    """Nodes of each SKU (``skus``: templates, ``sku`` names them, ids are ignored)
    needed for a demand, packed by ``policy`` (a name, or a factory for fresh policy
    instances). ``order`` is ``"random"`` (arrival in random order, as in the FGD
    paper's evaluation) or ``"largest_first"`` (first-fit decreasing; optimistic)."""

    def __init__(
        self,
        skus: Sequence[NodeSpec],
        policy: str = "fgd",
        *,
        seed: int = 0,
        order: str = "random",
        distribution: PodTypeDistribution | None = None,
        max_new_nodes: int = 1_000_000,
    ) -> None:
        self.skus = skus
        self.policy = policy
        self.seed = seed
        self.order = order
        self.distribution = distribution
        self.max_new_nodes = max_new_nodes

    def _validate(self) -> None:
        if not self.skus:
            raise ValueError("the estimator needs at least one node SKU")
        names = [s.sku or s.node_id for s in self.skus]
        if len(set(names)) != len(names):
            raise ValueError(f"SKU names must be unique, got {names}")
        if self.order not in ("random", "largest_first"):
            raise ValueError(f"order must be 'random' or 'largest_first', got {self.order!r}")

    def estimate(self, demand: PodBatch, base: ClusterSnapshot | None = None) -> Estimate:
        """Nodes to add so ``demand`` fits on ``base`` (default: an empty cluster).
        ``base`` is forked and reverted: it is unchanged afterwards."""
        self._validate()
        names = [s.sku or s.node_id for s in self.skus]
        snap = base if base is not None else ClusterSnapshot([])
        if len(demand) == 0:
            return Estimate(dict.fromkeys(names, 0), 0, 0, 0)
        dist = self.distribution or PodTypeDistribution.from_batch(demand)
        order_rng, tie_rng, policy_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(3)
        )
        policy: Policy = make_policy(self.policy, dist, policy_rng)
        if self.order == "random":
            order = order_rng.permutation(len(demand))
        else:
            order = np.lexsort((-demand.cpu_milli, -demand.total_gpu_milli))
        probes = [ClusterSnapshot([replace(s, node_id="probe")]) for s in self.skus]
        min_cpu = int(demand.cpu_milli.min())
        min_mem = int(demand.memory_mib.min())
        gpu_pods = demand.num_gpu > 0
        min_share = int(demand.gpu_milli[gpu_pods].min()) if gpu_pods.any() else GPU_MILLI
        all_gpu = bool(gpu_pods.all())

        snap.fork()
        try:
            first_new = snap.n_nodes
            alloc = Allocator(snap, policy, tie_rng, explain=False)
            open_rows = self._open_rows(
                snap, np.arange(snap.n_nodes), min_cpu, min_mem, min_share, all_gpu
            )
            added: Counter[str] = Counter()
            unplaceable: Counter[str] = Counter()
            on_existing = on_new = 0
            for i in order.tolist():
                pod = demand.request(i)
                d = alloc.place(pod, rows=open_rows)
                if not d.placed:
                    k = self._sku_for(pod, probes)
                    if k is None:
                        unplaceable[self._why_no_sku(pod, probes)] += 1
                        continue
                    if sum(added.values()) >= self.max_new_nodes:
                        raise ValueError(f"demand needs more than {self.max_new_nodes} new nodes")
                    sku = self.skus[k]
                    row = snap.add_nodes(
                        [replace(sku, node_id=f"new-{names[k]}-{added[names[k]]}")]
                    )
                    added[names[k]] += 1
                    open_rows = np.append(open_rows, row)
                    d = alloc.place(pod, rows=np.array(row))
                    if not d.placed:  # the probe said it fits; a policy bug otherwise
                        raise RuntimeError(f"pod {pod.pod_id} does not fit an empty {names[k]}")
                row_i = snap.index_of(d.node_id or "")
                if row_i >= first_new:
                    on_new += 1
                else:
                    on_existing += 1
                if self._closed(snap, row_i, min_cpu, min_mem, min_share, all_gpu):
                    open_rows = open_rows[open_rows != row_i]
            new_rows = np.arange(first_new, snap.n_nodes)
            used = float(
                (snap.gpu_count[new_rows] * GPU_MILLI - snap.gpu_free_total[new_rows]).sum()
            )
            cap = float(snap.gpu_count[new_rows].sum() * GPU_MILLI)
            frag = FragmentationIndex(dist).frag_ratio(snap)
        finally:
            snap.revert()
        return Estimate(
            {n: added[n] for n in names},
            len(demand),
            on_existing,
            on_new,
            dict(unplaceable),
            used / cap if cap else 0.0,
            frag,
        )

    def estimate_quantity(
        self,
        mix: PodBatch,
        *,
        gpus: float = 0.0,
        cpu_cores: float = 0.0,
        base: ClusterSnapshot | None = None,
    ) -> Estimate:
        """Nodes for a resource quantity (e.g. a p90 forecast of GPUs and CPU cores),
        turned into pods by sampling ``mix`` (:func:`sample_pods`, seeded)."""
        rng = np.random.default_rng(np.random.SeedSequence(self.seed).spawn(4)[3])
        demand = sample_pods(mix, rng, gpu_milli=gpus * GPU_MILLI, cpu_milli=cpu_cores * 1000)
        return self.estimate(demand, base)

    @staticmethod
    def _closed(
        snap: ClusterSnapshot, row: int, min_cpu: int, min_mem: int, min_share: int, all_gpu: bool
    ) -> bool:
        """True when no pod of the demand can fit ``row`` any more."""
        if snap.cpu_free[row] < min_cpu or snap.mem_free[row] < min_mem:
            return True
        return all_gpu and int(snap.gpu_free[row].max(initial=0)) < min_share

    def _open_rows(
        self,
        snap: ClusterSnapshot,
        rows: np.ndarray,
        min_cpu: int,
        min_mem: int,
        min_share: int,
        all_gpu: bool,
    ) -> np.ndarray:
        keep = [
            r
            for r in rows.tolist()
            if snap.schedulable[r]
            and not self._closed(snap, r, min_cpu, min_mem, min_share, all_gpu)
        ]
        return np.array(keep, dtype=np.int64)

    @staticmethod
    def _sku_for(pod: PodRequest, probes: list[ClusterSnapshot]) -> int | None:
        for k, probe in enumerate(probes):
            if pick_devices(probe, 0, pod) is not None:
                return k
        return None

    @staticmethod
    def _why_no_sku(pod: PodRequest, probes: list[ClusterSnapshot]) -> str:
        """The filter that stopped the SKU that came closest (latest in filter order)."""
        return "no_sku:" + max((unplaced_reason(p, pod) for p in probes), key=REASONS.index)
