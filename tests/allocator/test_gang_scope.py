"""A gang's rack / spine scope survives into a fresh allocator through its members
(``PodRequest.gang_scope``): a drain what-if on a snapshot built from running pods
must keep a rack-scoped gang in its rack, or report it stranded."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from predops.allocator.requests import Gang, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from tests.allocator.factories import make_allocator, make_cluster, make_node, make_pod


def _racks() -> ClusterSnapshot:
    """Rack ra (a1, a2) and rack rb (b1, b2) in one spine; 4-GPU nodes."""
    return make_cluster(
        make_node(4, node_id="a1", rack="ra", spine="s1"),
        make_node(4, node_id="a2", rack="ra", spine="s1"),
        make_node(4, node_id="b1", rack="rb", spine="s1"),
        make_node(4, node_id="b2", rack="rb", spine="s1"),
    )


def _running_gang(snap: ClusterSnapshot, scope: str | None) -> None:
    """Two 4-GPU members on a1 and a2, placed the way a snapshot builder replays the
    running pods (pod by pod on their nodes, not through ``place_gang``)."""
    builder = make_allocator(snap)
    for i, node in enumerate(("a1", "a2")):
        pod = replace(make_pod(f"g{i}", gpus=4, gang="g"), gang_scope=scope)
        d = builder.place(pod, rows=np.array([snap.index_of(node)]))
        assert d.placed


def test_fresh_allocator_reports_a_rack_scoped_gang_stranded() -> None:
    snap = _racks()
    _running_gang(snap, "rack")
    base = snap.state()
    check = make_allocator(snap, seed=5).fits_after_drain(["a1"])
    # Rack rb has two idle 4-GPU nodes, but the evicted member may not leave rack ra,
    # where a2 is full with the other member.
    assert not check.fits
    assert [(g.gang_id, g.placed) for g in check.gang_decisions] == [("g", False)]
    assert sum(check.unplaced.values()) == 1
    assert ClusterSnapshot.same_state(base, snap.state())


def test_without_a_carried_scope_the_member_may_leave_its_rack() -> None:
    """The contrast that shows the scope is what strands the gang above."""
    snap = _racks()
    _running_gang(snap, None)
    check = make_allocator(snap, seed=5).fits_after_drain(["a1"])
    assert check.fits
    (gd,) = check.gang_decisions
    assert gd.placed and gd.decisions[0].node_id in {"b1", "b2"}


def test_whole_rack_drained_moves_the_gang_to_another_rack_together() -> None:
    snap = _racks()
    _running_gang(snap, "rack")
    check = make_allocator(snap, seed=5).fits_after_drain(["a1", "a2"])
    assert check.fits
    (gd,) = check.gang_decisions
    assert gd.placed and gd.domain is not None and gd.domain[-1] == "rb"
    assert {d.node_id for d in gd.decisions} == {"b1", "b2"}


def test_gang_scope_is_validated() -> None:
    with pytest.raises(ValueError, match="gang_scope"):
        PodRequest("p", gang_scope="zone", gang_id="g")
    with pytest.raises(ValueError, match="without gang_id"):
        PodRequest("p", gang_scope="rack")


def test_members_disagreeing_on_the_scope_is_an_error() -> None:
    snap = _racks()
    builder = make_allocator(snap)
    for i, (node, scope) in enumerate((("a1", "rack"), ("a2", "spine"))):
        pod = replace(make_pod(f"g{i}", gpus=4, gang="g"), gang_scope=scope)
        assert builder.place(pod, rows=np.array([snap.index_of(node)])).placed
    with pytest.raises(ValueError, match="disagree"):
        make_allocator(snap).fits_after_drain(["a1", "a2"])


def test_the_scope_an_allocator_placed_a_gang_with_still_wins() -> None:
    snap = _racks()
    alloc = make_allocator(snap)
    gang = Gang("g", tuple(make_pod(f"g{i}", gpus=4, gang="g") for i in range(2)), "rack")
    assert alloc.place_gang(gang).placed
    assert not alloc.fits_after_drain([snap.node_ids[snap.placements["g0"].node]]).fits
