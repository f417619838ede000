"""The what-if's label modes: what a drain's inspection records, and what each weekly
retrain learns from (today's records, the censoring-aware labels, the oracle's)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from predops.core.contracts import Forecast
from predops.features.labels import add_failure_labels
from predops.pipelines.whatif.labels import LabelBook, failure_rows
from predops.pipelines.whatif.loop import Loop, LoopConfig, retrained_loop
from predops.pipelines.whatif.risk import RiskConfig, oracle_risk
from predops.pipelines.whatif.run import sim_policy_config
from predops.pipelines.whatif.world import World, WorldConfig, build_world

WORLD = WorldConfig(nodes=60, days=4, seed=11, warmup_days=7)
H = timedelta(hours=24)


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(WORLD)


def _no_forecasts(now: datetime) -> list[Forecast]:
    return []


def _oracle_loop(world: World, **kw: object) -> Loop:
    cfg = LoopConfig(policy="oracle", policy_config=sim_policy_config(), sizing_every=6, **kw)  # type: ignore[arg-type]
    loop = Loop(world, cfg, oracle_risk(world, cfg.horizon), _no_forecasts)
    loop.run()
    return loop


@pytest.fixture(scope="module")
def drained(world: World) -> Loop:
    """The oracle policy (drains on the truth) with every found fault confirmed."""
    loop = _oracle_loop(
        world, labels="censoring", inspection_find_rate=1.0, inspection_unknown_rate=0.0
    )
    assert loop.tally.drains_caught > 0, "the test world must hold averted failures"
    return loop


def test_every_drain_is_recorded_unknown_at_once_then_with_its_outcome(drained: Loop) -> None:
    recs = drained.inspections
    first = [r for r in recs if r[2] == "unknown"]
    assert len(first) == drained.tally.drains
    assert all(r[1] == r[4] for r in first)  # recorded at the drain, as predops apply does
    found = [r for r in recs if r[2] == "fault_found"]
    nff = [r for r in recs if r[2] == "no_fault_found"]
    assert len(found) == drained.tally.drains_caught  # find rate 1: every averted fault found
    assert len(nff) == drained.tally.drains_needless
    assert all(r[4] > r[1] for r in found + nff)  # recorded when the node is back
    f = drained.world.failures
    causes = {f.cause[i] for i in np.flatnonzero(drained.averted)}
    assert {r[3] for r in found} <= causes
    assert dict(drained.tally.inspections) == {
        k: v for k, v in (("fault_found", len(found)), ("no_fault_found", len(nff))) if v
    }


def test_find_and_unknown_rates_decide_the_outcomes(world: World) -> None:
    none_found = _oracle_loop(world, inspection_find_rate=0.0, inspection_unknown_rate=0.0)
    assert "fault_found" not in none_found.tally.inspections
    all_unknown = _oracle_loop(world, inspection_unknown_rate=1.0)
    assert set(all_unknown.tally.inspections) == {"unknown"}
    assert all(r[2] == "unknown" for r in all_unknown.inspections)


def test_rates_are_checked() -> None:
    with pytest.raises(ValueError, match="inspection_find_rate"):
        LoopConfig(policy="oracle", inspection_find_rate=1.5)
    with pytest.raises(ValueError, match="labels must be one of"):
        LoopConfig(policy="oracle", labels="truth")


def _labels(world: World, loop: Loop, mode: str) -> pl.DataFrame:
    """Hourly rows of the drained nodes, labelled as a retrain at the world's end would."""
    cutoff = world.cfg.at(world.cfg.last_tick)
    events, insp = LabelBook(world, mode).at(cutoff, loop.averted, loop.inspections)
    nodes = sorted({world.node_ids[r[0]] for r in loop.inspections})
    ts = [world.cfg.at(k) for k in range(world.cfg.first_tick, world.cfg.last_tick)]
    rows = pl.DataFrame({"node_id": [n for n in nodes for _ in ts], "ts": ts * len(nodes)})
    return add_failure_labels(
        rows.lazy(),
        events.lazy(),
        horizons=(H,),
        label_cutoff=cutoff,
        inspections=None if insp is None else insp.lazy(),
    ).collect()


def _before_averted(world: World, loop: Loop) -> pl.DataFrame:
    """(node_id, ts) of the rows whose 24 h window holds an averted failure's drain."""
    keys = []
    drains = {(r[0], r[1]) for r in loop.inspections if r[2] == "fault_found"}
    for row, at in sorted(drains):
        for k in range(world.cfg.first_tick, world.cfg.last_tick):
            if k * 3600.0 < at <= k * 3600.0 + H.total_seconds():
                keys.append((world.node_ids[row], world.cfg.at(k)))
    return pl.DataFrame(
        keys, schema={"node_id": pl.String, "ts": pl.Datetime("us", "UTC")}, orient="row"
    )


def test_today_learns_averted_failures_as_negatives_censoring_and_oracle_do_not(
    world: World, drained: Loop
) -> None:
    keys = _before_averted(world, drained)
    assert keys.height > 0
    got = {
        mode: keys.join(_labels(world, drained, mode), on=["node_id", "ts"])["fails_within_24h"]
        for mode in ("today", "censoring", "oracle")
    }
    # today: the drained and fixed node never failed on record
    assert (got["today"] == 0).sum() > 0
    assert (got["today"] == 0).sum() >= (got["oracle"] == 0).sum()
    # censoring with every fault found: the drain is the failure it prevented
    assert (got["censoring"] == 1).all()
    assert (got["oracle"] == 1).sum() > (got["today"] == 1).sum()


def test_today_drops_the_averted_failures_and_their_repairs_only(
    world: World, drained: Loop
) -> None:
    cutoff = world.cfg.at(world.cfg.last_tick)
    today, insp = LabelBook(world, "today").at(cutoff, drained.averted, drained.inspections)
    oracle, _ = LabelBook(world, "oracle").at(cutoff, drained.averted, drained.inspections)
    assert insp is None
    n = int(drained.averted.sum())
    count = lambda ev, kind: ev.filter(pl.col("kind") == kind).height  # noqa: E731
    assert count(today, "failure") == len(world.failures) - n
    assert count(today, "maintenance_start") == count(oracle, "maintenance_start")
    rows = failure_rows(world).filter(pl.col("kind") == "failure").drop("detail")
    truth = oracle.filter(pl.col("kind") == "failure").select(rows.columns)
    assert rows.sort("node_id", "at").equals(truth.sort("node_id", "at"))  # same times as the sim


def test_each_retrain_learns_only_from_drains_before_its_cutoff(world: World) -> None:
    small = RiskConfig(retrain_every=timedelta(days=1), params={"n_estimators": 20})
    small = replace(small, params={**small.params, "early_stopping_rounds": 5})
    cfg = LoopConfig(
        policy="predictive", policy_config=sim_policy_config(), sizing_every=6, labels="censoring"
    )
    loop = retrained_loop(world, cfg, small, _no_forecasts)
    seen: list[tuple[datetime, int, float]] = []
    inner = loop.label_source

    def spy(cutoff: datetime) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        last = max((r[1] for r in loop.inspections), default=-1.0)
        seen.append((cutoff, len(loop.inspections), last))
        return inner(cutoff)

    assert loop.risk is not None and loop.risk.fill is not None
    loop.risk.fill.__self__.labels = spy  # type: ignore[attr-defined]
    loop.run()
    starts = [world.cfg.at(t) for t in range(world.cfg.first_tick, world.cfg.last_tick, 24)]
    assert [c for c, _, _ in seen] == starts  # one fit per day, in order, as the loop reached it
    for cutoff, _, last in seen:
        assert world.cfg.start + timedelta(seconds=last) < cutoff or last < 0
    fits = loop.risk.fits
    assert len(fits) == len(starts)
    assert all(f["scored_rows"] > 0 for f in fits)
    aps = [f["average_precision"] for f in fits if f["scored_positives"]]
    assert all(0.0 <= a <= 1.0 for a in aps)


def test_cli_runs_the_predictive_policy_on_the_censoring_labels() -> None:
    import json

    from click.testing import CliRunner

    from predops.pipelines.cli.main import main

    res = CliRunner().invoke(
        main,
        ["simulate-ops", "--nodes", "30", "--days", "1", "--warmup-days", "7",
         "--policy", "predictive", "--labels", "censoring", "--inspection-find-rate", "0.5",
         "--no-progress", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["config"]["labels"] == "censoring"
    assert out["config"]["inspection_find_rate"] == 0.5
    fits = out["policies"]["predictive"]["failure_model_fits"]
    assert len(fits) == 1 and "average_precision" in fits[0]
    assert (
        sum(out["policies"]["predictive"]["inspections"].values())
        == (out["policies"]["predictive"]["drains"])
    )


def test_label_modes_share_the_world_and_its_first_retrain(world: World) -> None:
    from predops.pipelines.whatif.label_modes import label_modes
    from predops.pipelines.whatif.run import OpsConfig

    small = RiskConfig(retrain_every=timedelta(days=2), params={"n_estimators": 20})
    small = replace(small, params={**small.params, "early_stopping_rounds": 5})
    out = label_modes(OpsConfig(world=WORLD, risk=small, sizing_every=6), world=world)
    modes = out["modes"]
    assert list(modes) == ["today", "censoring", "oracle"]
    firsts = {m: f["failure_model_fits"][0] for m, f in modes.items()}
    # before any drain the three label sources are the same: the same first model
    assert len({(f["train_positives"], f["average_precision"]) for f in firsts.values()}) == 1
    for f in modes.values():
        assert len(f["average_precision_by_retrain"]) == 2
        assert f["lost_gpu_hours"] >= 0 and f["budget_violations"] == 0
        assert sum(f["inspections"].values()) == f["drains"]
    assert out["config"]["world"]["seed"] == WORLD.seed
    with pytest.raises(ValueError, match="modes must be among"):
        label_modes(OpsConfig(world=WORLD), ["truth"], world=world)
