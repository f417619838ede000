"""Allocator: gangs all-or-nothing, scoped gangs, drain what-ifs, explanations."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.requests import Gang
from predops.allocator.snapshot import ClusterSnapshot
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


def _racks() -> ClusterSnapshot:
    """Two racks in one spine, a third rack in another spine; 4-GPU nodes."""
    return make_cluster(
        make_node(4, node_id="a1", rack="ra", spine="s1"),
        make_node(4, node_id="a2", rack="ra", spine="s1"),
        make_node(4, node_id="b1", rack="rb", spine="s1"),
        make_node(4, node_id="c1", rack="rc", spine="s2"),
        make_node(4, node_id="c2", rack="rc", spine="s2"),
    )


def test_rack_scoped_gang_lands_in_one_rack() -> None:
    snap = _racks()
    alloc = make_allocator(snap)
    gang = Gang("g", tuple(make_pod(f"g{i}", gpus=2, gang="g") for i in range(4)), "rack")
    gd = alloc.place_gang(gang)
    assert gd.placed and len(gd.decisions) == 4
    racks = {snap.specs[snap.placements[f"g{i}"].node].rack for i in range(4)}
    assert len(racks) == 1 and gd.domain is not None and gd.domain[-1] in {"ra", "rc"}


def test_gang_too_big_for_any_rack_is_not_placed_at_all() -> None:
    snap = _racks()
    alloc = make_allocator(snap)
    base = snap.state()
    gang = Gang("g", tuple(make_pod(f"g{i}", gpus=4, gang="g") for i in range(3)), "rack")
    gd = alloc.place_gang(gang)
    assert not gd.placed and gd.decisions == ()
    assert ClusterSnapshot.same_state(base, snap.state())
    # the same gang fits within a spine (a1, a2, b1) and without a scope
    assert alloc.place_gang(Gang("g", gang.pods, "spine")).placed


def test_gang_scope_is_validated() -> None:
    import pytest

    with pytest.raises(ValueError, match="scope"):
        Gang("g", (make_pod(),), "zone")
    with pytest.raises(ValueError, match="no pods"):
        Gang("g", ())


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=1, max_size=6),
    preload=st.lists(st.integers(0, 4), min_size=5, max_size=5),
    scope=st.sampled_from([None, "rack", "spine"]),
    policy=st.sampled_from(["best_fit", "gpu_packing", "random"]),
)
def test_a_gang_is_placed_whole_or_not_at_all(
    sizes: list[int], preload: list[int], scope: str | None, policy: str
) -> None:
    snap = _racks()
    alloc = make_allocator(snap, policy, seed=sum(sizes))
    for row, k in enumerate(preload):
        if k:
            alloc.place(make_pod(f"pre{row}", gpus=k), rows=np.array([row]))
    before = snap.state()
    gang = Gang(
        "g",
        tuple(make_pod(f"m{i}", cpu=1000, gpus=k, gang="g") for i, k in enumerate(sizes)),
        scope,
    )
    gd = alloc.place_gang(gang)
    members = [p for p in snap.placements if p.startswith("m")]
    if gd.placed:
        assert len(members) == len(sizes)
        if scope is not None:
            level = 3 if scope == "rack" else 2
            assert (
                len({snap.specs[snap.placements[m].node].path[: level + 1] for m in members}) == 1
            )
    else:
        assert members == []
        assert ClusterSnapshot.same_state(before, snap.state())
    assert snap.depth == 0


def test_fits_after_drain_answers_without_changing_the_cluster() -> None:
    snap = _racks()
    alloc = make_allocator(snap)
    for i in range(5):
        alloc.place(make_pod(f"p{i}", gpus=2))
    gang = Gang("g", tuple(make_pod(f"g{i}", gpus=2, gang="g") for i in range(2)), "rack")
    assert alloc.place_gang(gang).placed
    base = snap.state()
    victim_row = snap.placements["g0"].node
    victim = snap.node_ids[victim_row]
    on_victim = set(snap.pods_on[victim_row])
    ok = alloc.fits_after_drain([victim])
    moved = [d for d in ok.decisions] + [d for gd in ok.gang_decisions for d in gd.decisions]
    assert ok.fits and ok.unplaced == {}
    assert {d.pod_id for d in moved} == on_victim
    assert all(d.placed and d.node_id != victim for d in moved)
    rack = snap.specs[victim_row].rack
    for gd in ok.gang_decisions:  # evicted gang members stay in their gang's rack
        assert (
            all(snap.specs[snap.index_of(d.node_id or "")].rack == rack for d in gd.decisions)
            or len(gd.decisions) == 2
        )
    too_many = alloc.fits_after_drain(["a1", "a2", "b1", "c1"])
    assert not too_many.fits and sum(too_many.unplaced.values()) > 0
    assert ClusterSnapshot.same_state(base, snap.state())


def test_decisions_explain_node_devices_and_runner_up() -> None:
    snap = make_cluster(make_node(8, node_id="x"), make_node(8, node_id="y"))
    alloc = make_allocator(snap)
    first = alloc.place(make_pod("a", gpus=2))
    assert first.tied == 2 and "lost the tie-break" in first.explain()
    second = alloc.place(make_pod("b", gpus=1))
    assert second.node_id == first.node_id and second.runner_up != second.node_id
    text = second.explain()
    assert "GPUs [2]" in text and "scored lower" in text and "leaves" in text
    nope = alloc.place(make_pod("c", gpus=9))
    assert not nope.placed and nope.reason == "gpu" and "not placed (gpu)" in nope.explain()
    assert alloc.place(make_pod("d", cpu=10**6)).reason == "cpu"
    assert alloc.place(make_pod("e", mem=10**9)).reason == "memory"
    snap.set_schedulable(["x", "y"], False)
    assert alloc.place(make_pod("f")).reason == "no_schedulable_node"


def test_drained_gang_member_must_return_to_its_gangs_rack() -> None:
    snap = _racks()
    alloc = make_allocator(snap)
    gang = Gang("g", tuple(make_pod(f"g{i}", gpus=4, gang="g") for i in range(2)), "rack")
    gd = alloc.place_gang(gang)
    assert gd.placed
    rows = {snap.placements[f"g{i}"].node for i in range(2)}
    assert len(rows) == 2  # two full nodes of one rack
    home = snap.specs[rows.pop()]
    check = alloc.fits_after_drain([home.node_id])
    # Other racks have idle 4-GPU nodes, but the member may not leave its rack.
    assert not check.fits
    assert sum(check.unplaced.values()) == 1


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["best_fit", "topology_aware"]),
)
def test_pin_places_exactly_as_place_on_one_row(seed: int, policy: str) -> None:
    """Pods bound to a node: ``pin`` gives the outcome and devices of ``place`` limited
    to that row, pod after pod, whatever the pod shape."""
    rng = np.random.default_rng(seed)

    def cluster() -> ClusterSnapshot:
        return make_cluster(
            make_node(
                8,
                node_id="g8",
                numa_nodes=2,
                gpu_numa=[0] * 4 + [1] * 4,
                nvlink="d1",
                nvlink_groups=[0, 0, 0, 0, 1, 1, 1, 1],
            ),
            make_node(4, node_id="g4", cpu_milli=32_000),
            make_node(0, node_id="c1", cpu_milli=16_000, memory_mib=64 * 1024),
        )

    a, b = cluster(), cluster()
    pa = make_allocator(a, policy=policy, seed=seed)
    pb = make_allocator(b, policy=policy, seed=seed)
    for i in range(40):
        row = int(rng.integers(3))
        kind = int(rng.integers(4))
        pod = make_pod(
            f"p{i}",
            cpu=int(rng.integers(0, 12)) * 1000,
            mem=int(rng.integers(1, 64)) * 1024,
            gpus=[0, 1, 2, 4][kind] if kind else 0,
            milli=int(rng.integers(100, 900)) if kind == 1 and rng.random() < 0.5 else None,
            numa=bool(rng.random() < 0.3),
            nvlink=bool(rng.random() < 0.3),
        )
        placed = pa.place(pod, rows=np.array([row])).placed
        assert pb.pin(pod, row) == placed, (i, pod)
        assert ClusterSnapshot.same_state(a.state(), b.state()), (i, pod)
