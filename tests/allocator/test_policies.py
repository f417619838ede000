"""Each placement policy prefers what it says it prefers; FGD against a slow oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.devices import feasible
from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.engine import Allocator
from predops.allocator.policies import (
    FGD,
    POLICY_NAMES,
    BestFit,
    PlacementContext,
    TopologyAware,
    canonical_name,
    make_policy,
)
from predops.allocator.policies.fgd import sigmoid_score
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot, Placement
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod
from tests.allocator.reference import node_fragmentation


def _busy(snap: ClusterSnapshot, row: int, gpus: int = 0, cpu: int = 0, milli: int = 0) -> None:
    pod = make_pod(f"busy{row}-{gpus}-{milli}-{cpu}", cpu=cpu, gpus=gpus, milli=milli or None)
    devs = tuple(range(gpus)) if not milli else (0,)
    snap.place(Placement(pod, row, devs if pod.num_gpu else (), ((0, cpu),) if cpu else ()))


def test_best_fit_picks_the_fullest_node() -> None:
    snap = make_cluster(*(make_node(8, node_id=f"n{i}") for i in range(3)))
    _busy(snap, 1, gpus=6)
    _busy(snap, 2, gpus=3)
    d = make_allocator(snap, "best_fit").place(make_pod(gpus=1))
    assert d.node_id == "n1" and d.runner_up == "n2"
    assert "n2 scored lower" in d.explain()


def test_gpu_packing_prefers_a_partly_used_gpu_then_a_used_node() -> None:
    snap = make_cluster(*(make_node(4, node_id=f"n{i}") for i in range(3)))
    _busy(snap, 1, gpus=1)
    _busy(snap, 2, milli=600)
    alloc = make_allocator(snap, "gpu_packing")
    assert alloc.place(make_pod(milli=300)).node_id == "n2"  # shares the used GPU
    assert alloc.place(make_pod(gpus=1)).node_id in {"n1", "n2"}  # a used node
    assert snap.gpu_free[0].sum() == 4000  # the idle node stays idle


def test_gpu_clustering_keeps_shapes_together() -> None:
    snap = make_cluster(*(make_node(8, node_id=f"n{i}") for i in range(3)))
    alloc = make_allocator(snap, "gpu_clustering")
    alloc.place(make_pod("share", milli=200), rows=np.array([0]))
    alloc.place(make_pod("two", gpus=2), rows=np.array([1]))
    assert alloc.place(make_pod(milli=500)).node_id == "n0"
    assert alloc.place(make_pod(gpus=2)).node_id == "n1"
    assert alloc.place(make_pod(gpus=4)).node_id == "n2"  # an empty node beats mixing


def test_dot_product_avoids_aligning_with_the_pod() -> None:
    # A GPU-heavy pod goes to the node rich in CPU rather than the GPU-rich one.
    snap = make_cluster(
        make_node(8, node_id="gpu-rich", cpu_milli=16_000),
        make_node(2, node_id="cpu-rich", cpu_milli=128_000),
    )
    assert make_allocator(snap, "dot_product").place(make_pod(cpu=1000, gpus=2)).node_id == (
        "cpu-rich"
    )


@pytest.mark.parametrize("tie_break", ["rank", "random"])
def test_random_spreads_over_feasible_nodes(tie_break: str) -> None:
    snap = make_cluster(*(make_node(8, node_id=f"n{i}") for i in range(4)))
    alloc = make_allocator(snap, "random", seed=7, tie_break=tie_break)
    nodes = [alloc.place(make_pod(cpu=100)).node_id for _ in range(400)]
    counts = np.array([nodes.count(f"n{i}") for i in range(4)])
    assert counts.min() > 60  # each near 100; a fixed choice would give 0 somewhere


def test_rank_tie_break_fills_one_node_first_random_spreads() -> None:
    # GPU packing scores every node 0 for CPU-only pods: all ties.
    def run(tie_break: str) -> set[str | None]:
        snap = make_cluster(*(make_node(8, node_id=f"n{i}") for i in range(4)))
        alloc = make_allocator(snap, "gpu_packing", seed=7, tie_break=tie_break)
        return {alloc.place(make_pod(cpu=100)).node_id for _ in range(50)}

    assert len(run("rank")) == 1
    assert len(run("random")) == 4


def _frag_after(
    snap: ClusterSnapshot, row: int, pod: PodRequest, gpu: int, dist: PodTypeDistribution
) -> float:
    n = int(snap.gpu_count[row])
    free = snap.gpu_free[row, :n].tolist()
    if pod.is_share:
        free[gpu] -= pod.gpu_milli
    else:
        for g in [i for i, v in enumerate(free) if v == 1000][: pod.num_gpu]:
            free[g] = 0
    model = snap.models[snap.model[row]] if snap.model[row] >= 0 else None
    return node_fragmentation(free, int(snap.cpu_free[row]) - pod.cpu_milli, model, dist)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    milli=st.sampled_from([None, 150, 470, 810]),
    gpus=st.sampled_from([0, 1, 2]),
)
def test_fgd_scores_are_the_sigmoid_of_the_reference_fragmentation_change(
    seed: int, milli: int | None, gpus: int
) -> None:
    rng = np.random.default_rng(seed)
    mix = PodBatch.of(
        [
            make_pod(
                cpu=int(rng.choice([2000, 8000])),
                milli=int(m) if 0 < m < 1000 else None,
                gpus=int(m >= 1000),
            )
            for m in rng.choice([0, 250, 470, 810, 1000, 1000], size=30)
        ]
    )
    dist = PodTypeDistribution.from_batch(mix)
    snap = make_cluster(
        *(
            make_node(int(rng.choice([2, 4, 8])), node_id=f"n{i}", cpu_milli=32_000)
            for i in range(5)
        )
    )
    warm = make_allocator(snap, "best_fit", seed=seed)
    for i in range(int(rng.integers(0, 25))):
        warm.place(mix.request(int(rng.integers(len(mix))), f"w{i}"))
    pod = make_pod(cpu=3000, gpus=gpus if milli is None else 0, milli=milli)
    rows = feasible(snap, pod)
    if rows.size == 0:
        return
    policy = FGD(dist)
    ns = policy.score(snap, pod, rows, PlacementContext())
    for j, row in enumerate(rows.tolist()):
        before = _frag_after(snap, row, make_pod(cpu=0), 0, dist)
        if pod.is_share:
            n = int(snap.gpu_count[row])
            options = [g for g in range(n) if snap.gpu_free[row, g] >= pod.gpu_milli]
            deltas = np.array([before - _frag_after(snap, row, pod, g, dist) for g in options])
            scores = sigmoid_score(deltas).tolist()
            assert ns.scores[j] == max(scores)
            assert ns.gpu is not None and ns.gpu[j] == options[scores.index(max(scores))]
        else:
            after = _frag_after(snap, row, pod, 0, dist)
            assert ns.scores[j] == int(sigmoid_score(np.array([before - after]))[0])


def test_fgd_keeps_whole_gpus_for_a_whole_gpu_workload() -> None:
    # Workload mostly whole GPUs: a share should go to the GPU that is already split.
    mix = PodBatch.of([make_pod(gpus=1)] * 9 + [make_pod(milli=300)])
    snap = make_cluster(make_node(2, node_id="a"), make_node(2, node_id="b"))
    _busy(snap, 1, milli=500)
    d = make_allocator(snap, FGD(PodTypeDistribution.from_batch(mix))).place(make_pod(milli=300))
    assert d.node_id == "b" and d.gpus == (0,)
    assert "fragmentation changes by" in d.detail


def test_topology_aware_prefers_nvlink_and_gang_rack() -> None:
    snap = make_cluster(
        make_node(8, node_id="pcie", nvlink=None, rack="r1"),
        make_node(8, node_id="sxm", nvlink="nv", rack="r2"),
    )
    alloc = make_allocator(snap, TopologyAware(BestFit()))
    assert alloc.place(make_pod(gpus=4)).node_id == "sxm"
    # Two equally free nodes: a gang member joins its sibling's rack.
    twins = make_cluster(make_node(8, node_id="x", rack="r1"), make_node(8, node_id="y", rack="r2"))
    for sibling in (0, 1):
        ctx = PlacementContext(gang_rows=(sibling,))
        with twins.what_if():
            got = make_allocator(twins, TopologyAware(BestFit())).place(make_pod(), ctx=ctx)
            assert got.node_id == twins.node_ids[sibling]


def test_policy_names() -> None:
    assert canonical_name("BestFit") == "best_fit"
    assert canonical_name("gpu-packing") == "gpu_packing"
    with pytest.raises(ValueError, match="unknown policy"):
        canonical_name("tetris2")
    with pytest.raises(ValueError, match="distribution"):
        make_policy("fgd")
    dist = PodTypeDistribution.from_batch(PodBatch.of([make_pod(gpus=1)]))
    for name in POLICY_NAMES:
        assert isinstance(make_policy(name, dist).name, str)
    with pytest.raises(ValueError, match="tie_break"):
        Allocator(make_cluster(make_node()), BestFit(), np.random.default_rng(0), tie_break="coin")
