"""One error body everywhere (``{"error": ..., "field": ...}``, see
:mod:`predops.serving.schemas`) and the request body size limit.

Handlers turn FastAPI's validation errors, HTTP errors, :class:`ApiError` and the
workspace's typed errors (:mod:`predops.pipelines.workspace.errors`, by
:data:`WORKSPACE_STATUS`: a missing plan 404, a held lock 409, anything else the workspace
cannot do now 503) into that body; a JSON document nested too deeply for the parser is a
422, not a 500. The body limit is a pure ASGI middleware: a declared ``Content-Length``
over ``max_body_bytes`` is refused before anything is read, and a chunked body is counted
as it arrives.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from predops.pipelines.workspace.errors import (
    ApprovalRequired,
    LockHeld,
    PlanNotFound,
    WorkspaceError,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


WORKSPACE_STATUS: tuple[tuple[type[WorkspaceError], int], ...] = (
    (PlanNotFound, 404),
    (LockHeld, 409),
    (ApprovalRequired, 409),
    (WorkspaceError, 503),
)
"""HTTP status of each workspace error type, the first that matches."""


def workspace_status(exc: WorkspaceError) -> int:
    return next(status for kind, status in WORKSPACE_STATUS if isinstance(exc, kind))


class ApiError(Exception):
    """An error answer: HTTP ``status``, a message and the offending field (if any)."""

    def __init__(
        self,
        status: int,
        error: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status, self.error, self.field, self.headers = status, error, field, headers


class EscapedJSONResponse(JSONResponse):
    """A JSON answer that always encodes. Error bodies quote the request (an unknown id,
    the field's path, a dictionary key), and a string that is not Unicode text — a lone
    surrogate from a ``"\\ud800"`` escape — cannot be UTF-8: such a body is written
    with ASCII escapes instead (the same JSON value), never a 500."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(
    status: int, error: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return EscapedJSONResponse(
        {"error": error, "field": field}, status_code=status, headers=headers
    )


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc)


class BadQuery(StarletteHTTPException):
    """A page's query parameter that cannot be used (a filter value not offered, a time
    range that does not parse): HTTP 400 naming the parameter, as a page for a browser
    and the one JSON body (``field: query.<param>``) for anyone else."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(400, f"{param}: {message}")
        self.param = param


PageError = Callable[[Request, int, str], Response]
"""Renders an error as a dashboard page: (request, status, message) -> HTML response."""


def wants_page(request: Request) -> bool:
    """A browser asking for a page (not the API, not a static file): an HTML error."""
    path = request.url.path
    if path.startswith(("/v1/", "/static/", "/metrics", "/openapi.json", "/healthz", "/readyz")):
        return False
    return "text/html" in request.headers.get("accept", "")


def install_error_handlers(app: FastAPI, page_error: PageError | None = None) -> None:
    """Register the handlers that give every error the one body (an API error as JSON;
    with ``page_error``, a browser's failed page request as a page)."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.error, exc.field, exc.headers)

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        first: dict[str, Any] = dict(errors[0]) if errors else {}
        msg = str(first.get("msg", "invalid request"))
        if first.get("type") == "json_invalid":
            msg = f"body is not valid JSON: {dict(first.get('ctx') or {}).get('error', msg)}"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return error_response(422, msg + more, _loc(tuple(first.get("loc", ()))) or None)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers) if exc.headers else None
        if isinstance(exc, BadQuery):
            if page_error is not None and wants_page(request):
                return page_error(request, 400, str(exc.detail))
            return error_response(400, str(exc.detail), f"query.{exc.param}")
        if page_error is not None and wants_page(request) and exc.status_code in (404, 422):
            return page_error(request, exc.status_code, str(exc.detail))
        if exc.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
            return error_response(422, f"body cannot be read as JSON: {exc.detail}", "body")
        return error_response(exc.status_code, str(exc.detail), None, headers)

    async def too_deep(request: Request, exc: Exception) -> JSONResponse:
        return error_response(422, "body is nested too deeply to parse", "body")

    async def not_text(request: Request, exc: Exception) -> JSONResponse:
        return error_response(422, "body is not UTF-8 text", "body")

    async def workspace_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WorkspaceError)
        return error_response(workspace_status(exc), str(exc))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(WorkspaceError, workspace_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RecursionError, too_deep)
    app.add_exception_handler(UnicodeDecodeError, not_text)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413 (pure ASGI middleware)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0 or declared > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, f"request body larger than {self.max_bytes} bytes (max_body_bytes)", "body"
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass
