"""The closed-loop what-if on small fleets: paired worlds, the oracle's ceiling, budgets,
determinism, and the drain floor that never changes a plan."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.actions import Drain
from predops.core.clock import FixedClock
from predops.core.contracts import Forecast
from predops.pipelines.cli.main import main
from predops.pipelines.whatif.cluster import PENDING, RUNNING
from predops.pipelines.whatif.forecasts import loop_demand
from predops.pipelines.whatif.loop import Loop, LoopConfig, drain_floor
from predops.pipelines.whatif.risk import RiskConfig, oracle_risk
from predops.pipelines.whatif.run import OpsConfig, sim_policy_config, simulate_ops
from predops.pipelines.whatif.tally import BudgetAuditor
from predops.pipelines.whatif.world import HOUR_S, World, WorldConfig, build_world
from predops.policy.config import Budgets
from predops.policy.engine import plan as make_plan
from predops.policy.fleet import FleetState
from predops.policy.soft_taint import pool_limit

WORLD = WorldConfig(nodes=60, days=4, seed=11, warmup_days=7)
GUARDS = {
    "budget_exhausted",
    "storm_breaker",
    "would_strand_gang",
    "does_not_fit",
    "pdb_blocked",
    "hysteresis",
    "under_repair",
    "already_cordoned",
    "drain_scheduled_after_failure",
    "idle_or_parked_at_plan",
}
"""Why the oracle may still lose work: a guard said no, the failure came before the
checkpoint the drain waited for, or the node got its pods after the hour's plan."""


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(WORLD)


def _no_forecasts(now: datetime) -> list[Forecast]:
    return []


def _run(world: World, policy: str) -> Loop:
    cfg = LoopConfig(policy=policy, policy_config=sim_policy_config(), sizing_every=6)
    risk = oracle_risk(world, cfg.horizon) if policy == "oracle" else None
    forecasts: Callable[[datetime], list[Forecast]] | None = None
    if policy == "oracle":
        forecasts = _no_forecasts
    loop = Loop(world, cfg, risk, forecasts)
    loop.run()
    return loop


@pytest.fixture(scope="module")
def reactive(world: World) -> Loop:
    return _run(world, "reactive")


@pytest.fixture(scope="module")
def oracle(world: World) -> Loop:
    return _run(world, "oracle")


def _failures_in_period(world: World) -> int:
    lo, hi = world.cfg.first_tick * HOUR_S, world.cfg.last_tick * HOUR_S
    return int(((world.failures.at > lo) & (world.failures.at <= hi)).sum())


def test_same_seed_same_world() -> None:
    a, b = build_world(WORLD), build_world(WORLD)
    assert np.array_equal(a.failures.node, b.failures.node)
    assert np.array_equal(a.failures.at, b.failures.at)
    assert a.workload.pod_ids == b.workload.pod_ids
    assert np.array_equal(a.workload.arrive, b.workload.arrive)
    other = build_world(replace(WORLD, seed=12))
    assert not np.array_equal(a.failures.at, other.failures.at)


def test_paired_runs_see_identical_failures(world: World, reactive: Loop, oracle: Loop) -> None:
    n = _failures_in_period(world)
    assert n > 0, "the test world needs failures in its evaluated days"
    for loop in (reactive, oracle):
        t = loop.tally
        assert t.failures + t.failures_averted == n
    assert reactive.tally.failures_averted == 0
    assert oracle.tally.failures_averted == oracle.tally.drains_caught


def test_oracle_loses_only_what_a_guard_or_timing_blocked(reactive: Loop, oracle: Loop) -> None:
    t = oracle.tally
    assert t.lost_gpu_hours <= reactive.tally.lost_gpu_hours
    assert reactive.tally.lost_gpu_hours > 0
    assert sum(t.missed.values()) == t.failures_on_busy_nodes
    assert set(t.missed) <= GUARDS, t.missed
    # perfect knowledge never drains a node that would not fail
    assert t.drains_needless == 0
    assert t.drains == t.drains_caught


def test_budget_violations_are_counted_and_zero(world: World, oracle: Loop) -> None:
    assert oracle.tally.budget_violations == 0
    assert oracle.auditor.checks == oracle.tally.drains
    # the auditor is independent of the engine: a second node out in one rack violates
    specs = world.specs
    rack = [i for i, s in enumerate(specs) if s.rack == specs[0].rack]
    assert len(rack) >= 2
    auditor = BudgetAuditor(Budgets(), specs)
    disrupted = np.zeros(len(specs), dtype=bool)
    active = np.ones(len(specs), dtype=bool)
    assert auditor.violates(rack[0], disrupted, active) is None
    disrupted[rack[0]] = True
    why = auditor.violates(rack[1], disrupted, active)
    assert why is not None and "2 disrupted > 1 allowed" in why


def test_drain_floor_never_changes_the_plan(world: World) -> None:
    cfg = LoopConfig(policy="oracle", policy_config=sim_policy_config(), sizing_every=1000)
    loop = Loop(world, cfg, oracle_risk(world, cfg.horizon), lambda now: [])
    for k in range(world.cfg.first_tick, world.cfg.first_tick + 30):
        loop.tick(k)
    k = world.cfg.first_tick + 30
    now = world.cfg.at(k)
    c = loop.cluster
    c.place_pending(k * HOUR_S)
    busy = np.flatnonzero(c.busy() & c.active)
    floor = loop.floor
    rng = np.random.default_rng(0)
    p = rng.uniform(0.0, 2 * floor, size=busy.size)
    p[: busy.size // 3] = rng.uniform(0.9, 1.0, size=busy.size // 3)
    risks = [loop._risk(int(r), float(q), k) for r, q in zip(busy, p, strict=True)]
    keep = [r for r, q in zip(risks, p, strict=True) if q > floor]
    assert 0 < len(keep) < len(risks)

    def drains(rs: list) -> list[str]:  # type: ignore[type-arg]
        fleet = FleetState(
            topology=loop._topology(),
            observed_at=now,
            nodes={loop.world.node_ids[int(r)]: loop._state(int(r), now) for r in busy},
        )
        out = make_plan(rs, [], c.snapshot, fleet, Budgets(), FixedClock(now), loop.pcfg)
        return sorted(a.target for a in out.actions if isinstance(a, Drain))

    assert drains(risks) == drains(keep)
    assert floor == pytest.approx(drain_floor(loop.pcfg.disruption, timedelta(hours=2)))


def test_loop_demand_is_what_the_loop_runs_and_queues(world: World) -> None:
    demand = loop_demand(world)
    loop = Loop(world, LoopConfig(policy="reactive", policy_config=sim_policy_config()))
    w, c = world.workload, loop.cluster
    for k in range(world.cfg.first_tick, world.cfg.first_tick + 6):
        loop.tick(k)
        alive = (c.status == RUNNING) | (c.status == PENDING)
        at = demand.filter(pl.col("ts") == world.cfg.at(k))
        assert at.height == len(w.pools)
        for sid, value in zip(at["series_id"], at["value"], strict=True):
            pool = w.pool == w.pools.index(sid.split("/")[0])
            held = w.gpus if "/gpus/" in sid else w.cpu_milli / 1000
            assert value == pytest.approx(float(held[pool & alive].sum()), abs=1e-3), sid


def test_same_seed_same_json() -> None:
    cfg = OpsConfig(
        world=WorldConfig(nodes=30, days=1, seed=5, warmup_days=7),
        policies=("reactive", "oracle"),
        sizing_every=6,
    )
    a, b = simulate_ops(cfg), simulate_ops(cfg, jobs=2)  # b: one process per policy
    a.pop("seconds"), b.pop("seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["policies"]["oracle"]["budget_violations"] == 0
    assert set(a["comparison"]) == {"oracle"}


def test_predictive_retrains_on_the_past_only(world: World) -> None:
    from predops.pipelines.whatif.risk import predicted_risk

    small = RiskConfig(retrain_every=timedelta(days=2), params={"n_estimators": 30})
    small = replace(small, params={**small.params, "early_stopping_rounds": 10})
    table = predicted_risk(world, small)
    assert [c.isoformat() for c in table.cutoffs] == [f["cutoff"] for f in table.fits]
    starts = [world.cfg.at(t) for t in range(world.cfg.first_tick, world.cfg.last_tick, 48)]
    assert table.cutoffs == starts  # each model is fitted at the start of the days it scores
    assert table.version[0] == 1 and table.version[-1] == len(starts)
    scored = table.p[~np.isnan(table.p)]
    assert scored.size > 0 and ((scored >= 0) & (scored <= 1)).all()


def test_cli_reports_one_json_object() -> None:
    res = CliRunner().invoke(
        main,
        [
            "simulate-ops",
            "--nodes",
            "30",
            "--days",
            "1",
            "--warmup-days",
            "7",
            "--policy",
            "reactive",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress lines go to stderr
    assert list(out["policies"]) == ["reactive"]
    assert out["policies"]["reactive"]["drains"] == 0


def test_soft_taint_follows_the_risk_and_never_the_reactive(world: World, reactive: Loop) -> None:
    cfg = LoopConfig(
        policy="reactive", policy_config=sim_policy_config(), sizing_every=6, soft_taint_p=0.5
    )
    again = Loop(world, cfg)
    assert again.run().to_dict() == reactive.tally.to_dict()
    assert again.soft_tainted_node_hours == 0 and not again.cluster.soft_taint.any()
    oracle_cfg = replace(cfg, policy="oracle")
    tainted = Loop(world, oracle_cfg, oracle_risk(world, cfg.horizon), _no_forecasts)
    k = world.cfg.first_tick
    tainted.tick(k)
    # the engine's soft-taint policy: only nodes at or above the level and in service,
    # at most its budget per pool, the riskiest first
    c = tainted.cluster
    over = (tainted._p(k) >= 0.5) & c.active & ~c.disrupted()
    assert c.soft_taint.any() and not (c.soft_taint & ~(tainted._p(k) >= 0.5)).any()
    for rows in c.pool_rows.values():
        limit = pool_limit(len(rows), tainted.pcfg.disruption)
        assert c.soft_taint[rows].sum() == min(limit, over[rows].sum())
    assert tainted.soft_tainted_node_hours == int(
        (tainted.cluster.soft_taint & tainted.cluster.active).sum()
    )
