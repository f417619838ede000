"""The reclaimable-capacity decision: bounds, shrink at once, deadband, budget, stale
inputs, and the engine wiring."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Plan, SetReclaimable, SkipReason, action_from_dict
from predops.core.contracts import UsageForecast
from predops.policy.config import Budgets, PolicyConfig, ReclaimConfig
from predops.policy.engine import Reclaiming, plan
from predops.policy.reclaim import NodeUsage, ReclaimPolicy, reclaimable
from tests.policy.factories import T0, H, clock, make_fleet, make_state, pool_node, prov

CFG = ReclaimConfig()


def node(node_id: str = "n1", cores: int = 64, pool: str = "web"):  # type: ignore[no-untyped-def]
    return replace(pool_node(node_id, pool, gpus=0), cpu_milli=cores * 1000, memory_mib=256 * 1024)


def forecast(
    node_id: str = "n1", p50: float = 10, p95: float = 20, p99: float = 30, **kw: object
) -> UsageForecast:
    kw.setdefault("as_of", T0)
    kw.setdefault("window", 4 * H)
    kw.setdefault("provenance", prov(name="usage"))
    return UsageForecast(node_id, p50=p50, p95=p95, p99=p99, **kw)  # type: ignore[arg-type]


def used(node_id: str = "n1", cores: float = 12.0, **kw: object) -> NodeUsage:
    kw.setdefault("at", T0 - timedelta(minutes=5))
    return NodeUsage(node_id, cpu_cores=cores, **kw)  # type: ignore[arg-type]


def decide(nodes, forecasts, usage, published=None, cfg=CFG, states=None):  # type: ignore[no-untyped-def]
    fleet = make_fleet(nodes, states)
    return ReclaimPolicy(cfg).decide(
        forecasts, {u.node_id: u for u in usage}, fleet, published or {}, T0
    )


def test_forecast_peak_minus_margin_binds() -> None:
    r = reclaimable(node(), forecast(), used(), CFG, T0)
    # 64 - p99 30 - 5 % of 64 (3.2) = 30.8 cores; unused now 64 - 12 - 3.2 = 48.8
    assert r.cpu_milli == 30_800
    assert r.evidence["bound"] == "forecast"
    assert r.evidence["peak_cores"] == 30


def test_usage_now_over_the_forecast_binds() -> None:
    r = reclaimable(node(), forecast(), used(cores=50), CFG, T0)
    assert r.cpu_milli == 10_800  # 64 - 50 - 3.2
    assert r.evidence["bound"] == "unused_now"


def test_risk_picks_the_quantile() -> None:
    r = reclaimable(node(), forecast(), used(), replace(CFG, risk=0.05), T0)
    assert r.cpu_milli == 40_800 and r.evidence["peak_cores"] == 20


def test_memory_when_both_inputs_carry_it() -> None:
    gib = 1 << 30
    f = forecast(memory_p50=10 * gib, memory_p95=20 * gib, memory_p99=40 * gib)
    r = reclaimable(node(), f, used(memory_bytes=30 * gib), CFG, T0)
    assert r.memory_bytes == int(256 * gib - 40 * gib - 0.05 * 256 * gib)
    assert reclaimable(node(), forecast(), used(memory_bytes=gib), CFG, T0).memory_bytes is None


@pytest.mark.parametrize(
    ("f", "u", "disrupted", "why"),
    [
        (forecast(), None, False, "no usage measurement"),
        (None, used(), False, "no usage forecast"),
        (forecast(), used(at=T0 - H), False, "not current"),
        (forecast(as_of=T0 - 3 * H), used(), False, "not current"),
        (forecast(window=timedelta(minutes=30)), used(), False, "window ends"),
        (forecast(), used(), True, "cordoned"),
    ],
)
def test_missing_or_stale_inputs_reclaim_nothing(
    f: UsageForecast | None, u: NodeUsage | None, disrupted: bool, why: str
) -> None:
    r = reclaimable(node(), f, u, CFG, T0, disrupted=disrupted)
    assert r.cpu_milli == 0 and why in r.evidence["withheld"]


def test_withdrawn_when_published_and_inputs_go_stale() -> None:
    out = decide([node()], [], [used()], published={"n1": (30_000, None)})
    (a,) = out.actions
    assert isinstance(a, SetReclaimable) and a.cpu_milli == 0
    assert "no usage forecast" in a.reason and "shrunk from 30000 m" in a.reason


def test_deadband_holds_small_increases_never_decreases() -> None:
    out = decide([node()], [forecast()], [used()], published={"n1": (30_700, None)})
    assert not out.actions and out.skips[0].reason is SkipReason.NOT_NEEDED
    out = decide([node()], [forecast()], [used()], published={"n1": (30_801, None)})
    (a,) = out.actions
    assert isinstance(a, SetReclaimable) and a.cpu_milli == 30_800  # 1 m less: published
    out = decide([node()], [forecast()], [used()], published={"n1": (30_800, None)})
    assert not out.actions and "published already" in out.skips[0].detail


def test_growth_budget_per_pool_decreases_free() -> None:
    nodes = [node(f"n{i}") for i in range(8)]
    fs = [forecast(f"n{i}") for i in range(8)]
    us = [used(f"n{i}") for i in range(8)]
    published = {f"n{i}": (0, None) for i in range(6)} | {"n6": (60_000, None)}
    out = decide(nodes, fs, us, published)
    grown = [a for a in out.actions if isinstance(a, SetReclaimable) and a.cpu_milli > 0]
    # 25 % of 8 nodes may grow: n0, n1; n6 shrinks (never budgeted); n7 publishes
    # nothing known, which counts as growth, and the budget is used up by then.
    assert [a.target for a in out.actions] == ["n0", "n1", "n6"]
    assert len(grown) == 3
    assert out.budgets_used == {"reclaim_grow:web": 2}
    held = {s.target for s in out.skips if s.reason is SkipReason.BUDGET_EXHAUSTED}
    assert held == {"n2", "n3", "n4", "n5", "n7"}


def test_round_trips_through_the_plan_dict() -> None:
    (a,) = decide([node()], [forecast()], [used()]).actions
    back = action_from_dict(a.to_dict())
    assert back == a and isinstance(back, SetReclaimable)


def test_engine_plans_it_only_with_usage_inputs() -> None:
    nodes = [node("n1"), node("n2")]
    fleet = make_fleet(nodes, {"n2": make_state("n2", cordoned=True, cordon_owner="me")})
    snap = ClusterSnapshot(nodes)
    base = plan([], [], snap, fleet, Budgets(), clock(T0), PolicyConfig())
    assert not [a for a in base.actions if a.kind == "set_reclaimable"]
    usage = Reclaiming([forecast("n1"), forecast("n2")], {"n1": used("n1"), "n2": used("n2")})
    p = plan([], [], snap, fleet, Budgets(), clock(T0), PolicyConfig(), usage=usage)
    got = {a.target: a for a in p.actions if isinstance(a, SetReclaimable)}
    assert got["n1"].cpu_milli == 30_800 and got["n2"].cpu_milli == 0
    assert any(pv.model_name == "usage" for pv in p.provenance)
    assert Plan.from_dict(p.to_dict()) == p


# ---------------------------------------------------------------- properties
quantiles = st.tuples(st.floats(0, 128, allow_nan=False), st.floats(0, 128), st.floats(0, 128)).map(
    sorted
)


@settings(max_examples=300, deadline=None)
@given(
    cores=st.integers(1, 128),
    q=quantiles,
    u1=st.floats(0, 160, allow_nan=False),
    rise=st.floats(0.001, 160, allow_nan=False),
    risk=st.sampled_from([0.5, 0.05, 0.01]),
    margin=st.floats(0, 0.5),
    published=st.one_of(st.none(), st.integers(0, 128_000)),
)
def test_never_above_unused_and_shrinks_within_one_round(
    cores: int,
    q: list[float],
    u1: float,
    rise: float,
    risk: float,
    margin: float,
    published: int | None,
) -> None:
    cfg = replace(CFG, risk=risk, margin_share=margin)
    n = node(cores=cores)
    f = forecast(p50=q[0], p95=q[1], p99=q[2])
    pub = {} if published is None else {"n1": (published, None)}
    # round 1
    out1 = ReclaimPolicy(cfg).decide([f], {"n1": used(cores=u1)}, make_fleet([n]), pub, T0)
    value1 = _effective(out1, pub)
    assert 0 <= value1 <= max(0.0, cores - u1) * 1000 + 1e-6
    acted = [a for a in out1.actions if isinstance(a, SetReclaimable)]
    for a in acted:
        assert a.cpu_milli <= max(0.0, cores - u1) * 1000 + 1e-6
    # round 2: online usage rose; the value now published must fit in what is unused
    t2 = T0 + H
    f2 = replace(f, as_of=t2)
    pub2 = {"n1": (value1, None)}
    out2 = ReclaimPolicy(cfg).decide(
        [f2], {"n1": used(cores=u1 + rise, at=t2)}, make_fleet([n]), pub2, t2
    )
    value2 = _effective(out2, pub2)
    assert value2 <= max(0.0, cores - u1 - rise) * 1000 + 1e-6
    assert value2 <= value1


def _effective(out, published: dict[str, tuple[int, int | None]]) -> int:  # type: ignore[no-untyped-def]
    """What the node publishes after the round: the action's value, else the old one."""
    acted = [a.cpu_milli for a in out.actions if isinstance(a, SetReclaimable)]
    if acted:
        return int(acted[0])
    return published["n1"][0] if "n1" in published else 0
