"""Cluster metrics: allocation ratio, fragmentation, unplaced reasons, stranded capacity."""

from __future__ import annotations

import pytest

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.metrics import (
    fragmentation,
    gpu_allocation_ratio,
    stranded,
    summary,
    unplaced_by_reason,
)
from predops.allocator.requests import PodBatch
from predops.allocator.snapshot import ClusterSnapshot, Placement
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


def _cluster() -> ClusterSnapshot:
    snap = make_cluster(
        make_node(4, node_id="a", cpu_milli=32_000), make_node(4, node_id="b", cpu_milli=32_000)
    )
    # a: all 4 GPUs taken, 12 cores free. b: one GPU at 700 milli used, 2 cores free.
    snap.place(
        Placement(make_pod("full", cpu=20_000, mem=0, gpus=4), 0, (0, 1, 2, 3), ((0, 20_000),))
    )
    snap.place(Placement(make_pod("share", cpu=30_000, mem=0, milli=700), 1, (0,), ((0, 30_000),)))
    return snap


def test_allocation_ratio_counts_milli_gpu() -> None:
    assert gpu_allocation_ratio(_cluster()) == pytest.approx(4700 / 8000)
    assert gpu_allocation_ratio(make_cluster(make_node(0))) == 0.0


def test_fragmentation_by_hand() -> None:
    snap = _cluster()
    # Target workload: 1 GPU pods needing 4 cores. Node b has only 2 cores free, so all
    # of its 3300 idle milli are fragmented; node a has nothing idle.
    dist = PodTypeDistribution.from_batch(PodBatch.of([make_pod(cpu=4000, gpus=1)]))
    f = fragmentation(snap, dist)
    assert f.frag_milli == pytest.approx(3300) and f.idle_milli == 3300
    assert f.frag_ratio == 1.0 and f.frag_of_capacity == pytest.approx(3300 / 8000)
    # With 1-core pods, node b can host them: only the 300 left on GPU 0 is fragment.
    small = PodTypeDistribution.from_batch(PodBatch.of([make_pod(cpu=1000, gpus=1)]))
    assert fragmentation(snap, small).frag_milli == pytest.approx(300)


def test_stranded_capacity() -> None:
    snap = _cluster()
    dist = PodTypeDistribution.from_batch(PodBatch.of([make_pod(cpu=4000, gpus=1)]))
    s = stranded(snap, dist)
    assert s.cpu_milli == 12_000  # free cores on node a, whose GPUs are all taken
    assert s.gpu_milli == 3300  # idle GPU on node b, too little CPU for any GPU pod


def test_unplaced_by_reason_and_summary() -> None:
    snap = _cluster()
    alloc = make_allocator(snap)
    decisions = [
        alloc.place(make_pod(gpus=4)),
        alloc.place(make_pod(cpu=10**6)),
        alloc.place(make_pod(gpus=8)),
        alloc.place(make_pod(cpu=100)),
    ]
    assert unplaced_by_reason(decisions) == {"gpu": 2, "cpu": 1}
    dist = PodTypeDistribution.from_batch(PodBatch.of([make_pod(cpu=1000, gpus=1)]))
    s = summary(snap, dist, decisions)
    assert s["unplaced_by_reason"] == {"gpu": 2, "cpu": 1}
    assert 0 < s["gpu_allocation_ratio"] < 1 and s["idle_gpus"] == pytest.approx(3.3)
