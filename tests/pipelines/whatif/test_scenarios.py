"""The flood scenarios of ``simulate-ops --scenario``, run small: the issue's targets
for slow-start pacing against the former storm breaker on the same world."""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

import pytest
from click.testing import CliRunner

from predops.pipelines.cli import whatif as cli_whatif
from predops.pipelines.cli.main import main
from predops.pipelines.whatif.scenarios import (
    SCENARIOS,
    ScenarioConfig,
    build_scenario,
    pacing_config,
    run_scenario,
)
from predops.pipelines.whatif.world import HOUR_S

FIRST_STEP = pacing_config("slow_start").disruption.slow_start_width


@cache
def _run(name: str) -> dict[str, Any]:
    """Each scenario runs once per test session (both pacings)."""
    return run_scenario(ScenarioConfig(name))


def _hours(v: float | None) -> float:
    return math.inf if v is None else v


@pytest.mark.parametrize("name", SCENARIOS)
def test_no_budget_is_exceeded_under_either_pacing(name: str) -> None:
    result = _run(name)
    for pacing in ("breaker", "slow_start"):
        assert result["pacing"][pacing]["budget_violations"] == 0, pacing


@pytest.mark.parametrize("name", ["xid-flood", "exporter-outage"])
def test_false_floods_cost_at_most_the_first_slow_start_step(name: str) -> None:
    result = _run(name)
    slow, breaker = result["pacing"]["slow_start"], result["pacing"]["breaker"]
    assert result["world"]["flagged_unfounded"] >= 20  # a flood, not a trickle
    assert slow["needless_drains_flagged"] <= FIRST_STEP
    assert slow["skips_domain_paused"] > 0 and slow["alerts"] > 0
    # the other domains went on: the real fault during the flood was handled, no later
    assert slow["real_failures_handled"] >= breaker["real_failures_handled"]
    assert slow["real_failures_handled"] == result["world"]["real_failures"]
    assert _hours(slow["hours_to_resume"]) <= _hours(breaker["hours_to_resume"])


@pytest.mark.parametrize("name", ["rack-power", "driver-rollout"])
def test_real_correlated_failures_are_handled_at_least_as_fast(name: str) -> None:
    result = _run(name)
    slow, breaker = result["pacing"]["slow_start"], result["pacing"]["breaker"]
    assert slow["real_failures_handled"] >= max(1, breaker["real_failures_handled"])
    assert _hours(slow["hours_to_resume"]) <= _hours(breaker["hours_to_resume"])


def test_the_events_are_what_they_say() -> None:
    sc = build_scenario(ScenarioConfig("rack-power"))
    rows = {r for r, _ in sc.real}
    assert len({"/".join(sc.world.specs[r].path) for r in rows}) == 1  # one rack
    assert len({t for _, t in sc.real}) == 1  # at once
    assert sc.onset * HOUR_S < min(t for _, t in sc.real)
    flood = build_scenario(ScenarioConfig("xid-flood"))
    racks = {"/".join(flood.world.specs[r].path) for r in flood.flagged}
    assert len(racks) >= 6 and not any(r in flood.flagged for r, _ in flood.real)
    drivers = build_scenario(ScenarioConfig("driver-rollout"))
    assert {drivers.drivers[r] for r, _ in drivers.real} == {"v2"}


def test_a_bad_scenario_is_named() -> None:
    with pytest.raises(ValueError, match="scenario must be one of"):
        ScenarioConfig("meteor")
    with pytest.raises(ValueError, match="onset_h"):
        ScenarioConfig("xid-flood", days=1, onset_h=30)


def test_cli_runs_a_scenario_under_both_pacings() -> None:
    assert cli_whatif.SCENARIO_NAMES == SCENARIOS
    args = ["simulate-ops", "--scenario", "xid-flood", "--nodes", "200", "--days", "2"]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["scenarios"]["xid-flood"]
    assert out["world"]["nodes"] == 200 and set(out["pacing"]) == {"breaker", "slow_start"}
    res = CliRunner().invoke(main, ["simulate-ops", "--scenario", "xid-flood", "--days", "0.2"])
    assert res.exit_code != 0 and "onset_h" in res.output
