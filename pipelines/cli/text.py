"""The CLI's one text rendering of a JSON-like result, for commands without their own.

Every command prints one JSON object with ``--json``; without it, people read the same
object as text: nested mappings as indented ``key: value`` lines, lists of records as an
aligned table, lists of scalars on one line. Numbers read as numbers: an integral float
as an integer (``864``, not ``864.0000``), others to four significant digits; ``None``
as ``-``; times as ISO 8601 in UTC with the offset shown as ``Z``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

INDENT = "  "


def scalar(value: Any) -> str:
    """One value as it reads in a line or a table cell."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if abs(value) >= 1000:
            return f"{value:,.1f}"
        return f"{value:.4g}"
    if isinstance(value, datetime):
        at = value.astimezone(UTC) if value.tzinfo else value
        return at.isoformat().replace("+00:00", "Z")
    return str(value)


def counts(what: str, found: Mapping[str, Any] | None) -> str:
    """``{"buy": 6, "drain:below_threshold": 195}`` as ``201 <what> (buy 6, drain
    below_threshold 195)``; ``0 <what>`` when none."""
    found = dict(found or {})
    total = sum(int(n) for n in found.values())
    if not found:
        return f"0 {what}"
    parts = ", ".join(f"{k.replace(':', ' ')} {scalar(n)}" for k, n in found.items())
    return f"{total:,} {what} ({parts})"


def plan_summary(summary: Mapping[str, Any] | None) -> str:
    """A plan's summary (``{"actions": {kind: n}, "skips": {kind:reason: n}, "alerts":
    n}``) in words: ``73 actions (buy 6, ...); 337 skips (...); 0 alerts``."""
    summary = summary or {}
    alerts = summary.get("alerts") or 0
    return "; ".join(
        (
            counts("actions", summary.get("actions")),
            counts("skips", summary.get("skips")),
            f"{scalar(alerts)} alert{'s' if alerts != 1 else ''}",
        )
    )


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple)


def _is_table(values: Sequence[Any]) -> bool:
    return all(isinstance(v, Mapping) and all(_is_scalar(x) for x in v.values()) for v in values)


def table(rows: Sequence[Mapping[str, Any]], pad: str = "") -> list[str]:
    """Rows as an aligned table, columns in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    cells = [[scalar(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = [pad + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += [
        pad + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells
    ]
    return lines


def _lines(obj: Mapping[str, Any], pad: str) -> list[str]:
    out: list[str] = []
    for key, value in obj.items():
        if isinstance(value, Mapping):
            if value:
                out.append(f"{pad}{key}:")
                out += _lines(value, pad + INDENT)
            else:
                out.append(f"{pad}{key}: (none)")
        elif isinstance(value, list | tuple):
            if not value:
                out.append(f"{pad}{key}: (none)")
            elif all(_is_scalar(v) for v in value):
                out.append(f"{pad}{key}: {', '.join(scalar(v) for v in value)}")
            elif _is_table(value):
                out.append(f"{pad}{key}:")
                out += table(value, pad + INDENT)
            else:
                out.append(f"{pad}{key}:")
                for i, item in enumerate(value, 1):
                    if isinstance(item, Mapping):
                        out.append(f"{pad}{INDENT}[{i}]")
                        out += _lines(item, pad + INDENT * 2)
                    else:
                        out.append(f"{pad}{INDENT}[{i}] {scalar(item)}")
        else:
            out.append(f"{pad}{key}: {scalar(value)}")
    return out


def render(obj: Mapping[str, Any]) -> str:
    """``obj`` as text (see the module's docstring)."""
    return "\n".join(_lines(obj, ""))
