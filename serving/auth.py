"""Bearer-token checks: ``Authorization: Bearer <secret>`` against the configured tokens.

The presented secret is hashed (SHA-256) and compared with every configured digest in
constant time (``hmac.compare_digest``; no early exit, so timing says nothing about which
token nearly matched). Missing, unknown and expired tokens get 401 (with
``WWW-Authenticate: Bearer``), a weaker role 403. Messages never echo the secret.

Reads (with ``protect_reads``) also accept a dashboard sign-in session
(:mod:`serving.sessions`); dashboard pages without one redirect to ``/login``
(:class:`LoginRequired`). Approve and apply accept bearer tokens only.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from predops.serving.config import ApiToken, token_digest
from predops.serving.context import Ctx, ServeContext
from predops.serving.errors import ApiError
from predops.serving.sessions import COOKIE

FIELD = "header.authorization"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <token>")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _unauthorised(why: str) -> ApiError:
    return ApiError(401, why, FIELD, CHALLENGE)


def authenticate(
    ctx: ServeContext, credentials: HTTPAuthorizationCredentials | None, role: str
) -> ApiToken:
    """The bearer token presented if it is valid now and may act as ``role``;
    :class:`ApiError` 401 / 403 otherwise."""
    secret = credentials.credentials.strip() if credentials is not None else ""
    if not secret:
        raise _unauthorised("this endpoint needs a bearer token (Authorization: Bearer ...)")
    digest = token_digest(secret)
    found: ApiToken | None = None
    for token in ctx.config.tokens:  # compare with all of them, always
        if hmac.compare_digest(digest, token.sha256):
            found = token
    if found is None:
        raise _unauthorised("the bearer token is not valid")
    if found.expired(ctx.clock.now()):
        raise _unauthorised(f"token {found.name!r} expired at {found.expires_at}")
    if not found.may(role):
        raise ApiError(
            403, f"token {found.name!r} has role {found.role!r}; this needs {role!r}", FIELD
        )
    return found


def requires(role: str) -> Callable[..., Coroutine[Any, Any, ApiToken]]:
    """Dependency: the request's token, which must be valid and hold ``role``."""

    async def dependency(ctx: Ctx, credentials: Credentials) -> ApiToken:
        return authenticate(ctx, credentials, role)

    return dependency


def session_token(ctx: ServeContext, request: Request) -> ApiToken | None:
    """The configured, unexpired token a valid dashboard session cookie names (None when
    there is no cookie, or it is forged, expired, or its token is gone or expired)."""
    value = request.cookies.get(COOKIE)
    if not value:
        return None
    now = ctx.clock.now()
    session = ctx.sessions.verify(value, now)
    if session is None:
        return None
    token = next((t for t in ctx.config.tokens if t.name == session.token_name), None)
    if token is None or token.expired(now) or not token.may("viewer"):
        return None
    return token


async def read_access(ctx: Ctx, credentials: Credentials, request: Request) -> ApiToken | None:
    """Dependency of read endpoints: open unless ``protect_reads`` (then a viewer token,
    or a dashboard session when no Authorization header is sent)."""
    if not ctx.config.protect_reads:
        return None
    if credentials is None:
        token = session_token(ctx, request)
        if token is not None:
            return token
    return authenticate(ctx, credentials, "viewer")


class LoginRequired(Exception):
    """A dashboard page was asked for without a session while reads are protected;
    answered with a redirect to ``/login?next=<path>``."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


async def page_access(ctx: Ctx, credentials: Credentials, request: Request) -> ApiToken | None:
    """Dependency of dashboard pages: like :func:`read_access`, but a browser without a
    session is sent to the sign-in page instead of getting a 401."""
    if not ctx.config.protect_reads:
        return None
    token = session_token(ctx, request)
    if token is not None:
        return token
    if credentials is not None:  # scripts may fetch pages with a bearer token
        return authenticate(ctx, credentials, "viewer")
    query = f"?{request.url.query}" if request.url.query else ""
    raise LoginRequired(request.url.path + query)


Reader = Annotated[ApiToken | None, Depends(read_access)]
Approver = Annotated[ApiToken, Depends(requires("approver"))]
Operator = Annotated[ApiToken, Depends(requires("operator"))]
