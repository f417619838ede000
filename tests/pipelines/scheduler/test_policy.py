"""The scheduler reads ``[policy]`` from its predops.toml (which may also hold the
server's sections) and its ``plan`` step plans with it, recording the values used."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from predops.pipelines.scheduler import steps
from predops.pipelines.scheduler.config import load_config
from predops.pipelines.workspace.config import ConfigError
from predops.policy.config import DisruptionBudget
from tests.pipelines.scheduler.conftest import START, make_context

SHARED_FILE = """
[scheduler]
max_workers = 1

[server]                    # the server's: left to it
port = 9000
protect_reads = true

[[tokens]]
name = "alice"
role = "approver"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[[policy.budgets]]
scope = "rack"
max_nodes = 0

[policy.disruption]
owner = "predops-test"
benefit_margin = 2.0
"""


def test_one_file_feeds_the_scheduler_its_policy_and_leaves_the_servers_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "predops.toml"
    path.write_text(SHARED_FILE)
    env = {"PREDOPS_POLICY__SIZING__HOLD": "2h", "PREDOPS_SERVER__PORT": "not-ours"}
    cfg = load_config(path, env)
    assert cfg.policy.budgets.budgets == (DisruptionBudget("rack", max_nodes=0),)
    assert cfg.policy.config.disruption.owner == "predops-test"
    assert cfg.policy.config.sizing.hold == timedelta(hours=2)
    assert cfg.policy.origin == f"{path} [policy] + environment (PREDOPS_POLICY__SIZING__HOLD)"
    assert load_config(None, {}).policy.origin == "defaults"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[policy.disruption]\nownr = 'x'\n", ["[policy.disruption]", "ownr", "unknown key"]),
        ("[policy]\nbudgets = 'rack'\n", ["[policy]", "budgets"]),
        ("[polcy]\n", ["[polcy]", "unknown section"]),
        ("[sever]\nport = 1\n", ["[sever]", "unknown section"]),
    ],
)
def test_policy_errors_and_unknown_sections_are_refused(
    tmp_path: Path, text: str, needles: list[str]
) -> None:
    path = tmp_path / "predops.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, {})
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_plan_step_plans_with_the_configured_policy_and_records_it(workspace: Path) -> None:
    ctx = make_context(workspace, SHARED_FILE)
    out = workspace / "scheduled" / "pipeline" / "test"
    outcome = steps.plan(ctx, START + timedelta(days=2), out)
    saved = json.loads(Path(outcome.detail["plan_file"]).read_text())
    policy = saved["inputs"]["policy"]
    assert policy["origin"].endswith("predops.toml [policy]")
    assert policy["budgets"] == [
        {"scope": "rack", "max_nodes": 0, "max_percent": None, "min_nodes": 0, "domain": None}
    ]
    assert policy["disruption"]["owner"] == "predops-test"
    assert policy["disruption"]["benefit_margin"] == 2.0
    assert policy["disruption"]["min_hold"] == 6 * 3600  # the default, in seconds
    assert policy["sizing"]["costs"]["gpu_hour"] == 1.0
    # without [policy] the same step records the defaults
    default = steps.plan(make_context(workspace, ""), START + timedelta(days=2), out)
    saved = json.loads(Path(default.detail["plan_file"]).read_text())
    assert saved["inputs"]["policy"]["origin"] == "defaults"
    assert len(saved["inputs"]["policy"]["budgets"]) == 3
