"""What a dashboard page shows, read from its query parameters: filters, a time range
and the refresh interval. Every page parses them here, so each reads them the same way,
a view is its URL (share the link, get the same page), and a value that cannot be used
is a 400 page naming the parameter (:class:`~predops.serving.errors.BadQuery`), never a
silent fallback.

- Filters: ``choice`` takes one value out of what the page offers (pools, racks, GPU
  models, action kinds, node states ... as the data has them); anything else is refused
  with the first offered values listed.
- Time range: ``range=6h|24h|3d|7d`` (ending at the page's newest data), or
  ``range=custom&from=<ISO>&to=<ISO>`` (a time without an offset is UTC); at most
  :data:`MAX_SPAN`.
- ``refresh=<seconds>``: how often the page reloads itself (``static/view.js``), 0 for
  never; :data:`REFRESH_DEFAULT` when not given.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from predops.serving.errors import BadQuery

RANGES: dict[str, timedelta] = {
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "3d": timedelta(days=3),
    "7d": timedelta(days=7),
}
"""The time-range picker's presets, each ending at the page's newest data."""
CUSTOM = "custom"
MAX_SPAN = timedelta(days=31)
"""Longest custom range: a node page reads one node's rows over it, bounded."""
MAX_VALUE_CHARS = 253
"""Longest filter value (a Kubernetes name)."""
REFRESH_DEFAULT = 60
REFRESH_MAX = 86_400
"""``refresh`` in seconds: 0 (never) or 1 .. one day; 60 when not given."""
LISTED = 10
"""Offered values named in the error for a value that is not offered."""


def _text(params: Mapping[str, str], name: str) -> str | None:
    """The parameter's value; None when absent or blank (a form's "all")."""
    value = params.get(name)
    if value is None or value == "":
        return None
    if len(value) > MAX_VALUE_CHARS or not value.isprintable():
        raise BadQuery(name, f"not a value this page offers ({len(value)} characters)")
    return value


def choice(params: Mapping[str, str], name: str, offered: Collection[str]) -> str | None:
    """The value of filter ``name`` if it is one of ``offered``; None when not given;
    :class:`BadQuery` naming the parameter and the first offered values otherwise."""
    value = _text(params, name)
    if value is None or value in offered:
        return value
    listed = sorted(offered)
    some = ", ".join(listed[:LISTED]) + (
        f" (and {len(listed) - LISTED} more)" if len(listed) > LISTED else ""
    )
    raise BadQuery(
        name,
        f"{value!r} is not offered here; one of: {some}"
        if listed
        else f"{value!r}: nothing to filter on",
    )


@dataclass(frozen=True, slots=True)
class Filter:
    """One filter of a page: its parameter, label, the values offered, the one chosen."""

    name: str
    label: str
    offered: tuple[str, ...]
    chosen: str | None


def filters(
    params: Mapping[str, str],
    offered: Mapping[str, Sequence[str]],
    labels: Mapping[str, str] | None = None,
) -> list[Filter]:
    """The page's filters (``offered``: parameter -> values), each checked by :func:`choice`."""
    return [
        Filter(
            name,
            (labels or {}).get(name, name.replace("_", " ")),
            tuple(values),
            choice(params, name, set(values)),
        )
        for name, values in offered.items()
    ]


def chosen(found: Sequence[Filter]) -> dict[str, str]:
    """Parameter -> value of the filters that are set."""
    return {f.name: f.chosen for f in found if f.chosen is not None}


@dataclass(frozen=True, slots=True)
class TimeRange:
    """``[since, until]`` (UTC) and the preset that made it (or ``custom``)."""

    since: datetime
    until: datetime
    preset: str

    @property
    def span(self) -> timedelta:
        return self.until - self.since

    def params(self) -> dict[str, str]:
        """The query parameters that give this range again."""
        if self.preset != CUSTOM:
            return {"range": self.preset}
        return {"range": CUSTOM, "from": _iso(self.since), "to": _iso(self.until)}


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def _instant(params: Mapping[str, str], name: str) -> datetime | None:
    value = _text(params, name)
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise BadQuery(name, f"{value!r} is not an ISO 8601 time (e.g. 2026-12-01T14:00)") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def time_range(params: Mapping[str, str], end: datetime, *, default: str = "3d") -> TimeRange:
    """The page's time range: a preset ending at ``end`` (the page's newest data), or
    ``custom`` from ``from`` to ``to`` (``to`` defaults to ``end``). ``from`` / ``to``
    without ``range`` mean custom."""
    preset = _text(params, "range")
    if preset is None:
        preset = CUSTOM if ("from" in params or "to" in params) else default
    if preset in RANGES:
        return TimeRange(end - RANGES[preset], end, preset)
    if preset != CUSTOM:
        raise BadQuery(
            "range", f"one of {', '.join(RANGES)} or {CUSTOM} (with from= and to=), not {preset!r}"
        )
    since, until = _instant(params, "from"), _instant(params, "to") or end
    if since is None:
        raise BadQuery("from", "a custom range needs from= (an ISO 8601 time)")
    if until <= since:
        raise BadQuery("to", f"must be after from= ({_iso(since)} UTC), not {_iso(until)} UTC")
    if until - since > MAX_SPAN:
        raise BadQuery(
            "from", f"a range of at most {MAX_SPAN.days} days, not {(until - since).days} days"
        )
    return TimeRange(since, until, CUSTOM)


def refresh_seconds(params: Mapping[str, str]) -> int:
    """Seconds between the page's reloads (0 = never); :data:`REFRESH_DEFAULT` if absent."""
    value = _text(params, "refresh")
    if value is None:
        return REFRESH_DEFAULT
    if not (value.isascii() and value.isdigit()) or int(value) > REFRESH_MAX:
        raise BadQuery(
            "refresh", f"seconds between reloads, 0 (never) to {REFRESH_MAX}, not {value!r}"
        )
    return int(value)


def link(path: str, params: Mapping[str, str], **changes: str | None) -> str:
    """``path`` with ``params`` and ``changes`` as its query (a None change drops the
    parameter): links and forms that keep the page's other choices."""
    q = {k: v for k, v in params.items() if v not in (None, "")}
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    return f"{path}?{urlencode(q)}" if q else path


def without(path: str, params: Mapping[str, str], names: Sequence[str]) -> str:
    """``path`` with ``params`` less ``names`` (a "clear filters" link)."""
    return link(path, {k: v for k, v in params.items() if k not in names})


def preset_link(path: str, params: Mapping[str, str], preset: str) -> str:
    """``path`` with ``params``, the time range set to ``preset`` (no from / to)."""
    kept = {k: v for k, v in params.items() if k not in ("from", "to")}
    return link(path, kept, range=preset)


def ages(
    now: datetime, pairs: Sequence[tuple[str, datetime | str | None]]
) -> list[dict[str, object]]:
    """What a page's data is as of: ``{"label", "at", "age"}`` per ``(label, time)``
    given (a time may be ISO text, as plan files hold it; missing ones are left out;
    ``age`` None for a time after ``now``)."""
    out: list[dict[str, object]] = []
    for label, at in pairs:
        if isinstance(at, str):
            try:
                at = datetime.fromisoformat(at)
            except ValueError:
                continue
        if at is None:
            continue
        at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
        age = now - at  # a forecast is issued for the coming hour: no age before it
        out.append({"label": label, "at": at, "age": age if age >= timedelta(0) else None})
    return out
