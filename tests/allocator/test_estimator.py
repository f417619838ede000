"""Node-count estimator: simulated packing, not division."""

from __future__ import annotations

import numpy as np
import pytest

from predops.allocator.estimator import NodeCountEstimator, sample_pods
from predops.allocator.requests import PodBatch
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


def _sku(gpus: int, name: str, model: str = "A100", cpu: int = 64_000) -> NodeSpec:
    return make_node(gpus, node_id=name, sku=name, model=model, cpu_milli=cpu)


@pytest.mark.parametrize("policy", ["fgd", "best_fit", "gpu_packing"])
def test_whole_gpu_pods_need_ceil_of_gpus(policy: str) -> None:
    demand = PodBatch.of([make_pod(f"p{i}", gpus=1) for i in range(17)])
    est = NodeCountEstimator([_sku(8, "x8")], policy).estimate(demand)
    assert est.nodes == {"x8": 3} and est.placed_on_new == 17


def test_fragmentation_costs_nodes_that_division_would_miss() -> None:
    # Six 0.6-GPU shares: 3.6 GPUs by division (two 2-GPU nodes), but no two shares
    # fit on one GPU, so six GPUs are needed: three nodes.
    demand = PodBatch.of([make_pod(f"s{i}", milli=600) for i in range(6)])
    est = NodeCountEstimator([_sku(2, "x2")], "fgd").estimate(demand)
    assert est.nodes == {"x2": 3}
    assert est.gpu_allocation_ratio == pytest.approx(0.6)


def test_cpu_can_be_the_binding_resource() -> None:
    demand = PodBatch.of([make_pod(f"p{i}", cpu=20_000, milli=100) for i in range(10)])
    est = NodeCountEstimator([_sku(8, "x8", cpu=64_000)], "best_fit").estimate(demand)
    assert est.nodes == {"x8": 4}  # 3 pods of 20 cores per node; 8 GPUs barely used


def test_existing_capacity_is_used_first_and_left_untouched() -> None:
    base = make_cluster(make_node(8, node_id="old"))
    make_allocator(base).place(make_pod("resident", gpus=6))
    before = base.state()
    demand = PodBatch.of([make_pod(f"p{i}", gpus=1) for i in range(10)])
    est = NodeCountEstimator([_sku(8, "x8")], "best_fit").estimate(demand, base)
    assert est.placed_on_existing == 2 and est.nodes == {"x8": 1}
    assert ClusterSnapshot.same_state(before, base.state())


def test_sku_priority_and_unplaceable_reasons() -> None:
    demand = PodBatch.of(
        [
            make_pod("big", gpus=8),
            make_pod("t4", gpus=1, models=["T4"]),
            make_pod("h100", gpus=1, models=["H100"]),
            make_pod("huge", cpu=10**7),
        ]
    )
    skus = [_sku(4, "a4"), _sku(8, "a8"), _sku(2, "t4x2", model="T4")]
    est = NodeCountEstimator(skus, "best_fit").estimate(demand)
    assert est.nodes == {"a4": 0, "a8": 1, "t4x2": 1}
    assert est.unplaceable == {"no_sku:gpu_model": 1, "no_sku:cpu": 1}


def test_estimator_rejects_bad_configuration() -> None:
    demand = PodBatch.of([make_pod(gpus=1)])
    with pytest.raises(ValueError, match="at least one"):
        NodeCountEstimator([], "fgd").estimate(demand)
    with pytest.raises(ValueError, match="unique"):
        NodeCountEstimator([_sku(2, "a"), _sku(4, "a")], "fgd").estimate(demand)
    with pytest.raises(ValueError, match="order"):
        NodeCountEstimator([_sku(2, "a")], order="sideways").estimate(demand)
    empty = NodeCountEstimator([_sku(2, "a")]).estimate(PodBatch.of([]))
    assert empty.nodes == {"a": 0}


def test_sample_pods_reaches_the_requested_resources() -> None:
    mix = PodBatch.of(
        [make_pod(gpus=1, cpu=4000), make_pod(milli=500, cpu=2000), make_pod(cpu=8000)]
    )
    rng = np.random.default_rng(3)
    pods = sample_pods(mix, rng, gpu_milli=50_000, cpu_milli=600_000)
    gpu = int(pods.total_gpu_milli.sum())
    assert 50_000 <= gpu < 51_000  # stops at the first pod that reaches the target
    assert int(pods.cpu_milli.sum()) >= 600_000
    assert len(set(pods.pod_id)) == len(pods)
    with pytest.raises(ValueError, match="no GPU pods"):
        sample_pods(PodBatch.of([make_pod(cpu=1)]), rng, gpu_milli=10)


def test_largest_first_is_never_worse_here_and_random_is_seeded() -> None:
    rng = np.random.default_rng(0)
    mix = PodBatch.of(
        [
            make_pod(gpus=int(k)) if k else make_pod(milli=300)
            for k in rng.choice([0, 1, 2, 4], size=60)
        ]
    )
    skus = [_sku(8, "x8")]
    a = NodeCountEstimator(skus, "fgd", seed=5).estimate(mix)
    b = NodeCountEstimator(skus, "fgd", seed=5).estimate(mix)
    ffd = NodeCountEstimator(skus, "fgd", order="largest_first").estimate(mix)
    assert a.nodes == b.nodes
    assert ffd.total_nodes <= a.total_nodes
    lower = int(np.ceil(mix.total_gpu_milli.sum() / 8000))
    assert ffd.total_nodes >= lower


def test_estimate_for_a_forecast_quantity() -> None:
    mix = PodBatch.of(
        [make_pod(gpus=1, cpu=4000), make_pod(milli=500, cpu=2000), make_pod(cpu=8000)]
    )
    est = NodeCountEstimator([_sku(8, "x8", cpu=96_000)], "fgd", seed=2)
    small = est.estimate_quantity(mix, gpus=40, cpu_cores=400)
    big = est.estimate_quantity(mix, gpus=400, cpu_cores=4000)
    assert small.total_nodes >= 5  # at least 40 GPUs / 8 and 400 cores / 96
    assert big.total_nodes >= 50  # 400 GPUs / 8
    assert big.total_nodes <= 10 * small.total_nodes  # packing is no worse at scale
    assert est.estimate_quantity(mix, gpus=40, cpu_cores=400).nodes == small.nodes
