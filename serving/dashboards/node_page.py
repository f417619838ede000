"""The node page (``/nodes/{node_id}``): where the node sits and its state, its risk now
and why, risk over the chosen time range (re-scored by today's champion), the telemetry
behind it with its failures, repairs, drains and cordons marked, the repeat-offender
hint, and the newest plan's decision about it. Its data comes from
:mod:`~predops.serving.dashboards.node`; the page shell from
:mod:`~predops.serving.dashboards.router`."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from predops.serving.auth import page_access
from predops.serving.context import Ctx
from predops.serving.dashboards import (
    calibration,
    charts,
    fleet,
    incidents,
    links,
    node,
    node_state,
    view,
    why,
)
from predops.serving.dashboards.risk import fleet_risk
from predops.serving.dashboards.router import _page

NODE_RANGE = "3d"
"""Default time range of the node page (``?range=``, :mod:`view`)."""

pages = APIRouter(include_in_schema=False, dependencies=[Depends(page_access)])


@pages.get("/nodes/{node_id}", response_class=HTMLResponse)
def node_page(request: Request, ctx: Ctx, node_id: str) -> HTMLResponse:
    """One node: risk over time, the telemetry behind it, failure / repair history."""
    if not node.valid_node_id(node_id):
        raise HTTPException(422, "node_id: letters, digits, '.', '_', ':' or '-' only")
    now = ctx.clock.now()
    inventory = fleet.inventory_at(ctx.settings.lake_dir, now)
    where = inventory.filter(inventory["node_id"] == node_id).to_dicts()
    if not where:
        raise HTTPException(404, f"no node {node_id!r} in the lake's inventory")
    risk = fleet_risk(ctx)
    current = risk.by_node().get(node_id)
    why_ = why.node_why(risk, node_id) if current else None
    reasons = [r.feature for r in (*why_.raising, *why_.lowering)] if why_ else []
    rng = view.time_range(request.query_params, now, default=NODE_RANGE)
    history = node.risk_history(
        ctx, node_id, since=rng.since, until=rng.until, horizon=risk.horizon
    )
    risk_fig = None
    events = node.events(ctx, node_id, until=now)
    if history["ts"]:
        risk_fig = charts.risk_over_time(
            history["ts"],
            history["p_fail"],
            trained_until=history.get("trained_until"),
            title=f"p_fail within {history['horizon_h']:g} h, scored by {history['model']}",
        )
    tel = node.telemetry(
        ctx, node_id, since=rng.since, until=rng.until, first=node.telemetry_columns(reasons)
    )
    tel_fig = None
    varying, flat = node.varying_columns(tel)
    if tel.height and varying:
        cols = varying[:6]
        tel_fig = charts.telemetry_panels(
            tel["ts"].to_list(),
            {c: tel[c].cast(float).to_list() for c in cols},
            "Telemetry (raw samples); the columns its reasons point at come first",
        )
    risk_fig, tel_fig = (
        None if f is None else incidents.mark_events(f, events, rng.since, rng.until)
        for f in (risk_fig, tel_fig)
    )
    rank = next((i + 1 for i, r in enumerate(risk.risks) if r.node_id == node_id), None)
    loans = node_state.open_loans(ctx.settings.audit_log, ctx.settings.plans_dir)
    state = node_state.node_states(ctx.settings.lake_dir, [node_id], now, loans=loans)[node_id]
    return _page(
        request,
        "node.html",
        "/",
        node_id=node_id,
        where=where[0],
        state=state,
        current=current,
        why=why_,
        rank=rank,
        risk=risk,
        history=history,
        risk_fig=risk_fig,
        in_sample=bool(
            history["ts"]
            and history.get("trained_until")
            and history["trained_until"] > history["ts"][0]
        ),
        tel_fig=tel_fig,
        flat=flat,
        events=events,
        rng=rng,
        offender=incidents.repeat_offender(events, now),
        repeat_failures=incidents.REPEAT_FAILURES,
        repeat_days=incidents.REPEAT_WINDOW.days,
        decision=links.plan_decision(ctx.settings.plans_dir, node_id, where[0].get("rack")),
        as_of=[("risk score", risk.online_as_of or risk.as_of)],
        caveat=calibration.caveat(ctx),
    )
