"""Event markers on the node page's charts and the repeat-offender hint
(``serving/dashboards/incidents.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from predops.serving.dashboards import incidents

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ev(kind: str, hours_ago: float, cause: str | None = None, detail: str | None = None) -> dict:
    return {"kind": kind, "at": NOW - timedelta(hours=hours_ago), "cause": cause, "detail": detail}


XID48 = "XID 48: double-bit ECC error, GPU needs reset"


def test_three_failures_of_one_xid_in_five_days_give_the_hint() -> None:
    events = [
        _ev("failure", 120, "gpu_xid", XID48),
        _ev("repair", 110),
        _ev("failure", 60, "gpu_xid", XID48),
        _ev("failure", 2, "gpu_xid", "xid-48 again"),
        _ev("failure", 30, "thermal", "thermal shutdown"),
    ]
    hint = incidents.repeat_offender(events, NOW)
    assert hint is not None
    assert (hint["signature"], hint["count"], hint["days"]) == ("XID 48", 3, 5)
    assert hint["text"] == (
        "3 XID 48 (gpu_xid) failures in 5 days — consider RMA / repair before returning it "
        "to service"
    )


def test_no_hint_below_the_threshold_or_outside_the_window() -> None:
    two = [_ev("failure", 10, "gpu_xid", XID48), _ev("failure", 20, "gpu_xid", XID48)]
    assert incidents.repeat_offender(two, NOW) is None
    old = [*two, _ev("failure", 24 * 8, "gpu_xid", XID48)]  # 8 days ago: outside the week
    assert incidents.repeat_offender(old, NOW) is None
    mixed = [*two, _ev("failure", 5, "psu", "power supply")]  # three failures, two kinds
    assert incidents.repeat_offender(mixed, NOW) is None
    future = [*two, _ev("failure", -5, "gpu_xid", XID48)]  # after the page's time
    assert incidents.repeat_offender(future, NOW) is None
    # without an XID the cause is the signature
    psu = [_ev("failure", h, "psu", "power supply tripped") for h in (1, 2, 3)]
    assert incidents.repeat_offender(psu, NOW)["text"].startswith("3 psu failures in 1 day —")


def test_markers_are_lines_at_the_events_in_range() -> None:
    figure = {"data": [{"type": "scatter", "x": ["2026-12-01 00:00:00"], "y": [0.1]}], "layout": {}}
    events = [
        _ev("failure", 5, "gpu_xid", XID48),
        _ev("repair", 3),
        _ev("drain", 6),
        _ev("ready", 4),  # a readiness flip is not marked
        _ev("failure", 100, "psu"),  # before the range
    ]
    out = incidents.mark_events(figure, events, NOW - timedelta(days=1), NOW)
    lines = out["layout"]["shapes"]
    assert [s["name"] for s in lines] == ["event-failure", "event-repair", "event-drain"]
    assert lines[0]["x0"] == lines[0]["x1"] == "2026-12-01 07:00:00"
    assert all(s["yref"] == "paper" and s["type"] == "line" for s in lines)
    assert out["layout"]["meta"]["events"] == {"failure": 1, "repair": 1, "drain": 1}
    assert [t["name"] for t in out["data"][1:]] == ["failure (1)", "repair (1)", "drain (1)"]
    assert out["data"][0] == figure["data"][0]
