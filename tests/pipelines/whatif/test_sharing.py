"""Co-location and tidal lending in the closed loop on a small simulated world: the
reclaim policy's batch capacity, evictions and violations are counted consistently, the
knobs come from the tuning world, and lending moves nodes and serves the borrower."""

from __future__ import annotations

import numpy as np
import pytest

from predops.pipelines.whatif.sharing import (
    Outcome,
    SharingConfig,
    _run_hour,
    colocation,
    ewma_quantiles,
    lending,
    online_use,
    run_predops,
)
from predops.pipelines.whatif.usage_model import model_quantiles
from predops.pipelines.whatif.world import World, WorldConfig, build_world
from predops.policy.config import ReclaimConfig

SMALL = SharingConfig(predops_margins=(0.0, 0.05), baseline_margins=(0.0, 0.05, 0.1))


@pytest.fixture(scope="module")
def worlds() -> tuple[World, World]:
    cfg = {"nodes": 40, "days": 1.5, "warmup_days": 8}
    return build_world(WorldConfig(seed=5, **cfg)), build_world(WorldConfig(seed=6, **cfg))


def test_violations_and_evictions_follow_online_use() -> None:
    class U:
        alloc = np.array([10.0, 10.0, 10.0])
        use = np.array([[4.0], [8.0], [np.nan]])

    out = Outcome()
    _run_hour(out, U, 0, np.array([4.0, 4.0, 8.0]), 4.0)  # type: ignore[arg-type]
    # node 0: 4 + 4 fits; node 1: 8 + 4 = 12 > 10: one pod evicted; node 2 down
    assert (out.violation_node_hours, out.batch_evictions, out.node_hours) == (1, 1, 2)
    assert out.batch_core_hours == 8 and out.batch_core_hours_evicted == 4
    assert out.online_throttled_core_hours == pytest.approx(2.0)


def test_the_reclaim_policy_drives_batch_pods_in_the_loop(worlds: tuple[World, World]) -> None:
    world, _ = worlds
    u = online_use(world)
    assert u.use.shape[0] == len(u.specs) > 0
    fc = ewma_quantiles(u, 0.3)
    out = run_predops(world, u, fc, ReclaimConfig(risk=0.05, max_grow_percent=100.0), 4.0)
    assert out.batch_core_hours > 0 and out.node_hours > 0
    assert out.batch_core_hours <= out.allocatable_core_hours


def test_the_usage_model_forecasts_every_evaluated_hour_from_the_warmup_only(
    worlds: tuple[World, World],
) -> None:
    world, _ = worlds
    u = online_use(world)
    ids = [n.node_id for n in u.specs]
    first, last = world.cfg.first_tick, world.cfg.last_tick
    q, info = model_quantiles(ids, u.use, u.alloc, world.cfg.start, first, last, n_estimators=20)
    assert q.shape == (len(ids), u.use.shape[1], 3)
    assert np.isnan(q[:, :first]).all() and np.isnan(q[:, last:]).all()
    inside = q[:, first:last]
    seen = np.isfinite(inside).all(axis=2)
    assert seen.mean() > 0.9
    ok = inside[seen]
    assert (np.diff(ok, axis=1) >= -1e-9).all()  # p50 <= p95 <= p99
    assert info["fitted_on_hours"] == first and info["train_rows"] > 0
    # the evaluated hours are never seen by the fit: changing them leaves the first
    # hour's forecast (its origin is the last warm-up hour) unchanged
    other = u.use.copy()
    other[:, first:] = other[:, first:] * 1.5
    q2, _ = model_quantiles(ids, other, u.alloc, world.cfg.start, first, last, n_estimators=20)
    np.testing.assert_allclose(q2[:, first], q[:, first], equal_nan=True)
    out = run_predops(world, u, q, ReclaimConfig(risk=0.01, max_grow_percent=100.0), 4.0)
    assert 0 < out.batch_core_hours <= out.allocatable_core_hours


def test_colocation_tunes_on_the_other_world(worlds: tuple[World, World]) -> None:
    world, tune = worlds
    r = colocation(world, tune, SMALL)
    assert r["tuned_on_seed"] == 6
    methods = r["methods"]
    assert set(methods) == {"predops", "reclaim_ewma", "trailing_max", "none"}
    none = methods["none"]
    assert none["batch_core_hours"] == 0 and none["online_throttled_node_hours"] == 0
    for m in (methods["predops"], methods["reclaim_ewma"], methods["trailing_max"]):
        assert m["batch_core_hours"] > 0
        assert m["batch_core_hours"] + m["batch_core_hours_lost_to_evictions"] == pytest.approx(
            m["batch_core_hours_placed"]
        )
        assert m["violation_rate"] == pytest.approx(
            m["online_throttled_node_hours"] / m["node_hours"], abs=1e-5
        )
    assert r["knobs"]["predops_risk_margin_grow"][1] in SMALL.predops_margins
    assert r["usage_model"]["evaluation"]["fitted_on_hours"] == world.cfg.first_tick
    best = r["best_baseline_at_same_violation_rate"]
    assert best in {None, "reclaim_ewma", "trailing_max"}
    if best is not None:
        matched = r["baselines_at_predops_violation_rate"][best]
        gain = methods["predops"]["batch_core_hours"] / matched - 1
        assert r["batch_gain_vs_best_baseline_at_same_violation_rate"] == pytest.approx(
            gain, abs=1e-4
        )


def test_lending_moves_nodes_to_the_night_pool(worlds: tuple[World, World]) -> None:
    world, _ = worlds
    r = lending(world, SharingConfig(borrower_scale=2.5))
    lent, none = r["with_lending"], r["no_lending"]
    assert lent["lends"] >= 1 and lent["node_hours_lent"] > 0
    assert lent["borrower_served_core_hours"] >= none["borrower_served_core_hours"]
    assert lent["borrower_throughput_gained_core_hours"] > 0


def test_cli_sharing_needs_another_tuning_seed_and_reports_both() -> None:
    import json

    from click.testing import CliRunner

    from predops.pipelines.cli.main import main

    args = ["simulate-ops", "--sharing", "--nodes", "30", "--days", "1", "--warmup-days", "8"]
    res = CliRunner().invoke(main, [*args, "--seed", "5", "--json"])
    assert res.exit_code != 0 and "--tune-seed" in res.output
    res = CliRunner().invoke(main, [*args, "--seed", "5", "--tune-seed", "6", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["seed"] == 5 and out["colocation"]["tuned_on_seed"] == 6
    assert set(out["colocation"]["methods"]) == {"predops", "reclaim_ewma", "trailing_max", "none"}
    assert "with_lending" in out["lending"] and "no_lending" in out["lending"]


def test_interpolation_on_the_upper_frontier() -> None:
    from predops.pipelines.whatif.sharing import _interpolate

    curve = {
        0.0: {"violation_rate": 0.02, "batch_core_hours": 100.0},
        0.1: {"violation_rate": 0.0, "batch_core_hours": 40.0},
        0.05: {"violation_rate": 0.01, "batch_core_hours": 80.0},
        0.2: {"violation_rate": 0.0, "batch_core_hours": 20.0},  # dominated
    }
    assert _interpolate(curve, 0.015) == 90.0
    assert _interpolate(curve, 0.005) == 60.0
    assert _interpolate(curve, 0.03) is None
