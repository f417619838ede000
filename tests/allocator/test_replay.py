"""Trace replay: arrival order and inflation, the artifact's discretisation, and the FGD
paper's published results reproduced on the Alibaba openb trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from predops.allocator.replay import arrival_order, discretize, replay
from predops.allocator.requests import PodBatch
from predops.allocator.topology import Topology
from predops.core.schemas import INVENTORY, PODS
from predops.core.validation import validate
from tests.allocator.factories import make_node, make_pod


def _mix(n: int = 40) -> PodBatch:
    rng = np.random.default_rng(1)
    pods = []
    for i in range(n):
        kind = rng.integers(4)
        if kind == 0:
            pods.append(make_pod(f"w{i}", cpu=4000))
        elif kind == 1:
            pods.append(make_pod(f"w{i}", cpu=2000, milli=int(rng.choice([250, 500, 800]))))
        else:
            pods.append(make_pod(f"w{i}", cpu=8000, gpus=int(rng.choice([1, 1, 2, 4]))))
    return PodBatch.of(pods)


def test_arrival_order_inflates_to_the_target() -> None:
    mix = _mix()
    order, n_orig = arrival_order(mix, 40_000, 1.3, np.random.default_rng(0))
    assert n_orig == len(mix)
    assert sorted(order[:n_orig].tolist()) == list(range(len(mix)))  # all originals, shuffled
    total = int(mix.total_gpu_milli[order].sum())
    assert 1.3 * 40_000 - 4000 < total <= 1.3 * 40_000  # stops before overshooting
    again, _ = arrival_order(mix, 40_000, 1.3, np.random.default_rng(0))
    assert np.array_equal(order, again)


def test_arrival_order_thins_a_workload_above_the_target() -> None:
    mix = _mix()
    order, n_orig = arrival_order(mix, 5_000, 1.0, np.random.default_rng(0))
    assert n_orig == len(order) < len(mix) and len(set(order.tolist())) == len(order)
    assert int(mix.total_gpu_milli[order].sum()) <= 5_000


def test_discretize_averages_per_percent_and_falls_back_to_neighbours() -> None:
    total_gpus = 10  # 10,000 milli: 1 % of load = 100 milli
    arrived = np.array([100.0, 140.0, 160.0, 400.0])  # 1 %, 1 %, 2 %, 4 %
    alloc = np.array([1.0, 1.4, 1.6, 3.0])
    out = discretize(arrived, alloc, total_gpus, range(0, 6))
    assert out[1] == pytest.approx(1.2)  # mean of the two arrivals at 1 %
    assert out[2] == 1.6
    assert out[3] == pytest.approx((1.6 + 3.0) / 2)  # none at 3 %: neighbours 2 and 4
    assert 5 in out and 0 in out


def test_replay_is_seeded_and_consistent() -> None:
    topo = Topology.of([make_node(4, node_id=f"n{i}", cpu_milli=32_000) for i in range(6)])
    mix = _mix()
    a = replay(topo, mix, "fgd", seed=3)
    b = replay(topo, mix, "fgd", seed=3)
    c = replay(topo, mix, "best_fit", seed=3)
    assert np.array_equal(a.used_milli, b.used_milli) and a.curve() == b.curve()
    assert np.array_equal(a.arrived_milli, c.arrived_milli)  # same arrivals per seed
    assert (np.diff(a.used_milli) >= 0).all()  # pods never leave
    assert a.placed + sum(a.unplaced_by_reason.values()) == a.pods_arrived
    assert a.arrived_milli[-1] <= 1.3 * 24_000
    d = a.to_dict()
    # a 40-pod trace jumps several percent per pod: only some points have arrivals
    assert set(d["gpu_allocation_pct"]) <= {str(x) for x in range(0, 131, 10)}
    assert d["pods_arrived"] == a.pods_arrived and d["policy"] == "fgd"
    assert d["final_gpu_allocation_pct"] == pytest.approx(a.used_milli[-1] / 240, abs=0.005)
    with pytest.raises(ValueError, match="no GPUs"):
        replay(Topology.of([make_node(0)]), mix, "fgd", seed=1)


# ---------------------------------------------------------------- the FGD paper
PUBLISHED = {"fgd": "06-FGD", "best_fit": "05-BestFit"}
SEEDS = (42, 43, 44)


def _load(shared: Path, workload: str) -> tuple[Topology, PodBatch]:
    from predops.pipelines.ingest.traces.openb import read_nodes, read_pods

    csv = shared / "alibaba-clusterdata" / "cluster-trace-gpu-v2023" / "csv"
    nodes = validate(read_nodes(csv / "openb_node_list_gpu_node.csv"), INVENTORY)
    pods = validate(read_pods(csv / f"openb_pod_list_{workload}.csv"), PODS)
    assert nodes.quarantined.height == 0 and pods.quarantined.height == 0
    return Topology.from_inventory(nodes.good), PodBatch.from_frame(pods.good)


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["default", "gpuspec20"])
def test_fgd_paper_allocation_ratios_are_reproduced(shared_data: Path, workload: str) -> None:
    """GPU allocation ratio at 100 % and 130 % arrived load, mean over seeds 42-44, within
    1.5 percentage points of the paper's published mean over seeds 42-51 for FGD and
    BestFit; FGD's margin over BestFit within 30 % of the published margin. gpuspec20
    adds GPU-model constraints (20 % of pods restricted to some models)."""
    published = pl.read_csv(
        shared_data
        / "alibaba-clusterdata"
        / "fgd-expected-results"
        / "analysis_allo_discrete.csv.gz"
    )
    topo, pods = _load(shared_data, workload)
    mine: dict[str, np.ndarray] = {}
    theirs: dict[str, np.ndarray] = {}
    for policy, label in PUBLISHED.items():
        curves = [replay(topo, pods, policy, seed=s).curve(range(100, 131, 30)) for s in SEEDS]
        mine[policy] = np.array([[c[100], c[130]] for c in curves]).mean(axis=0)
        rows = published.filter(
            (pl.col("workload") == f"openb_pod_list_{workload}") & (pl.col("sc_policy") == label)
        )
        assert rows.height == 10
        theirs[policy] = np.array([rows["100"].mean(), rows["130"].mean()])
        assert np.abs(mine[policy] - theirs[policy]).max() <= 1.5, (policy, mine, theirs)
    margin = mine["fgd"] - mine["best_fit"]
    margin_published = theirs["fgd"] - theirs["best_fit"]
    assert (margin > 0).all()
    assert np.all(np.abs(margin - margin_published) <= 0.3 * margin_published), (
        margin,
        margin_published,
    )
