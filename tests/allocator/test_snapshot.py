"""ClusterSnapshot: placements, over-commit refusal, fork / revert / commit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot, OverCommitError, Placement
from predops.allocator.topology import NodeSpec
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


def _cluster() -> ClusterSnapshot:
    return make_cluster(
        make_node(8, node_id="a", numa_nodes=2, rack="r1"),
        make_node(2, node_id="b", model="T4", cpu_milli=16_000, rack="r2"),
        make_node(0, node_id="c", cpu_milli=32_000, rack="r2"),
    )


def test_place_and_remove_update_free_resources() -> None:
    snap = _cluster()
    pod = make_pod("x", cpu=3000, mem=100, milli=300)
    snap.place(Placement(pod, 0, (2,), ((0, 3000),)))
    assert snap.gpu_free[0, 2] == 700
    assert snap.cpu_free[0] == 61_000 and snap.numa_cpu_free[0, 0] == 29_000
    assert snap.used_gpu_milli == 300
    snap.remove("x")
    assert snap.gpu_free[0, 2] == 1000 and snap.cpu_free[0] == 64_000
    assert snap.used_gpu_milli == 0 and not snap.placements


@pytest.mark.parametrize(
    ("placement", "why"),
    [
        (Placement(make_pod("p", cpu=70_000), 0, (), ((0, 32_000), (1, 38_000))), "NUMA"),
        (Placement(make_pod("p", gpus=1), 2, (0,), ((0, 1000),)), "does not exist"),
        (Placement(make_pod("p", gpus=2), 1, (0, 0), ((0, 1000),)), "distinct"),
        (Placement(make_pod("p", mem=10**9), 0, (), ((0, 1000),)), "memory"),
        (Placement(make_pod("p", gpus=1, models=["T4"]), 0, (0,), ((0, 1000),)), "model"),
    ],
)
def test_over_commit_is_refused(placement: Placement, why: str) -> None:
    snap = _cluster()
    before = snap.state()
    with pytest.raises(OverCommitError, match=why):
        snap.place(placement)
    assert ClusterSnapshot.same_state(before, snap.state())


def test_a_gpu_cannot_be_shared_beyond_1000_milli() -> None:
    snap = _cluster()
    snap.place(Placement(make_pod("a1", milli=600), 1, (0,), ((0, 1000),)))
    with pytest.raises(OverCommitError, match="milli free"):
        snap.place(Placement(make_pod("a2", milli=500), 1, (0,), ((0, 1000),)))
    snap.place(Placement(make_pod("a3", milli=400), 1, (0,), ((0, 1000),)))
    assert snap.gpu_free[1, 0] == 0


def test_revert_undoes_and_commit_keeps() -> None:
    snap = _cluster()
    alloc = make_allocator(snap)
    base = snap.state()
    snap.fork()
    assert alloc.place(make_pod(gpus=2)).placed
    snap.revert()
    assert ClusterSnapshot.same_state(base, snap.state())
    snap.fork()
    assert alloc.place(make_pod("kept", gpus=2)).placed
    snap.commit()
    assert "kept" in snap.placements and snap.depth == 0


def test_nested_fork_commit_folds_into_the_outer_revert() -> None:
    snap = _cluster()
    alloc = make_allocator(snap)
    base = snap.state()
    snap.fork()
    alloc.place(make_pod("outer", gpus=1))
    snap.fork()
    alloc.place(make_pod("inner", gpus=1))
    snap.commit()  # inner changes now belong to the outer fork
    assert {"outer", "inner"} <= snap.placements.keys()
    snap.revert()
    assert ClusterSnapshot.same_state(base, snap.state())


def test_what_if_add_nodes_and_drain_never_touch_the_base() -> None:
    snap = _cluster()
    alloc = make_allocator(snap)
    alloc.place(make_pod("run", gpus=4))
    base = snap.state()
    with snap.what_if():
        rows = snap.add_nodes([make_node(16, node_id="big", numa_nodes=4)])
        assert snap.n_nodes == 4 and snap.max_gpus == 16
        evicted = snap.drain(["a"])
        assert [p.pod_id for p in evicted] == ["run"]
        assert alloc.place(make_pod("moved", gpus=4), rows=np.array(rows)).placed
    assert ClusterSnapshot.same_state(base, snap.state())
    assert snap.index_of("a") == 0
    with pytest.raises(KeyError, match="big"):
        snap.index_of("big")


def test_revert_without_fork_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="without fork"):
        _cluster().revert()


def test_duplicate_node_ids_are_refused() -> None:
    snap = _cluster()
    with pytest.raises(ValueError, match="'a' is already"):
        snap.add_nodes([make_node(1, node_id="a")])


# ---------------------------------------------------------------- properties
OPS = st.lists(
    st.tuples(
        st.sampled_from(["place", "remove", "drain", "cordon", "add", "nest"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=30,
)


def _pod_from(k: int, i: int) -> PodRequest:
    shape = k % 5
    if shape == 0:
        return make_pod(f"q{i}", cpu=1000 + k % 7000, mem=k % 4096)
    if shape == 1:
        return make_pod(f"q{i}", cpu=500 + k % 3000, milli=100 + k % 899)
    if shape == 2:
        return make_pod(f"q{i}", cpu=2000, gpus=1 + k % 4, nvlink=bool(k & 8))
    if shape == 3:
        return make_pod(f"q{i}", cpu=1000 + k % 20_000, gpus=1 + k % 2, numa=True)
    return make_pod(f"q{i}", cpu=1000, milli=250, models=["T4"])


def _apply(snap: ClusterSnapshot, ops: list[tuple[str, int]], seed: int) -> None:
    alloc = make_allocator(snap, "best_fit", seed=seed)
    opened = 0
    for i, (op, k) in enumerate(ops):
        if op == "place":
            alloc.place(_pod_from(k, i))
        elif op == "remove" and snap.placements:
            snap.remove(sorted(snap.placements)[k % len(snap.placements)])
        elif op == "drain":
            snap.drain([snap.node_ids[k % snap.n_nodes]])
        elif op == "cordon":
            snap.set_schedulable([snap.node_ids[k % snap.n_nodes]], bool(k & 1))
        elif op == "add":
            snap.add_nodes([make_node(k % 9, numa_nodes=1 + k % 3, nvlink_groups=None)])
        elif op == "nest":
            snap.fork()
            opened += 1
        _check_invariants(snap)
    for _ in range(opened):
        snap.commit()


def _check_invariants(snap: ClusterSnapshot) -> None:
    """No device, NUMA node or node is ever over-committed; counters agree."""
    cnt = snap.gpu_count
    cols = np.arange(snap.max_gpus)[None, :]
    assert ((snap.gpu_free >= 0) & (snap.gpu_free <= 1000)).all()
    assert (snap.gpu_free[cols >= cnt[:, None]] == 0).all()
    assert (snap.cpu_free >= 0).all() and (snap.mem_free >= 0).all()
    assert (snap.numa_cpu_free >= 0).all()
    assert (snap.numa_cpu_free.sum(axis=1) == snap.cpu_free).all()
    assert (snap.gpu_idle == (snap.gpu_free == 1000).sum(axis=1)).all()
    assert (snap.gpu_free_total == snap.gpu_free.sum(axis=1)).all()
    assert (snap.gpu_free_most == snap.gpu_free.max(axis=1, initial=0)).all()
    for models in (None, frozenset({"T4"}), frozenset({"A100", "H100"})):
        names = np.array([*snap.models, ""])[snap.model]
        want = cnt > 0 if models is None else np.isin(names, list(models))
        assert (snap.model_mask(models) == (want & (snap.model >= 0))).all()
    used = (cnt * 1000 - snap.gpu_free.sum(axis=1)).sum()
    assert used == snap.used_gpu_milli
    assert sum(p.pod.total_gpu_milli for p in snap.placements.values()) == used


@settings(max_examples=60, deadline=None)
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_fork_anything_revert_restores_exactly(ops: list[tuple[str, int]], seed: int) -> None:
    snap = _cluster()
    make_allocator(snap, seed=seed + 1).place(make_pod("resident", gpus=2))
    base = snap.state()
    snap.fork()
    _apply(snap, ops, seed)
    snap.revert()
    assert ClusterSnapshot.same_state(base, snap.state())
    _check_invariants(snap)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_no_device_is_ever_over_committed(ops: list[tuple[str, int]], seed: int) -> None:
    snap = _cluster()
    _apply(snap, ops, seed)  # _apply checks the invariants after every operation
    for p in snap.placements.values():
        for g in p.gpus:
            assert g < snap.gpu_count[p.node]


def test_pods_nodes_and_placements_pickle_through_their_constructors() -> None:
    pod = PodRequest("p1", 2000, 4096, 1, 500, frozenset({"A100"}), True, False, "g1", "rack")
    node = NodeSpec("n1", 64000, 512000, gpus=4, gpu_model="A100", numa_nodes=2, rack="r1")
    placed = Placement(pod, 3, (1,), ((0, 2000),))
    for obj in (pod, node, placed):
        back = pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == obj and type(back) is type(obj)
    # the constructor's checks run on the way back in: a tampered pickle is refused
    bad = pickle.dumps(pod).replace(b"rack", b"zone")
    with pytest.raises(ValueError, match="gang_scope"):
        pickle.loads(bad)
