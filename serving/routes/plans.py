"""``/v1/plans``: read plans, approve them (role approver) and apply them (role operator).

Apply needs an approval first (409 otherwise) and goes through the same machinery as
``predops apply`` (:func:`predops.pipelines.jobs.plan.apply_in_workspace`): dry-run unless the
server is configured with ``apply_execute``, re-validated with the server's ``[policy]``
(the report's ``policy`` says which values); another apply holding the workspace lock is
a 409 (:mod:`predops.serving.errors`); every decision is in the audit log, plus an
``approved`` / ``apply_requested`` entry naming the token that asked.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path
from starlette.concurrency import run_in_threadpool

from predops.core.actions import Plan
from predops.pipelines.workspace.approvals import ApprovalStore, checked_path
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.plans import read_plan
from predops.serving.auth import Approver, Operator, Reader
from predops.serving.config import ApiToken
from predops.serving.context import Ctx, ServeContext
from predops.serving.errors import ApiError
from predops.serving.schemas import ERRORS, PLAN_ID, ApplyResponse, ApproveRequest, PlanOut

router = APIRouter(prefix="/v1/plans", tags=["plans"], responses=ERRORS)
PlanId = Annotated[str, Path(pattern=PLAN_ID, max_length=128, description="a plan id")]


def who(token: ApiToken) -> str:
    return f"{token.name} ({token.role}) via predops API"


def _load(ctx: ServeContext, plan_id: str) -> tuple[Plan, dict[str, Any]]:
    try:
        path = checked_path(ctx.settings.plans_dir, plan_id)
    except ValueError as exc:
        raise ApiError(422, str(exc), "path.plan_id") from None
    if not path.exists():
        raise ApiError(404, f"no plan {plan_id!r}", "path.plan_id")
    plan = read_plan(path)  # a PlanError is a 503 (serving.errors)
    return plan, json.loads(path.read_text(encoding="utf-8"))


def _plan_out(ctx: ServeContext, plan: Plan, raw: dict[str, Any]) -> dict[str, Any]:
    return {
        **plan.to_dict(),
        "inputs": raw.get("inputs"),
        "approval": ApprovalStore(ctx.settings.workspace).get(plan.plan_id),
    }


def latest_plan_id(ctx: ServeContext) -> str | None:
    """The newest plan file's id (by modification time, then name)."""
    files = [p for p in ctx.settings.plans_dir.glob("*.json") if not p.name.startswith(".")]
    if not files:
        return None
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.name)).stem


@router.get("/latest", response_model=PlanOut, summary="The newest plan")
def latest(ctx: Ctx, _: Reader) -> dict[str, Any]:
    """The newest plan in the workspace, with its approval (null when not approved)."""
    plan_id = latest_plan_id(ctx)
    if plan_id is None:
        raise ApiError(404, "no plan yet; run `predops plan`")
    return _plan_out(ctx, *_load(ctx, plan_id))


@router.get("/{plan_id}", response_model=PlanOut, summary="One plan")
def get_plan(plan_id: PlanId, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """Plan ``plan_id``: actions with reasons and evidence, skips, budgets, approval."""
    return _plan_out(ctx, *_load(ctx, plan_id))


@router.post("/{plan_id}/approve", response_model=PlanOut, summary="Approve a plan")
def approve(
    plan_id: PlanId, ctx: Ctx, token: Approver, body: ApproveRequest | None = None
) -> dict[str, Any]:
    """Record that the token's holder approved the plan (kept in the workspace) and
    write an ``approved`` audit entry. Needs role approver or operator."""
    plan, raw = _load(ctx, plan_id)
    now = ctx.clock.now()
    comment = body.comment if body is not None else ""
    ApprovalStore(ctx.settings.workspace).approve(
        plan_id, by=token.name, role=token.role, at=now, comment=comment, subject=token.identity
    )
    AuditLog(ctx.settings.audit_log, who=who(token)).append(
        at=now,
        outcome="approved",
        what={"kind": "plan", "target": plan_id, "params": {"actions": len(plan.actions)}},
        why=comment or "approved through the API",
        plan_id=plan_id,
    )
    return _plan_out(ctx, plan, raw)


@router.post("/{plan_id}/apply", response_model=ApplyResponse, summary="Apply an approved plan")
async def apply(plan_id: PlanId, ctx: Ctx, token: Operator) -> dict[str, Any]:
    """Re-validate and apply an approved plan (dry-run unless the server is configured
    with ``apply_execute``); 409 when the plan is not approved. Needs role operator."""
    return await run_in_threadpool(_apply, ctx, plan_id, token)


def _apply(ctx: ServeContext, plan_id: str, token: ApiToken) -> dict[str, Any]:
    import time

    from predops.pipelines.jobs.plan import apply_in_workspace

    plan, _ = _load(ctx, plan_id)
    if ApprovalStore(ctx.settings.workspace).get(plan_id) is None:
        raise ApiError(409, f"plan {plan_id!r} is not approved; approve it first", "path.plan_id")
    cfg = ctx.config
    mode = "execute" if cfg.apply_execute else "dry_run"
    AuditLog(ctx.settings.audit_log, who=who(token)).append(
        at=ctx.clock.now(),
        outcome="apply_requested",
        what={"kind": "plan", "target": plan_id, "params": {"actions": len(plan.actions)}},
        why="apply requested through the API",
        plan_id=plan_id,
        mode=mode,
    )
    try:
        out = apply_in_workspace(
            ctx.settings,
            plan,
            execute=cfg.apply_execute,
            clock=ctx.clock,
            sleep=time.sleep,
            who=who(token),
            subject=token.identity,
            kubeconfig=cfg.kubeconfig,
            context=cfg.kube_context,
            policy=cfg.policy,
        )
    except OSError as exc:  # the cluster could not be read
        raise ApiError(503, str(exc)) from None
    return out
