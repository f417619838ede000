"""``[policy]``: defaults when absent, every field settable, errors that name the file,
the table and the key, environment overrides, and a JSON record of every value."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import fields, is_dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from predops.pipelines.workspace.config import ConfigError
from predops.pipelines.workspace.policy_config import (
    PolicySettings,
    load_policy_settings,
    parse_policy,
    policy_settings_dict,
)
from predops.policy.config import Budgets, DisruptionBudget, PolicyConfig

README = Path(__file__).resolve().parents[3] / "README.md"

EVERY_KEY = """
[[policy.budgets]]
scope = "rack"
max_nodes = 2
domain = "rk01"
[[policy.budgets]]
scope = "pool"
max_percent = 25.0
min_nodes = 2

[policy.costs]
gpu_hour = 3.0
cpu_core_hour = 0.05
checkpoint_interval = "1h"
restart_overhead = "10m"
detection_delay = "20m"
inspection_window = "3h"
capacity_value = 0.5
replacement_lead = "45m"
price_by_headroom = false
spare_share = 0.1

[policy.disruption]
max_risk_age = "3h"
max_data_age = "12h"
max_clock_skew = "0s"
benefit_margin = 1.5
pacing = "breaker"
burst_nodes = 6
burst_spread_racks = 4
slow_start_width = 2
slow_start_open_width = 8
pacing_hold = "12h"
pacing_max_domains = 100
storm_fraction = 0.3
storm_min_nodes = 5
min_hold = "4h"
repair_hold = "24h"
clean_window = "48h"
uncordon_p_fail = 0.01
confirm_scores = 2
confirm_gap = "2h"
max_checkpoint_wait = "1h"
expires_after = "3h"
owner = "predops-east"
placement_policy = "gpu_packing"
seed = 7
soft_taint_p = 0.2
soft_taint_clear_p = 0.05
soft_taint_max_percent = 5.0

[policy.disruption.costs]
gpu_hour = 2.0

[policy.sizing]
scale_up_lead = "15m"
hold = "2h"
scale_in_cooldown = "0s"
deadband_nodes = 2
failure_service_level = 0.95
anchor_history = "3d"
anchor_min_changes = 12
packing_policy = "dot_product"
max_packed_pods = 50
seed = 3
max_forecast_age = "3h"
lend_min_anticorrelation = 0.7
lend_horizon = "12h"

[policy.sizing.costs]
cpu_core_hour = 0.01

[policy.buy]
review_period = "14d"
annual_failure_rate = 0.1
repair_yield = 0.5
max_forecast_age = "3d"

[policy.reclaim]
risk = 0.05
margin_share = 0.1
margin_cores = 1.0
max_share = 0.6
grow_deadband_milli = 500
grow_deadband_mib = 512
max_grow_percent = 50.0
hold = "30m"
max_forecast_age = "1h"
max_usage_age = "10m"
expires_after = "10m"

[policy.reclaim.costs]
cpu_core_hour = 0.03
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "predops.toml"
    path.write_text(text)
    return path


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every scalar field of a (nested) dataclass, by dotted path."""
    out: dict[str, Any] = {}
    for f in fields(value):
        child = getattr(value, f.name)
        if is_dataclass(child):
            out |= leaves(child, f"{prefix}{f.name}.")
        else:
            out[f"{prefix}{f.name}"] = child
    return out


def test_no_policy_table_is_the_documented_defaults(tmp_path: Path) -> None:
    for path in (None, write(tmp_path, "[server]\nport = 9000\n")):
        settings = load_policy_settings(path, {})
        assert settings == PolicySettings(Budgets(), PolicyConfig(), "defaults")
    empty = load_policy_settings(write(tmp_path, "[policy]\n"), {})
    assert (empty.budgets, empty.config) == (Budgets(), PolicyConfig())
    assert empty.origin == f"{tmp_path / 'predops.toml'} [policy]"


def test_every_field_of_the_policy_dataclasses_is_settable(tmp_path: Path) -> None:
    settings = load_policy_settings(write(tmp_path, EVERY_KEY), {})
    got, default = leaves(settings.config), leaves(PolicyConfig())
    unchanged = [k for k in default if got[k] == default[k]]
    assert not unchanged, f"EVERY_KEY leaves these at their default: {unchanged}"
    assert settings.budgets == Budgets(
        (
            DisruptionBudget("rack", max_nodes=2, domain="rk01"),
            DisruptionBudget("pool", max_percent=25.0, min_nodes=2),
        )
    )
    budget_fields = {f.name for f in fields(DisruptionBudget)}
    assert budget_fields == set(re.findall(r"^(\w+) =", EVERY_KEY.split("[policy.costs]")[0], re.M))


def test_policy_costs_are_shared_and_each_config_may_change_its_own(tmp_path: Path) -> None:
    config = load_policy_settings(write(tmp_path, EVERY_KEY), {}).config
    disruption, sizing = config.disruption.costs, config.sizing.costs
    assert (disruption.gpu_hour, disruption.cpu_core_hour) == (2.0, 0.05)
    assert (sizing.gpu_hour, sizing.cpu_core_hour) == (3.0, 0.01)
    assert disruption.inspection_window == sizing.inspection_window == timedelta(hours=3)


def test_environment_overrides_are_typed_and_named_in_the_origin(tmp_path: Path) -> None:
    env = {
        "PREDOPS_POLICY__DISRUPTION__BENEFIT_MARGIN": "2.5",
        "PREDOPS_POLICY__DISRUPTION__REPAIR_HOLD": "12h",
        "PREDOPS_POLICY__SIZING__COSTS__PRICE_BY_HEADROOM": "false",
        "PREDOPS_POLICY__BUY__REPAIR_YIELD": "1",
        "PREDOPS_SERVER__PORT": "9000",  # another face's: not read here
    }
    path = write(tmp_path, "[policy.disruption]\nbenefit_margin = 1.2\n")
    settings = load_policy_settings(path, env)
    d = settings.config.disruption
    assert d.benefit_margin == 2.5 and d.repair_hold == timedelta(hours=12)
    assert settings.config.sizing.costs.price_by_headroom is False
    assert settings.config.disruption.costs.price_by_headroom is True
    assert settings.config.buy.repair_yield == 1.0
    assert "PREDOPS_POLICY__DISRUPTION__BENEFIT_MARGIN" in settings.origin
    assert "PREDOPS_SERVER__PORT" not in settings.origin


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        # values out of range or unknown
        ("[policy.disruption]\nstorm_fraction = 1.5\n", ["[policy.disruption]", "storm_fraction"]),
        ("[policy.sizing]\nhold = '0s'\n", ["[policy.sizing]", "hold", "positive"]),
        ("[policy.disruption]\nrepair_hold = '-1h'\n", ["repair_hold"]),
        ("[policy.disruption]\nconfirm_scores = 0\n", ["confirm_scores", ">= 1"]),
        ("[policy.costs]\ngpu_hour = -1\n", ["[policy.costs]", "gpu_hour"]),
        ("[policy.costs]\nspare_share = nan\n", ["[policy.costs]", "spare_share"]),
        ("[policy.sizing.costs]\ncapacity_value = 2\n", ["[policy.sizing.costs]", "capacity"]),
        ("[policy.sizing]\nfailure_service_level = 1.0\n", ["failure_service_level"]),
        ("[policy.buy]\nannual_failure_rate = 2\n", ["[policy.buy]", "annual_failure_rate"]),
        ("[policy.sizing]\npacking_policy = 'fgd'\n", ["packing_policy", "'fgd'"]),
        ("[policy.disruption]\nowner = ''\n", ["[policy.disruption]", "owner"]),
        # unknown keys and tables
        ("[policy]\nbudget = []\n", ["[policy]", "budget", "unknown key"]),
        ("[policy.disruption]\nmin_hld = '1h'\n", ["[policy.disruption]", "min_hld", "unknown"]),
        ("[policy.sizing.costs]\ngpu_hours = 1\n", ["[policy.sizing.costs]", "gpu_hours"]),
        ("[polcy.disruption]\nmin_hold = '1h'\n", ["[polcy]", "unknown section"]),
        # wrong types
        ("[policy.disruption]\nmin_hold = 6\n", ["[policy.disruption]", "min_hold", "duration"]),
        ("[policy.disruption]\nbenefit_margin = 'x'\n", ["benefit_margin", "not a number"]),
        ("[policy.disruption]\nbenefit_margin = true\n", ["benefit_margin", "number"]),
        ("[policy.sizing]\ndeadband_nodes = 1.5\n", ["[policy.sizing]", "deadband_nodes"]),
        ("[policy.costs]\nprice_by_headroom = 'yes'\n", ["price_by_headroom", "true or false"]),
        ("[policy]\ndisruption = 3\n", ["[policy.disruption]", "must be a table"]),
        ("[policy]\nbudgets = { scope = 'rack' }\n", ["[policy]", "budgets", "array"]),
        ("[policy]\nbudgets = []\n", ["[policy]", "budgets", "non-empty"]),
        # a budget's own checks (DisruptionBudget.__post_init__) name the key
        ("[[policy.budgets]]\nscope = 'rak'\nmax_nodes = 1\n", ["[policy.budgets[0]]", "scope"]),
        ("[[policy.budgets]]\nscope = 'rack'\n", ["[policy.budgets[0]]", "max_nodes", "exactly"]),
        (
            "[[policy.budgets]]\nscope = 'pool'\nmax_nodes = 1\nmax_percent = 5.0\n",
            ["[policy.budgets[0]]", "max_nodes", "exactly one"],
        ),
        ("[[policy.budgets]]\nmax_nodes = 1\n", ["[policy.budgets[0]]", "scope", "required"]),
        (
            "[[policy.budgets]]\nscope = 'pool'\nmax_percent = 101.0\n",
            ["[policy.budgets[0]]", "max_percent"],
        ),
        (
            "[[policy.budgets]]\nscope = 'rack'\nmax_nodes = 1\n"
            "[[policy.budgets]]\nscope = 'rack'\nmax_nodes = 1\nrack = 'r1'\n",
            ["[policy.budgets[1]]", "rack", "unknown key"],
        ),
    ],
)
def test_errors_name_the_file_table_and_key(tmp_path: Path, text: str, needles: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_policy_settings(path, {})
    msg = str(err.value)
    assert msg.startswith(str(path)), msg
    for needle in needles:
        assert needle in msg, msg


def test_a_bad_environment_override_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"\[policy.sizing\] max_packed_pods: 'many'"):
        load_policy_settings(None, {"PREDOPS_POLICY__SIZING__MAX_PACKED_PODS": "many"})


def test_policy_settings_dict_is_json_and_holds_every_value(tmp_path: Path) -> None:
    settings = load_policy_settings(write(tmp_path, EVERY_KEY), {})
    record = json.loads(json.dumps(policy_settings_dict(settings)))
    assert record["origin"] == settings.origin and record["duration_unit"] == "s"
    assert record["budgets"][0] == {
        "scope": "rack",
        "max_nodes": 2,
        "max_percent": None,
        "min_nodes": 0,
        "domain": "rk01",
    }
    for part in ("disruption", "sizing", "buy"):
        for path, value in leaves(getattr(settings.config, part)).items():
            recorded: Any = record[part]
            for key in path.split("."):
                recorded = recorded[key]
            expected = value.total_seconds() if isinstance(value, timedelta) else value
            assert recorded == expected, f"{part}.{path}"
    assert record["disruption"]["min_hold"] == 4 * 3600
    assert policy_settings_dict(PolicySettings())["origin"] == "defaults"


def test_the_readme_example_is_valid() -> None:
    """The ``[policy]`` example the README shows parses, and sets what it says."""
    text = README.read_text()
    section = text[text.index("## Policy configuration") :]
    example = re.search(r"```toml\n(.*?)```", section, re.S)
    assert example is not None
    settings = parse_policy(tomllib.loads(example.group(1)), "README.md")
    assert settings.budgets != Budgets() and settings.config != PolicyConfig()
