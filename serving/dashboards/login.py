"""``/login`` and ``/logout``: dashboard sign-in with a viewer (or stronger) token.

Only needed when ``protect_reads`` is on (see :mod:`serving.sessions`). The form posts
the token once (``application/x-www-form-urlencoded``: ``token``, ``next``); a valid one
sets the session cookie and redirects to ``next`` — a path on this server only, so the
page cannot be used to send people elsewhere. A refused token re-shows the form with why
(never the secret). ``/logout`` clears the cookie.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from predops.serving.auth import LoginRequired, authenticate
from predops.serving.context import Ctx, ServeContext
from predops.serving.errors import ApiError
from predops.serving.sessions import COOKIE, SESSION_TTL

router = APIRouter(include_in_schema=False)
MAX_FORM_BYTES = 8192


def safe_next(path: str | None) -> str:
    """``path`` if it is a path on this server (``/...``, not ``//host`` or ``/\\host``),
    else ``/``."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    if "\\" in path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return "/"  # browsers drop tabs / newlines: "/\t/host" would become "//host"
    return path


def login_redirect(exc: LoginRequired) -> RedirectResponse:
    """The answer to a page asked for without a session."""
    return RedirectResponse(f"/login?next={quote(safe_next(exc.path))}", status_code=303)


def _form(ctx: ServeContext, request: Request, status: int, **extra: object) -> HTMLResponse:
    from predops.serving.dashboards.router import templates

    context = {
        "nav": (),
        "active": "",
        "now": ctx.clock.now(),
        "protect_reads": ctx.config.protect_reads,
        "next": "/",
        "error": None,
        **extra,
    }
    return templates.TemplateResponse(request, "login.html", context, status_code=status)


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request, ctx: Ctx, next_path: Annotated[str, Query(alias="next")] = "/"
) -> HTMLResponse:
    """The sign-in form (or a note that reads are open)."""
    return _form(ctx, request, 200, next=safe_next(next_path))


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, ctx: Ctx) -> Response:
    """Check the posted token (viewer or stronger) and start a session."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return _form(ctx, request, 413, error="the form is too large")
    try:
        fields = parse_qs(body.decode(), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        return _form(ctx, request, 422, error="the form could not be read")
    target = safe_next((fields.get("next") or ["/"])[0])
    secret = (fields.get("token") or [""])[0].strip()
    if not secret:
        return _form(ctx, request, 401, error="paste an API token to sign in", next=target)
    try:
        token = authenticate(
            ctx, HTTPAuthorizationCredentials(scheme="Bearer", credentials=secret), "viewer"
        )
    except ApiError as exc:
        return _form(ctx, request, exc.status, error=exc.error, next=target)
    now = ctx.clock.now()
    ends: datetime = now + SESSION_TTL
    if token.expires_at is not None:
        ends = min(ends, token.expires_at)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        ctx.sessions.issue(token.name, ends),
        max_age=int((ends - now).total_seconds()),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
def logout() -> RedirectResponse:
    """End the session (clear the cookie)."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
