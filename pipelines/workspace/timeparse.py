"""Durations and instants as configuration and the command line write them.

Plain functions that raise :class:`ValueError` with the offending text; each face turns
that into its own error (the CLI a usage error, the configuration loaders a
``ConfigError`` naming the key).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """'30s', '5m', '1h', '2d', '1w' -> timedelta; ValueError otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration like 30s, 5m, 1h, 2d")
    return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])


def parse_time(text: str) -> datetime:
    """ISO-8601 date or time; naive values are UTC. ValueError otherwise."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
