"""``create_app(settings, config)``: the FastAPI application (REST API + dashboards)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import Response

from predops.core.clock import Clock
from predops.pipelines.workspace.settings import Settings
from predops.serving import api_docs
from predops.serving.auth import LoginRequired
from predops.serving.config import ServeConfig
from predops.serving.context import ServeContext
from predops.serving.dashboards import login
from predops.serving.dashboards import router as dashboards
from predops.serving.dashboards.router import error_page
from predops.serving.errors import BodyLimit, install_error_handlers
from predops.serving.metrics import RequestMetrics, ServerMetrics
from predops.serving.models import demand_slot, failure_slot
from predops.serving.redirects import RelativeRedirects
from predops.serving.routes import demand, failure, health, metrics, plans

API_VERSION = "1"


def create_app(
    settings: Settings,
    config: ServeConfig | None = None,
    *,
    clock: Clock | None = None,
    reload_in_background: bool = True,
) -> FastAPI:
    """The application for one workspace. Models load at start-up (a missing model is a
    /readyz problem, not a crash); with ``reload_in_background`` a thread polls the
    registry for moved aliases."""
    if clock is None:
        from predops.pipelines.workspace.clock import SystemClock

        clock = SystemClock()
    cfg = config or ServeConfig()
    ctx = ServeContext(
        settings, cfg, clock, failure_slot(settings, clock), demand_slot(settings, clock)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.refresh_models()
        if reload_in_background:
            ctx.start_reloader()
        try:
            yield
        finally:
            ctx.stop_reloader()

    app = FastAPI(
        title="predops",
        version=API_VERSION,
        description="Node failure risk, demand forecasts and action plans for a compute fleet.",
        lifespan=lifespan,
        docs_url=None,  # served from the installed package instead of a CDN: api_docs
        redoc_url=None,
    )
    app.state.ctx = ctx
    app.state.metrics = ServerMetrics()
    install_error_handlers(app, page_error=error_page)

    async def to_login(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        return login.login_redirect(exc)

    app.add_exception_handler(LoginRequired, to_login)
    app.add_middleware(RelativeRedirects)  # never a Location built from the Host header
    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=app.state.metrics)  # outermost: sees 413s
    for module in (health, metrics, failure, demand, plans):
        app.include_router(module.router)
    app.include_router(dashboards)
    app.include_router(api_docs.router)
    app.include_router(login.router)
    return app
