"""The ``[policy]`` table of ``predops.toml``: disruption budgets and every policy knob.

Every face that plans or applies reads it — the scheduler (``[policy]`` beside its own
tables), the server (beside ``[server]``) and ``predops plan|apply --config`` — into a
frozen :class:`PolicySettings`. Every field of :class:`~predops.policy.config.Budgets`,
:class:`~predops.policy.config.PolicyConfig` and its parts is a key named like the
field; an absent key keeps the default documented in :mod:`predops.policy.config`.
Durations are text (``"90s"``, ``"6h"``, ``"7d"``); unknown keys and values out of range
are :class:`ConfigError` naming the file, the table and the key. Example::

    [[policy.budgets]]         # when given, these replace the default budgets
    scope = "rack"             # pool | rack | spine
    max_nodes = 1              # or max_percent = 10.0 (with min_nodes = 1)

    [policy.costs]             # the cost model of disruption and sizing (cost units)
    gpu_hour = 1.0
    inspection_window = "4h"

    [policy.disruption]
    benefit_margin = 1.5
    min_hold = "6h"

    [policy.disruption.costs]  # optional: disruption's own costs, over [policy.costs]
    capacity_value = 0.5

    [policy.sizing]
    scale_up_lead = "30m"

    [policy.buy]
    review_period = "30d"

    [policy.approval]          # who may execute a plan (pipelines/workspace/approvals.py)
    required = true            # apply --execute needs an approval (or --break-glass)
    four_eyes = false          # the approver may not also apply

``DisruptionConfig`` and ``SizingConfig`` each carry a ``CostModel``; ``[policy.costs]``
sets both (one money unit for the whole policy) and ``[policy.<config>.costs]`` changes
one of them. Environment overrides reach these tables as ``PREDOPS_POLICY__DISRUPTION__
BENEFIT_MARGIN=1.5`` through each face's loader (:func:`merge_env`).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from predops.allocator.policies import POLICY_NAMES
from predops.pipelines.workspace.approvals import ApprovalRule
from predops.pipelines.workspace.config import (
    ConfigError,
    ConfigTable,
    check_sections,
    merge_env,
    read_toml,
)
from predops.policy.config import (
    PACINGS,
    Budgets,
    BuyConfig,
    CostModel,
    DisruptionBudget,
    DisruptionConfig,
    PolicyConfig,
    ReclaimConfig,
    SizingConfig,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "POLICY_ENV_PREFIX",
    "REVALIDATION_KEYS",
    "ConfigError",
    "PolicySettings",
    "load_policy_settings",
    "parse_policy",
    "policy_settings_dict",
]

POLICY_ENV_PREFIX = "PREDOPS_POLICY__"
"""Environment overrides of ``[policy]`` keys."""

PLACEMENT_POLICIES = tuple(name for name in POLICY_NAMES if name != "fgd")
"""Allocator policies the engine can place and pack with: FGD needs a pod-type
distribution the planner does not hand it."""

NUMBER_RANGES: Mapping[str, tuple[float, float | None]] = {
    # CostModel: cost units per hour; capacity_value and spare_share are fractions
    "gpu_hour": (0.0, None),
    "cpu_core_hour": (0.0, None),
    "capacity_value": (0.0, 1.0),
    "spare_share": (0.0, 1.0),
    # DisruptionConfig
    "benefit_margin": (0.0, None),
    "storm_fraction": (0.0, 1.0),
    "storm_min_nodes": (1, None),
    "burst_nodes": (1, None),
    "burst_spread_racks": (1, None),
    "slow_start_width": (1, None),
    "slow_start_open_width": (1, None),
    "pacing_max_domains": (1, 1_000_000),
    "uncordon_p_fail": (0.0, 1.0),
    "confirm_scores": (1, None),
    "seed": (0, None),
    "soft_taint_p": (0.0, 1.0),
    "soft_taint_clear_p": (0.0, 1.0),
    "soft_taint_max_percent": (0.0, 100.0),
    # SizingConfig (failure_service_level is a quantile: 1.0 would mean an infinite buffer)
    "deadband_nodes": (0, None),
    "failure_service_level": (0.0, 0.999),
    "anchor_min_changes": (1, None),
    "max_packed_pods": (1, None),
    "lend_min_anticorrelation": (0.0, 1.0),
    # ReclaimConfig (risk: 0.5, 0.05 or 0.01, checked by the dataclass)
    "risk": (0.0, 1.0),
    "margin_share": (0.0, 1.0),
    "margin_cores": (0.0, None),
    "max_share": (0.0, 1.0),
    "grow_deadband_milli": (0, None),
    "grow_deadband_mib": (0, None),
    "max_grow_percent": (0.0, 100.0),
    # BuyConfig: failures per node-year and a share of nodes
    "annual_failure_rate": (0.0, 1.0),
    "repair_yield": (0.0, 1.0),
}
"""Inclusive range of every number field of the policy dataclasses, by field name (a
name means the same thing in every dataclass that has it)."""

ZERO_DURATIONS = frozenset(
    {
        "repair_hold",  # 0 turns the hold off (the default)
        "anchor_history",  # 0 turns anchoring off
        "max_clock_skew",
        "min_hold",
        "max_checkpoint_wait",
        "scale_in_cooldown",
        "restart_overhead",
        "detection_delay",
        "replacement_lead",
    }
)
"""Duration fields where zero means "none" and is allowed; every other one is positive."""

TEXT_CHOICES: Mapping[str, tuple[str, ...]] = {
    "placement_policy": PLACEMENT_POLICIES,
    "pacing": PACINGS,
    "packing_policy": PLACEMENT_POLICIES,
}

_Config = TypeVar("_Config", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The budgets and policy knobs a face plans and applies with, and where they came
    from (``"defaults"``, or the file's ``[policy]`` plus any environment keys)."""

    budgets: Budgets = field(default_factory=Budgets)
    config: PolicyConfig = field(default_factory=PolicyConfig)
    origin: str = "defaults"
    approval: ApprovalRule = field(default_factory=ApprovalRule)


# ---------------------------------------------------------------- reading
def parse_policy(
    document: Mapping[str, Any], where: str, *, env_keys: Sequence[str] = ()
) -> PolicySettings:
    """The :class:`PolicySettings` of a parsed TOML ``document``'s ``[policy]`` table
    (defaults when there is none); ``env_keys`` are the environment variables already
    merged into ``document``, recorded in ``origin`` when they are ``PREDOPS_POLICY__*``."""
    if "policy" not in document:
        return PolicySettings()
    policy = ConfigTable(document["policy"], where, "policy")
    shared_costs = _read_fields(_subtable(policy, "costs"), CostModel())
    disruption = _read_nested(policy, "disruption", DisruptionConfig(), shared_costs)
    sizing = _read_nested(policy, "sizing", SizingConfig(), shared_costs)
    buy = _read_fields(_subtable(policy, "buy"), BuyConfig())
    reclaim = _read_nested(policy, "reclaim", ReclaimConfig(), shared_costs)
    budgets = _read_budgets(policy)
    approval = _read_fields(_subtable(policy, "approval"), ApprovalRule())
    policy.done()
    ours = [k for k in env_keys if k.startswith(POLICY_ENV_PREFIX)]
    origin = f"{where} [policy]" + (f" + environment ({', '.join(ours)})" if ours else "")
    config = PolicyConfig(disruption, sizing, buy, reclaim)
    return PolicySettings(budgets, config, origin, approval)


def load_policy_settings(path: Path | None, env: Mapping[str, str]) -> PolicySettings:
    """``[policy]`` of the TOML file ``path`` (None: defaults) with ``PREDOPS_POLICY__*``
    overrides from ``env``, for a face that reads nothing else of the file (the CLI).
    The file's other tables are left to their readers, but a table no reader knows is a
    :class:`ConfigError` (a typo such as ``[polcy]`` never falls back to defaults)."""
    where, document = read_toml(path)
    check_sections(document, where)
    ours = {k: v for k, v in env.items() if k.startswith(POLICY_ENV_PREFIX)}
    applied = merge_env(document, ours, where)
    return parse_policy(document, where, env_keys=applied)


def _subtable(parent: ConfigTable, key: str) -> ConfigTable:
    """``[<parent>.<key>]``, empty when absent."""
    raw = parent.get(key)
    return ConfigTable({} if raw is None else raw, parent.where, f"{parent.name}.{key}")


def _read_nested(
    policy: ConfigTable, key: str, defaults: _Config, shared_costs: CostModel
) -> _Config:
    """``[policy.<key>]`` over ``defaults``, its ``costs`` read from
    ``[policy.<key>.costs]`` over the shared ``[policy.costs]``."""
    table = _subtable(policy, key)
    costs = _read_fields(_subtable(table, "costs"), shared_costs)
    return _read_fields(table, defaults, costs=costs)


def _read_fields(table: ConfigTable, defaults: _Config, **given: Any) -> _Config:
    """A copy of the dataclass ``defaults`` with each field read from the key of its name
    in ``table`` (the field's type picks the getter; an absent key keeps the default),
    except the fields in ``given`` (nested tables the caller read). Unknown keys, and a
    ValueError of the dataclass's own checks, are :class:`ConfigError` naming the key."""
    hints = typing.get_type_hints(type(defaults))
    values = dict(given)
    for f in fields(defaults):
        if f.name not in given:
            values[f.name] = _read_value(table, f.name, hints[f.name], getattr(defaults, f.name))
    table.done()
    return _construct(table, partial(replace, defaults, **values), values)


def _read_value(table: ConfigTable, key: str, kind: Any, default: Any) -> Any:
    """One field's value by its type (bool before int: a bool is an int to Python)."""
    if kind is timedelta:
        return table.duration(key, default, allow_zero=key in ZERO_DURATIONS)
    if kind is bool:
        return table.boolean(key, default)
    if kind is int:
        low, high = NUMBER_RANGES[key]
        return table.integer(key, default, int(low), None if high is None else int(high))
    if kind is float:
        return table.number(key, default, *NUMBER_RANGES[key])
    if kind is str:
        if key in TEXT_CHOICES:
            return table.choice(key, default, TEXT_CHOICES[key])
        return table.text(key, default)
    raise TypeError(f"[{table.name}] {key}: no configuration getter for {kind!r}")


def _read_budgets(policy: ConfigTable) -> Budgets:
    """``[[policy.budgets]]``: when given, the budgets in force instead of the defaults."""
    raw = policy.get("budgets")
    if raw is None:
        return Budgets()
    if not isinstance(raw, list) or not raw:
        raise policy.fail(
            "budgets",
            "must be a non-empty array of tables ([[policy.budgets]]); "
            "leave it out for the default budgets",
        )
    budgets = []
    for i, item in enumerate(raw):
        t = ConfigTable(item, policy.where, f"policy.budgets[{i}]")
        values: dict[str, Any] = {
            "scope": t.required_text("scope"),  # DisruptionBudget checks it is one of SCOPES
            "max_nodes": None if t.raw.get("max_nodes") is None else t.integer("max_nodes", 0, 0),
            "max_percent": None
            if t.raw.get("max_percent") is None
            else t.number("max_percent", 0.0, 0.0, 100.0),
            "min_nodes": t.integer("min_nodes", 0, 0),
            "domain": t.text("domain"),
        }
        t.done()
        budgets.append(_construct(t, partial(DisruptionBudget, **values), values))
    return Budgets(tuple(budgets))


_Built = TypeVar("_Built")


def _construct(
    table: ConfigTable, build: Callable[[], _Built], values: Mapping[str, Any]
) -> _Built:
    """``build()``, its ValueError turned into a :class:`ConfigError` naming the first key
    of ``values`` the message mentions (else the table)."""
    try:
        return build()
    except ValueError as exc:
        named = [k for k in values if re.search(rf"\b{k}\b", str(exc))]
        raise table.fail(named[0] if named else "(table)", str(exc)) from None


# ---------------------------------------------------------------- recording
def policy_settings_dict(settings: PolicySettings) -> dict[str, Any]:
    """Every value ``settings`` holds as JSON-able data, for plan files and reports:
    ``origin``, ``budgets`` (one object per budget), ``disruption``, ``sizing`` and
    ``buy`` keyed like the TOML; durations in seconds (``duration_unit``)."""
    return {
        "origin": settings.origin,
        "duration_unit": "s",
        "budgets": [_jsonable(b) for b in settings.budgets.budgets],
        "disruption": _jsonable(settings.config.disruption),
        "sizing": _jsonable(settings.config.sizing),
        "buy": _jsonable(settings.config.buy),
        "reclaim": _jsonable(settings.config.reclaim),
    }


REVALIDATION_KEYS = ("origin", "duration_unit", "budgets", "disruption")
"""The part of :func:`policy_settings_dict` re-validating a plan before apply uses."""


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value
