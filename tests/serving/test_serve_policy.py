"""The server reads ``[policy]`` from a predops.toml shared with the scheduler, and
``/apply`` re-validates with it and reports the values it used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from predops.pipelines.workspace.config import ConfigError
from predops.policy.config import DisruptionBudget
from predops.serving.config import load_serve_config, token_digest
from tests.serving.api import SECRETS, bearer, fresh_clock
from tests.serving.conftest import settings_for

SHARED_FILE = f"""
[scheduler]                 # the scheduler's: left to it
misfire_grace_time = "5m"

[jobs.pipeline]
cron = "*/5 * * * *"

[server]
protect_reads = false

[[tokens]]
name = "alice"
role = "approver"
sha256 = "{token_digest(SECRETS["approver"])}"

[[tokens]]
name = "otto"
role = "operator"
sha256 = "{token_digest(SECRETS["operator"])}"

[[policy.budgets]]
scope = "pool"
max_nodes = 0

[policy.disruption]
expires_after = "30d"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "predops.toml"
    path.write_text(text)
    return path


def test_the_server_reads_policy_beside_the_schedulers_sections(tmp_path: Path) -> None:
    path = write(tmp_path, SHARED_FILE)
    cfg = load_serve_config(path, {"PREDOPS_POLICY__DISRUPTION__MIN_HOLD": "1h"})
    assert cfg.policy.budgets.budgets == (DisruptionBudget("pool", max_nodes=0),)
    assert cfg.policy.config.disruption.min_hold.total_seconds() == 3600
    assert "PREDOPS_POLICY__DISRUPTION__MIN_HOLD" in cfg.policy.origin
    assert "PREDOPS_POLICY__DISRUPTION__MIN_HOLD" in cfg.origin
    assert [t.name for t in cfg.tokens] == ["alice", "otto"]
    assert load_serve_config(None, {}).policy.origin == "defaults"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[policy.disruption]\nmin_hold = 'soon'\n", "[policy.disruption] min_hold"),
        ("[policy.buy]\nrepair_yeild = 0.5\n", "[policy.buy] repair_yeild: unknown key"),
        ("[schedular]\n", "[schedular]: unknown section"),
        ("[scheduler]\ntimezone = 'UTC'\n[server]\nprotect_read = true\n", "protect_read"),
    ],
)
def test_policy_errors_name_the_key_and_own_typos_are_still_caught(
    tmp_path: Path, text: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_serve_config(write(tmp_path, text), {})
    assert needle in str(err.value)


def test_apply_revalidates_with_the_configured_policy_and_says_so(
    served_workspace: Path, shared_data: Path, tmp_path: Path
) -> None:
    from predops.serving.app import create_app

    path = write(tmp_path, SHARED_FILE)
    cfg = load_serve_config(path, {})
    (plan_file,) = sorted((served_workspace / "plans").glob("*.json"))
    pid = plan_file.stem
    app = create_app(
        settings_for(served_workspace, shared_data),
        cfg,
        clock=fresh_clock(served_workspace),
        reload_in_background=False,
    )
    with TestClient(app) as c:
        assert c.post(f"/v1/plans/{pid}/approve", headers=bearer("approver")).status_code == 200
        r = c.post(f"/v1/plans/{pid}/apply", headers=bearer("operator"))
        assert r.status_code == 200, r.text
        report = r.json()
    policy = report["policy"]
    assert policy["origin"] == f"{path} [policy]"
    assert set(policy) == {"origin", "duration_unit", "budgets", "disruption"}
    assert policy["budgets"] == [
        {"scope": "pool", "max_nodes": 0, "max_percent": None, "min_nodes": 0, "domain": None}
    ]
    assert policy["disruption"]["expires_after"] == 30 * 86400
    plan_actions = len(json.loads(plan_file.read_text())["actions"])
    assert len(report["actions"]) == plan_actions  # every action re-validated, none dropped
