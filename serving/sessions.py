"""Dashboard sign-in sessions: a signed, expiring cookie that names the token it came from.

With ``protect_reads`` the dashboards need a viewer token like the read endpoints, but a
browser cannot send ``Authorization`` headers on page loads. ``/login`` takes the token
once; the server answers with the cookie ``predops_session`` =
``<token name>.<expiry, unix seconds>.<HMAC-SHA256 of both>``. The secret itself is never
stored in the cookie. Each request re-checks the signature (in constant time), the expiry
and that the named token is still configured and unexpired, so removing a token from the
configuration ends its sessions at the next restart.

The signing key is random per server process unless ``[server] session_key_file`` names a
file holding one (:func:`read_session_key`): with a random key, restarting the server
signs everyone out and several replicas do not share sessions; replicas that read the
same key file (a mounted Kubernetes Secret) accept each other's cookies, and a restart
keeps everyone signed in. The API's bearer tokens are unaffected either way.

Cookie flags: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's
page sends it), ``Secure`` when the request came over HTTPS, ``Path=/``.
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
from pathlib import Path

COOKIE = "predops_session"
SESSION_TTL = timedelta(hours=8)
"""How long a sign-in lasts (never past the token's own expiry)."""
MIN_KEY_BYTES = 32
"""The shortest signing key a key file may hold (bytes, after surrounding whitespace)."""


def read_session_key(path: Path) -> bytes:
    """The signing key in ``path``: its bytes without surrounding whitespace (a trailing
    newline from ``openssl rand -base64 48 > key`` is not part of the key). Raises
    ValueError saying why when the file cannot be read or holds fewer than
    :data:`MIN_KEY_BYTES` bytes; the key itself is never in the message."""
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{path}: holds {len(key)} bytes; a session key needs at least {MIN_KEY_BYTES} "
            "(e.g. `openssl rand -base64 48`)"
        )
    return key


@dataclass(frozen=True, slots=True)
class Session:
    """A verified session: the configured token's name and when the session ends."""

    token_name: str
    expires_at: datetime


@dataclass(frozen=True)
class SessionSigner:
    """Issues and verifies session cookie values with one key: random per process by
    default, or the one every replica reads from the same key file."""

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
