"""``ClusterSnapshot``: free resources per node, NUMA node and GPU, forkable for what-ifs.
Over 500 lines: one class whose arrays, journal and placements change together.

State is kept as numpy arrays indexed by node (row) and GPU (column) so policies score
every node at once: free CPU (milli-cores, also per NUMA node), free memory (MiB), free
milli-GPU per GPU (1000 = idle; columns past a node's GPU count are 0), each GPU's NUMA
node and NVLink domain, the GPU model and rack / spine of each node, and whether the
node is schedulable. Three per-node GPU summaries are kept beside ``gpu_free`` as it
changes (idle GPUs, free milli in all, the most free milli on one GPU), so a fleet-wide
filter reads one number per node instead of reducing every node's GPU row for every
pod. ``version[n]`` changes whenever node ``n`` changes, so caches (the
FGD fragmentation index) recompute only the nodes that changed.

``fork()`` opens a savepoint; every change after it is journalled; ``revert()`` undoes
back to the savepoint, ``commit()`` keeps the changes (folding them into an outer
savepoint when forks are nested). What-if questions (drain these nodes, add N nodes of
SKU X, replay these pods) run between ``fork()`` and ``revert()`` and never touch the
base state. The snapshot never over-commits: :meth:`place` raises
:class:`OverCommitError` when a placement does not fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from predops.allocator.requests import PodRequest
from predops.allocator.topology import GPU_MILLI, NodeSpec, Topology

_TICK = [1]
"""Version counter shared by all snapshots, so a cache keyed by (row, version) can never
mistake one snapshot's node for another's (single-threaded use, like the snapshots)."""


def _ticks(k: int) -> int:
    """Reserve ``k`` consecutive version numbers; returns the first."""
    first = _TICK[0]
    _TICK[0] += k
    return first


class OverCommitError(ValueError):
    """A placement asked for more than a node, NUMA node or GPU has free."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one pod runs: node row, GPU indices (each giving ``pod.gpu_milli``) and the
    CPU taken from each NUMA node as ``(numa, milli)`` pairs."""

    pod: PodRequest
    node: int
    gpus: tuple[int, ...]
    numa_cpu: tuple[tuple[int, int], ...]

    @property
    def pod_id(self) -> str:
        return self.pod.pod_id

    def __reduce__(self) -> tuple[Any, ...]:
        # through __init__: unpickling a snapshot's tens of thousands of placements by
        # the dataclass' __setstate__ took seconds
        return (Placement, (self.pod, self.node, self.gpus, self.numa_cpu))


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal integers (the remainder to the first ones)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class ClusterSnapshot:
    """Free resources of a cluster; see the module docstring."""

    def __init__(self, topology: Topology | Sequence[NodeSpec]) -> None:
        nodes = topology.nodes if isinstance(topology, Topology) else tuple(topology)
        self._n = 0
        self._cap = 0
        self._g = max([n.gpus for n in nodes] + [1])
        self._u = max([n.numa_nodes for n in nodes] + [1])
        self.node_ids: list[str] = []
        self.specs: list[NodeSpec] = []
        self._index: dict[str, int] = {}
        self.models: list[str] = []
        self._model_index: dict[str, int] = {}
        self.domains: dict[str, list[tuple[str, ...]]] = {"rack": [], "spine": []}
        self._domain_index: dict[str, dict[tuple[str, ...], int]] = {"rack": {}, "spine": {}}
        self._node_masks: dict[frozenset[str], np.ndarray] = {}
        """Per-node model masks (read-only), dropped whenever nodes are added or cut."""
        self._largest: tuple[float, float] | None = None
        self._alloc(max(len(nodes), 1))
        self.placements: dict[str, Placement] = {}
        self.pods_on: list[set[str]] = []
        self.used_gpu_milli = 0
        self.total_gpu_milli = 0
        self.last_change = 0
        """Grows with every change to any node (a cheap "anything changed?" check)."""
        self._journal: list[tuple[Any, ...]] = []
        self._savepoints: list[int] = []
        self._add(nodes)

    # ------------------------------------------------------------------ arrays
    def _alloc(self, cap: int) -> None:
        """(Re)allocate the backing arrays for ``cap`` nodes, keeping the first ``_n``."""
        n, g, u = self._n, self._g, self._u

        def grow(old: np.ndarray | None, shape: tuple[int, ...], dtype: Any, fill: Any) -> Any:
            new = np.full(shape, fill, dtype=dtype)
            if old is not None and n:
                new[(slice(0, n), *(slice(0, s) for s in old.shape[1:]))] = old[:n]
            return new

        o = self.__dict__
        self._cpu_cap = grow(o.get("_cpu_cap"), (cap,), np.int64, 0)
        self._mem_cap = grow(o.get("_mem_cap"), (cap,), np.int64, 0)
        self._cpu_free = grow(o.get("_cpu_free"), (cap,), np.int64, 0)
        self._mem_free = grow(o.get("_mem_free"), (cap,), np.int64, 0)
        self._numa_cpu_free = grow(o.get("_numa_cpu_free"), (cap, u), np.int64, 0)
        self._gpu_free = grow(o.get("_gpu_free"), (cap, g), np.int64, 0)
        self._gpu_count = grow(o.get("_gpu_count"), (cap,), np.int64, 0)
        self._gpu_idle = grow(o.get("_gpu_idle"), (cap,), np.int64, 0)
        self._gpu_total = grow(o.get("_gpu_total"), (cap,), np.int64, 0)
        self._gpu_most = grow(o.get("_gpu_most"), (cap,), np.int64, 0)
        self._gpu_numa = grow(o.get("_gpu_numa"), (cap, g), np.int16, -1)
        self._gpu_nvl = grow(o.get("_gpu_nvl"), (cap, g), np.int16, -1)
        self._model = grow(o.get("_model"), (cap,), np.int32, -1)
        self._rack = grow(o.get("_rack"), (cap,), np.int32, -1)
        self._spine = grow(o.get("_spine"), (cap,), np.int32, -1)
        self._schedulable = grow(o.get("_schedulable"), (cap,), np.bool_, False)
        self._version = grow(o.get("_version"), (cap,), np.int64, 0)
        self._cap = cap

    @property
    def n_nodes(self) -> int:
        return self._n

    @property
    def max_gpus(self) -> int:
        """Width of the per-GPU arrays (the most GPUs any node has)."""
        return self._g

    # Views of the live rows. Callers read them; only this class writes them.
    @property
    def cpu_cap(self) -> np.ndarray:
        return np.asarray(self._cpu_cap[: self._n])

    @property
    def mem_cap(self) -> np.ndarray:
        return np.asarray(self._mem_cap[: self._n])

    @property
    def cpu_free(self) -> np.ndarray:
        return np.asarray(self._cpu_free[: self._n])

    @property
    def mem_free(self) -> np.ndarray:
        return np.asarray(self._mem_free[: self._n])

    @property
    def numa_cpu_free(self) -> np.ndarray:
        return np.asarray(self._numa_cpu_free[: self._n])

    @property
    def gpu_free(self) -> np.ndarray:
        return np.asarray(self._gpu_free[: self._n])

    @property
    def gpu_idle(self) -> np.ndarray:
        """Idle GPUs (all 1000 milli free) per node."""
        return np.asarray(self._gpu_idle[: self._n])

    @property
    def gpu_free_total(self) -> np.ndarray:
        """Free milli-GPU per node, summed over its GPUs (``gpu_free.sum(axis=1)``)."""
        return np.asarray(self._gpu_total[: self._n])

    @property
    def gpu_free_most(self) -> np.ndarray:
        """The most free milli on any one GPU of each node (0 without GPUs)."""
        return np.asarray(self._gpu_most[: self._n])

    def _gpu_summary(self, rows: int | slice) -> None:
        free = self._gpu_free[rows]
        self._gpu_idle[rows] = (free == GPU_MILLI).sum(axis=-1)
        self._gpu_total[rows] = free.sum(axis=-1)
        self._gpu_most[rows] = free.max(axis=-1, initial=0)

    @property
    def gpu_count(self) -> np.ndarray:
        return np.asarray(self._gpu_count[: self._n])

    @property
    def gpu_numa(self) -> np.ndarray:
        return np.asarray(self._gpu_numa[: self._n])

    @property
    def gpu_nvl(self) -> np.ndarray:
        return np.asarray(self._gpu_nvl[: self._n])

    @property
    def model(self) -> np.ndarray:
        return np.asarray(self._model[: self._n])

    @property
    def rack(self) -> np.ndarray:
        return np.asarray(self._rack[: self._n])

    @property
    def spine(self) -> np.ndarray:
        return np.asarray(self._spine[: self._n])

    @property
    def schedulable(self) -> np.ndarray:
        return np.asarray(self._schedulable[: self._n])

    @property
    def version(self) -> np.ndarray:
        return np.asarray(self._version[: self._n])

    def domain_index(self, level: str) -> np.ndarray:
        """Per-node index into ``self.domains[level]`` (level: 'rack' or 'spine')."""
        if level == "rack":
            return self.rack
        if level == "spine":
            return self.spine
        raise ValueError(f"gangs can be scoped to 'rack' or 'spine', not {level!r}")

    def index_of(self, node_id: str) -> int:
        try:
            return self._index[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def model_mask(self, models: frozenset[str] | None) -> np.ndarray:
        """Per-node bool: the node has GPUs of one of ``models`` (None: any GPU node)."""
        if models is None:
            return self.gpu_count > 0
        per_node = self._node_masks.get(models)
        if per_node is not None:
            return per_node
        mask = np.array([m in models for m in self.models] + [False], dtype=np.bool_)
        # index -1 (CPU node) reads the trailing False
        per_node = np.asarray(mask[self.model])
        per_node.setflags(write=False)
        self._node_masks[models] = per_node
        return per_node

    def _touch(self, rows: int | np.ndarray) -> None:
        if isinstance(rows, int | np.integer):
            self._version[rows] = _ticks(1)
        else:
            k = len(rows)
            self._version[rows] = np.arange(_ticks(k), _TICK[0])
        self.last_change = _TICK[0]

    # ------------------------------------------------------------------ nodes
    def _domain(self, level: str, key: tuple[str, ...]) -> int:
        idx = self._domain_index[level]
        if key not in idx:
            idx[key] = len(self.domains[level])
            self.domains[level].append(key)
        return idx[key]

    def largest_node(self) -> tuple[float, float]:
        """(largest node CPU in milli-cores, largest GPU count x 1000), 1.0 for none:
        what the scoring policies normalise by (the artifact's cluster's largest node
        spec, 128 cores and 8 GPUs); kept until nodes are added or cut."""
        if self._largest is None:
            cpu = float(self.cpu_cap.max(initial=0)) or 1.0
            gpu = float(self.gpu_count.max(initial=0)) * 1000.0 or 1.0
            self._largest = (cpu, gpu)
        return self._largest

    def _add(self, nodes: Sequence[NodeSpec]) -> None:
        self._node_masks.clear()
        self._largest = None
        need_g = max([n.gpus for n in nodes] + [self._g])
        need_u = max([n.numa_nodes for n in nodes] + [self._u])
        if self._n + len(nodes) > self._cap or need_g > self._g or need_u > self._u:
            self._g, self._u = need_g, need_u
            self._alloc(max(self._n + len(nodes), 2 * self._cap))
        for spec in nodes:
            if spec.node_id in self._index:
                raise ValueError(f"node {spec.node_id!r} is already in the snapshot")
            i = self._n
            self._n += 1
            self._index[spec.node_id] = i
            self.node_ids.append(spec.node_id)
            self.specs.append(spec)
            self.pods_on.append(set())
            self._cpu_cap[i] = self._cpu_free[i] = spec.cpu_milli
            self._mem_cap[i] = self._mem_free[i] = spec.memory_mib
            self._numa_cpu_free[i, :] = 0
            self._numa_cpu_free[i, : spec.numa_nodes] = split_evenly(
                spec.cpu_milli, spec.numa_nodes
            )
            self._gpu_free[i, :] = 0
            self._gpu_free[i, : spec.gpus] = GPU_MILLI
            self._gpu_count[i] = spec.gpus
            self._gpu_summary(i)
            self._gpu_numa[i, :] = -1
            self._gpu_numa[i, : spec.gpus] = spec.gpu_numa_ids
            self._gpu_nvl[i, :] = -1
            self._gpu_nvl[i, : spec.gpus] = spec.nvlink_ids
            if spec.gpus and spec.gpu_model:
                if spec.gpu_model not in self._model_index:
                    self._model_index[spec.gpu_model] = len(self.models)
                    self.models.append(spec.gpu_model)
                self._model[i] = self._model_index[spec.gpu_model]
            else:
                self._model[i] = -1
            self._rack[i] = self._domain("rack", spec.path)
            self._spine[i] = self._domain("spine", spec.path[:3])
            self._schedulable[i] = True
            self.total_gpu_milli += spec.gpus * GPU_MILLI
            self._touch(i)

    def add_nodes(self, nodes: Iterable[NodeSpec]) -> list[int]:
        """Append nodes (e.g. N more of one SKU); returns their rows. Undone by revert."""
        nodes = list(nodes)
        ids = [n.node_id for n in nodes]
        clash = sorted(set(ids) & self._index.keys()) or sorted(
            {x for x in ids if ids.count(x) > 1}
        )
        if clash:
            raise ValueError(f"node {clash[0]!r} is already in the snapshot")
        first = self._n
        self._record(("add", first))
        self._add(nodes)
        return list(range(first, self._n))

    def _truncate(self, n: int) -> None:
        self._node_masks.clear()
        self._largest = None
        for i in range(n, self._n):
            if self.pods_on[i]:
                raise RuntimeError("internal: truncating a node that still runs pods")
            del self._index[self.node_ids[i]]
            self.total_gpu_milli -= self.specs[i].gpus * GPU_MILLI
        del self.node_ids[n:], self.specs[n:], self.pods_on[n:]
        self._schedulable[n : self._n] = False
        self._n = n

    def set_schedulable(self, node_ids: Iterable[str], schedulable: bool) -> None:
        """Cordon (False) or uncordon (True) nodes."""
        rows = np.array([self.index_of(x) for x in node_ids], dtype=np.int64)
        self._record(("sched", rows, self._schedulable[rows].copy()))
        self._schedulable[rows] = schedulable
        self._touch(rows)

    def drain(self, node_ids: Iterable[str]) -> list[PodRequest]:
        """Cordon the nodes and evict their pods; returns the evicted requests."""
        node_ids = list(node_ids)
        self.set_schedulable(node_ids, False)
        evicted: list[PodRequest] = []
        for x in node_ids:
            for pod_id in sorted(self.pods_on[self.index_of(x)]):
                evicted.append(self.remove(pod_id).pod)
        return evicted

    # ------------------------------------------------------------------ pods
    def check(self, p: Placement) -> str | None:
        """Why ``p`` does not fit (None when it does)."""
        pod, i = p.pod, p.node
        if not 0 <= i < self._n:
            return f"node row {i} out of range"
        if pod.pod_id in self.placements:
            return f"pod {pod.pod_id!r} is already placed"
        if pod.memory_mib > self._mem_free[i]:
            return f"memory {pod.memory_mib} MiB > {self._mem_free[i]} free"
        if sum(m for _, m in p.numa_cpu) != pod.cpu_milli:
            return "numa_cpu does not add up to the pod's cpu_milli"
        for u, m in p.numa_cpu:
            if not 0 <= u < self._u or m < 0 or m > self._numa_cpu_free[i, u]:
                return f"cpu {m} milli on NUMA node {u} exceeds its free CPU"
        if len(p.gpus) != pod.num_gpu or len(set(p.gpus)) != len(p.gpus):
            return f"needs {pod.num_gpu} distinct GPUs, got {p.gpus}"
        for g in p.gpus:
            if not 0 <= g < self._gpu_count[i]:
                return f"GPU {g} does not exist on {self.node_ids[i]}"
            if self._gpu_free[i, g] < pod.gpu_milli:
                return f"GPU {g} has {self._gpu_free[i, g]} milli free < {pod.gpu_milli}"
        if (
            pod.num_gpu
            and pod.gpu_models is not None
            and (self._model[i] < 0 or self.models[self._model[i]] not in pod.gpu_models)
        ):
            return "GPU model not allowed for this pod"
        return None

    def place(self, p: Placement) -> None:
        """Commit a placement; raises :class:`OverCommitError` if it does not fit."""
        why = self.check(p)
        if why is not None:
            where = self.node_ids[p.node] if 0 <= p.node < self._n else "?"
            raise OverCommitError(f"cannot place {p.pod_id!r} on {where}: {why}")
        self._apply(p)
        self._record(("place", p.pod_id))

    def _apply(self, p: Placement) -> None:
        pod, i = p.pod, p.node
        self._mem_free[i] -= pod.memory_mib
        for u, m in p.numa_cpu:
            self._numa_cpu_free[i, u] -= m
        self._cpu_free[i] -= pod.cpu_milli
        for g in p.gpus:
            self._gpu_free[i, g] -= pod.gpu_milli
        if p.gpus:
            self._gpu_summary(i)
        self.used_gpu_milli += pod.num_gpu * pod.gpu_milli
        self.placements[pod.pod_id] = p
        self.pods_on[i].add(pod.pod_id)
        self._touch(i)

    def remove(self, pod_id: str) -> Placement:
        """Take a pod off its node; returns its placement."""
        p = self._unapply(pod_id)
        self._record(("remove", p))
        return p

    def _unapply(self, pod_id: str) -> Placement:
        try:
            p = self.placements.pop(pod_id)
        except KeyError:
            raise KeyError(f"pod {pod_id!r} is not placed") from None
        pod, i = p.pod, p.node
        self._mem_free[i] += pod.memory_mib
        for u, m in p.numa_cpu:
            self._numa_cpu_free[i, u] += m
        self._cpu_free[i] += pod.cpu_milli
        for g in p.gpus:
            self._gpu_free[i, g] += pod.gpu_milli
        if p.gpus:
            self._gpu_summary(i)
        self.used_gpu_milli -= pod.num_gpu * pod.gpu_milli
        self.pods_on[i].discard(pod_id)
        self._touch(i)
        return p

    def tidy(self, rows: Iterable[int]) -> None:
        """Hold the placements in pod-id order and the pod sets of ``rows`` as new sets
        filled in that order: the containers' iteration orders of a snapshot whose pods
        were placed in pod-id order (one updated node by node looks the same)."""
        if self._savepoints:
            raise RuntimeError("tidy() with open forks")
        self.placements = dict(sorted(self.placements.items()))
        for i in rows:
            self.pods_on[i] = set(sorted(self.pods_on[i]))

    # ------------------------------------------------------------------ fork / revert
    def _record(self, entry: tuple[Any, ...]) -> None:
        if self._savepoints:
            self._journal.append(entry)

    @property
    def depth(self) -> int:
        """Number of open forks."""
        return len(self._savepoints)

    def fork(self) -> ClusterSnapshot:
        """Open a savepoint; later changes can be undone with :meth:`revert`."""
        self._savepoints.append(len(self._journal))
        return self

    def revert(self) -> None:
        """Undo every change since the matching :meth:`fork`."""
        if not self._savepoints:
            raise RuntimeError("revert() without fork()")
        mark = self._savepoints.pop()
        while len(self._journal) > mark:
            entry = self._journal.pop()
            kind = entry[0]
            if kind == "place":
                self._unapply(entry[1])
            elif kind == "remove":
                self._apply(entry[1])
            elif kind == "sched":
                self._schedulable[entry[1]] = entry[2]
                self._touch(entry[1])
            elif kind == "add":
                self._truncate(entry[1])

    def commit(self) -> None:
        """Keep the changes since the matching :meth:`fork`."""
        if not self._savepoints:
            raise RuntimeError("commit() without fork()")
        self._savepoints.pop()
        if not self._savepoints:
            self._journal.clear()

    @contextmanager
    def what_if(self) -> Iterator[ClusterSnapshot]:
        """``with snap.what_if(): ...`` runs the block on a fork and always reverts."""
        self.fork()
        try:
            yield self
        finally:
            self.revert()

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        if self._savepoints:
            raise RuntimeError("a snapshot with open forks cannot be pickled")
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        # Versions come from this process's counter (see _TICK): the pickled ones may be
        # handed out here again, and a cache keyed by (row, version) would trust them.
        self._touch(np.arange(self._n))

    # ------------------------------------------------------------------ inspection
    def state(self) -> dict[str, Any]:
        """A comparable copy of everything that defines the cluster state (for tests and
        audit); excludes ``version`` (bumped by reverts too)."""
        n = self._n
        # Trim the per-GPU / per-NUMA columns to what live nodes use: adding a wide node
        # and reverting leaves the backing arrays wider, not the state different.
        g = max([s.gpus for s in self.specs] + [1])
        u = max([s.numa_nodes for s in self.specs] + [1])
        arrays = {
            k: getattr(self, k)[:n].copy()
            for k in (
                "_cpu_cap",
                "_mem_cap",
                "_cpu_free",
                "_mem_free",
                "_gpu_count",
                "_model",
                "_rack",
                "_spine",
                "_schedulable",
            )
        }
        arrays["_numa_cpu_free"] = self._numa_cpu_free[:n, :u].copy()
        for k in ("_gpu_free", "_gpu_numa", "_gpu_nvl"):
            arrays[k] = getattr(self, k)[:n, :g].copy()
        return {
            "node_ids": tuple(self.node_ids),
            "arrays": arrays,
            "placements": dict(self.placements),
            "used_gpu_milli": self.used_gpu_milli,
            "total_gpu_milli": self.total_gpu_milli,
        }

    @staticmethod
    def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
        if a.keys() != b.keys() or a["arrays"].keys() != b["arrays"].keys():
            return False
        arrays_equal = all(
            a["arrays"][k].shape == b["arrays"][k].shape
            and bool(np.array_equal(a["arrays"][k], b["arrays"][k]))
            for k in a["arrays"]
        )
        rest = all(a[k] == b[k] for k in a if k != "arrays")
        return arrays_equal and rest
