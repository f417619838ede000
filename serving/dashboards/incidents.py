"""A node's failures, repairs, drains and cordons on its charts, and the repeat-offender
hint: a node that keeps failing the same way should go to repair (or RMA) rather than
back into service.

Markers are vertical lines (plotly layout shapes spanning the plot's height) at each
event inside the chart's time range, one colour per kind, with a legend entry per kind
(an empty trace: shapes have no legend) and the event in a hover label.

The hint counts failures with one *signature* (the ``XID nn`` a GPU failure's detail
names, else the failure's cause) within :data:`REPEAT_WINDOW` before the page's time;
:data:`REPEAT_FAILURES` or more give the hint. These are operating rules stated for
people, not fitted thresholds: three of one GPU XID inside a week is the usual point at
which operators stop returning a GPU node to service after a reset.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from predops.serving.dashboards.charts import plot_text

REPEAT_FAILURES = 3
REPEAT_WINDOW = timedelta(days=7)
"""The repeat-offender hint: this many failures of one signature within this window."""

MARKED: dict[str, str] = {
    "failure": "#cf222e",
    "repair": "#1a7f37",
    "drain": "#d9822b",
    "cordon": "#8250df",
    "uncordon": "#57606a",
    "maintenance_start": "#0969da",
    "maintenance_end": "#54aeff",
}
"""Event kinds marked on the node's charts, and their colours."""
XID = re.compile(r"\bXID[ -]?(\d+)\b", re.IGNORECASE)


def _x(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def mark_events(
    figure: dict[str, Any], events: Sequence[dict[str, Any]], since: datetime, until: datetime
) -> dict[str, Any]:
    """``figure`` with a vertical line at each marked event in ``[since, until]`` and a
    legend entry per kind shown (``layout.meta.events`` counts them per kind)."""
    shown = [e for e in events if e["kind"] in MARKED and since <= e["at"] <= until]
    layout = figure["layout"]
    shapes = list(layout.get("shapes", []))
    for e in shown:
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": _x(e["at"]),
                "x1": _x(e["at"]),
                "y0": 0,
                "y1": 1,
                "line": {"color": MARKED[e["kind"]], "width": 1.5, "dash": "dot"},
                "name": f"event-{e['kind']}",
            }
        )
    counts: dict[str, int] = {}
    for e in shown:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    legend = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": plot_text(f"{kind} ({n})"),
            "x": [_x(e["at"]) for e in shown if e["kind"] == kind],
            "y": [None] * n,
            "line": {"color": MARKED[kind], "width": 2, "dash": "dot"},
            "showlegend": True,
            "hoverinfo": "skip",
        }
        for kind, n in counts.items()
    ]
    layout["shapes"] = shapes
    if counts:  # the kinds' legend entries; a chart with no events keeps its own legend
        layout["showlegend"] = True
    layout["meta"] = {**layout.get("meta", {}), "events": counts}
    return {"data": [*figure["data"], *legend], "layout": layout}


def signature(event: dict[str, Any]) -> str:
    """What makes two failures "the same": ``XID 48`` when the detail names a GPU XID,
    else the cause (``unknown`` when none)."""
    found = XID.search(str(event.get("detail") or ""))
    return f"XID {found.group(1)}" if found else str(event.get("cause") or "unknown")


def repeat_offender(events: Sequence[dict[str, Any]], now: datetime) -> dict[str, Any] | None:
    """The node's most frequent failure signature within :data:`REPEAT_WINDOW` before
    ``now`` when it has :data:`REPEAT_FAILURES` or more of them, else None:
    ``{"signature", "cause", "count", "first", "last", "days", "text"}``."""
    recent = [e for e in events if e["kind"] == "failure" and now - REPEAT_WINDOW <= e["at"] <= now]
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in recent:
        groups.setdefault(signature(e), []).append(e)
    if not groups:
        return None
    sig, found = max(groups.items(), key=lambda kv: (len(kv[1]), kv[0]))
    if len(found) < REPEAT_FAILURES:
        return None
    first, last = min(e["at"] for e in found), max(e["at"] for e in found)
    days = max(1, -(-int((last - first).total_seconds()) // 86400))
    cause = str(found[0].get("cause") or "unknown")
    what = f"{sig} ({cause})" if sig != cause else cause
    return {
        "signature": sig,
        "cause": cause,
        "count": len(found),
        "first": first,
        "last": last,
        "days": days,
        "text": f"{len(found)} {what} failures in {days} day{'s' if days != 1 else ''} — "
        "consider RMA / repair before returning it to service",
    }
