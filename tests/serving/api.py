"""Builders for the API tests: an app on a served workspace with tokens and a clock set
just after the online features were built (so every node is fresh)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from predops.core.clock import FixedClock
from predops.serving.config import ApiToken, ServeConfig, token_digest
from tests.serving.conftest import settings_for

SECRETS = {
    "viewer": "viewer-secret-0123456789",
    "approver": "approver-secret-0123456789",
    "operator": "operator-secret-0123456789",
    "expired": "expired-secret-0123456789",
}


def tokens() -> tuple[ApiToken, ...]:
    past = datetime(2000, 1, 1, tzinfo=UTC)
    return (
        ApiToken("vera", "viewer", token_digest(SECRETS["viewer"])),
        ApiToken("alice", "approver", token_digest(SECRETS["approver"])),
        ApiToken("otto", "operator", token_digest(SECRETS["operator"])),
        ApiToken("old", "operator", token_digest(SECRETS["expired"]), expires_at=past),
    )


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[who]}"}


def online_as_of(ws: Path) -> datetime:
    meta = json.loads((ws / "features" / "online" / "node.json").read_text())
    return datetime.fromisoformat(meta["as_of"])


def fresh_clock(ws: Path) -> FixedClock:
    return FixedClock(online_as_of(ws) + timedelta(minutes=1))


def make_app(ws: Path, shared_data: Path, clock: Any = None, **config: Any) -> Any:
    from predops.serving.app import create_app

    cfg = ServeConfig(**{"tokens": tokens(), **config})
    return create_app(
        settings_for(ws, shared_data),
        cfg,
        clock=clock or fresh_clock(ws),
        reload_in_background=False,
    )
