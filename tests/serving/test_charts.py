"""Every dashboard figure builder escapes the text that comes from data: plotly draws a
subset of HTML (links, bold, spans) in tick labels, hover text, legend names and titles,
so a rack named ``<a href=...>`` must reach it as entities, never as markup."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from predops.serving.dashboards import charts
from predops.serving.dashboards.fleet import RackCell

HOSTILE = '<a href="https://evil.example/phish">x</a> & <b>bold</b>'
ESCAPED = '&lt;a href="https://evil.example/phish"&gt;x&lt;/a&gt; &amp; &lt;b&gt;bold&lt;/b&gt;'
OWN_MARKUP = ("<br>", "<extra></extra>")
"""The markup the builders add themselves (line breaks in hover text, no trace box)."""
T0 = datetime(2026, 3, 1, tzinfo=UTC)
TS = [T0 + timedelta(hours=h) for h in range(3)]


def _cell(text: str) -> RackCell:
    return RackCell(
        spine=text,
        rack=f"{text}-rk1",
        position=text,
        nodes=4,
        scored=3,
        p_max=0.2,
        p_mean=0.1,
        pools=f"{text}, train",
    )


BUILDERS: dict[str, Callable[[str], charts.Figure]] = {
    "rack_heatmap": lambda t: charts.rack_heatmap([_cell(t), _cell("sp02")]),
    "risk_over_time": lambda t: charts.risk_over_time(
        TS, [0.1, 0.2, 0.3], trained_until=TS[1], title=t
    ),
    "telemetry_panels": lambda t: charts.telemetry_panels(
        TS, {t: [1.0, 2.0, 3.0], "gpu_temp_c": [60.0, 61.0, 62.0]}, t
    ),
    "fan_chart": lambda t: charts.fan_chart(
        TS[:2],
        [1.0, 2.0],
        TS[1:],
        [1.0, 1.5],
        [2.0, 2.5],
        [3.0, 3.5],
        title=t,
        unit=t,
        capacity=(TS[:2], [4.0, 4.0]),
    ),
    "grouped_bars": lambda t: charts.grouped_bars(
        [t, "train"], {t: [1.0, 2.0], "target nodes": [2.0, 3.0]}, title=t, unit=t
    ),
    "event_bars": lambda t: charts.event_bars(
        TS[:2], {t: [1, 2], "drain": [0, 1]}, {"drain": "#888"}, title=t
    ),
    "reliability_plot": lambda t: charts.reliability_plot(
        [{"p_mean": 0.1, "observed": 0.12, "rows": 50.0}], title=t
    ),
}
"""Each public figure builder, with ``t`` in every text parameter it has."""


def _strings(value: Any) -> Iterator[str]:
    """Every string plotly may draw. ``customdata`` is not drawn (a click's URL value,
    see charts.js), unless a template names it: that is checked here too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if k == "customdata":
                templates = [value.get("hovertemplate", ""), value.get("texttemplate", "")]
                assert not any("customdata" in str(t) for t in templates), value
                continue
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def test_every_figure_builder_is_checked() -> None:
    builders = {
        name
        for name, fn in inspect.getmembers(charts, inspect.isfunction)
        if fn.__module__ == charts.__name__
        and not name.startswith("_")
        and inspect.signature(fn).return_annotation == "Figure"
    }
    assert builders == set(BUILDERS)


def test_plot_text_escapes_what_plotly_reads_as_markup() -> None:
    assert charts.plot_text(HOSTILE) == ESCAPED
    assert charts.plot_text("&lt;already&gt;") == "&amp;lt;already&amp;gt;"
    assert charts.plot_text("rg-1a-sp01-rk03") == "rg-1a-sp01-rk03"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_no_data_text_reaches_plotly_as_markup(name: str) -> None:
    figure = BUILDERS[name](HOSTILE)
    texts = list(_strings(figure))
    assert any(ESCAPED in t for t in texts), f"{name}: the data text is not in the figure"
    for text in texts:
        for markup in OWN_MARKUP:
            text = text.replace(markup, "")
        assert "<" not in text and ">" not in text, (name, text)


def test_gaps_in_time_are_drawn_as_gaps() -> None:
    start = datetime(2026, 5, 1, tzinfo=UTC)
    ts = [start + timedelta(minutes=5 * i) for i in range(4)]
    ts += [ts[-1] + timedelta(days=3) + timedelta(minutes=5 * i) for i in range(3)]
    fig = charts.risk_over_time(ts, [0.1] * 7, trained_until=None, title="t")
    trace = fig["data"][0]
    assert trace["connectgaps"] is False
    assert trace["y"] == [0.1] * 4 + [None] + [0.1] * 3  # one break, inside the outage
    assert trace["x"][3] < trace["x"][4] < trace["x"][5]
    assert charts.with_gaps(ts[:4], [1.0, 2.0, 3.0, 4.0])[1] == [1.0, 2.0, 3.0, 4.0]


def test_telemetry_axes_carry_units_and_bytes_read_as_gigabytes() -> None:
    fig = charts.telemetry_panels(
        TS, {"mem_used_bytes": [8e11, 8e11, 8.1e11], "gpu_temp_c": [60.0, None, 62.0]}, "t"
    )
    mem, temp = fig["data"]
    assert mem["y"] == [800.0, 800.0, 810.0]
    assert fig["layout"]["yaxis"]["title"]["text"] == "mem_used_bytes (GB)"
    assert fig["layout"]["yaxis"]["ticksuffix"] == " GB"
    assert fig["layout"]["yaxis"]["exponentformat"] == "none"  # never "800B"
    assert fig["layout"]["yaxis2"]["title"]["text"] == "gpu_temp_c (°C)"
    assert temp["y"] == [60.0, None, 62.0] and temp["connectgaps"] is False
    assert charts.unit_of("xid_errors_total") == ("count", 1.0)
    assert charts.unit_of("something") == ("", 1.0)


def test_risk_colours_are_anchored_on_the_base_rate_and_the_action_threshold() -> None:
    scale = charts.risk_colorscale(base_rate=0.01, act_at=0.2)
    stops = [pos for pos, _ in scale]
    assert stops == sorted(stops) and stops[0] == 0.0 and stops[-1] == 1.0
    lo = math.log10(charts.FLOOR)

    def colour_at(p: float) -> str:
        z = (math.log10(p) - lo) / -lo
        return [c for pos, c in scale if pos <= z + 1e-12][-1]

    assert colour_at(0.001) == colour_at(0.0099) == "#d0d7de"  # at or below the mean: grey
    assert colour_at(0.05) == "#fff3b0"  # above the mean, below where the plan acts
    assert colour_at(0.3) == "#e03131"  # as risky as the nodes the plan drains: red
    fig = charts.rack_heatmap([_cell("sp01")], base_rate=0.01, act_at=0.2)
    bar = fig["data"][0]["colorbar"]
    assert "fleet mean 1.00%" in bar["ticktext"] and "plan acts 20.00%" in bar["ticktext"]
    assert charts.risk_colorscale(None, None)[0][0] == 0.0  # no anchors: a plain scale


TEXT_PX = 14
"""Height of a 12 px colour-bar label, with a pixel either side: closer centres overlap."""


@pytest.mark.parametrize("spines", [1, 4, 30])
@pytest.mark.parametrize(
    ("base_rate", "act_at"),
    [
        (0.0615, None),  # the screenshot: "10%" under "fleet mean 6.15%"
        (0.0615, 0.2),
        (0.0112, 0.0935),  # "1%" and "10%" both next to an anchor
        (0.009, 0.011),  # two anchors next to each other
        (0.00005, 0.5),  # an anchor below the floor, one near no tick
        (0.001, 1.0),  # anchors on round ticks
        (None, None),
    ],
)
def test_colour_bar_labels_never_overlap(
    spines: int, base_rate: float | None, act_at: float | None
) -> None:
    cells = [
        RackCell(f"sp{i:02d}", f"sp{i:02d}-rk1", "rk1", 4, 4, 0.02, 0.01, "train")
        for i in range(spines)
    ]
    fig = charts.rack_heatmap(cells, base_rate=base_rate, act_at=act_at)
    trace, layout = fig["data"][0], fig["layout"]
    bar = trace["colorbar"]
    # the bar spans the plot area less plotly's default 10 px padding at each end
    bar_px = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"] - 20
    px = [(v - trace["zmin"]) / (trace["zmax"] - trace["zmin"]) * bar_px for v in bar["tickvals"]]
    assert px == sorted(px) and len(px) == len(bar["ticktext"])
    assert all(-0.5 <= p <= bar_px + 0.5 for p in px)
    closest = min((b - a for a, b in pairwise(px)), default=math.inf)
    assert closest >= TEXT_PX, list(zip(bar["ticktext"], px, strict=True))
    text = " ".join(bar["ticktext"])
    for p, name in ((base_rate, "fleet mean"), (act_at, "plan acts")):
        if p:
            assert f"{name} {p:.2%}" in text  # an anchor is never dropped
    assert len(px) >= 3  # still a scale to read, not just the anchors
