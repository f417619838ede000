"""``/healthz`` (the process answers) and ``/readyz`` (it serves: dashboards, plans,
metrics; with the models' state, the champion aliases as predops promoted them).

A new installation has no model until its first training, yet its dashboards, plans and
``/metrics`` are useful at once, so readiness means "serving" and the models' state is
reported in the body (``models_ready``, ``problems``). A probe that must wait for both
models asks ``/readyz?require=models`` (503 until they are loaded)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from predops.serving.context import Ctx

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(ctx: Ctx, require: Literal["serving", "models"] = "serving") -> JSONResponse:
    """Readiness: 200 while the server serves, with ``models_ready`` and the reasons a
    model is missing under ``problems``; with ``require=models``, 503 until both champions
    are loaded. A registry error while a model is loaded keeps the model ready (it serves
    the last good model) and is reported under ``models.*.last_error``. A ``champion``
    alias moved outside predops keeps it ready too (the last promoted version serves) and
    is listed under ``champion_untrusted``: model, the version the alias points at, the
    one served and why."""
    slots = (ctx.failure, ctx.demand)
    models: dict[str, Any] = {s.name: s.status() for s in slots}
    problems = [f"{name}: no model loaded" for name, st in models.items() if not st["loaded"]]
    untrusted = [u for u in (s.untrusted_alias() for s in slots) if u is not None]
    ready = require == "serving" or not problems
    body = {
        "ready": ready,
        "serving": True,
        "models_ready": not problems,
        "problems": problems,
        "champion_untrusted": untrusted,
        "models": models,
    }
    return JSONResponse(body, status_code=200 if ready else 503)
