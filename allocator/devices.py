"""Which nodes can host a pod, and which GPUs and NUMA CPUs it gets on one node.

:func:`feasible` filters every node at once (the fast path: schedulable, free CPU and
memory, an allowed GPU model, enough GPUs with enough free milli); pods that need NUMA
alignment or NVLink locality are then checked node by node with :func:`pick_devices`.
:func:`unplaced_reason` names the filter that ruled out the last node.

Device choice on a node, when the policy has no opinion: a GPU share goes to the
fitting GPU with the least free milli (best fit, lowest index on ties); whole GPUs are
idle GPUs, the lowest indices first. A NUMA-aligned pod takes its GPUs and all its CPU
from one NUMA node; an NVLink pod takes all its GPUs from one NVLink domain; among
the groups that fit, the one with the fewest idle GPUs wins (keeping big groups whole
for big pods). ``prefer_local`` applies that grouping even when the pod does not
require it, falling back to any GPUs. CPU of an unaligned pod is drawn from the NUMA
nodes with the most free CPU first.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot, Placement
from predops.allocator.topology import GPU_MILLI

REASONS = ("no_schedulable_node", "cpu", "memory", "gpu_model", "gpu", "topology")
"""Why a pod found no node, in filter order."""


def _gpu_ok(snap: ClusterSnapshot, rows: np.ndarray | None, pod: PodRequest) -> np.ndarray:
    if pod.is_share:
        most = snap.gpu_free_most if rows is None else snap.gpu_free_most[rows]
        return np.asarray(most >= pod.gpu_milli)
    idle = snap.gpu_idle if rows is None else snap.gpu_idle[rows]
    return np.asarray(idle >= pod.num_gpu)


def feasible(snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (node indices) that can host ``pod`` now; ``rows`` limits the search."""
    if rows is None:
        ok = snap.schedulable & (snap.cpu_free >= pod.cpu_milli) & (snap.mem_free >= pod.memory_mib)
        if pod.num_gpu:
            ok &= snap.model_mask(pod.gpu_models)
            ok &= _gpu_ok(snap, None, pod)
        cand = np.flatnonzero(ok)
    else:
        rows = np.asarray(rows, dtype=np.int64)
        ok = (
            snap.schedulable[rows]
            & (snap.cpu_free[rows] >= pod.cpu_milli)
            & (snap.mem_free[rows] >= pod.memory_mib)
        )
        if pod.num_gpu:
            ok &= snap.model_mask(pod.gpu_models)[rows]
            ok &= _gpu_ok(snap, rows, pod)
        cand = rows[ok]
    if pod.constrained and cand.size:
        keep = [i for i in cand.tolist() if pick_devices(snap, i, pod) is not None]
        cand = np.array(keep, dtype=np.int64)
    return cand


def unplaced_reason(snap: ClusterSnapshot, pod: PodRequest, rows: np.ndarray | None = None) -> str:
    """The first filter (in :data:`REASONS` order) after which no node is left."""
    idx = np.arange(snap.n_nodes) if rows is None else np.asarray(rows, dtype=np.int64)
    stages: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
        ("no_schedulable_node", lambda r: snap.schedulable[r]),
        ("cpu", lambda r: snap.cpu_free[r] >= pod.cpu_milli),
        ("memory", lambda r: snap.mem_free[r] >= pod.memory_mib),
    ]
    if pod.num_gpu:
        stages.append(("gpu_model", lambda r: snap.model_mask(pod.gpu_models)[r]))
        stages.append(("gpu", lambda r: _gpu_ok(snap, r, pod)))
    for name, test in stages:
        idx = idx[test(idx)]
        if idx.size == 0:
            return name
    return "topology"


def _spread_cpu(numa_free: np.ndarray, cpu: int) -> tuple[tuple[int, int], ...]:
    out = []
    left = cpu
    for u in np.argsort(-numa_free, kind="stable").tolist():
        if left <= 0:
            break
        take = min(left, int(numa_free[u]))
        if take > 0:
            out.append((u, take))
            left -= take
    return tuple(out) if left <= 0 else ()


def _best_group(candidates: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray | None:
    """Among GPU groups (``keys`` per candidate GPU), the first ``k`` GPUs of the group
    with the fewest candidates that still has ``k`` (ties: lowest key)."""
    best: np.ndarray | None = None
    for key in np.unique(keys).tolist():
        members = candidates[keys == key]
        if len(members) >= k and (best is None or len(members) < len(best)):
            best = members
    return None if best is None else best[:k]


def pick_devices(
    snap: ClusterSnapshot,
    node: int,
    pod: PodRequest,
    preferred_gpu: int | None = None,
    prefer_local: bool = False,
) -> Placement | None:
    """The devices ``pod`` gets on ``node`` (None when it cannot run there)."""
    if pod.cpu_milli > snap.cpu_free[node] or pod.memory_mib > snap.mem_free[node]:
        return None
    spec = snap.specs[node]
    numa_free = snap.numa_cpu_free[node, : spec.numa_nodes]
    cpu = pod.cpu_milli
    if pod.num_gpu == 0:
        if pod.numa_aligned:
            fits = np.flatnonzero(numa_free >= cpu)
            if fits.size == 0:
                return None
            u = int(fits[np.argmin(numa_free[fits])])
            return Placement(pod, node, (), ((u, cpu),) if cpu else ())
        return Placement(pod, node, (), _spread_cpu(numa_free, cpu))
    if snap.model[node] < 0 or (
        pod.gpu_models is not None and snap.models[snap.model[node]] not in pod.gpu_models
    ):
        return None
    cnt = int(snap.gpu_count[node])
    free = snap.gpu_free[node, :cnt]
    numa = snap.gpu_numa[node, :cnt].astype(np.int64)
    nvl = snap.gpu_nvl[node, :cnt].astype(np.int64)
    usable = free >= pod.gpu_milli if pod.is_share else free == GPU_MILLI
    if pod.numa_aligned:
        usable &= numa_free[numa] >= cpu
    cand = np.flatnonzero(usable)
    if cand.size < pod.num_gpu:
        return None
    if pod.is_share:
        if preferred_gpu is not None and 0 <= preferred_gpu < cnt and usable[preferred_gpu]:
            gpus: tuple[int, ...] = (int(preferred_gpu),)
        else:
            gpus = (int(cand[np.argmin(free[cand])]),)
    else:
        gpus_arr = _choose_whole(cand, numa, nvl, pod, prefer_local)
        if gpus_arr is None:
            return None
        gpus = tuple(int(g) for g in gpus_arr)
    if pod.numa_aligned:
        u = int(numa[gpus[0]])
        return Placement(pod, node, gpus, ((u, cpu),) if cpu else ())
    numa_cpu = _spread_cpu(numa_free, cpu)
    if cpu and not numa_cpu:
        return None
    return Placement(pod, node, gpus, numa_cpu)


def _choose_whole(
    cand: np.ndarray, numa: np.ndarray, nvl: np.ndarray, pod: PodRequest, prefer_local: bool
) -> np.ndarray | None:
    k = pod.num_gpu
    need_nvl = pod.nvlink and k > 1
    if need_nvl or pod.numa_aligned:
        ok = nvl[cand] >= 0 if need_nvl else np.ones(len(cand), dtype=np.bool_)
        key = np.zeros(len(cand), dtype=np.int64)
        if pod.numa_aligned:
            key += numa[cand] * 1024
        if need_nvl:
            key += nvl[cand]
        return _best_group(cand[ok], key[ok], k)
    if prefer_local and k > 1:
        linked = nvl[cand] >= 0
        for ok, key in (
            (linked, numa[cand] * 1024 + nvl[cand]),
            (linked, nvl[cand]),
            (np.ones(len(cand), dtype=np.bool_), numa[cand]),
        ):
            got = _best_group(cand[ok], key[ok], k)
            if got is not None:
                return got
    return cand[:k]
