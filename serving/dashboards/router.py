"""The planning dashboards: server-rendered pages over the same context as the REST API.

Pages: ``/`` fleet risk board, ``/nodes/{node_id}``, ``/demand`` and
``/demand/{series_id}``, ``/capacity`` (pool sizing and buy plan), ``/plans/latest`` and
``/plans/{plan_id}`` (with approval through the API; ``/plans``, the history, is in
:mod:`plan_history`), ``/models``. Charts are plotly
figures embedded as JSON and drawn by plotly.js served from the installed ``plotly``
package (``/static/plotly.min.js``) — no CDN, nothing fetched from the network.
Templates autoescape everything; ids from URLs are validated before use.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

import polars as pl
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape

from predops.serving.auth import page_access
from predops.serving.context import Ctx
from predops.serving.dashboards import (
    assets,
    board_history,
    calibration,
    capacity_view,
    charts,
    demand,
    demand_backtest,
    demand_view,
    filtering,
    fleet,
    formatting,
    links,
    node_state,
    plans,
    registry_view,
    view,
    why,
)
from predops.serving.dashboards.risk import fleet_risk
from predops.serving.sessions import COOKIE

HERE = Path(str(files("predops.serving.dashboards")))
TOP_NODES = 25
"""Riskiest in-service nodes listed on the board (out-of-service ones apart)."""
DEMAND_RANGE = "3d"
"""Default time range of the demand pages (``?range=``, :mod:`view`)."""
BOARD_RANGE = "7d"
"""Default time range of the risk board's events."""
CAPACITY_RANGE = "24h"
"""Default history of the capacity page's fan charts (``?range=``), before the next 48 h."""
DEMAND_FILTERS = ("pool", "gpu_model", "resource")
"""Filters of the demand index (columns of the series table)."""

router = APIRouter(include_in_schema=False)


_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters.update({k: getattr(formatting, k) for k in formatting.FILTERS})
_env.globals.update(
    link=view.link, without=view.without, preset_link=view.preset_link, ranges=view.RANGES
)
_env.globals.update({k: getattr(links, k) for k in links.TEMPLATE_GLOBALS})
_env.globals.update(state_text=node_state.state_text)
_env.filters.update(qty=demand_view.quantity, evidence_unit=capacity_view.evidence_unit)
templates = Jinja2Templates(env=_env)

NAV = (
    ("/", "Fleet risk"),
    ("/demand", "Demand"),
    ("/capacity", "Capacity"),
    ("/plans/latest", "Action plan"),
    ("/plans", "Plan history"),
    ("/models", "Models"),
)


def _page(request: Request, name: str, active: str, **context: Any) -> HTMLResponse:
    ctx = request.app.state.ctx
    return templates.TemplateResponse(
        request,
        name,
        {
            "nav": NAV,
            "active": active,
            "now": ctx.clock.now(),
            "signed_in": ctx.config.protect_reads and COOKIE in request.cookies,
            "params": dict(request.query_params),
            "refresh": context.pop("refresh", None)
            if "refresh" in context
            else view.refresh_seconds(request.query_params),
            "as_of": view.ages(ctx.clock.now(), context.pop("as_of", [])),
            **context,
        },
    )


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """A failed page request (an unknown node, a malformed id) as a page with the
    navigation, not the API's JSON error body."""
    heading = {400: "Not a valid view", 404: "Not found", 422: "Not a valid request"}.get(
        status, "Error"
    )
    response = _page(
        request,
        "error.html",
        "",
        status=status,
        heading=heading,
        message=message,
        path=request.url.path,
        refresh=0,
    )
    response.status_code = status
    return response


pages = APIRouter(include_in_schema=False, dependencies=[Depends(page_access)])
"""Every page showing fleet data: behind a sign-in when reads are protected."""


BOARD_FILTERS = ("pool", "spine", "rack", "gpu_model")
"""Inventory columns the risk board filters on (query parameters, so a view is a URL)."""
MAX_CHOICES = 1000
"""Values offered per filter (a 10,000-node fleet has a few hundred racks)."""


@pages.get("/", response_class=HTMLResponse)
def fleet_board(request: Request, ctx: Ctx, horizon_h: float | None = None) -> HTMLResponse:
    """Fleet risk board: heat map of p_fail per rack and spine, riskiest nodes; filtered
    by pool, spine, rack and GPU model, at a horizon (all kept in the URL)."""
    loaded = ctx.failure.current
    horizons = [h.total_seconds() / 3600 for h in loaded.model.horizons] if loaded else []
    horizon = timedelta(hours=horizon_h) if horizon_h and horizon_h in horizons else None
    risk = fleet_risk(ctx) if horizon is None else fleet_risk(ctx, horizon=horizon)
    everything = fleet.inventory_at(ctx.settings.lake_dir, ctx.clock.now())
    choices = filtering.offered(everything, BOARD_FILTERS, MAX_CHOICES)
    chosen = view.chosen(view.filters(request.query_params, choices))
    inventory = everything
    for column, value in chosen.items():
        inventory = inventory.filter(pl.col(column).cast(pl.String) == value)
    shown = set(inventory["node_id"].to_list())
    board = replace(risk, risks=tuple(r for r in risk.risks if r.node_id in shown))
    cells = fleet.rack_cells(inventory, board)
    base_rate, act_at = _risk_anchors(ctx, risk)  # the whole fleet's, whatever is shown
    riskiest = [r.node_id for r in board.risks[: 2 * TOP_NODES]]
    states = node_state.node_states(
        ctx.settings.lake_dir,
        riskiest,
        ctx.clock.now(),
        loans=node_state.open_loans(ctx.settings.audit_log, ctx.settings.plans_dir),
    )
    top = fleet.top_nodes(inventory, board, n=2 * TOP_NODES, states=states)
    in_service = [r for r in top if r["state"].in_service]
    figure = (
        charts.rack_heatmap(cells, base_rate=base_rate, act_at=act_at)
        if board.risks and cells
        else None
    )
    rng = view.time_range(request.query_params, ctx.clock.now(), default=BOARD_RANGE)
    happened = board_history.range_events(
        ctx.settings.lake_dir, rng.since, rng.until, shown if chosen else None
    )
    happened_fig = (
        charts.event_bars(
            happened.bins,
            happened.per_bin,
            board_history.colours(),
            title=f"Events per {formatting.age(happened.width)} on the nodes shown",
        )
        if happened.total
        else None
    )
    return _page(
        request,
        "fleet.html",
        "/",
        risk=board,
        figure=figure,
        top=why.explained(
            [r for r in in_service if r["state"].busy is not False][:TOP_NODES], board
        ),
        idle=[r for r in in_service if r["state"].busy is False],
        pods_known=any(r["state"].pods is not None for r in top),
        out_of_service=[r for r in top if not r["state"].in_service],
        nodes=inventory.height,
        horizon_h=board.horizon.total_seconds() / 3600,
        horizons=horizons,
        choices=choices,
        chosen=chosen,
        as_of=[("risk scores", risk.online_as_of or risk.as_of)],
        caveat=calibration.caveat(ctx),
        rng=rng,
        happened=happened,
        happened_fig=happened_fig,
    )


def _risk_anchors(ctx: Any, risk: Any) -> tuple[float | None, float | None]:
    """The fleet's mean p_fail now, and the lowest p_fail of a node the newest plan
    cordons or drains (None when it acts on none)."""
    p = {r.node_id: r.p_fail for r in risk.risks}
    base = sum(p.values()) / len(p) if p else None
    ids = plans.plan_ids(ctx.settings.plans_dir)
    latest = plans.read_plan_dict(ctx.settings.plans_dir, ids[0]) if ids else None
    acted = [
        p[a["target"]]
        for a in (latest or {}).get("actions", [])
        if a.get("kind") in ("cordon", "drain") and a.get("target") in p
    ]
    return base, (min(acted) if acted else None)


@pages.get("/demand", response_class=HTMLResponse)
def demand_index(request: Request, ctx: Ctx) -> HTMLResponse:
    """Every demand series in its units: a sparkline, latest value and capacity, p90
    against capacity and the days of headroom."""
    frame = demand.demand_frame(ctx)
    rows = demand.series_table(frame)
    found = view.filters(
        request.query_params, {k: filtering.distinct(rows, k) for k in DEMAND_FILTERS}
    )
    served = demand.served_forecast(ctx, frame)
    newest = max((r["last_ts"] for r in rows), default=None)
    rng = view.time_range(request.query_params, newest or ctx.clock.now(), default=DEMAND_RANGE)
    shown = demand_view.index_rows(
        frame,
        served,
        filtering.matching(rows, view.chosen(found)),
        history=rng.span,
        until=rng.until,
    )
    return _page(
        request,
        "demand_index.html",
        "/demand",
        series=shown,
        filters=found,
        as_of=[("demand", newest)],
        served=served,
        rng=rng,
    )


@pages.get("/demand/{series_id:path}", response_class=HTMLResponse)
def demand_series(request: Request, ctx: Ctx, series_id: str) -> HTMLResponse:
    """One series: actual vs the served forecast's p10 / p50 / p90, backtest accuracy."""
    if not demand.valid_series_id(series_id):
        raise HTTPException(422, "series_id: letters, digits, '.', '_', ':', '/' or '-' only")
    frame = demand.demand_frame(ctx)
    if frame.filter(frame["series_id"] == series_id).height == 0:
        raise HTTPException(404, f"no demand series {series_id!r} in the lake")
    served = demand.served_forecast(ctx, frame)
    end = frame.filter(frame["series_id"] == series_id)["ts"].max()
    assert isinstance(end, datetime)
    rng = view.time_range(request.query_params, end, default=DEMAND_RANGE)
    shown = demand.series_view(frame, served, series_id, history=rng.span, until=rng.until)
    figure = _fan(shown, f"{series_id}: actual and forecast", with_capacity=True)
    models, registry_problem = registry_view.registered_models(ctx)
    backtest = demand_backtest.series_backtest(ctx, models, series_id)
    return _page(
        request,
        "demand_series.html",
        "/demand",
        series_id=series_id,
        pool=frame.filter(frame["series_id"] == series_id)["pool"].drop_nulls().last(),
        served=served,
        figure=figure,
        horizon_rows=shown["forecast"].height,
        as_of=[("demand", end), ("forecast", demand.issued_at(served))],
        served_href=links.served_href(ctx.demand.current),
        rng=rng,
        backtest=backtest,
        registry_problem=registry_problem,
        unit=demand_view.view_unit(shown),
        choice=demand.series_selection(served, series_id),
    )


def _fan(view: dict[str, Any], title: str, *, with_capacity: bool) -> dict[str, Any] | None:
    fc, actual = view["forecast"], view["actual"]
    if fc.height == 0 and actual.height == 0:
        return None
    capacity = None
    if with_capacity and actual.height:
        capacity = (actual["ts"].to_list(), actual["capacity"].cast(float).to_list())
    return charts.fan_chart(
        actual["ts"].to_list(),
        actual["value"].cast(float).to_list(),
        fc["valid_at"].to_list(),
        fc["p10"].to_list(),
        fc["p50"].to_list(),
        fc["p90"].to_list(),
        title=title,
        unit=demand_view.view_unit(view),
        capacity=capacity,
    )


@pages.get("/capacity", response_class=HTMLResponse)
def capacity(request: Request, ctx: Ctx, plan_id: str | None = None) -> HTMLResponse:
    """Pool sizing (target vs current, demand over the next 48 h) and the buy plan of the
    latest plan (or ``?plan_id=``)."""
    ids = plans.plan_ids(ctx.settings.plans_dir)
    pid = plan_id or (ids[0] if ids else None)
    plan = _plan_or_404(ctx, pid) if pid else None
    frame = demand.demand_frame(ctx)
    series = demand.series_table(frame)
    sizing = plans.pool_sizing(plan) if plan else []
    series, sizing, found = filtering.capacity_view(series, sizing, request.query_params)
    served = demand.served_forecast(ctx, frame)
    newest = max((r["last_ts"] for r in series), default=None)
    rng = view.time_range(request.query_params, newest or ctx.clock.now(), default=CAPACITY_RANGE)
    sizing_fig = None
    if sizing:
        pools = [r["pool"] for r in sizing]
        sizing_fig = charts.grouped_bars(
            pools,
            {
                "current nodes": [r["current"] for r in sizing],
                "target nodes": [r["target"] for r in sizing],
                "planned nodes": [r["to_nodes"] for r in sizing],
            },
            title="Nodes per pool: now, needed for p90 demand, and what the plan holds",
            unit="nodes",
        )
    pool_figs = []
    for row in series:
        shown = demand.series_view(
            frame, served, row["series_id"], history=rng.span, until=rng.until
        )
        shown["series_id"] = row["series_id"]
        fig = _fan(shown, f"{row['series_id']}: demand vs capacity", with_capacity=True)
        if fig is not None:
            pool_figs.append((row["series_id"], fig))
    buys, buy_skips = plans.buys(plan) if plan else ([], [])
    reach = capacity_view.buy_reach(plan) if plan else None
    return _page(
        request,
        "capacity.html",
        "/capacity",
        as_of=[("plan", (plan or {}).get("created_at")), ("forecast", demand.issued_at(served))],
        plan=plan,
        sizing=sizing,
        sizing_fig=sizing_fig,
        pool_figs=pool_figs,
        served=served,
        buys=buys,
        buy_skips=buy_skips,
        no_buy_reason=plans.no_buy_reason(plan) if plan and not buys and not buy_skips else None,
        filters=found,
        reach=reach,
        no_buy=capacity_view.no_buy_headline(reach, buy_skips) if reach and not buys else None,
        rng=rng,
    )


def _plan_or_404(ctx: Any, plan_id: str) -> dict[str, Any]:
    try:
        plan = plans.read_plan_dict(ctx.settings.plans_dir, plan_id)
    except ValueError as exc:
        raise HTTPException(422, f"plan_id: {exc}") from None
    if plan is None:
        raise HTTPException(404, f"no plan {plan_id!r}")
    return plan


@pages.get("/plans/latest", response_class=HTMLResponse)
def plan_latest(request: Request, ctx: Ctx) -> HTMLResponse:
    """The newest plan, or an empty state saying how to make one."""
    ids = plans.plan_ids(ctx.settings.plans_dir)
    if not ids:
        return _page(request, "plan.html", "/plans/latest", plan=None, ids=[])
    return _plan_page(request, ctx, ids[0], ids)


@pages.get("/plans/{plan_id}", response_class=HTMLResponse)
def plan_page(request: Request, ctx: Ctx, plan_id: str) -> HTMLResponse:
    """One plan: actions and skips with reasons and evidence, audit trail, approval."""
    return _plan_page(request, ctx, plan_id, plans.plan_ids(ctx.settings.plans_dir))


def _plan_page(request: Request, ctx: Any, plan_id: str, ids: list[str]) -> HTMLResponse:
    whole = _plan_or_404(ctx, plan_id)
    now = ctx.clock.now()
    loans = node_state.open_loans(ctx.settings.audit_log, ctx.settings.plans_dir)
    plan, found = filtering.plan_view(
        whole, request.query_params, ctx.settings.lake_dir, now, loans=loans
    )
    risk = fleet_risk(ctx)
    p_fail = {r.node_id: r.p_fail for r in risk.risks}
    groups = plans.skip_groups(plan, p_fail)
    shown = [*plan.get("actions", []), *(s for g in groups for s in g["rows"])]
    states = node_state.node_states(
        ctx.settings.lake_dir,
        [str(r["target"]) for r in shown if r.get("kind") in filtering.NODE_KINDS],
        now,
        loans=loans,
    )
    return _page(
        request,
        "plan.html",
        "/plans/latest",
        as_of=[("plan", plan.get("created_at"))],
        plan=plan,
        ids=ids[:20],
        skip_groups=groups,
        states=states,
        alerts=[plans.alert_view(a) for a in plan.get("alerts", [])],
        audit=plans.audit_trail(ctx.settings.audit_log, plan_id),
        whole=whole,
        filters=found,
        apply_execute=ctx.config.apply_execute,
    )


router.include_router(pages)
router.include_router(assets.router)
