"""The plan use case: plan in a workspace, apply a plan in a workspace.

Every face calls these as plain functions: ``predops plan`` / ``predops apply``
(:mod:`predops.pipelines.cli.plan`), the scheduler's ``plan`` step
(:mod:`predops.pipelines.scheduler.steps`) and the server's apply endpoint
(:mod:`predops.serving.routes.plans`).

:func:`plan_in_workspace` builds the fleet from the workspace — inventory, node states
from the lake's events, PDBs (``pdbs`` table), the running pods as the allocator's
snapshot (:mod:`predops.pipelines.workspace.fleet_state`) — adds the failure risk of the
champion ``node_failure`` model and the demand forecasts when those exist — the champion
``demand.hourly`` model's for drains and pool sizing, the champion ``demand.weekly``
model's for the buys (lead times of weeks); a registry holding only the single
``demand`` model of earlier releases answers for the horizon it was trained for — plus
each stock position's node demand derived from its series, the champion
``predops.usage`` model's per-node usage forecasts (:mod:`predops.pipelines.jobs.usage`)
and the loans and published reclaimable values now (:mod:`predops.pipelines.jobs.
sharing_state`: the cluster's node annotations when given, else the audit log), runs
:func:`predops.policy.engine.plan` with the slow-start pacing state the previous plan
left (``<workspace>/policy/pacing.json``, :mod:`predops.pipelines.workspace.pacing_state`;
written back after), writes the plan to ``<workspace>/plans/<plan_id>.json``
(atomically) with one ``planned`` entry in the audit log, and returns the report: the
plan (actions with reason, evidence and idempotency key; skips with their typed reason),
``inputs`` (what each input was, or why it is missing; ``buy_forecasts``: per SKU and
region, the window a buy needs forecasts for and how far they reach — an alert names
each SKU whose lead time the forecasts do not reach; ``policy``: every budget and policy
value planned with and where they came from, see
:func:`predops.pipelines.workspace.policy_config.policy_settings_dict`), ``summary`` and
``plan_file``. A
missing model is never replaced by invented numbers: the plan runs with no risks /
forecasts, says so in ``inputs`` and raises an alert.

:func:`apply_in_workspace` re-validates every action of a plan just before it would run
and records each decision in the audit log. Dry-run unless ``execute``. With a
``kubeconfig`` (a file or ``in-cluster``) the live cluster is the state re-validation
reads and, with ``execute``, cordons / drains / uncordons / soft taints go to it and pool resizes to
each pool's actuator — Cluster API, Karpenter limits or placeholder pods, chosen per pool
(``pool_actuators``, :mod:`predops.pipelines.actuators.pool_resizers`); a dry-run's
report says which and what it would send. Without, the lake's state is re-read. ``buy``
actions are written as purchase requests under ``<workspace>/purchases``. Its report's
``policy`` holds the budgets and disruption values re-validation used. With a
``kubeconfig`` every node scored now also gets its risk annotation and
``PredictedFailure`` condition, and every cordon, drain, uncordon and skip of a node an
Event (:mod:`predops.pipelines.actuators.node_signals`; with ``execute`` only, a
dry-run's ``node_signals`` says what it would send), one ``published`` audit entry when
anything was written.

Both take the :class:`PolicySettings` the face loaded (budgets, policy knobs and where
they came from, recorded with the values); None is the documented defaults.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.core.actions import Plan
from predops.core.clock import Clock, FixedClock
from predops.core.contracts import FailureRisk, Forecast
from predops.pipelines.actuators.apply import (
    ActionFailed,
    Actuator,
    FleetStateSource,
    StateSource,
    apply_plan,
)
from predops.pipelines.actuators.purchase import PurchaseRequestWriter
from predops.pipelines.jobs import demand as demand_jobs
from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.jobs.inspections import record_applied
from predops.pipelines.jobs.sharing_state import SharingState, from_audit
from predops.pipelines.jobs.usage import usage_inputs
from predops.pipelines.workspace import snapshot_cache as cached_snapshot
from predops.pipelines.workspace.approvals import check_approval
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.errors import FeatureStoreError, RegistryError
from predops.pipelines.workspace.fleet_state import fleet_from_lake
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.pacing_state import pacing_path, read_pacing, write_pacing
from predops.pipelines.workspace.plans import write_plan
from predops.pipelines.workspace.policy_config import (
    REVALIDATION_KEYS,
    PolicySettings,
    policy_settings_dict,
)
from predops.pipelines.workspace.settings import Settings
from predops.policy.demand_nodes import buy_forecast_coverage, node_demand_forecasts
from predops.policy.disruption import latest_risk
from predops.policy.engine import Reclaiming
from predops.policy.engine import plan as make_plan
from predops.policy.fleet import FleetState
from predops.policy.pacing import pacing_after


def _has_registry(settings: Settings) -> bool:
    uri = settings.mlflow_uri
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).exists()
    return True


def failure_risk(
    settings: Settings, now: datetime, *, reuse: bool = False
) -> tuple[list[FailureRisk], dict[str, Any]]:
    """The champion failure model's current risks, or none and why (``reuse``: the
    previous pass's when the online rows and the champion did not change, see
    :func:`predops.pipelines.jobs.failure.score_online`)."""
    if not _has_registry(settings):
        return [], {"status": "missing", "note": "no model registry in the workspace yet"}
    try:
        if reuse:
            scores = failure_jobs.current_scores(settings, now=now, reuse=True)
            risks, reused = list(scores.risks), scores.reused
        else:
            risks, reused = list(failure_jobs.current_risk(settings, now=now)), False
    except RegistryError as exc:
        return [], {"status": "missing", "note": f"no champion failure model: {exc}"}
    except FeatureStoreError as exc:
        return [], {"status": "missing", "note": f"no current node features: {exc}"}
    note: dict[str, Any] = {"status": "ok", "nodes_scored": len({r.node_id for r in risks})}
    if reuse:
        note["reused"] = reused
    return risks, note


def demand_forecasts(
    settings: Settings, horizon: str = "hourly", *, reuse: bool = False
) -> tuple[list[Forecast], dict[str, Any]]:
    """The ``horizon`` demand model's champion forecasts of the lake's series (``hourly``:
    pool sizing; ``weekly``: buys), or none and why (``reuse``: the previous pass's when
    the served version and its inputs did not change, see
    :func:`predops.pipelines.jobs.demand.issue_forecasts`)."""
    if not _has_registry(settings):
        return [], {"status": "missing", "note": "no model registry in the workspace yet"}
    try:
        out = demand_jobs.issue_forecasts(settings, horizon=horizon, reuse=reuse)
    except RegistryError as exc:
        return [], {"status": "missing", "note": f"no champion {horizon} demand model: {exc}"}
    series = len({f.series_id for f in out.forecasts})
    note: dict[str, Any] = {
        "status": "ok",
        "model": out.provenance.model_name,
        "series": series,
        "version": out.version,
    }
    if reuse:
        note["reused"] = out.reused
    return list(out.forecasts), note


def summary(plan: Plan) -> dict[str, Any]:
    """Counts of actions by kind, skips by kind and reason, and alerts."""
    return {
        "actions": dict(sorted(Counter(a.kind for a in plan.actions).items())),
        "skips": dict(sorted(Counter(f"{s.kind}:{s.reason.value}" for s in plan.skips).items())),
        "alerts": len(plan.alerts),
    }


def with_soft_taints(fleet: FleetState, audit: AuditLog) -> FleetState:
    """``fleet`` with the nodes the audit log says carry predops' soft taint marked so
    (the policy removes a taint only from a node it knows carries one)."""
    tainted = audit.soft_tainted() & fleet.nodes.keys()
    if not tainted:
        return fleet
    nodes = {n: replace(st, soft_tainted=n in tainted) for n, st in fleet.nodes.items()}
    return replace(fleet, nodes=nodes)


def plan_in_workspace(
    settings: Settings,
    now: datetime,
    *,
    who: str,
    clock: Clock,
    why: str = "predops plan",
    policy: PolicySettings | None = None,
    scored: tuple[list[FailureRisk], dict[str, Any]] | None = None,
    forecasted: tuple[list[Forecast], dict[str, Any]] | None = None,
    seen: dict[str, datetime] | None = None,
    buy_forecasted: tuple[list[Forecast], dict[str, Any]] | None = None,
    sharing: SharingState | None = None,
    reclaiming: tuple[Reclaiming | None, dict[str, Any]] | None = None,
    snapshot_cache: Path | None = None,
) -> dict[str, Any]:
    """Plan as of ``now`` from the workspace (see the module docstring); writes the plan
    file and one ``planned`` audit entry as ``who`` (stamped by ``clock``), changes
    nothing in the cluster. Returns the plan's report.

    A caller that has just scored and forecast at ``now`` (the incremental cycle,
    :mod:`predops.pipelines.jobs.cycle`) hands in ``scored`` (:func:`failure_risk`'s
    answer), ``forecasted`` (:func:`demand_forecasts`' hourly answer),
    ``buy_forecasted`` (its weekly answer) and ``seen`` (each node's latest telemetry
    time) instead of having them computed again.

    ``sharing``: the loans and published reclaimable values now
    (:mod:`predops.pipelines.jobs.sharing_state`; None: from the audit log); with them
    the plan plans lending (``lend_nodes`` / ``return_nodes``). ``reclaiming``:
    :func:`predops.pipelines.jobs.usage.usage_inputs`' answer (None: asked here); with
    the champion ``predops.usage`` model the plan sets each node's reclaimable
    capacity (``set_reclaimable``). ``snapshot_cache``: the file that keeps the snapshot
    of running pods between cycles (:mod:`predops.pipelines.workspace.snapshot_cache`:
    re-used while the pods and the inventory it was built from hold)."""
    started = time.perf_counter()
    policy = policy if policy is not None else PolicySettings()
    budgets, config = policy.budgets, policy.config
    lake_fleet = fleet_from_lake(
        Lake(settings.lake_dir), now, seen=seen, snapshot_cache=snapshot_cache
    )
    risks, risk_note = scored if scored is not None else failure_risk(settings, now)
    forecasts, forecast_note = forecasted if forecasted is not None else demand_forecasts(settings)
    forecasts = list(forecasts)
    forecasts += node_demand_forecasts(forecasts, lake_fleet.demand_in_nodes)
    buy_forecasts, buy_note = (
        buy_forecasted if buy_forecasted is not None else demand_forecasts(settings, "weekly")
    )
    buy_forecasts = list(buy_forecasts)
    buy_forecasts += node_demand_forecasts(buy_forecasts, lake_fleet.demand_in_nodes)
    coverage = buy_forecast_coverage(
        lake_fleet.fleet.stock,
        lake_fleet.demand_in_nodes,
        buy_forecasts,
        now,
        config.buy.review_period,
    )
    audit = AuditLog(settings.audit_log, who=who)
    if sharing is None:
        sharing = from_audit(audit, settings.plans_dir)
    usage, usage_note = (
        reclaiming if reclaiming is not None else usage_inputs(settings, now, sharing.published)
    )
    if usage is not None and reclaiming is not None:
        usage = replace(usage, published=dict(sharing.published))
    paced = config.disruption.pacing == "slow_start"
    state_file = pacing_path(settings.workspace)
    memo: dict[str, Any] | None = None
    if snapshot_cache is not None and lake_fleet.snapshot_token is not None:
        memo = cached_snapshot.read_memo(snapshot_cache, lake_fleet.snapshot_token)
    memo_before = dict(memo) if memo is not None else None
    snap = lake_fleet.snapshot
    depth = snap.depth
    snap.fork()  # the plan's changes are undone: a kept snapshot stays as it was built
    try:
        plan = make_plan(
            risks,
            forecasts,
            snap,
            with_soft_taints(lake_fleet.fleet, audit),
            budgets,
            FixedClock(now),
            config,
            buy_forecast=buy_forecasts,
            pacing=read_pacing(state_file) if paced else None,
            usage=usage,
            loans=sharing.loans,
            sizing_memo=memo,
        )
    finally:
        while snap.depth > depth:  # ours, and any a failed step left open inside it
            snap.revert()
        lake_fleet.give_back()
    if memo is not None and memo != memo_before:
        assert snapshot_cache is not None and lake_fleet.snapshot_token is not None
        cached_snapshot.write_memo(snapshot_cache, lake_fleet.snapshot_token, memo)
    after = pacing_after(plan)
    if after is not None:
        write_pacing(state_file, after)
    notes = (
        ("failure risk", risk_note),
        ("demand forecast", forecast_note),
        ("buy forecast", buy_note),
    )
    alerts = [
        f"{what}: {note['note']} — planned without it"
        for what, note in notes
        if note["status"] != "ok"
    ]
    if buy_note["status"] == "ok":  # else the alert above says why there are none
        alerts += [f"buy {k}: {c['note']}" for k, c in coverage.items() if not c["covered"]]
    plan = replace(plan, alerts=plan.alerts + tuple(alerts))
    inputs = {
        "fleet": lake_fleet.notes,
        "failure_risk": risk_note,
        "forecasts": forecast_note,
        "buy_forecast_model": buy_note,
        "buy_forecasts": coverage,
        "policy": policy_settings_dict(policy),
        "usage_forecasts": usage_note,
        "sharing": sharing.to_dict(now),
        "pacing": {"pacing": config.disruption.pacing}
        if after is None
        else {
            "pacing": "slow_start",
            "state_file": str(state_file),
            "domains_paced": len(after.domains),
            "drains_in_flight": len(after.in_flight),
        },
    }
    path = write_plan(settings.plans_dir, plan, {"inputs": inputs})
    audit.append(
        at=clock.now(),
        outcome="planned",
        what={"kind": "plan", "target": plan.plan_id, "params": summary(plan)},
        why=why,
        plan_id=plan.plan_id,
        mode="dry_run",
        detail=f"plan file {path.name}",
    )
    return {
        **plan.to_dict(),
        "inputs": inputs,
        "summary": summary(plan),
        "plan_file": str(path),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _audit_published(audit: AuditLog, plan: Plan, sent: dict[str, Any], clock: Clock) -> None:
    """One ``published`` entry when the node signals wrote or sent anything."""
    counts = {k: v for k, v in sent.items() if isinstance(v, int)}
    if sent["mode"] != "execute" or not (
        counts["annotations"] or counts["conditions"] or counts["events"] or sent["errors"]
    ):
        return
    audit.append(
        at=clock.now(),
        outcome="published",
        what={"kind": "node_signals", "target": plan.plan_id, "params": counts},
        why="risk annotations, PredictedFailure conditions and Events on the nodes",
        plan_id=plan.plan_id,
        mode="execute",
        detail="; ".join(sent["errors"])[:2000],
    )


PROBLEM_OUTCOMES = frozenset({"failed", "unsupported"})
"""Outcomes of an apply that a person must look at: the command exits non-zero."""


def apply_in_workspace(
    settings: Settings,
    plan: Plan,
    *,
    execute: bool,
    clock: Clock,
    sleep: Callable[[float], None],
    who: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout_s: float = 600.0,
    policy: PolicySettings | None = None,
    subject: str | None = None,
    break_glass: str | None = None,
    pool_actuators: Sequence[str] = (),
) -> dict[str, Any]:
    """Apply ``plan`` (see the module docstring): state from the cluster of
    ``kubeconfig`` (or the lake), drains and cordons on that cluster, pool resizes
    through each pool's actuator (``pool_actuators``: ``NAME`` or ``POOL=NAME``
    settings, default ``auto``), buys as purchase files, every decision in
    the audit log as ``who``. Returns the report with ``state``, ``failure_risk``,
    ``policy`` (the values re-validation used) and ``audit_log``; raises
    :class:`OSError` when the cluster cannot even be listed.

    With ``execute`` the plan must be approved first (:mod:`~predops.pipelines.workspace.
    approvals`: ``policy.approval`` says whether, and whether with four eyes, comparing
    the approver with ``subject``, default ``who``), unless ``break_glass`` gives a
    reason, audited; :class:`ApprovalRequired` otherwise, before anything runs. The
    report's ``authorised`` says what allowed it, ``problems`` lists every action that
    failed or had no actuator."""
    policy = policy if policy is not None else PolicySettings()
    budgets, config = policy.budgets, policy.config
    audit = AuditLog(settings.audit_log, who=who)
    authorised: dict[str, Any] = {"dry_run": True}
    if execute:
        authorised = check_approval(
            settings.workspace,
            plan.plan_id,
            applier=subject or who,
            rule=policy.approval,
            break_glass=break_glass,
            audit=audit,
            at=clock.now(),
        )
    actuators: dict[str, Actuator] = {
        "buy": PurchaseRequestWriter(settings.workspace / "purchases", clock)
    }
    state: StateSource
    previews: dict[str, dict[str, Any]] = {}  # a dry-run's pool resizes, filled by their checks
    signals = None
    if kubeconfig:
        from predops.pipelines.actuators.kube import KubeActuator, KubeOptions, KubeState, connect
        from predops.pipelines.actuators.lending import LendActuator
        from predops.pipelines.actuators.node_signals import NodeSignals
        from predops.pipelines.actuators.pool_resizers import PoolResizers, parse_pool_actuators
        from predops.pipelines.actuators.reclaim import ReclaimActuator
        from predops.pipelines.actuators.soft_taint import SoftTaintActuator

        choice = parse_pool_actuators(pool_actuators)
        api = connect(kubeconfig, context, KubeOptions(timeout=timeout_s))
        state = KubeState(api, clock)
        kube = KubeActuator(api, clock, sleep)
        actuators.update(dict.fromkeys(("cordon", "drain", "uncordon"), kube))
        taints = SoftTaintActuator(api, sleep)
        actuators.update(dict.fromkeys(taints.kinds, taints))
        actuators["set_reclaimable"] = ReclaimActuator(api, clock, sleep)
        lend = LendActuator(api, clock, sleep)
        actuators.update(dict.fromkeys(lend.kinds, lend))
        pools = PoolResizers(api, clock, sleep, choice)
        actuators["resize_pool"], previews = pools, pools.previews
        signals = NodeSignals(api, sleep)
    else:
        state = FleetStateSource(fleet_from_lake(Lake(settings.lake_dir), clock.now()).fleet)
    risks, risk_note = failure_risk(settings, clock.now())
    try:
        report = apply_plan(
            plan,
            state=state,
            actuators=actuators,
            audit=audit,
            clock=clock,
            execute=execute,
            budgets=budgets,
            config=config.disruption,
            risk=latest_risk(risks),
        )
    except ActionFailed as exc:  # the cluster could not even be listed
        raise OSError(f"apply {plan.plan_id}: {exc.reason}") from exc
    out = report.to_dict()
    if execute:  # each drain and cordon run awaits its inspection's outcome
        out["inspections"] = record_applied(
            Lake(settings.lake_dir), out["actions"], clock.now(), clock
        )
    if signals is not None:
        out["node_signals"] = signals.publish(plan, report, risks, clock.now(), execute=execute)
        _audit_published(audit, plan, out["node_signals"], clock)
    for a in out["actions"]:
        if a["outcome"] == "would_run" and a["key"] in previews:
            a["report"] = previews[a["key"]]
    out.update(
        {
            "state": "kubernetes" if kubeconfig else "lake",
            "failure_risk": risk_note,
            "policy": {
                k: v for k, v in policy_settings_dict(policy).items() if k in REVALIDATION_KEYS
            },
            "audit_log": str(settings.audit_log),
            "authorised": authorised,
            "problems": [a for a in out["actions"] if a["outcome"] in PROBLEM_OUTCOMES],
        }
    )
    return out
