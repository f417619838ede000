"""The allocator's snapshot of the pods running at a time, built from the lake or
brought up to date.

:func:`running_pods` reads the ``pods`` rows scheduled on a node by ``now`` and not
deleted by then (a pod's latest row wins); :func:`snapshot_of` pins them on the
topology in pod-id order (devices chosen best-fit), so a node's devices depend on its
own pods alone; :func:`update_snapshot` uses that to bring an earlier snapshot of the
same topology up to date node by node, equal to a new one. Pods that no longer fit
their node (bad data) are counted, not placed.

Memory: the running pods (about 37,000 rows at 10,000 nodes) and one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np
import polars as pl

from predops.allocator.engine import Allocator
from predops.allocator.policies import make_policy
from predops.allocator.requests import PodRequest, parse_gpu_spec
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import Topology
from predops.pipelines.workspace.lake import Lake


def running_pods(lake: Lake, now: datetime) -> pl.DataFrame:
    """Pods running at ``now``: scheduled on a node by then and not deleted yet."""
    if not lake.files("pods"):
        return pl.DataFrame()
    return (
        lake.scan("pods")
        .filter(
            pl.col("node_id").is_not_null()
            & pl.col("scheduled_at").is_not_null()
            & (pl.col("scheduled_at") <= now)
            & (pl.col("deleted_at").is_null() | (pl.col("deleted_at") > now))
        )
        .unique("pod_id", keep="last")
        .sort("pod_id")
        .collect()
    )


def _pinner(snap: ClusterSnapshot, seed: int) -> Allocator:
    return Allocator(
        snap,
        make_policy("best_fit", rng=np.random.default_rng(seed + 1)),
        np.random.default_rng(seed),
        explain=False,
    )


def _requests(pods: pl.DataFrame) -> Iterator[tuple[str, PodRequest]]:
    """(node id, request) per running pod, in the frame's order (none from an empty
    frame, which :func:`running_pods` gives without columns when there is no table)."""
    if pods.height == 0:
        return
    cols: tuple[str, ...] = ("pod_id", "node_id", "cpu_milli", "memory_mib", "num_gpu")
    cols += ("gpu_milli", "gpu_spec", "gang_id")
    for pod_id, node_id, cpu, mem, ngpu, milli, spec, gang in pods.select(cols).iter_rows():
        yield (
            node_id,
            PodRequest(
                pod_id=pod_id,
                cpu_milli=int(cpu),
                memory_mib=int(mem),
                num_gpu=int(ngpu),
                gpu_milli=int(milli) if ngpu else 0,
                gpu_models=parse_gpu_spec(spec),
                gang_id=gang,
            ),
        )


def _on_nodes(
    snap: ClusterSnapshot, pods: pl.DataFrame, counts: dict[str, int]
) -> Iterator[tuple[int, PodRequest]]:
    """(node row, request) per running pod on a node of the snapshot; counts the pods
    (``running``) and those on nodes it does not have (``unknown_node``)."""
    for node_id, req in _requests(pods):
        counts["running"] += 1
        try:
            row = snap.index_of(node_id)
        except KeyError:
            counts["unknown_node"] += 1
            continue
        yield row, req


def snapshot_of(
    topology: Topology, pods: pl.DataFrame, *, seed: int = 0
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """The topology with ``pods`` (sorted by pod id, as :func:`running_pods` gives them)
    placed on their nodes (devices chosen best-fit). A node's devices depend on its own
    pods alone, pinned in that order (:func:`update_snapshot` relies on it)."""
    snap = ClusterSnapshot(topology)
    counts = {"running": 0, "placed": 0, "unknown_node": 0, "does_not_fit": 0}
    if pods.height == 0:
        return snap, counts
    alloc = _pinner(snap, seed)
    for row, req in _on_nodes(snap, pods, counts):
        if alloc.pin(req, row):
            counts["placed"] += 1
        else:
            counts["does_not_fit"] += 1
    return snap, counts


def update_snapshot(
    snap: ClusterSnapshot, pods: pl.DataFrame, *, seed: int = 0
) -> tuple[dict[str, int], int]:
    """Bring ``snap`` (built by :func:`snapshot_of` on the same topology, at an earlier
    time) to the running ``pods`` (sorted by pod id), node by node. :func:`snapshot_of`
    pins each node's pods in pod-id order, and a node's devices depend on its own pods
    alone; so on a node whose pods changed (a pod started, stopped, moved, or its
    requests changed; a pod that did not fit counts as changed) the pods up to the first
    difference in that order stay as they are, the ones after it are taken off, and the
    node's running pods from there on are pinned again. New pods (larger ids) only add;
    a stopped pod redoes the pods after it. The result equals a new snapshot, iteration
    orders included (``tests/pipelines/workspace/test_snapshot_cache.py``). Returns the
    counts as :func:`snapshot_of` gives them and the nodes changed."""
    counts = {"running": 0, "placed": 0, "unknown_node": 0, "does_not_fit": 0}
    by_row: dict[int, list[PodRequest]] = {}
    running: set[str] = set()
    changed: set[int] = set()
    for row, req in _on_nodes(snap, pods, counts):
        by_row.setdefault(row, []).append(req)
        running.add(req.pod_id)
        was = snap.placements.get(req.pod_id)
        if was is None or was.node != row or was.pod != req:
            changed.add(row)
            if was is not None:
                changed.add(was.node)
    changed.update(p.node for pod_id, p in snap.placements.items() if pod_id not in running)
    if changed:
        kept: dict[int, int] = {}
        for row in sorted(changed):  # every suffix off first: a pod may move between them
            old, new = sorted(snap.pods_on[row]), by_row.get(row, [])
            k = 0
            while (
                k < len(old)
                and k < len(new)
                and old[k] == new[k].pod_id
                and snap.placements[old[k]].pod == new[k]
            ):
                k += 1
            kept[row] = k
            for pod_id in reversed(old[k:]):
                snap.remove(pod_id)
        alloc = _pinner(snap, seed)
        for row in sorted(changed):
            for req in by_row.get(row, [])[kept[row] :]:
                alloc.pin(req, row)
        snap.tidy(changed)
    counts["placed"] = len(snap.placements)
    counts["does_not_fit"] = counts["running"] - counts["unknown_node"] - counts["placed"]
    return counts, len(changed)


__all__ = ["running_pods", "snapshot_of", "update_snapshot"]
