"""How the pages write numbers and times (the templates' filters ``pct``, ``when``,
``age``, ``num`` and ``sig``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any


def pct(p: float | None, digits: int = 2) -> str:
    return "n/a" if p is None else f"{p:.{digits}%}"


def when(t: datetime | str | None) -> str:
    if t is None:
        return "—"
    if isinstance(t, str):
        try:
            return datetime.fromisoformat(t).strftime("%Y-%m-%d %H:%M UTC")
        except ValueError:
            return t
    return t.strftime("%Y-%m-%d %H:%M UTC")


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
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def sig(x: float) -> str:
    """A measured number as people read it: an integral value as an integer, large ones
    with separators, small ones to three significant digits (never 0.00 for 0.004)."""
    if x != x:
        return "—"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 100 else f"{x:.3g}"
