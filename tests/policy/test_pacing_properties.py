"""Slow-start pacing over many planning rounds, its state carried from one to the next,
on generated fleets, floods and inspection outcomes: no budget is ever exceeded, no
paced domain ever has more drains in flight than its width, a stopped domain gets no
drain, the state stays bounded and survives its JSON form unchanged."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from predops.core.actions import Drain
from predops.core.contracts import FailureRisk, Reason
from predops.policy.budgets import domains_of
from predops.policy.config import Budgets, PolicyConfig
from predops.policy.engine import plan as make_plan
from predops.policy.fleet import NodeState
from predops.policy.pacing import PAUSED, STOPPED, PacingState, in_flight_per_domain, pacing_after
from tests.policy.factories import T0, H, busy_snapshot, clock, make_fleet, make_state, prov
from tests.policy.factories import rack_nodes as racks_of
from tests.policy.test_disruption import EAGER

SIGNALS = ("xid_errors", "ecc_dbe", "samples", "gpu_power_w")
CFG = PolicyConfig(disruption=replace(EAGER.disruption, burst_nodes=3, pacing_max_domains=6))


def _risk(node_id: str, signal: str, p: float, at: object) -> FailureRisk:
    reasons = (Reason(f"{signal}__increase_24h", 0.8, signal),)
    return FailureRisk(node_id, at, 24 * H, p, reasons, prov(at - H))  # type: ignore[arg-type, operator]


def _limit(scope: str, size: int) -> int:
    return 1 if scope == "rack" else max(1, math.floor(size * 0.1))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_pacing_over_rounds_never_exceeds_a_budget_or_a_width(data: st.DataObject) -> None:
    nodes = racks_of("train", data.draw(st.integers(4, 10)), data.draw(st.integers(2, 4)), 2)
    nodes += racks_of("infer", data.draw(st.integers(2, 5)), 2, 1)
    ids = [n.node_id for n in nodes]
    drivers = {n: data.draw(st.sampled_from(["550", "550", "560"])) for n in ids}
    snap = busy_snapshot(nodes)
    states: dict[str, NodeState] = {}
    state: PacingState | None = None
    size: Counter[tuple[str, str]] = Counter()
    for n in nodes:
        for k in domains_of(n).items():
            size[k] += 1
    for r in range(data.draw(st.integers(3, 8))):
        now = T0 + r * 2 * H
        # the world moves: drained nodes are inspected (a fault, none, not known) and
        # come back or stay out; the plan is applied or not
        for n, s in list(states.items()):
            if s.cordoned and data.draw(st.booleans()):
                fault = data.draw(st.sampled_from([True, False, None]))
                back = data.draw(st.booleans())
                states[n] = replace(s, inspection_fault=fault, cordoned=not back)
        current = {
            n: replace(states.get(n, make_state(n)), observed_at=now, driver_version=drivers[n])
            for n in ids
        }
        fleet = make_fleet(nodes, current, observed_at=now)
        flood = data.draw(st.sampled_from(SIGNALS))
        flagged = data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
        risks = [
            _risk(
                n,
                flood if data.draw(st.booleans()) else data.draw(st.sampled_from(SIGNALS)),
                data.draw(st.sampled_from([0.6, 0.9, 0.99])),
                now,
            )
            for n in flagged
        ]
        plan = make_plan(risks, [], snap, fleet, Budgets(), clock(now), CFG, None, state)
        out = pacing_after(plan)
        assert out is not None
        drained = {a.target for a in plan.actions if isinstance(a, Drain)}
        event(f"drains: {min(len(drained), 3)}; paced domains: {min(len(out.domains), 2)}")

        # budgets: nodes disrupted before the round plus its drains, per domain
        busy: Counter[tuple[str, str]] = Counter()
        new: Counter[tuple[str, str]] = Counter()
        for n in nodes:
            for k in domains_of(n).items():
                busy[k] += current[n.node_id].disrupted
                new[k] += n.node_id in drained
        for k, m in new.items():
            if m:
                assert busy[k] + m <= _limit(k[0], size[k]), k

        # widths: a paced domain that got a drain this round holds no more than its width
        flying = in_flight_per_domain(out)
        for a in plan.actions:
            if not isinstance(a, Drain):
                continue
            for key in out.in_flight[a.target].domains:
                d = out.domains.get(key)
                if d is None:
                    continue
                if a.target in d.members or d.mode not in (PAUSED, STOPPED):
                    assert d.mode != STOPPED, key  # a stopped burst gets no drain
                    assert flying[key] <= d.width, (key, flying[key], d.width)
                else:  # after the burst ebbed, a node outside it: the first step
                    assert flying[key] <= CFG.disruption.slow_start_width, key

        # bounded, and the same state after a JSON round trip plans the same
        assert len(out.domains) <= CFG.disruption.pacing_max_domains
        assert set(out.in_flight) <= set(ids)
        if state is not None:
            carried = PacingState.from_dict(state.to_dict())
            again = make_plan(risks, [], snap, fleet, Budgets(), clock(now), CFG, None, carried)
            assert again.to_dict() == plan.to_dict()
        state = out
        for n in drained:
            if data.draw(st.booleans()):  # applied
                states[n] = make_state(n, cordoned=True, cordon_owner="predops", cordoned_at=now)
