"""``predops plan`` and ``predops apply``: the plan use case
(:mod:`predops.pipelines.jobs.plan`) from the command line.

``predops plan [--at T] [--config FILE] [--kubeconfig K] --json`` plans in the workspace
and prints one JSON object: the plan, its ``inputs`` (``inputs.policy``: the budgets and
policy values used; ``inputs.usage_forecasts``: the ``predops.usage`` champion's;
``inputs.sharing``: the loans and published reclaimable values, read from the nodes of
``--kubeconfig`` or else the audit log), ``summary`` and ``plan_file``.

``predops apply PLAN_ID [--execute] [--kubeconfig K] --json`` re-validates every action
of a plan just before it would run and records each decision in the audit log. Dry-run
unless ``--execute``. With ``--kubeconfig`` (a file or ``in-cluster``) the live cluster is
the state re-validation reads and, with ``--execute``, cordons / drains / uncordons go to
it; without, the lake's state is re-read. ``--pool-actuator [POOL=]NAME`` (repeatable;
``clusterapi``, ``karpenter``, ``placeholders`` or ``auto``, the default) says how pool
resizes act (:mod:`predops.pipelines.actuators.pool_resizers`). ``--execute`` needs the
plan approved first — the same record ``POST /v1/plans/{id}/approve`` writes, or
``predops approve PLAN_ID`` — and with ``[policy.approval] four_eyes = true`` by someone
else (:mod:`predops.pipelines.workspace.approvals`); ``--break-glass REASON`` executes
without one and puts the reason in the audit log. Exit status 2 when an action failed or
had no actuator (the JSON's ``problems`` lists them).

Both read the budgets and policy knobs from the ``[policy]`` table of ``--config FILE``
(default ``$PREDOPS_CONFIG``, else the documented defaults), the same ``predops.toml``
the scheduler and the server read
(:mod:`predops.pipelines.workspace.policy_config`), with ``PREDOPS_POLICY__*``
environment overrides.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from predops.core.clock import FixedClock
from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    parse_duration,
    parse_time,
    reports,
)
from predops.pipelines.cli.text import scalar
from predops.pipelines.workspace.approvals import ApprovalStore
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.clock import SystemClock
from predops.pipelines.workspace.plans import plan_path, read_plan
from predops.pipelines.workspace.policy_config import PolicySettings, load_policy_settings
from predops.pipelines.workspace.settings import operator_identity, operator_subject


def _now(at: str | None) -> datetime:
    return parse_time(at) if at else SystemClock().now()


CONFIG_ENV = "PREDOPS_CONFIG"
"""The default of ``--config``: the path of the shared ``predops.toml``."""

policy_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=CONFIG_ENV,
    default=None,
    help=f"predops.toml whose [policy] sets budgets and policy knobs (default: ${CONFIG_ENV}, "
    "else the documented defaults; PREDOPS_POLICY__* overrides).",
)


def _policy(config_path: Path | None) -> PolicySettings:
    return load_policy_settings(config_path, os.environ)


@click.command("plan")
@click.option("--at", default=None, help="Plan as of this time (ISO-8601). Default: now.")
@click.option(
    "--kubeconfig",
    default=None,
    help="Kubeconfig file or 'in-cluster': read the loans and the published reclaimable "
    "capacity from the nodes' annotations (read only). Default: from the audit log.",
)
@click.option("--context", default=None, help="Kubeconfig context.")
@policy_config_option
@json_option
@reports
def plan_command(
    at: str | None,
    kubeconfig: str | None,
    context: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Plan cordons, drains, uncordons, pool sizes, lending, reclaimable capacity and buys
    from the workspace (writes the plan file and an audit entry; changes nothing in the
    cluster)."""
    # imported here: the jobs load the models (LightGBM), which `predops --help` need not
    from predops.pipelines.jobs.plan import plan_in_workspace

    sharing = None
    if kubeconfig:
        from predops.pipelines.actuators.kube import KubeOptions, connect
        from predops.pipelines.jobs.sharing_state import from_cluster

        sharing = from_cluster(connect(kubeconfig, context, KubeOptions()).nodes())
    out = plan_in_workspace(
        current_settings(),
        _now(at),
        who=operator_identity(),
        clock=SystemClock(),
        policy=_policy(config_path),
        sharing=sharing,
    )
    emit(out, as_json, _human_plan)


def _human_plan(o: dict[str, Any]) -> str:
    lines = [f"{o['plan_id']} (as of {o['created_at']}) -> {o['plan_file']}"]
    for a in o["actions"]:
        lines.append(f"  ACTION {a['kind']:<12} {a['target']:<24} {a['reason']}")
    for s in o["skips"]:
        lines.append(f"  skip   {s['kind']:<12} {s['target']:<24} {s['reason']}: {s['detail']}")
    lines += [f"  ALERT  {a}" for a in o["alerts"]]
    return "\n".join(lines)


@click.command("apply")
@click.argument("plan_id")
@click.option("--execute", is_flag=True, help="Act for real (default: dry-run).")
@click.option(
    "--kubeconfig",
    default=None,
    help="Kubeconfig file or 'in-cluster': re-validate against (and, with --execute, act "
    "on) this cluster. Default: re-validate against the lake.",
)
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--timeout", default="10m", show_default=True, help="Per-drain timeout.")
@click.option("--at", default=None, help="Apply as of this time (ISO-8601). Default: now.")
@click.option(
    "--break-glass",
    "break_glass",
    metavar="REASON",
    default=None,
    help="With --execute: act without an approval; REASON goes to the audit log first.",
)
@click.option(
    "--pool-actuator",
    "pool_actuators",
    multiple=True,
    metavar="[POOL=]NAME",
    help="How pool resizes act, for every pool or POOL: clusterapi, karpenter, placeholders "
    "or auto (default: a MachineDeployment -> clusterapi, a NodePool -> karpenter, else "
    "placeholders). Repeatable.",
)
@policy_config_option
@json_option
@reports
def apply_command(
    plan_id: str,
    execute: bool,
    kubeconfig: str | None,
    context: str | None,
    timeout: str,
    at: str | None,
    break_glass: str | None,
    pool_actuators: tuple[str, ...],
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Re-validate and apply plan PLAN_ID; every decision goes to the audit log.

    --execute needs the plan approved (predops approve, or the API) unless --break-glass.
    """
    from predops.pipelines.jobs.plan import apply_in_workspace

    policy = _policy(config_path)
    settings = current_settings()
    plan = read_plan(plan_path(settings.plans_dir, plan_id))
    clock: Any = FixedClock(parse_time(at)) if at else SystemClock()
    sleep = _fixed_sleep(clock) if at else time.sleep
    out = apply_in_workspace(
        settings,
        plan,
        execute=execute,
        clock=clock,
        sleep=sleep,
        who=operator_identity(),
        kubeconfig=kubeconfig,
        context=context,
        timeout_s=_seconds(timeout),
        policy=policy,
        subject=operator_subject(),
        break_glass=break_glass,
        pool_actuators=pool_actuators,
    )
    emit(out, as_json, _human_apply)
    if out["problems"]:
        click.get_current_context().exit(2)


@click.command("approve")
@click.argument("plan_id")
@click.option("--comment", default="", help="Why (kept with the approval and audited).")
@json_option
@reports
def approve_command(plan_id: str, comment: str, as_json: bool) -> None:
    """Approve plan PLAN_ID: the same record the API's approve writes, so
    `predops apply PLAN_ID --execute` (by someone else, with four eyes) may run it."""
    settings = current_settings()
    plan = read_plan(plan_path(settings.plans_dir, plan_id))
    now = SystemClock().now()
    who = operator_identity()
    record = ApprovalStore(settings.workspace).approve(
        plan.plan_id,
        by=who,
        role="operator",
        at=now,
        comment=comment,
        subject=operator_subject(),
    )
    AuditLog(settings.audit_log, who=who).append(
        at=now,
        outcome="approved",
        what={"kind": "plan", "target": plan.plan_id, "params": {"actions": len(plan.actions)}},
        why=comment or "approved with predops approve",
        plan_id=plan.plan_id,
    )
    emit(
        record,
        as_json,
        lambda r: f"{r['plan_id']} approved by {r['subject']} at {r['approved_at']}",
    )


def _seconds(text: str) -> float:
    return parse_duration(text).total_seconds()


def _fixed_sleep(clock: FixedClock) -> Any:
    """With ``--at`` time is simulated: waiting moves the clock."""
    return lambda s: clock.advance(timedelta(seconds=s))


def _human_apply(o: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(o["counts"].items()))
    lines = [f"{o['plan_id']} ({o['mode']}, state from {o['state']}): {counts or 'no actions'}"]
    for a in o["actions"]:
        params = " ".join(f"{k}={scalar(v)}" for k, v in sorted(a.get("params", {}).items()))
        skipped = f" [{a['reason']}]" if a["reason"] else ""
        detail = f": {a['detail']}" if a["detail"] else ""
        lines.append(f"  {a['outcome']:<12} {a['kind']:<12} {a['target']:<24} {params}".rstrip())
        if a.get("why"):
            lines.append(f"      why: {a['why']}")
        if skipped or detail:
            lines.append(f"      result:{skipped}{detail}")
    return "\n".join(lines)


PLAN_COMMANDS: Sequence[click.Command] = (plan_command, apply_command, approve_command)
"""Registered on the main ``predops`` group by ``predops.pipelines.cli.main``."""
