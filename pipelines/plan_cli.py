"""``predops plan`` and ``predops apply``: the policy engine and the actuators from the
command line.

``predops plan [--at T] --json`` builds the fleet from the workspace — inventory, node
states from the lake's events, PDBs (``pdbs`` table), the running pods as the
allocator's snapshot (:mod:`pipelines.actuators.lake_state`) — adds the failure risk
of the champion ``node_failure`` model and the champion ``demand`` model's forecasts
when those exist (plus each stock position's node demand derived from its series,
``lake_state.node_demand_forecasts``), runs :func:`policy.engine.plan`, writes the plan to
``<workspace>/plans/<plan_id>.json`` (atomically) with one ``planned`` entry in the
audit log, and prints one JSON object: the plan (actions with reason, evidence and
idempotency key; skips with their typed reason), ``inputs`` (what each input was, or
why it is missing; ``buy_forecasts``: per SKU and region, the window a buy needs
forecasts for and how far they reach — an alert names each SKU whose lead time the
forecasts do not reach), ``summary`` and ``plan_file``. A missing model is never replaced by
invented numbers: the plan runs with no risks / forecasts, says so in ``inputs`` and
raises an alert.

``predops apply PLAN_ID [--execute] [--kubeconfig K] --json`` re-validates every action
of a plan just before it would run and records each decision in the audit log. Dry-run
unless ``--execute``. With ``--kubeconfig`` (a file or ``in-cluster``) the live cluster is
the state re-validation reads and, with ``--execute``, cordons / drains / uncordons go to
it; without, the lake's state is re-read. ``buy`` actions are written as purchase
requests under ``<workspace>/purchases``. Exit status 2 when an action failed.
"""

from __future__ import annotations

import getpass
import importlib
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from core.actions import Plan
from core.clock import FixedClock
from core.contracts import FailureRisk, Forecast, Provenance
from pipelines.actuators.apply import ActionFailed, Actuator, FleetStateSource, StateSource
from pipelines.actuators.audit import AuditLog
from pipelines.actuators.lake_state import (
    buy_forecast_coverage,
    fleet_from_lake,
    node_demand_forecasts,
)
from pipelines.actuators.plan_files import plan_path, read_plan, write_plan
from pipelines.cli_support import emit, json_option, parse_duration, parse_time, reports
from pipelines.clock import SystemClock
from pipelines.lake import Lake
from pipelines.settings import Settings
from policy.config import Budgets, PolicyConfig
from policy.disruption import latest_risk
from policy.engine import plan as make_plan

FAILURE_JOBS = "pipelines.failure_jobs"
FAILURE_ENTRY = "current_risk"
"""Contract with the failure model's job module: ``current_risk(settings, *, now) ->
Sequence[FailureRisk]`` scores the online features with the champion and raises
``registry.RegistryError`` when there is no champion, ``FeatureStoreError`` when the
online store cannot feed it (no frame, another feature set)."""


def _settings() -> Settings:
    obj = click.get_current_context().obj
    assert isinstance(obj, Settings)
    return obj


def _who() -> str:
    """Who is acting, for the audit log: $PREDOPS_OPERATOR, else the login name."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = "unknown"
    return os.environ.get("PREDOPS_OPERATOR") or f"{login} via predops"


def _now(at: str | None) -> datetime:
    return parse_time(at) if at else SystemClock().now()


def _has_registry(settings: Settings) -> bool:
    uri = settings.mlflow_uri
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).exists()
    return True


def failure_risk(settings: Settings, now: datetime) -> tuple[list[FailureRisk], dict[str, Any]]:
    """The champion failure model's current risks, or none and why."""
    if not _has_registry(settings):
        return [], {"status": "missing", "note": "no model registry in the workspace yet"}
    try:
        module = importlib.import_module(FAILURE_JOBS)
    except ModuleNotFoundError as exc:
        if exc.name != FAILURE_JOBS:
            raise
        return [], {"status": "missing", "note": f"{FAILURE_JOBS} does not exist yet"}
    entry = getattr(module, FAILURE_ENTRY, None)
    if entry is None:
        return [], {
            "status": "missing",
            "note": f"{FAILURE_JOBS} has no {FAILURE_ENTRY}(settings, *, now)",
        }
    from pipelines.feature_store import FeatureStoreError
    from pipelines.registry import RegistryError

    try:
        risks = list(entry(settings, now=now))
    except RegistryError as exc:
        return [], {"status": "missing", "note": f"no champion failure model: {exc}"}
    except FeatureStoreError as exc:
        return [], {"status": "missing", "note": f"no current node features: {exc}"}
    return risks, {"status": "ok", "nodes_scored": len({r.node_id for r in risks})}


def _forecast(d: dict[str, Any], prov: Provenance | None) -> Forecast:
    return Forecast(
        series_id=d["series_id"],
        issued_at=datetime.fromisoformat(d["issued_at"]),
        valid_at=datetime.fromisoformat(d["valid_at"]),
        p10=float(d["p10"]),
        p50=float(d["p50"]),
        p90=float(d["p90"]),
        method=d.get("method") or "model",
        provenance=prov,
    )


def demand_forecasts(settings: Settings) -> tuple[list[Forecast], dict[str, Any]]:
    """The champion demand model's forecasts of the lake's series, or none and why."""
    if not _has_registry(settings):
        return [], {"status": "missing", "note": "no model registry in the workspace yet"}
    from pipelines import demand_jobs
    from pipelines.registry import RegistryError

    try:
        out = demand_jobs.forecast(settings)
    except RegistryError as exc:
        return [], {"status": "missing", "note": f"no champion demand model: {exc}"}
    p = out["provenance"]
    prov = Provenance(
        p["model_name"],
        p["model_version"],
        p["feature_set_hash"],
        datetime.fromisoformat(p["data_cutoff"]),
        p.get("run_id"),
    )
    forecasts = [_forecast(f, prov) for f in out["forecasts"]]
    return forecasts, {"status": "ok", "series": out["series"], "version": out["version"]}


def summary(plan: Plan) -> dict[str, Any]:
    return {
        "actions": dict(sorted(Counter(a.kind for a in plan.actions).items())),
        "skips": dict(sorted(Counter(f"{s.kind}:{s.reason.value}" for s in plan.skips).items())),
        "alerts": len(plan.alerts),
    }


@click.command("plan")
@click.option("--at", default=None, help="Plan as of this time (ISO-8601). Default: now.")
@json_option
@reports
def plan_command(at: str | None, as_json: bool) -> None:
    """Plan cordons, drains, uncordons, pool sizes and buys from the workspace (writes the
    plan file and an audit entry; changes nothing in the cluster)."""
    started = time.perf_counter()
    settings = _settings()
    now = _now(at)
    lake_fleet = fleet_from_lake(Lake(settings.lake_dir), now)
    risks, risk_note = failure_risk(settings, now)
    forecasts, forecast_note = demand_forecasts(settings)
    forecasts += node_demand_forecasts(forecasts, lake_fleet.demand_in_nodes)
    config = PolicyConfig()
    coverage = buy_forecast_coverage(lake_fleet, forecasts, now, config.buy.review_period)
    plan = make_plan(
        risks,
        forecasts,
        lake_fleet.snapshot,
        lake_fleet.fleet,
        Budgets(),
        FixedClock(now),
        config,
    )
    alerts = [
        f"{what}: {note['note']} — planned without it"
        for what, note in (("failure risk", risk_note), ("demand forecast", forecast_note))
        if note["status"] != "ok"
    ]
    if forecast_note["status"] == "ok":  # else the alert above says why there are none
        alerts += [f"buy {k}: {c['note']}" for k, c in coverage.items() if not c["covered"]]
    plan = replace(plan, alerts=plan.alerts + tuple(alerts))
    inputs = {
        "fleet": lake_fleet.notes,
        "failure_risk": risk_note,
        "forecasts": forecast_note,
        "buy_forecasts": coverage,
    }
    path = write_plan(settings.plans_dir, plan, {"inputs": inputs})
    AuditLog(settings.audit_log, who=_who()).append(
        at=SystemClock().now(),
        outcome="planned",
        what={"kind": "plan", "target": plan.plan_id, "params": summary(plan)},
        why="predops plan",
        plan_id=plan.plan_id,
        mode="dry_run",
        detail=f"plan file {path.name}",
    )
    out = {
        **plan.to_dict(),
        "inputs": inputs,
        "summary": summary(plan),
        "plan_file": str(path),
        "seconds": round(time.perf_counter() - started, 3),
    }
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
@json_option
@reports
def apply_command(
    plan_id: str,
    execute: bool,
    kubeconfig: str | None,
    context: str | None,
    timeout: str,
    at: str | None,
    as_json: bool,
) -> None:
    """Re-validate and apply plan PLAN_ID; every decision goes to the audit log."""
    settings = _settings()
    plan = read_plan(plan_path(settings.plans_dir, plan_id))
    clock: Any = FixedClock(parse_time(at)) if at else SystemClock()
    sleep = _fixed_sleep(clock) if at else time.sleep
    out = apply_in_workspace(
        settings,
        plan,
        execute=execute,
        clock=clock,
        sleep=sleep,
        who=_who(),
        kubeconfig=kubeconfig,
        context=context,
        timeout_s=_seconds(timeout),
    )
    emit(out, as_json, _human_apply)
    if out["counts"].get("failed"):
        click.get_current_context().exit(2)


def apply_in_workspace(
    settings: Settings,
    plan: Plan,
    *,
    execute: bool,
    clock: Any,
    sleep: Any,
    who: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Apply ``plan`` as ``predops apply`` does (and the server's apply endpoint): state
    from the cluster of ``kubeconfig`` (or the lake), drains and cordons on that
    cluster, pool resizes through its Cluster API MachineDeployments (``pipelines.
    actuators.clusterapi``), buys as purchase files, every
    decision in the audit log as ``who``. Returns the report with ``state``,
    ``failure_risk`` and ``audit_log``."""
    from pipelines.actuators.apply import apply_plan
    from pipelines.actuators.purchase import PurchaseRequestWriter

    actuators: dict[str, Actuator] = {
        "buy": PurchaseRequestWriter(settings.workspace / "purchases", clock)
    }
    state: StateSource
    if kubeconfig:
        from pipelines.actuators.clusterapi import ClusterApi, PoolResizer
        from pipelines.actuators.kube import KubeActuator, KubeOptions, KubeState, connect

        api = connect(kubeconfig, context, KubeOptions(timeout=timeout_s))
        state = KubeState(api, clock)
        kube = KubeActuator(api, clock, sleep)
        actuators.update(dict.fromkeys(("cordon", "drain", "uncordon"), kube))
        actuators["resize_pool"] = PoolResizer(ClusterApi(api), clock, sleep)
    else:
        state = FleetStateSource(fleet_from_lake(Lake(settings.lake_dir), clock.now()).fleet)
    risks, risk_note = failure_risk(settings, clock.now())
    try:
        report = apply_plan(
            plan,
            state=state,
            actuators=actuators,
            audit=AuditLog(settings.audit_log, who=who),
            clock=clock,
            execute=execute,
            budgets=Budgets(),
            config=PolicyConfig().disruption,
            risk=latest_risk(risks),
        )
    except ActionFailed as exc:  # the cluster could not even be listed
        raise OSError(f"apply {plan.plan_id}: {exc.reason}") from exc
    out = report.to_dict()
    out.update(
        {
            "state": "kubernetes" if kubeconfig else "lake",
            "failure_risk": risk_note,
            "audit_log": str(settings.audit_log),
        }
    )
    return out


def _seconds(text: str) -> float:
    return parse_duration(text).total_seconds()


def _fixed_sleep(clock: FixedClock) -> Any:
    """With ``--at`` time is simulated: waiting moves the clock."""
    return lambda s: clock.advance(timedelta(seconds=s))


def _human_apply(o: dict[str, Any]) -> str:
    lines = [f"{o['plan_id']} ({o['mode']}, state from {o['state']}): {o['counts']}"]
    for a in o["actions"]:
        why = f" {a['reason']}" if a["reason"] else ""
        detail = f": {a['detail']}" if a["detail"] else ""
        lines.append(f"  {a['outcome']:<12} {a['kind']:<12} {a['target']:<24}{why}{detail}")
    return "\n".join(lines)


PLAN_COMMANDS: Sequence[click.Command] = (plan_command, apply_command)
"""Registered on the main ``predops`` group by ``pipelines.cli``."""
