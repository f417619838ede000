"""How the pages write numbers and times (the templates' filters ``pct``, ``when``,
``age``, ``num`` and ``sig``)."""

from __future__ import annotations

import numbers
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from markupsafe import Markup, escape

FILTERS = ("pct", "when", "utc", "age", "num", "sig")
"""The functions the templates use as filters, by these names."""


def pct(p: float | None, digits: int = 2) -> str:
    return "n/a" if p is None else f"{p:.{digits}%}"


def _in_utc(t: datetime | str | None) -> datetime | str:
    """``t`` as an aware UTC time; "—" for None, and text that is not a time as it is."""
    if t is None:
        return "—"
    if isinstance(t, str):
        try:
            t = datetime.fromisoformat(t)
        except ValueError:
            return t
    return (t.replace(tzinfo=UTC) if t.tzinfo is None else t).astimezone(UTC)


def when(t: datetime | str | None) -> Markup | str:
    """A time as ``<time datetime="<ISO UTC>">YYYY-MM-DD HH:MM UTC</time>``: the page's
    script (``static/view.js``) shows it in the viewer's zone with the offset; text
    that is not a time is returned as it is (escaped by the template)."""
    u = _in_utc(t)
    if isinstance(u, str):
        return u
    return Markup('<time datetime="{}">{}</time>').format(
        u.strftime("%Y-%m-%dT%H:%M:%SZ"), u.strftime("%Y-%m-%d %H:%M UTC")
    )


def utc(t: datetime | str | None) -> str:
    """A time as plain text, ``YYYY-MM-DD HH:MM UTC``: for attribute values (a ``title``),
    where :func:`when`'s markup would end the attribute."""
    u = _in_utc(t)
    return u if isinstance(u, str) else u.strftime("%Y-%m-%d %H:%M UTC")


def times_in(text: str, pattern: re.Pattern[str]) -> Markup:
    """``text`` escaped, with every match of ``pattern`` (an ISO time) as :func:`when`."""
    out, at = Markup(""), 0
    for m in pattern.finditer(text):
        out += escape(text[at : m.start()]) + when(m.group(0))
        at = m.end()
    return out + escape(text[at:])


def age(d: timedelta | None) -> str:
    if d is None:
        return "—"
    s = int(d.total_seconds())
    sign, s = ("-" if s < 0 else ""), abs(s)
    if s < 3600:
        return f"{sign}{s // 60} min"
    if s < 86400 * 2:
        return f"{sign}{s / 3600:.1f} h"
    return f"{sign}{s / 86400:.1f} d"


def num(x: Any, digits: int = 1) -> str:
    """A count or measure with thousands separators: integers (Python's or numpy's) as
    ``10,000``, floats to ``digits`` decimals (``1,234.5``); anything else as text."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    if isinstance(x, numbers.Real):
        return f"{float(x):,.{digits}f}"
    return str(x)


def sig(x: float) -> str:
    """A measured number as people read it: an integral value as an integer, large ones
    with separators, small ones to three significant digits (never 0.00 for 0.004)."""
    if x != x:
        return "—"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 100 else f"{x:.3g}"
