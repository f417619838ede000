"""The simulated cluster's placement with soft-tainted nodes: placed last, used when
nothing else fits, and no change at all when no node is tainted."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from predops.allocator.topology import NodeSpec, Topology
from predops.pipelines.whatif.cluster import RUNNING, Cluster
from predops.pipelines.whatif.loop import LoopConfig
from predops.pipelines.whatif.world import Workload, World, WorldConfig, build_world

MODEL = "A100"


@pytest.fixture(scope="module")
def base() -> World:
    """A real world whose fleet and workload the tests replace by hand."""
    return build_world(WorldConfig(nodes=4, days=1, seed=3, warmup_days=1))


def _world(base: World, node_gpus: list[int], pod_gpus: list[int], *, gang: bool) -> World:
    """Nodes ``n0, n1, ...`` with ``node_gpus`` GPUs each; one job of pods with
    ``pod_gpus`` whole GPUs each (a gang when ``gang``), arriving at tick 0."""
    specs = [
        NodeSpec(f"n{i}", cpu_milli=32_000, memory_mib=256_000, gpus=g, gpu_model=MODEL)
        for i, g in enumerate(node_gpus)
    ]
    n = len(pod_gpus)
    workload = Workload(
        pod_ids=[f"p{i}" for i in range(n)],
        job=np.zeros(n, dtype=np.int64),
        gang=np.full(n, 0 if gang else -1, dtype=np.int64),
        gang_ids=["g0"] if gang else [],
        pool=np.zeros(n, dtype=np.int64),
        pools=["default"],
        cpu_milli=np.full(n, 1000, dtype=np.int64),
        memory_mib=np.full(n, 1024, dtype=np.int64),
        num_gpu=np.array(pod_gpus, dtype=np.int64),
        gpu_milli=np.full(n, 1000, dtype=np.int64),
        models=np.zeros(n, dtype=np.int64),
        model_sets=[frozenset({MODEL})],
        arrive=np.zeros(n, dtype=np.int64),
        leave=np.full(n, 10, dtype=np.int64),
        members=np.ones(n, dtype=np.int64),
    )
    return replace(base, topology=Topology.of(specs), workload=workload)


def _placed(world: World, tainted: list[int], out: tuple[int, ...] = ()) -> list[int]:
    """Node rows of the pods after one placement with ``tainted`` rows soft-tainted and
    ``out`` rows out of the pool."""
    c = Cluster(world, checkpoint_s=3600.0, seed=0)
    c.soft_taint[tainted] = True
    c.active[list(out)] = False
    c.arrive(np.arange(len(world.workload)))
    c.place_pending(0.0)
    assert (c.status == RUNNING).all(), "every pod fits somewhere"
    return [c.node_of(i) for i in range(len(world.workload))]


def test_a_tainted_node_is_passed_over_when_another_fits(base: World) -> None:
    # best fit prefers the 2-GPU node n0 for a 2-GPU pod; the taint sends it to n1
    world = _world(base, [2, 8], [2], gang=False)
    assert _placed(world, []) == [0]
    assert _placed(world, [0]) == [1]


def test_a_tainted_node_is_used_when_nothing_else_fits(base: World) -> None:
    world = _world(base, [2, 8], [2], gang=False)
    assert _placed(world, [0], out=(1,)) == [0]
    assert _placed(world, [0, 1]) == [0]  # all tainted: placement as without taints


def test_a_gang_falls_back_to_tainted_nodes_whole(base: World) -> None:
    world = _world(base, [2, 2], [2, 2], gang=True)
    assert sorted(_placed(world, [0])) == [0, 1]


def test_no_taint_is_the_single_pass(base: World) -> None:
    world = _world(base, [2, 8, 4], [2, 1, 4, 1], gang=False)
    one = Cluster(world, checkpoint_s=3600.0, seed=0)
    one.arrive(np.arange(len(world.workload)))
    one.sync_schedulable()
    one._place_pass(0.0)
    expected = [one.node_of(i) for i in range(len(world.workload))]
    assert _placed(world, []) == expected
    assert LoopConfig(policy="predictive").soft_taint_p is None  # off by default


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_soft_taint_threshold_must_be_a_probability(p: float) -> None:
    with pytest.raises(ValueError, match="soft_taint_p"):
        LoopConfig(policy="predictive", soft_taint_p=p)
