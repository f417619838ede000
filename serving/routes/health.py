"""``/healthz`` (the process answers) and ``/readyz`` (models loaded, data fresh, the
champion aliases as predops promoted them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from predops.serving.context import Ctx

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(ctx: Ctx) -> JSONResponse:
    """Readiness: 200 when both champions are loaded, else 503 with the reasons. A
    registry error while a model is loaded keeps the server ready (it serves the last
    good model) and is reported under ``models.*.last_error``. A ``champion`` alias moved
    outside predops keeps it ready too (the last promoted version serves) and is listed
    under ``champion_untrusted``: model, the version the alias points at, the one served
    and why."""
    slots = (ctx.failure, ctx.demand)
    models: dict[str, Any] = {s.name: s.status() for s in slots}
    problems = [f"{name}: no model loaded" for name, st in models.items() if not st["loaded"]]
    untrusted = [u for u in (s.untrusted_alias() for s in slots) if u is not None]
    body = {
        "ready": not problems,
        "problems": problems,
        "champion_untrusted": untrusted,
        "models": models,
    }
    return JSONResponse(body, status_code=200 if not problems else 503)
