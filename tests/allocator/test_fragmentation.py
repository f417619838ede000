"""The fast fragmentation index against the definition written out per pod type."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.fragmentation import FragmentationIndex
from predops.allocator.metrics import fragmentation
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot, Placement
from predops.allocator.topology import NodeSpec
from tests.allocator.factories import make_node, make_pod
from tests.allocator.reference import node_fragmentation

MODELS = ["A100", "T4", "V100"]
SPECS = ["", "", "", "T4", "A100|V100", "V100"]


@st.composite
def workloads(draw: st.DrawFn) -> PodBatch:
    """Pod mixes with CPU-only pods, shares, multi-GPU pods and model constraints."""
    pods = []
    for i in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 3))
        cpu = draw(st.sampled_from([1000, 4000, 8000, 16_000, 32_000]))
        spec = draw(st.sampled_from(SPECS))
        models = frozenset(spec.split("|")) if spec else None
        if kind == 0:
            pods.append(PodRequest(f"w{i}", cpu_milli=cpu))
        elif kind == 1:
            m = draw(st.sampled_from([100, 250, 470, 500, 810]))
            pods.append(PodRequest(f"w{i}", cpu, 0, 1, m, models))
        else:
            k = draw(st.sampled_from([1, 2, 4, 8]))
            pods.append(PodRequest(f"w{i}", cpu, 0, k, 1000, models))
    return PodBatch.of(pods)


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    """Clusters with random GPU usage (arbitrary per-GPU free milli) and CPU use."""
    nodes: list[NodeSpec] = []
    for i in range(draw(st.integers(1, 8))):
        gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        nodes.append(
            make_node(
                gpus,
                node_id=f"n{i}",
                model=draw(st.sampled_from(MODELS)),
                cpu_milli=draw(st.sampled_from([16_000, 64_000, 96_000])),
            )
        )
    snap = ClusterSnapshot(nodes)
    for i, spec in enumerate(nodes):
        used = [draw(st.integers(0, 1000)) for _ in range(spec.gpus)]
        cpu = draw(st.integers(0, spec.cpu_milli))
        for g, u in enumerate(used):
            if u:
                snap.place(
                    Placement(
                        make_pod(f"u{i}-{g}", cpu=0, milli=u)
                        if u < 1000
                        else make_pod(f"u{i}-{g}", cpu=0, gpus=1),
                        i,
                        (g,),
                        (),
                    )
                )
        if cpu:
            snap.place(Placement(make_pod(f"c{i}", cpu=cpu), i, (), ((0, cpu),)))
    return snap


def _reference(
    snap: ClusterSnapshot,
    row: int,
    dist: PodTypeDistribution,
    free: list[int] | None = None,
    cpu: int | None = None,
) -> float:
    n = int(snap.gpu_count[row])
    model = snap.models[snap.model[row]] if snap.model[row] >= 0 else None
    return node_fragmentation(
        free if free is not None else snap.gpu_free[row, :n].tolist(),
        int(snap.cpu_free[row]) if cpu is None else cpu,
        model,
        dist,
    )


@settings(max_examples=80, deadline=None)
@given(snap=clusters(), mix=workloads(), popularity=st.sampled_from([0.6, 0.95, 1.0]))
def test_node_fragmentation_matches_the_definition(
    snap: ClusterSnapshot, mix: PodBatch, popularity: float
) -> None:
    dist = PodTypeDistribution.from_batch(mix, popularity)
    got = FragmentationIndex(dist).node_frag(snap)
    want = [_reference(snap, i, dist) for i in range(snap.n_nodes)]
    np.testing.assert_allclose(got, want, atol=1e-6)


@settings(max_examples=80, deadline=None)
@given(
    snap=clusters(),
    mix=workloads(),
    milli=st.sampled_from([100, 470, 810]),
    cpu=st.sampled_from([0, 3000, 20_000]),
)
def test_share_candidates_match_the_definition(
    snap: ClusterSnapshot, mix: PodBatch, milli: int, cpu: int
) -> None:
    dist = PodTypeDistribution.from_batch(mix)
    index = FragmentationIndex(dist)
    pod = make_pod(cpu=cpu, milli=milli)
    rows = np.flatnonzero((snap.cpu_free >= cpu) & (snap.gpu_free >= milli).any(axis=1))
    pos, gpu, after = index.after_share(snap, rows, pod)
    seen = set()
    for p, g, a in zip(pos.tolist(), gpu.tolist(), after.tolist(), strict=True):
        row = int(rows[p])
        free = snap.gpu_free[row, : snap.gpu_count[row]].tolist()
        assert free[g] >= milli and free[g] not in free[:g]  # one per distinct value
        seen.add((row, free[g]))
        free[g] -= milli
        assert a == pytest.approx(
            _reference(snap, row, dist, free, int(snap.cpu_free[row]) - cpu), abs=1e-6
        )
    for row in rows.tolist():  # every distinct fitting value is a candidate
        vals = {v for v in snap.gpu_free[row, : snap.gpu_count[row]].tolist() if v >= milli}
        assert {(row, v) for v in vals} <= seen


@settings(max_examples=60, deadline=None)
@given(snap=clusters(), mix=workloads(), k=st.sampled_from([0, 1, 2, 4]))
def test_whole_gpu_candidates_match_the_definition(
    snap: ClusterSnapshot, mix: PodBatch, k: int
) -> None:
    dist = PodTypeDistribution.from_batch(mix)
    pod = make_pod(cpu=2000, gpus=k)
    rows = np.flatnonzero((snap.cpu_free >= 2000) & ((snap.gpu_free == 1000).sum(axis=1) >= k))
    after = FragmentationIndex(dist).after_whole(snap, rows, pod)
    for row, a in zip(rows.tolist(), after.tolist(), strict=True):
        free = snap.gpu_free[row, : snap.gpu_count[row]].tolist()
        for g in [i for i, v in enumerate(free) if v == 1000][:k]:
            free[g] = 0
        assert a == pytest.approx(
            _reference(snap, row, dist, free, int(snap.cpu_free[row]) - 2000), abs=1e-6
        )


def test_index_follows_changes_and_cluster_ratio() -> None:
    snap = ClusterSnapshot(
        [make_node(2, node_id="a", model="T4"), make_node(2, node_id="b", model="T4")]
    )
    # Workload: whole-GPU pods only; a half-used GPU is then pure fragment.
    dist = PodTypeDistribution.from_batch(PodBatch.of([make_pod(cpu=1000, gpus=1)]))
    index = FragmentationIndex(dist)
    assert index.cluster_frag_milli(snap) == 0
    snap.place(Placement(make_pod("s", cpu=0, milli=500), 0, (1,), ()))
    assert index.cluster_frag_milli(snap) == 500
    frag = fragmentation(snap, index)
    assert frag.idle_milli == 3500 and frag.frag_ratio == pytest.approx(500 / 3500)
    assert frag.frag_of_capacity == pytest.approx(500 / 4000)


def test_distribution_keeps_the_most_popular_types() -> None:
    pods = (
        [make_pod(cpu=1000, gpus=1)] * 6
        + [make_pod(cpu=2000, milli=500)] * 3
        + [make_pod(cpu=3000)]
    )
    dist = PodTypeDistribution.from_batch(PodBatch.of(pods), popularity=0.9)
    assert len(dist) == 2  # 6 + 3 of 10 reach 90 %
    np.testing.assert_allclose(dist.prob, [6 / 9, 3 / 9])
    assert dist.mean_gpu_milli == pytest.approx(6 / 9 * 1000 + 3 / 9 * 500)
    with pytest.raises(ValueError, match="empty"):
        PodTypeDistribution.from_batch(PodBatch.of([]))
