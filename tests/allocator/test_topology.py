"""Topology model: node specs, inventory frames, Kubernetes node labels."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec, Topology
from predops.core.schemas import INVENTORY
from predops.core.validation import validate
from tests.allocator.factories import make_node

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _inventory(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {
        "ts": T0,
        "pool": "p",
        "sku": "s",
        "gpu_model": "A100",
        "gpus": 8,
        "cpu_milli": 64_000,
        "memory_mib": 1 << 19,
        "numa_nodes": 2,
        "nvlink_domain": None,
        "region": "eu",
        "zone": "z1",
        "spine": "s1",
        "rack": "r1",
        "installed_at": None,
    }
    return pl.DataFrame([base | r for r in rows], schema=INVENTORY.polars_schema())


def test_gpus_split_evenly_over_numa_nodes_and_nvlink_from_inventory() -> None:
    n = make_node(8, numa_nodes=2, nvlink="nv0")
    assert n.gpu_numa_ids == (0, 0, 0, 0, 1, 1, 1, 1)
    assert n.nvlink_ids == (0,) * 8
    assert make_node(4, nvlink=None).nvlink_ids == (-1,) * 4
    assert make_node(3, numa_nodes=2).gpu_numa_ids == (0, 0, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": -1}, "gpus must be >= 0"),
        ({"gpus": 2, "gpu_model": None}, "no gpu_model"),
        ({"numa_nodes": 0}, "numa_nodes"),
        ({"gpus": 2, "gpu_model": "A", "gpu_numa": (0,)}, "gpu_numa has 1 entries"),
        ({"gpus": 2, "gpu_model": "A", "gpu_numa": (0, 3)}, "gpu_numa entries"),
    ],
)
def test_bad_node_specs_name_the_node(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"node 'bad'.*{message}"):
        NodeSpec(node_id="bad", cpu_milli=1, memory_mib=1, **kwargs)  # type: ignore[arg-type]


def test_from_inventory_keeps_the_latest_row_per_node_and_builds_domains() -> None:
    frame = _inventory(
        [
            {"node_id": "a", "ts": T0, "gpus": 4},
            {"node_id": "b", "rack": "r2", "nvlink_domain": "nv-b"},
            {"node_id": "a", "ts": datetime(2026, 2, 1, tzinfo=UTC), "gpus": 8, "spine": "s2"},
            {"node_id": "c", "gpus": 0, "gpu_model": None},
        ]
    )
    topo = Topology.from_inventory(frame)
    assert [n.node_id for n in topo.nodes] == ["b", "a", "c"]
    assert topo.node("a").gpus == 8 and topo.node("a").spine == "s2"
    assert topo.node("c").gpu_model is None and topo.total_gpus == 16
    assert topo.domain_of("b", "rack") == ("eu", "z1", "s1", "r2")
    assert topo.nodes_in("spine", ("eu", "z1", "s1")) == ["b", "c"]
    snap = ClusterSnapshot(topo)
    assert snap.domains["rack"][snap.rack[snap.index_of("b")]][-1] == "r2"
    with pytest.raises(ValueError, match="unknown topology level"):
        topo.domain_of("a", "row")
    with pytest.raises(KeyError, match="unknown node"):
        topo.node("zz")


def test_from_inventory_errors_name_the_row() -> None:
    frame = _inventory([{"node_id": "ok"}, {"node_id": "broken", "gpu_model": None}])
    with pytest.raises(ValueError, match=r"inventory row 2 \(node 'broken'\).*gpu_model"):
        Topology.from_inventory(frame)
    with pytest.raises(ValueError, match="lacks column"):
        Topology.from_inventory(frame.drop("cpu_milli"))
    with pytest.raises(ValueError, match="duplicate node_id"):
        Topology.of([make_node(1, node_id="x"), make_node(1, node_id="x")])


def test_openb_node_list_gives_the_papers_cluster(shared_data: Path) -> None:
    from predops.pipelines.ingest.traces.openb import read_nodes

    path = (
        shared_data
        / "alibaba-clusterdata"
        / "cluster-trace-gpu-v2023"
        / "csv"
        / "openb_node_list_gpu_node.csv"
    )
    result = validate(read_nodes(path), INVENTORY)
    assert result.quarantined.height == 0
    topo = Topology.from_inventory(result.good)
    assert len(topo) == 1213 and topo.total_gpus == 6212  # as PROVENANCE.md says
    assert {n.gpu_model for n in topo.nodes} >= {"G2", "T4", "P100", "V100M16"}


def test_synthetic_fleet_inventory_builds_a_topology() -> None:
    import numpy as np

    from predops.allocator.requests import Gang
    from predops.pipelines.synthetic.topology import build_fleet
    from tests.allocator.factories import make_allocator, make_pod

    inventory = build_fleet(200, np.random.default_rng(0)).inventory(T0)
    checked = validate(inventory, INVENTORY)
    assert checked.quarantined.height == 0
    topo = Topology.from_inventory(checked.good)
    assert len(topo) == 200 and topo.total_gpus > 0
    snap = ClusterSnapshot(topo)
    assert len(snap.domains["rack"]) > 1 and len(snap.domains["spine"]) >= 1
    # An NVLink 8-GPU gang of two pods, scoped to one rack, lands whole in one rack.
    gang = Gang(
        "g", tuple(make_pod(f"g{i}", gpus=8, nvlink=True, gang="g") for i in range(2)), "rack"
    )
    gd = make_allocator(snap).place_gang(gang)
    assert gd.placed
    assert len({snap.specs[snap.placements[f"g{i}"].node].rack for i in range(2)}) == 1
