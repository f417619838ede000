"""Plan history (``/plans``) and the plan page's audit-trail fragment
(``/plans/{plan_id}/audit``, what the page reloads after an approve or apply).

Each past plan: when it was made, its actions by kind, skips and alerts, and what
happened to it according to the audit log: who approved it and when, who asked for an
apply and in which mode, and the apply's outcome per action (done, would_run, failed;
``dropped`` is an action re-validation rejected). The audit log is read once per
request and grouped by plan; only one page of plans (:data:`PAGE` rows) is read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from predops.pipelines.workspace.audit import AuditLog
from predops.serving.auth import page_access
from predops.serving.context import Ctx
from predops.serving.dashboards import plans, view
from predops.serving.dashboards.router import _page, _plan_or_404, templates

PAGE = 20
"""Plans listed per page of the history (newest first; ``?offset=`` pages on)."""
HISTORY_RANGE = "7d"
"""Default time range of the history (``?range=``): plans created in the last week."""
APPLY_OUTCOMES = (
    "done",
    "would_run",
    "failed",
    "dropped",
    "deferred",
    "already_done",
    "unsupported",
)
"""Per-action outcomes an apply records, in the order the history shows them."""

pages = APIRouter(include_in_schema=False, dependencies=[Depends(page_access)])


def by_plan(audit_log: Any) -> dict[str, list[dict[str, Any]]]:
    """Audit entries grouped by plan id, oldest first within each plan."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in AuditLog(audit_log, who="dashboard").entries():
        pid = e.get("plan_id")
        if isinstance(pid, str):
            out.setdefault(pid, []).append(e)
    return out


def outcome(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What happened to one plan: ``status`` (planned, approved, applied (dry-run) or
    applied), ``approved`` / ``applied`` (the latest such entry: who, when, mode), and
    ``counts`` of the last apply's per-action outcomes."""
    approved = [e for e in entries if e.get("outcome") == "approved"]
    requested = [e for e in entries if e.get("outcome") == "apply_requested"]
    acted = [e for e in entries if e.get("outcome") in APPLY_OUTCOMES]
    last_apply = requested[-1] if requested else None
    if last_apply is not None:  # only the outcomes of the latest apply
        acted = [e for e in acted if str(e.get("at", "")) >= str(last_apply.get("at", ""))]
    counts = Counter(str(e["outcome"]) for e in acted)
    mode = (last_apply or (acted[-1] if acted else {})).get("mode")
    if acted or last_apply:
        status = "applied (dry-run)" if mode == "dry_run" else "applied"
    elif approved:
        status = "approved"
    else:
        status = "planned"
    return {
        "status": status,
        "approved": approved[-1] if approved else None,
        "applied": last_apply or (acted[-1] if acted else None),
        "mode": mode,
        "counts": {k: counts[k] for k in APPLY_OUTCOMES if counts.get(k)},
    }


def history(
    ctx: Any, offset: int = 0, limit: int = PAGE, rng: view.TimeRange | None = None
) -> dict[str, Any]:
    """One page of past plans (created in ``rng`` when given), newest first, each with
    its counts and outcome; ``outside``: plans created outside the range."""
    if rng is None:
        ids, outside = plans.plan_ids(ctx.settings.plans_dir), 0
    else:
        ids, outside = plans.plan_ids_between(ctx.settings.plans_dir, rng.since, rng.until)
    audit = by_plan(ctx.settings.audit_log)
    rows: list[dict[str, Any]] = []
    for pid in ids[offset : offset + limit]:
        try:
            plan = plans.read_plan_dict(ctx.settings.plans_dir, pid)
        except ValueError as exc:  # a damaged file is listed, with why
            rows.append({"plan_id": pid, "problem": str(exc)})
            continue
        if plan is None:
            continue
        rows.append(
            {
                "plan_id": pid,
                "created_at": plan.get("created_at"),
                "data_cutoff": plan.get("data_cutoff"),
                "dry_run": plan.get("dry_run"),
                "actions": dict(
                    sorted(Counter(str(a.get("kind")) for a in plan.get("actions", [])).items())
                ),
                "skips": len(plan.get("skips", [])),
                "alerts": len(plan.get("alerts", [])),
                "outcome": outcome(audit.get(pid, [])),
                "problem": None,
            }
        )
    return {"rows": rows, "total": len(ids), "offset": offset, "limit": limit, "outside": outside}


@pages.get("/plans", response_class=HTMLResponse)
def plan_history(request: Request, ctx: Ctx, offset: int = 0) -> HTMLResponse:
    """Past plans, newest first: counts by action kind, approvals and apply outcomes."""
    if offset < 0:
        raise HTTPException(422, "offset: must be >= 0")
    rng = view.time_range(request.query_params, ctx.clock.now(), default=HISTORY_RANGE)
    return _page(request, "plan_history.html", "/plans", rng=rng, **history(ctx, offset, rng=rng))


@pages.get("/plans/{plan_id}/audit", response_class=HTMLResponse)
def plan_audit(request: Request, ctx: Ctx, plan_id: str) -> HTMLResponse:
    """The plan page's audit-trail card alone (the page reloads it after an approve
    or apply)."""
    plan = _plan_or_404(ctx, plan_id)
    return templates.TemplateResponse(
        request,
        "plan_audit.html",
        {"plan": plan, "audit": plans.audit_trail(ctx.settings.audit_log, plan_id)},
    )
