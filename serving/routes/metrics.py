"""``GET /metrics``: Prometheus text exposition of the application's own registry."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from predops.serving.auth import Reader
from predops.serving.context import Ctx

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
)
def metrics(request: Request, ctx: Ctx, _: Reader) -> Response:
    """Request counts and latencies per route, served model versions, online data age,
    the latest plan's actions and skips."""
    body = request.app.state.metrics.exposition(ctx)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
