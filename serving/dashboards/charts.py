"""Plotly figures as plain dicts (``{"data": [...], "layout": {...}}``) that the pages
embed as JSON and ``static/charts.js`` draws with the locally served plotly.js.

Plotly draws a subset of HTML in every text it shows — tick labels, hover text, legend
names, titles, annotations: ``<a href>`` becomes a live link, ``<b>`` bold. Every text
that comes from data (rack, spine, pool, series and column names, model names in titles)
goes through :func:`plot_text` here, so a name shows as written; only the markup these
builders add themselves (``<br>`` between hover lines) stays markup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from predops.serving.dashboards.fleet import RackCell

Figure = dict[str, Any]

FLOOR = 1e-4
"""Lowest p_fail the heat map's colour scale tells apart (0.01 %)."""
TICKS = (1e-4, 1e-3, 1e-2, 0.1, 1.0)
BLUE, ORANGE, RED, GREY = "#1f6feb", "#d9822b", "#cf222e", "#8c959f"


def plot_text(text: object) -> str:
    """``text`` as plotly shows it literally: ``&``, ``<`` and ``>`` as the entities
    plotly decodes (its other markup needs a ``<``, so nothing else is read as HTML)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _texts(values: Sequence[object]) -> list[str]:
    return [plot_text(v) for v in values]


def _axis_title(text: str, **font: Any) -> dict[str, Any]:
    return {"text": plot_text(text), **({"font": font} if font else {})}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": plot_text(title), "font": {"size": 14}, "x": 0, "xanchor": "left"},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "height": 320,
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "closest",
        **extra,
    }


def _iso(ts: Sequence[datetime]) -> list[str]:
    """UTC times as plotly reads them (it ignores offsets: every page is in UTC)."""
    return [t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") for t in ts]


GAP_STEPS = 3.0
"""A time gap longer than this many median sample steps is drawn as a gap, not a line."""

UNITS: tuple[tuple[str, str, float], ...] = (
    # (column suffix, unit shown, factor from the stored value)
    ("_bytes", "GB", 1e-9),
    ("_mib", "GiB", 1 / 1024),
    ("_pct", "%", 1.0),
    ("_c", "°C", 1.0),
    ("_w", "W", 1.0),
    ("_total", "count", 1.0),
)
"""Units of the telemetry columns by their names' suffix (``core.schemas.TELEMETRY``)."""


def unit_of(column: str) -> tuple[str, float]:
    """(unit, factor) of a raw telemetry column; ("", 1) when its name does not say."""
    for suffix, unit, factor in UNITS:
        if column.endswith(suffix):
            return unit, factor
    return "", 1.0


def with_gaps(
    ts: Sequence[datetime], values: Sequence[float | None]
) -> tuple[list[str], list[float | None]]:
    """Plotly x / y with a ``None`` inserted inside every time gap longer than
    :data:`GAP_STEPS` median steps, so a stretch with no data is drawn as a gap (plotly
    joins the points on either side of a missing stretch otherwise)."""
    x, y = _iso(ts), list(values)
    if len(ts) < 3:
        return x, y
    steps = sorted((b - a).total_seconds() for a, b in pairwise(ts))
    limit = GAP_STEPS * max(steps[len(steps) // 2], 1.0)
    out_x, out_y = [x[0]], [y[0]]
    for i in range(1, len(ts)):
        if (ts[i] - ts[i - 1]).total_seconds() > limit:
            mid = ts[i - 1] + (ts[i] - ts[i - 1]) / 2
            out_x.append(_iso([mid])[0])
            out_y.append(None)
        out_x.append(x[i])
        out_y.append(y[i])
    return out_x, out_y


def risk_colorscale(base_rate: float | None, act_at: float | None) -> list[list[Any]]:
    """A colour scale over log10(p_fail) in [log10(FLOOR), 0] anchored on the fleet's base
    rate and the risk at which the plan acts: grey up to the base rate (no news), yellow to
    orange between the two, red from the action threshold up. Without anchors: yellow to
    red over the whole range."""
    lo = math.log10(FLOOR)

    def at(p: float) -> float:
        return min(1.0, max(0.0, (math.log10(max(p, FLOOR)) - lo) / -lo))

    if base_rate is None:
        return [[0.0, "#ffffcc"], [0.5, "#fd8d3c"], [1.0, "#800026"]]
    b = at(base_rate)
    t = at(act_at) if act_at is not None and act_at > base_rate else min(1.0, at(base_rate * 10))
    t = max(t, b)
    return [
        [0.0, "#d0d7de"],
        [b, "#d0d7de"],
        [b, "#fff3b0"],
        [t, "#fd8d3c"],
        [t, "#e03131"],
        [1.0, "#67000d"],
    ]


LABEL_PX = 18
"""Least distance (px) between two colour-bar labels' centres: 12 px text and a gap."""
COLORBAR_PAD = 10
"""Plotly's default ``colorbar.ypad``: the bar is this much shorter at each end."""


def _bar_px(height: int) -> float:
    m = _layout("")["margin"]
    return float(height - m["t"] - m["b"] - 2 * COLORBAR_PAD)


def colorbar_labels(
    base_rate: float | None, act_at: float | None, *, bar_px: float
) -> tuple[list[float], list[str]]:
    """The heat map colour bar's tick positions (log10 p_fail) and texts: the anchors
    (fleet mean, where the plan acts) and those of :data:`TICKS` at least
    :data:`LABEL_PX` from every anchor on a bar ``bar_px`` long — a round tick that
    close to an anchor is dropped (the anchor names its own value); two anchors that
    close share one label, midway, naming both values."""
    lo = math.log10(FLOOR)
    gap = LABEL_PX / max(bar_px, 1.0) * -lo  # in decades
    marks: list[tuple[float, str]] = []
    named = ((base_rate, "fleet mean"), (act_at, "plan acts"))
    for p, name in sorted(((p, n) for p, n in named if p), key=lambda a: a[0]):
        v, text = math.log10(max(p, FLOOR)), f"{name} {p:.2%}"
        if marks and v - marks[-1][0] < gap:
            v0, t0 = marks.pop()
            v, text = (v0 + v) / 2, f"{t0} · {text}"
        marks.append((v, text))
    ticks = [
        (math.log10(t), f"{t:.1%}".replace(".0%", "%"))
        for t in TICKS
        if FLOOR <= t <= 1.0 and all(abs(math.log10(t) - v) >= gap for v, _ in marks)
    ]
    both = sorted([*ticks, *marks])
    return [v for v, _ in both], [t for _, t in both]


def rack_heatmap(
    cells: Sequence[RackCell], *, base_rate: float | None = None, act_at: float | None = None
) -> Figure:
    """Max p_fail per rack: one row per spine, one column per rack position. Colour is
    log10(p_fail) — failure probabilities span orders of magnitude, and on a linear scale
    one bad node would wash every other rack out; hover shows the probability itself. The
    colours are anchored (:func:`risk_colorscale`): a rack at the fleet's base rate is grey,
    not orange; red means a node there is as risky as the ones the plan acts on."""
    spines = sorted({c.spine for c in cells})
    positions = sorted({c.position for c in cells})
    z: list[list[float | None]] = [[None] * len(positions) for _ in spines]
    text: list[list[str]] = [[""] * len(positions) for _ in spines]
    racks: list[list[str | None]] = [[None] * len(positions) for _ in spines]
    for c in cells:
        i, j = spines.index(c.spine), positions.index(c.position)
        racks[i][j] = c.rack
        z[i][j] = math.log10(max(c.p_max, FLOOR)) if c.p_max is not None else None
        top = f"{c.p_max:.2%}" if c.p_max is not None else "n/a"
        mean = f"{c.p_mean:.2%}" if c.p_mean is not None else "n/a"
        lines = (c.rack, f"pools: {c.pools}", f"{c.scored}/{c.nodes} nodes scored")
        text[i][j] = "<br>".join([*_texts(lines), f"max p_fail {top}", f"mean p_fail {mean}"])
    height = max(220, 90 + 40 * len(spines))
    tickvals, ticktext = colorbar_labels(base_rate, act_at, bar_px=_bar_px(height))
    trace = {
        "type": "heatmap",
        "x": _texts(positions),
        "y": _texts(spines),
        "z": z,
        "text": text,
        "customdata": racks,  # a click filters the board to the rack (charts.js)
        "hovertemplate": "%{text}<br>(click to show this rack)<extra></extra>",
        "colorscale": risk_colorscale(base_rate, act_at),
        "zmin": math.log10(FLOOR),
        "zmax": 0,
        "colorbar": {
            "title": {"text": "max p_fail", "side": "right"},
            "tickvals": tickvals,
            "ticktext": ticktext,
        },
        "xgap": 2,
        "ygap": 2,
    }
    return {
        "data": [trace],
        "layout": _layout(
            "Highest node failure probability per rack",
            height=height,
            meta={"link": "rack"},
            xaxis={"title": {"text": "rack"}, "type": "category"},
            yaxis={"title": {"text": "spine"}, "type": "category", "automargin": True},
        ),
    }


def risk_over_time(
    ts: Sequence[datetime],
    p: Sequence[float | None],
    *,
    trained_until: datetime | None,
    title: str,
) -> Figure:
    """p_fail over time, with the model's training cutoff marked; a ``None`` (no fresh
    telemetry behind the score) and a stretch with no rows are drawn as gaps."""
    layout = _layout(
        title, yaxis={"title": {"text": "p_fail"}, "tickformat": ".1%", "rangemode": "tozero"}
    )
    if trained_until is not None and ts and trained_until > ts[0]:
        layout["shapes"] = [
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": ts[0].isoformat(),
                "x1": min(trained_until, ts[-1]).isoformat(),
                "y0": 0,
                "y1": 1,
                "fillcolor": GREY,
                "opacity": 0.15,
                "line": {"width": 0},
            }
        ]
        layout["annotations"] = [
            {
                "x": ts[0].isoformat(),
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "xanchor": "left",
                "showarrow": False,
                "text": "in the model's training data",
                "font": {"size": 11, "color": "#57606a"},
            }
        ]
    x, y = with_gaps(ts, p)
    trace = {
        "type": "scatter",
        "mode": "lines",
        "name": "p_fail",
        "x": x,
        "y": y,
        "connectgaps": False,
        "line": {"color": RED},
    }
    return {"data": [trace], "layout": layout}


def telemetry_panels(ts: Sequence[datetime], series: dict[str, list[Any]], title: str) -> Figure:
    """Raw telemetry, one small panel per column, sharing the time axis; each axis in its
    column's unit (:func:`unit_of`: bytes as GB), gaps in the samples drawn as gaps."""
    names = list(series)
    n = max(1, len(names))
    gap = 0.04
    h = (1 - gap * (n - 1)) / n
    data, layout = [], _layout(title, height=max(260, 110 * n), showlegend=False)
    for k, name in enumerate(names):
        axis = "" if k == 0 else str(k + 1)
        top = 1 - k * (h + gap)
        unit, factor = unit_of(name)
        values = [None if v is None else v * factor for v in series[name]]
        x, y = with_gaps(ts, values)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": plot_text(name),
                "x": x,
                "y": y,
                "connectgaps": False,
                "xaxis": f"x{axis}" if axis else "x",
                "yaxis": f"y{axis}" if axis else "y",
                "line": {"width": 1.2, "color": BLUE},
            }
        )
        layout[f"yaxis{axis}"] = {
            "domain": [max(0.0, top - h), top],
            "title": _axis_title(f"{name} ({unit})" if unit else name, size=10),
            "ticksuffix": "" if unit in ("", "count") else f" {unit}",
            "exponentformat": "none",
            "separatethousands": True,
            "automargin": True,
        }
        layout[f"xaxis{axis}"] = {
            "anchor": f"y{axis}" if axis else "y",
            "matches": "x" if k else None,
            "showticklabels": k == n - 1,
        }
    for k in range(n):
        axis = "" if k == 0 else str(k + 1)
        if layout[f"xaxis{axis}"]["matches"] is None:
            del layout[f"xaxis{axis}"]["matches"]
    return {"data": data, "layout": layout}


def fan_chart(
    actual_ts: Sequence[datetime],
    actual: Sequence[float],
    fc_ts: Sequence[datetime],
    p10: Sequence[float],
    p50: Sequence[float],
    p90: Sequence[float],
    *,
    title: str,
    unit: str,
    capacity: tuple[Sequence[datetime], Sequence[float]] | None = None,
) -> Figure:
    """Actuals, then the p10-p90 band and p50 of the forecast; capacity when given."""
    fx = _iso(fc_ts)
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "actual",
            "x": _iso(actual_ts),
            "y": list(actual),
            "line": {"color": "#24292f", "width": 1.5},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "p10",
            "x": fx,
            "y": list(p10),
            "line": {"width": 0, "color": BLUE},
            "showlegend": False,
            "hoverinfo": "x+y+name",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "p10–p90",
            "x": fx,
            "y": list(p90),
            "fill": "tonexty",
            "fillcolor": "rgba(31,111,235,0.2)",
            "line": {"width": 0, "color": BLUE},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "p50 forecast",
            "x": fx,
            "y": list(p50),
            "line": {"color": BLUE, "width": 2, "dash": "dash"},
        },
    ]
    if capacity is not None and len(capacity[0]):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "capacity",
                "x": _iso(capacity[0]),
                "y": list(capacity[1]),
                "line": {"color": ORANGE, "width": 1.5, "shape": "hv"},
            }
        )
        if len(fc_ts):
            # what the pool holds now, if nothing changes, against the forecast
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": "capacity if unchanged",
                    "x": [_iso(capacity[0])[-1], fx[-1]],
                    "y": [capacity[1][-1], capacity[1][-1]],
                    "line": {"color": ORANGE, "width": 1.5, "dash": "dot"},
                }
            )
    return {"data": data, "layout": _layout(title, yaxis={"title": _axis_title(unit)})}


def grouped_bars(
    categories: Sequence[str], groups: dict[str, Sequence[float | None]], *, title: str, unit: str
) -> Figure:
    """One bar group per category (e.g. current vs target nodes per pool)."""
    colours = [GREY, BLUE, ORANGE, RED]
    data = [
        {
            "type": "bar",
            "name": plot_text(name),
            "x": _texts(categories),
            "y": list(values),
            "marker": {"color": colours[i % len(colours)]},
        }
        for i, (name, values) in enumerate(groups.items())
    ]
    return {
        "data": data,
        "layout": _layout(title, barmode="group", yaxis={"title": _axis_title(unit)}),
    }


def reliability_plot(table: Sequence[dict[str, float]], *, title: str) -> Figure:
    """Observed failure rate against mean predicted p_fail per bin, and the diagonal."""
    xs = [b["p_mean"] for b in table]
    ys = [b["observed"] for b in table]
    top = max([*xs, *ys, 1e-3]) * 1.1
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "perfectly calibrated",
            "x": [0, top],
            "y": [0, top],
            "line": {"color": GREY, "dash": "dot"},
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "champion",
            "x": xs,
            "y": ys,
            "text": [f"{int(b['rows'])} rows" for b in table],
            "hovertemplate": "predicted %{x:.2%}<br>observed %{y:.2%}<br>%{text}<extra></extra>",
            "line": {"color": RED},
        },
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            xaxis={"title": {"text": "mean predicted p_fail (bin)"}, "tickformat": ".1%"},
            yaxis={"title": {"text": "observed failure rate"}, "tickformat": ".1%"},
        ),
    }


def event_bars(
    bins: Sequence[datetime],
    counts: Mapping[str, Sequence[int]],
    colours: Mapping[str, str],
    *,
    title: str,
) -> Figure:
    """Events per time bin, stacked by kind (``bins`` are the bins' starts, UTC)."""
    data = [
        {
            "type": "bar",
            "name": plot_text(kind),
            "x": _iso(bins),
            "y": list(values),
            "marker": {"color": colours.get(kind, GREY)},
        }
        for kind, values in counts.items()
    ]
    return {
        "data": data,
        "layout": _layout(title, barmode="stack", yaxis={"title": _axis_title("events")}),
    }
