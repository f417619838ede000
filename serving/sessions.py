"""Dashboard sign-in sessions: a signed, expiring cookie that names the token it came from.

With ``protect_reads`` the dashboards need a viewer token like the read endpoints, but a
browser cannot send ``Authorization`` headers on page loads. ``/login`` takes the token
once; the server answers with the cookie ``predops_session`` =
``<token name>.<expiry, unix seconds>.<HMAC-SHA256 of both>``. The secret itself is never
stored in the cookie. Each request re-checks the signature (in constant time), the expiry
and that the named token is still configured and unexpired, so removing a token from the
configuration ends its sessions at the next restart.

The signing key is random per server process: restarting the server signs everyone out,
and several replicas do not share sessions (sign in on each; the API's bearer tokens are
unaffected). Cookie flags: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no
other site's page sends it), ``Secure`` when the request came over HTTPS, ``Path=/``.
Sessions grant reads only: approving and applying plans still need a bearer token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

COOKIE = "predops_session"
SESSION_TTL = timedelta(hours=8)
"""How long a sign-in lasts (never past the token's own expiry)."""


@dataclass(frozen=True, slots=True)
class Session:
    """A verified session: the configured token's name and when the session ends."""

    token_name: str
    expires_at: datetime


@dataclass(frozen=True)
class SessionSigner:
    """Issues and verifies session cookie values with one process-wide random key."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def _mac(self, name_part: str, expiry_part: str) -> str:
        msg = f"{name_part}.{expiry_part}".encode()
        return hmac.new(self.key, msg, hashlib.sha256).hexdigest()

    def issue(self, token_name: str, expires_at: datetime) -> str:
        """The cookie value for a session of ``token_name`` ending at ``expires_at``."""
        name_part = base64.urlsafe_b64encode(token_name.encode()).decode().rstrip("=")
        expiry_part = str(int(expires_at.timestamp()))
        return f"{name_part}.{expiry_part}.{self._mac(name_part, expiry_part)}"

    def verify(self, value: str, now: datetime) -> Session | None:
        """The session ``value`` stands for if its signature holds and it has not
        expired at ``now``; None for anything else (malformed, forged, expired, or not
        ASCII: a browser may send any bytes, and no cookie this signer issued has one)."""
        if not value.isascii():
            return None
        parts = value.split(".")
        if len(parts) != 3:
            return None
        name_part, expiry_part, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac(name_part, expiry_part).encode()):
            return None
        try:
            expires_at = datetime.fromtimestamp(int(expiry_part), UTC)
            padded = name_part + "=" * (-len(name_part) % 4)
            name = base64.urlsafe_b64decode(padded.encode()).decode()
        except (ValueError, OverflowError, OSError, binascii.Error, UnicodeDecodeError):
            return None
        if expires_at <= now:
            return None
        return Session(name, expires_at)
