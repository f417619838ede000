"""Slow-start pacing per failure domain: bursts, pauses, probes, growth, state."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Drain, Plan, SkipReason
from predops.core.contracts import FailureRisk, Reason
from predops.policy.config import Budgets, DisruptionConfig, PolicyConfig
from predops.policy.engine import plan as make_plan
from predops.policy.fleet import FleetState, NodeState
from predops.policy.pacing import (
    PAUSED,
    SLOW_START,
    STOPPED,
    PacingState,
    pacing_after,
    signal_of,
)
from tests.policy.factories import T0, H, busy_snapshot, clock, make_fleet, make_state, prov
from tests.policy.factories import rack_nodes as racks_of
from tests.policy.test_disruption import EAGER


def risk(node_id: str, signal: str, p: float = 0.95, at: datetime = T0) -> FailureRisk:
    reasons = (
        Reason(f"{signal}__increase_24h", 0.9, f"{signal} rose"),
        Reason("gpu_temp_c__mean_1h", 0.1, "warm"),
        Reason("node__age_days", -0.3, "young"),
    )
    return FailureRisk(node_id, at, 24 * H, p, reasons, prov(at - H))


NODES = racks_of("train", racks=10, per_rack=4)  # 40 nodes: pool / spine budget 4


def drains(p: Plan) -> list[str]:
    return sorted(a.target for a in p.actions if isinstance(a, Drain))


def skips(p: Plan, reason: SkipReason) -> list[str]:
    return sorted(s.target for s in p.skips if s.kind == "drain" and s.reason == reason)


def round_(
    risks: list[FailureRisk],
    fleet: FleetState,
    state: PacingState | None,
    at: datetime = T0,
    config: PolicyConfig = EAGER,
    snap: ClusterSnapshot | None = None,
) -> tuple[Plan, PacingState]:
    p = make_plan(
        risks, [], snap or busy_snapshot(NODES), fleet, Budgets(), clock(at), config, None, state
    )
    out = pacing_after(p)
    assert out is not None
    return p, out


def flood() -> list[FailureRisk]:
    """One node in each of the 10 racks flagged by XIDs at once."""
    return [risk(f"train-r{r}-n0", "xid_errors") for r in range(10)]


def test_signal_is_the_source_of_the_top_raising_reason() -> None:
    assert signal_of(risk("a", "xid_errors")) == "xid_errors"
    r = FailureRisk("a", T0, 24 * H, 0.5, (Reason("x__y", -1.0, "down"),), prov())
    assert signal_of(r) is None


def test_a_burst_of_one_signal_pauses_it_with_one_probe_and_others_go_on() -> None:
    other = risk("train-r3-n2", "ecc_dbe", p=0.9)
    p, state = round_([*flood(), other], make_fleet(NODES), None)
    assert len(drains(p)) == 2 and "train-r3-n2" in drains(p)  # the probe + the other signal
    assert len(skips(p, SkipReason.DOMAIN_PAUSED)) == 9
    assert any("signal xid_errors" in a and "paused" in a for a in p.alerts)
    assert state.domains["signal:xid_errors"].mode == PAUSED
    # the pool, racks and spine were not slowed: the burst was the signal's
    assert not any(k.startswith(("pool:", "rack:", "spine:")) for k in state.domains)
    probe = next(d for d in drains(p) if d != "train-r3-n2")
    assert set(state.in_flight) == {probe, "train-r3-n2"}


def fleet_at(at: datetime, states: dict[str, NodeState] | None = None) -> FleetState:
    """The fleet observed at ``at`` (every node state read then), ``states`` over it."""
    base = {n.node_id: make_state(n.node_id, observed_at=at) for n in NODES}
    return make_fleet(NODES, {**base, **(states or {})}, observed_at=at)


def _drained(node_id: str, fault: bool | None = None, at: datetime = T0) -> NodeState:
    return make_state(
        node_id,
        observed_at=at,
        cordoned=True,
        cordon_owner="predops",
        cordoned_at=at - H,
        inspection_fault=fault,
    )


def probed(fault: bool) -> tuple[str, list[FailureRisk], Plan, PacingState]:
    """A flood's first round, then 5 h later the round that reads its probe's
    inspection: the probe, the flood's other risks then, that round's plan and state."""
    p, state = round_(flood(), make_fleet(NODES), None)
    [probe] = drains(p)
    later = T0 + 5 * H
    fleet = fleet_at(later, {probe: _drained(probe, fault, later)})
    rest = [risk(r.node_id, "xid_errors", at=later) for r in flood() if r.node_id != probe]
    p2, state2 = round_(rest, fleet, state, later)
    return probe, rest, p2, state2


def test_a_probe_that_finds_no_fault_stops_the_domain() -> None:
    probe, _, p2, state2 = probed(False)
    assert drains(p2) == [] and len(skips(p2, SkipReason.DOMAIN_PAUSED)) == 9
    assert state2.domains["signal:xid_errors"].mode == STOPPED
    assert probe not in state2.in_flight  # completed
    # it stays stopped while the flood lasts, however long
    for h in range(6, 30, 3):
        at = T0 + h * H
        rest = [risk(r.node_id, "xid_errors", at=at) for r in flood() if r.node_id != probe]
        p2, state2 = round_(rest, fleet_at(at), state2, at)
        assert drains(p2) == [] and state2.domains["signal:xid_errors"].mode == STOPPED


def test_a_probe_that_finds_a_fault_resumes_in_slow_start_and_the_width_grows() -> None:
    _, rest, p2, state2 = probed(True)
    t1 = T0 + 5 * H
    d = state2.domains["signal:xid_errors"]
    assert d.mode == SLOW_START and d.width == 2
    assert len(drains(p2)) == 2 and len(skips(p2, SkipReason.PACED)) == 7
    assert any("resumed" in a for a in p2.alerts)
    # both complete without a false alarm: width 4 (doubling per round of completions)
    t2 = t1 + 5 * H
    done = {n: _drained(n, None, t2) for n in drains(p2)}
    done = {n: replace(s, cordoned=False, cordon_owner=None) for n, s in done.items()}
    left = [r for r in rest if r.node_id not in done]
    left = [risk(r.node_id, "xid_errors", at=t2) for r in left]
    p3, state3 = round_(left, fleet_at(t2, done), state2, t2)
    assert state3.domains["signal:xid_errors"].width == 4
    assert len(drains(p3)) == 4  # the pool budget (4 of 40) also allows 4


def test_a_burst_in_one_rack_is_physical_not_paused() -> None:
    rack = [risk(f"train-r2-n{i}", "gpu_power_w") for i in range(4)]
    elsewhere = risk("train-r7-n0", "gpu_power_w", p=0.9)
    p, state = round_([*rack, elsewhere], make_fleet(NODES), None)
    assert state.domains["rack:" + _rack_key("train-r2-n0")].mode == SLOW_START
    assert "signal:gpu_power_w" not in state.domains  # one rack: not a confined burst
    assert "train-r7-n0" in drains(p)  # the pool goes on
    assert len([d for d in drains(p) if d.startswith("train-r2-")]) == 1  # width 1 = the budget
    assert not skips(p, SkipReason.DOMAIN_PAUSED)


def _rack_key(node_id: str) -> str:
    n = next(x for x in NODES if x.node_id == node_id)
    return "/".join(n.path)


def _driven(versions: dict[str, str]) -> FleetState:
    states = {n.node_id: make_state(n.node_id, driver_version="550") for n in NODES}
    for n, v in versions.items():
        states[n] = make_state(n, driver_version=v)
    return make_fleet(NODES, states)


def test_a_burst_of_one_driver_version_pauses_the_driver_not_the_signals() -> None:
    bad = {f"train-r{r}-n1": "560" for r in range(8)}
    signals = ["xid_errors", "pcie_replay", "ecc_sbe", "nic_flaps"]
    risks = [risk(n, signals[i % 4]) for i, n in enumerate(sorted(bad))]
    ok = risk("train-r9-n3", "xid_errors", p=0.9)  # the old driver: goes on
    p, state = round_([*risks, ok], _driven(bad), None)
    assert state.domains["driver:560"].mode == PAUSED
    assert not any(k.startswith("signal:") for k in state.domains)
    assert "train-r9-n3" in drains(p)
    assert len([d for d in drains(p) if d in bad]) == 1  # the probe
    # one driver fleet-wide explains nothing: the signal does (or nothing)
    homogeneous = make_fleet(
        NODES, {n.node_id: make_state(n.node_id, driver_version="550") for n in NODES}
    )
    _, state = round_(flood(), homogeneous, None)
    assert "driver:550" not in state.domains and "signal:xid_errors" in state.domains


def test_a_quiet_domain_opens_again_and_a_drain_that_never_ran_is_forgotten() -> None:
    p, state = round_(flood(), make_fleet(NODES), None)
    [probe] = drains(p)
    # the plan was not applied: the probe node was never disrupted
    t1 = T0 + 3 * H
    _, state1 = round_([], fleet_at(t1), state, t1)
    assert probe not in state1.in_flight  # its action expired (2 h) unrun
    assert "signal:xid_errors" in state1.domains  # seen 3 h ago: still held
    t2 = T0 + 7 * H
    _, state2 = round_([], fleet_at(t2), state1, t2)
    assert state2.domains == {}


def test_breaker_pacing_keeps_no_state() -> None:
    cfg = PolicyConfig(disruption=replace(EAGER.disruption, pacing="breaker"))
    p = make_plan(flood(), [], busy_snapshot(NODES), make_fleet(NODES), Budgets(), clock(), cfg)
    assert pacing_after(p) is None and skips(p, SkipReason.STORM_BREAKER)


def test_the_state_round_trips_and_bad_state_names_the_field() -> None:
    _, state = round_([*flood(), risk("train-r3-n2", "ecc_dbe")], make_fleet(NODES), None)
    again = PacingState.from_dict(state.to_dict())
    assert again.to_dict() == state.to_dict()
    bad = state.to_dict()
    bad["domains"]["signal:xid_errors"]["width"] = -1
    with pytest.raises(ValueError, match=r"domains\['signal:xid_errors'\].*width"):
        PacingState.from_dict(bad)
    bad = state.to_dict()
    next(iter(bad["in_flight"].values()))["expires"] = "soon"
    with pytest.raises(ValueError, match=r"in_flight.*expires"):
        PacingState.from_dict(bad)


def test_the_remembered_domains_are_bounded() -> None:
    cfg = PolicyConfig(disruption=replace(EAGER.disruption, pacing_max_domains=2, burst_nodes=2))
    risks = [risk(f"train-r{r}-n{i}", f"sig{r}") for r in range(6) for i in range(2)]
    _, state = round_(risks, make_fleet(NODES), None, config=cfg)
    assert len(state.domains) == 2


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="pacing"):
        DisruptionConfig(pacing="fast")
    with pytest.raises(ValueError, match="slow_start_width"):
        DisruptionConfig(slow_start_width=20, slow_start_open_width=16)


def test_after_a_stopped_flood_ebbs_a_node_outside_it_gets_the_first_step() -> None:
    probe, rest, _, state = probed(False)
    outsider = risk("train-r4-n3", "xid_errors", at=T0 + 6 * H)  # a real XID fault, later
    at = T0 + 6 * H
    still = [risk(r.node_id, "xid_errors", at=at) for r in rest]
    p, state = round_([*still, outsider], fleet_at(at), state, at)
    assert drains(p) == []  # the flood goes on: the outsider waits with it
    at = T0 + 7 * H  # the flood ebbed to 2 stragglers: they stay held, the outsider goes
    stragglers = [risk(r.node_id, "xid_errors", at=at) for r in rest[:2]]
    outsider = risk("train-r4-n3", "xid_errors", at=at)
    p, state = round_([*stragglers, outsider], fleet_at(at), state, at)
    assert drains(p) == ["train-r4-n3"] and state.domains["signal:xid_errors"].mode == STOPPED
    assert sorted(skips(p, SkipReason.DOMAIN_PAUSED)) == sorted(r.node_id for r in stragglers)
    assert probe not in drains(p)


def test_a_node_of_a_stopped_burst_that_fails_on_its_own_resumes_the_domain() -> None:
    _, rest, _, state = probed(False)
    at = T0 + 6 * H
    failed = rest[0].node_id
    repair = make_state(
        failed, observed_at=at, under_repair=True, cordoned=True, cordon_owner="repair"
    )
    still = [risk(r.node_id, "xid_errors", at=at) for r in rest[1:]]
    p, state = round_(still, fleet_at(at, {failed: repair}), state, at)
    d = state.domains["signal:xid_errors"]
    assert d.mode == SLOW_START and d.width == 2 and len(drains(p)) == 2
    assert any("of its burst failed" in a for a in p.alerts)
