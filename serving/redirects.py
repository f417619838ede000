"""Redirects stay on this server: every ``Location`` the application answers is a path.

The application only ever redirects to its own pages, but Starlette spells some of
those redirects as absolute URLs built from the request's ``Host`` header (``GET
/models/`` -> ``http://<Host>/models``), so a request with ``Host: evil.example`` — or a
cache or proxy that keeps such an answer — would send a browser to another site.
:class:`RelativeRedirects` (a pure ASGI middleware) rewrites any absolute ``Location``
to its path, query and fragment; relative ones pass unchanged. A path that would read
as ``//host`` (protocol-relative) keeps a single leading slash.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from predops.serving.errors import ASGIApp, Message, Receive, Scope, Send


def path_only(location: str) -> str:
    """``location`` without scheme and host: a path on this server (``/`` when it cannot
    even be parsed, as with an unbalanced ``[`` for a host)."""
    try:
        parts = urlsplit(location)
    except ValueError:
        return "/"
    if not (parts.scheme or parts.netloc):
        return location
    path = "/" + parts.path.lstrip("/")
    return urlunsplit(("", "", path, parts.query, parts.fragment))


class RelativeRedirects:
    """Rewrite absolute ``Location`` headers to paths (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def relative(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (k, path_only(v.decode("latin-1")).encode("latin-1"))
                    if k.lower() == b"location"
                    else (k, v)
                    for k, v in message.get("headers", ())
                ]
            await send(message)

        await self.app(scope, receive, relative)
