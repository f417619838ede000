"""The dashboards' query parameters (``serving/dashboards/view.py``): presets and custom
time ranges, filters limited to what a page offers, the refresh interval; every bad
value is refused naming its parameter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from predops.serving.dashboards import view
from predops.serving.errors import BadQuery

END = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_presets_end_at_the_newest_data_and_custom_ranges_parse() -> None:
    assert view.time_range({}, END) == view.TimeRange(END - timedelta(days=3), END, "3d")
    six = view.time_range({"range": "6h"}, END)
    assert (six.since, six.until, six.params()) == (END - timedelta(hours=6), END, {"range": "6h"})
    custom = view.time_range({"range": "custom", "from": "2026-11-28T00:00"}, END)
    assert custom.since == datetime(2026, 11, 28, tzinfo=UTC) and custom.until == END
    # from / to alone mean custom; an offset is honoured, naive times are UTC
    shifted = view.time_range({"from": "2026-11-30T01:00+01:00", "to": "2026-11-30T06:00"}, END)
    assert shifted.preset == "custom" and shifted.since == datetime(2026, 11, 30, 0, tzinfo=UTC)
    assert view.time_range(shifted.params(), END) == shifted  # the link gives it back


@pytest.mark.parametrize(
    ("params", "param", "words"),
    [
        ({"range": "2w"}, "range", "one of 6h, 24h, 3d, 7d or custom"),
        ({"range": "custom"}, "from", "needs from="),
        ({"from": "yesterday"}, "from", "not an ISO 8601 time"),
        ({"from": "2026-11-30T06:00", "to": "2026-11-30T05:00"}, "to", "must be after from="),
        ({"from": "2026-01-01T00:00"}, "from", "at most 31 days"),
        ({"from": "\ud800"}, "from", "not a value"),
    ],
)
def test_bad_ranges_name_the_parameter(params: dict[str, str], param: str, words: str) -> None:
    with pytest.raises(BadQuery) as err:
        view.time_range(params, END)
    assert err.value.param == param and err.value.status_code == 400
    assert str(err.value.detail).startswith(f"{param}: ") and words in str(err.value.detail)


def test_filters_take_only_offered_values() -> None:
    offered = {"pool": ["a100-train", "cpu-batch"], "resource": ["cpu", "gpus"]}
    found = view.filters({"pool": "cpu-batch", "resource": ""}, offered)
    assert view.chosen(found) == {"pool": "cpu-batch"}  # a blank filter is "all"
    assert [f.offered for f in found] == [("a100-train", "cpu-batch"), ("cpu", "gpus")]
    with pytest.raises(BadQuery) as err:
        view.filters({"resource": "tpus"}, offered)
    assert err.value.param == "resource" and "one of: cpu, gpus" in str(err.value.detail)
    many = [f"rack-{i:02d}" for i in range(30)]
    with pytest.raises(BadQuery, match=r"rack-09 \(and 20 more\)"):
        view.choice({"rack": "rack-99"}, "rack", many)


def test_refresh_interval() -> None:
    assert view.refresh_seconds({}) == view.REFRESH_DEFAULT
    assert view.refresh_seconds({"refresh": "0"}) == 0
    assert view.refresh_seconds({"refresh": "5"}) == 5
    for bad in ("-1", "1.5", "fast", "²", str(view.REFRESH_MAX + 1)):
        with pytest.raises(BadQuery, match="refresh: seconds"):
            view.refresh_seconds({"refresh": bad})


def test_links_keep_the_other_choices() -> None:
    params = {"pool": "p1", "range": "custom", "from": "2026-11-30T00:00", "refresh": "5"}
    assert view.link("/demand", {}) == "/demand"
    assert view.link("/demand", params, pool=None) == (
        "/demand?range=custom&from=2026-11-30T00%3A00&refresh=5"
    )
    assert view.preset_link("/nodes/n1", params, "24h") == "/nodes/n1?pool=p1&range=24h&refresh=5"
    assert view.without("/plans/latest", params, ["pool", "refresh"]) == (
        "/plans/latest?range=custom&from=2026-11-30T00%3A00"
    )
