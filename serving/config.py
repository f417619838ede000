"""The server's configuration: typed, frozen, validated once at start.

Tokens are bearer tokens with a role; only their SHA-256 digest is kept, so a config file
or a log line never holds a usable secret. Roles, weakest first: ``viewer`` (read
endpoints when reads are protected), ``approver`` (approve plans), ``operator`` (approve and
apply plans).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

ROLES = ("viewer", "approver", "operator")


def token_digest(secret: str) -> str:
    """The stored form of a bearer token (hex SHA-256 of its UTF-8 bytes)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiToken:
    """One bearer token: who holds it, what it may do, until when (UTC; None = no expiry)."""

    name: str
    role: str
    sha256: str
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"token {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if len(self.sha256) != 64:
            raise ValueError(f"token {self.name!r}: sha256 must be 64 hex characters")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError(f"token {self.name!r}: expires_at must carry a time zone")

    def may(self, role: str) -> bool:
        """Whether this token's role includes ``role``."""
        return ROLES.index(self.role) >= ROLES.index(role)


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What the server enforces. Units are in the names."""

    tokens: tuple[ApiToken, ...] = ()
    protect_reads: bool = False
    """True: read endpoints and dashboards need a ``viewer`` token too."""
    max_body_bytes: int = 8 << 20
    max_batch: int = 10_000
    """Most nodes or series one request may ask for."""
    reload_every_s: float = 15.0
    """How often the registry is polled for a moved ``champion`` alias."""
    max_data_age: timedelta = field(default=timedelta(minutes=30))
    """Online features older than this are stale: such nodes are not scored and /readyz
    reports the data as not fresh."""
