"""NUMA alignment, NVLink locality, GPU-model constraints and GPU-share packing."""

from __future__ import annotations

import numpy as np
import pytest

from predops.allocator.devices import feasible, pick_devices, unplaced_reason
from predops.allocator.snapshot import ClusterSnapshot, Placement
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


# ---------------------------------------------------------------- NUMA alignment
def test_numa_aligned_pod_takes_gpus_and_cpu_from_one_numa_node() -> None:
    snap = make_cluster(make_node(8, node_id="a", numa_nodes=2, cpu_milli=64_000))
    d = make_allocator(snap).place(make_pod("p", cpu=20_000, gpus=2, numa=True))
    p = snap.placements["p"]
    numa = {int(snap.gpu_numa[0, g]) for g in p.gpus}
    assert d.placed and len(numa) == 1
    assert p.numa_cpu == ((numa.pop(), 20_000),)


def test_numa_alignment_refuses_a_node_whose_numa_nodes_are_each_too_small() -> None:
    # 4 idle GPUs per NUMA node; a 5-GPU aligned pod cannot fit, an unaligned one can.
    snap = make_cluster(make_node(8, node_id="a", numa_nodes=2))
    assert feasible(snap, make_pod(gpus=5, numa=True)).size == 0
    assert unplaced_reason(snap, make_pod(gpus=5, numa=True)) == "topology"
    assert feasible(snap, make_pod(gpus=5)).tolist() == [0]


def test_numa_alignment_needs_cpu_on_the_gpus_numa_node() -> None:
    snap = make_cluster(make_node(2, node_id="a", numa_nodes=2, cpu_milli=32_000))
    # Take 15 of the 16 cores of NUMA node 1 (GPU 1's), leaving NUMA 0 its 16.
    snap.place(Placement(make_pod("cpu-hog", cpu=15_000), 0, (), ((1, 15_000),)))
    snap.place(Placement(make_pod("gpu0", cpu=0, gpus=1), 0, (0,), ()))
    # Only GPU 1 is idle, but its NUMA node has 1 core left.
    assert feasible(snap, make_pod(cpu=4000, gpus=1, numa=True)).size == 0
    assert feasible(snap, make_pod(cpu=4000, gpus=1)).tolist() == [0]
    aligned_cpu_only = pick_devices(snap, 0, make_pod(cpu=9000, numa=True))
    assert aligned_cpu_only is not None and aligned_cpu_only.numa_cpu == ((0, 9000),)


def test_unaligned_cpu_is_spread_from_the_freest_numa_node() -> None:
    snap = make_cluster(make_node(0, node_id="a", numa_nodes=2, cpu_milli=20_000))
    p = pick_devices(snap, 0, make_pod(cpu=14_000))
    assert p is not None and p.numa_cpu == ((0, 10_000), (1, 4_000))


# ---------------------------------------------------------------- NVLink locality
def _two_islands() -> ClusterSnapshot:
    """8 GPUs in two NVLink islands of 4; one GPU used in each island."""
    snap = make_cluster(make_node(8, node_id="a", nvlink_groups=[0] * 4 + [1] * 4))
    snap.place(Placement(make_pod("x0", cpu=0, gpus=1), 0, (0,), ()))
    snap.place(Placement(make_pod("x1", cpu=0, gpus=1), 0, (4,), ()))
    return snap


def test_nvlink_pod_gets_gpus_of_one_domain() -> None:
    snap = _two_islands()
    p = pick_devices(snap, 0, make_pod(gpus=3, nvlink=True))
    assert p is not None and len({int(snap.gpu_nvl[0, g]) for g in p.gpus}) == 1


def test_nvlink_pod_does_not_fit_across_domains() -> None:
    snap = _two_islands()  # 6 idle GPUs but at most 3 in one island
    assert feasible(snap, make_pod(gpus=4, nvlink=True)).size == 0
    assert feasible(snap, make_pod(gpus=4)).tolist() == [0]


def test_nvlink_prefers_the_tighter_domain() -> None:
    snap = _two_islands()
    snap.place(Placement(make_pod("x2", cpu=0, gpus=1), 0, (5,), ()))  # island 1: 2 idle
    p = pick_devices(snap, 0, make_pod(gpus=2, nvlink=True))
    assert p is not None and set(p.gpus) == {6, 7}  # island 0 (3 idle) stays whole


def test_node_without_nvlink_cannot_host_nvlink_pods_but_single_gpu_is_fine() -> None:
    snap = make_cluster(make_node(8, node_id="pcie", nvlink=None))
    assert feasible(snap, make_pod(gpus=2, nvlink=True)).size == 0
    assert feasible(snap, make_pod(gpus=1, nvlink=True)).tolist() == [0]


def test_inventory_nvlink_domain_joins_all_gpus_of_the_node() -> None:
    snap = make_cluster(make_node(8, node_id="sxm", nvlink="nvl-7"))
    assert feasible(snap, make_pod(gpus=8, nvlink=True)).tolist() == [0]


# ---------------------------------------------------------------- GPU models
def test_gpu_model_constraint_limits_the_nodes() -> None:
    snap = make_cluster(
        make_node(2, node_id="t4", model="T4"),
        make_node(2, node_id="a100", model="A100"),
        make_node(0, node_id="cpu"),
    )
    alloc = make_allocator(snap)
    for i in range(4):
        d = alloc.place(make_pod(f"p{i}", gpus=1, models=["A100", "H100"]))
        assert d.placed == (i < 2)
        if d.placed:
            assert d.node_id == "a100"
    assert alloc.place(make_pod("late", gpus=1, models=["A100"])).reason == "gpu"
    assert alloc.place(make_pod("h", gpus=1, models=["H100"])).reason == "gpu_model"
    # a CPU-only pod ignores GPU models entirely
    assert alloc.place(make_pod("c", cpu=1000)).placed


# ---------------------------------------------------------------- GPU sharing
def test_shares_pack_onto_a_partly_used_gpu() -> None:
    snap = make_cluster(make_node(4, node_id="a"))
    alloc = make_allocator(snap)
    alloc.place(make_pod("s1", milli=500))
    alloc.place(make_pod("s2", milli=300))
    alloc.place(make_pod("s3", milli=200))
    gpus = {snap.placements[x].gpus for x in ("s1", "s2", "s3")}
    assert len(gpus) == 1  # all three share one GPU (500 + 300 + 200 = 1000)
    assert sorted(snap.gpu_free[0].tolist()) == [0, 1000, 1000, 1000]


def test_share_goes_to_the_best_fitting_gpu() -> None:
    snap = make_cluster(make_node(3, node_id="a"))
    snap.place(Placement(make_pod("u0", cpu=0, milli=300), 0, (0,), ()))  # 700 free
    snap.place(Placement(make_pod("u1", cpu=0, milli=600), 0, (1,), ()))  # 400 free
    p = pick_devices(snap, 0, make_pod(milli=350))
    assert p is not None and p.gpus == (1,)
    p = pick_devices(snap, 0, make_pod(milli=450))
    assert p is not None and p.gpus == (0,)


def test_whole_gpu_pods_only_use_idle_gpus() -> None:
    snap = make_cluster(make_node(2, node_id="a"))
    snap.place(Placement(make_pod("u", cpu=0, milli=10), 0, (0,), ()))
    assert feasible(snap, make_pod(gpus=2)).size == 0
    p = pick_devices(snap, 0, make_pod(gpus=1))
    assert p is not None and p.gpus == (1,)


@pytest.mark.parametrize("policy", ["fgd", "best_fit", "gpu_packing", "dot_product"])
def test_every_policy_respects_constraints(policy: str) -> None:
    from predops.allocator.distribution import PodTypeDistribution
    from predops.allocator.policies import make_policy
    from predops.allocator.requests import PodBatch

    pods = [
        make_pod(
            f"p{i}",
            cpu=2000 + 500 * (i % 3),
            gpus=1 + i % 2,
            numa=bool(i % 2),
            nvlink=True,
            models=["A100"] if i % 3 == 0 else None,
        )
        for i in range(12)
    ]
    pods += [make_pod(f"s{i}", milli=150 + 100 * i, models=["T4"]) for i in range(6)]
    snap = make_cluster(
        make_node(8, node_id="a", numa_nodes=2, nvlink_groups=[0, 0, 1, 1, 2, 2, 3, 3]),
        make_node(4, node_id="t", model="T4", numa_nodes=2),
    )
    dist = PodTypeDistribution.from_batch(PodBatch.of(pods))
    alloc = make_allocator(snap, make_policy(policy, dist), seed=3)
    for pod in pods:
        d = alloc.place(pod)
        if not d.placed:
            continue
        p = snap.placements[pod.pod_id]
        model = snap.models[snap.model[p.node]]
        assert pod.gpu_models is None or model in pod.gpu_models
        if pod.numa_aligned:
            assert len({int(snap.gpu_numa[p.node, g]) for g in p.gpus}) <= 1
            assert len(p.numa_cpu) <= 1
        if pod.nvlink and pod.num_gpu > 1:
            assert len({int(snap.gpu_nvl[p.node, g]) for g in p.gpus}) == 1
    assert np.all(snap.gpu_free >= 0)


def test_model_constraint_sees_nodes_of_a_model_added_later() -> None:
    snap = make_cluster(make_node(2, node_id="a", model="A100"))
    pod = make_pod(gpus=1, models=["T4"])
    assert feasible(snap, pod).size == 0  # caches the mask for {"T4"}
    snap.add_nodes([make_node(2, node_id="t", model="T4")])
    assert feasible(snap, pod).tolist() == [1]
