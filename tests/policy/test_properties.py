"""Invariants of plan() over generated fleets: budgets never exceeded, no action on a
do-not-disrupt node, every candidate exactly once, deterministic, no stranded gang, the
storm breaker trips (``pacing`` 'breaker'), the snapshot is untouched. The budgets under
slow-start pacing over many rounds with its state carried: ``test_pacing_properties``."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec
from predops.core.actions import Drain, Plan
from predops.core.contracts import FailureRisk
from predops.policy.budgets import domains_of
from predops.policy.config import Budgets, DisruptionBudget
from predops.policy.engine import plan
from predops.policy.fleet import FleetState, NodeState
from tests.allocator.factories import make_allocator, make_pod
from tests.policy.factories import T0, H, clock, make_fleet, make_risk, make_state, rack_nodes
from tests.policy.test_disruption import BREAKER, EAGER


@dataclass
class Scenario:
    nodes: list[NodeSpec]
    load: dict[str, int]
    gangs: list[tuple[str, str]]
    states: dict[str, NodeState]
    risks: list[FailureRisk]
    extra_budget: int | None

    def snapshot(self) -> ClusterSnapshot:
        snap = ClusterSnapshot(self.nodes)
        alloc = make_allocator(snap)
        for node_id, g in sorted(self.load.items()):
            if g:
                pod = make_pod(f"p-{node_id}", gpus=g, cpu=2000)
                assert alloc.place(pod, rows=np.array([snap.index_of(node_id)])).placed
        for k, (a, b) in enumerate(self.gangs):
            for m, node_id in enumerate((a, b)):
                pod = make_pod(f"g{k}-{m}", gpus=8, cpu=2000, gang=f"g{k}")
                assert alloc.place(pod, rows=np.array([snap.index_of(node_id)])).placed
        return snap

    def fleet(self) -> FleetState:
        return make_fleet(self.nodes, self.states)

    def budgets(self) -> Budgets:
        extra = ()
        if self.extra_budget is not None:
            extra = (DisruptionBudget("pool", max_nodes=self.extra_budget),)
        return Budgets((*Budgets().budgets, *extra))


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = rack_nodes(
        "train", draw(st.integers(2, 6)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    )
    nodes += [replace(n, spine="web-spine") for n in rack_nodes("web", 2, 2)]
    ids = [n.node_id for n in nodes]
    free = list(ids)
    gangs: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 2))):
        if len(free) >= 2:
            a, b = draw(st.permutations(free))[:2]
            gangs.append((a, b))
            free = [x for x in free if x not in (a, b)]
    load = {x: draw(st.sampled_from([0, 0, 2, 4, 8])) for x in free}
    states: dict[str, NodeState] = {}
    for x in ids:
        flag = draw(st.sampled_from(["ok"] * 16 + ["dnd", "repair", "ours", "theirs"]))
        kw: dict[str, object] = {}
        if flag == "dnd":
            kw["do_not_disrupt"] = True
        elif flag == "repair":
            kw.update(under_repair=True, cordoned=True, cordon_owner="predops")
        elif flag in ("ours", "theirs"):
            kw.update(cordoned=True, cordon_owner="predops" if flag == "ours" else None)
            kw["cordoned_at"] = T0 - draw(st.sampled_from([1, 12, 48])) * H
        states[x] = make_state(x, **kw)
    risks = []
    for x in draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids))):
        bad = draw(st.sampled_from(["ok"] * 8 + ["noprov", "stale"]))
        p = draw(st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.95, 0.99, 1.0])))
        if bad == "noprov":
            risks.append(make_risk(x, p, provenance=None))
        elif bad == "stale":
            risks.append(make_risk(x, p, as_of=T0 - 5 * H))
        else:
            risks.append(make_risk(x, p))
    extra = draw(st.sampled_from([None, None, None, 0, 1, 2]))
    return Scenario(nodes, load, gangs, states, risks, extra)


def limit(scope: str, size: int, extra: int | None) -> int:
    """The default budgets, written out: max(1, 10 %) of a pool / spine, 1 per rack."""
    lim = 1 if scope == "rack" else max(1, math.floor(size * 0.1))
    if scope == "pool" and extra is not None:
        lim = min(lim, extra)
    return lim


def drains(p: Plan) -> list[Drain]:
    return [a for a in p.actions if isinstance(a, Drain)]


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_plan_invariants(sc: Scenario) -> None:
    snap = sc.snapshot()
    before = snap.state()
    fleet = sc.fleet()
    p = plan(sc.risks, [], snap, fleet, sc.budgets(), clock(), EAGER)
    drained = {d.target for d in drains(p)}
    event(f"drains: {min(len(drained), 2)}")
    event(f"stranded-gang skips: {sum(s.reason == 'would_strand_gang' for s in p.skips) > 0}")

    # every candidate exactly once
    seen = Counter((a.kind, a.candidate) for a in p.actions)
    seen.update((s.kind, s.target) for s in p.skips)
    assert max(seen.values(), default=1) == 1
    assert {t for k, t in seen if k == "drain"} == {r.node_id for r in sc.risks}
    cordoned = {x for x, s in sc.states.items() if s.cordoned}
    assert {t for k, t in seen if k == "uncordon"} == cordoned
    assert {t for k, t in seen if k == "resize_pool"} == {"train", "web"}

    # never a do-not-disrupt, cordoned, repaired, stale or unprovenanced node
    for x in drained:
        st_ = sc.states[x]
        assert not (st_.do_not_disrupt or st_.cordoned or st_.under_repair)
        [r] = [r for r in sc.risks if r.node_id == x]
        assert r.provenance is not None and T0 - r.as_of <= 2 * H

    # budgets never exceeded (counted independently of the engine's ledger)
    size: Counter[tuple[str, str]] = Counter()
    busy: Counter[tuple[str, str]] = Counter()
    new: Counter[tuple[str, str]] = Counter()
    for n in sc.nodes:
        for scope, dom in domains_of(n).items():
            size[(scope, dom)] += 1
            busy[(scope, dom)] += sc.states[n.node_id].disrupted
            new[(scope, dom)] += n.node_id in drained
    for key, k in new.items():
        if k:
            assert busy[key] + k <= limit(key[0], size[key], sc.extra_budget), key

    # no stranded gang: every evicted 8-GPU pod needs a whole free schedulable node left
    out = {x for x, s in sc.states.items() if s.disrupted} | drained
    keep = [i for i, x in enumerate(snap.node_ids) if x not in out]
    whole_free = int((snap.gpu_free[keep] == 1000).all(axis=1).sum()) if keep else 0
    evicted_whole = sum(
        1
        for pl in snap.placements.values()
        if snap.node_ids[pl.node] in drained and pl.pod.num_gpu == 8
    )
    assert evicted_whole <= whole_free
    for d in drains(p):
        assert d.evidence["allocator"]["fits"]
        assert d.expected_benefit is not None and d.expected_cost is not None
        assert d.expected_benefit > d.expected_cost

    # the snapshot is untouched and the plan deterministic (input order does not matter)
    assert ClusterSnapshot.same_state(before, snap.state())
    again = plan(
        list(reversed(sc.risks)), [], sc.snapshot(), sc.fleet(), sc.budgets(), clock(), EAGER
    )
    assert again.to_dict() == p.to_dict()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(5, 30), k=st.integers(0, 12))
def test_storm_breaker_trips_above_the_fraction(n: int, k: int) -> None:
    k = min(k, n)
    nodes = rack_nodes("train", n, 1)  # one node per rack: racks never bind
    snap = ClusterSnapshot(nodes)
    alloc = make_allocator(snap)
    for i in range(n):
        assert alloc.place(make_pod(f"p{i}", gpus=2), rows=np.array([i])).placed
    risks = [make_risk(nodes[i].node_id, 0.99) for i in range(k)]
    p = plan(risks, [], snap, make_fleet(nodes), Budgets(), clock(), BREAKER)
    trips = k >= 3 and k > 0.2 * n
    assert bool(p.alerts) == trips
    if trips:
        assert not drains(p)
    elif k:
        assert 1 <= len(drains(p)) <= max(1, n // 10)
