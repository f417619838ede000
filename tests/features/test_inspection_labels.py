"""Labels of nodes predops drained, by the inspection's outcome (features.inspections):
fault found is the failure it prevented, no fault found a negative once recorded,
unknown censored; every rule read as of the label cutoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from predops.core.schemas import INSPECTIONS
from predops.features.inspections import found_failures, outcomes_as_of
from predops.features.labels import add_failure_labels
from tests.features import builders

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=6)
LABEL = "fails_within_6h"
CUTOFF = T0 + timedelta(hours=48)


def at(h: float) -> datetime:
    return T0 + timedelta(hours=h)


def rows(node: str = "n0", hours: int = 48) -> pl.LazyFrame:
    return pl.DataFrame(
        {"node_id": [node] * hours, "ts": [at(h) for h in range(hours)]},
        schema={"node_id": pl.String, "ts": pl.Datetime("us", "UTC")},
    ).lazy()


def inspections(records: list[tuple[str, float, str, str | None, float]]) -> pl.LazyFrame:
    """(node, drained hour, outcome, cause, recorded hour) records."""
    return pl.DataFrame(
        {
            "node_id": [r[0] for r in records],
            "drained_at": [at(r[1]) for r in records],
            "action": ["drain"] * len(records),
            "outcome": [r[2] for r in records],
            "cause": [r[3] for r in records],
            "recorded_at": [at(r[4]) for r in records],
            "detail": [None] * len(records),
        },
        schema=INSPECTIONS.polars_schema(),
    ).lazy()


def no_events() -> pl.LazyFrame:
    return builders.events([]).lazy()


def labelled(
    insp: pl.LazyFrame | None,
    events: pl.LazyFrame | None = None,
    cutoff: datetime = CUTOFF,
) -> dict[float, tuple[int | None, bool]]:
    """Hour -> (label, usable)."""
    out = add_failure_labels(
        rows(),
        no_events() if events is None else events,
        horizons=(H,),
        label_cutoff=cutoff,
        inspections=insp,
    ).collect()
    hours = [(t - T0) / timedelta(hours=1) for t in out["ts"].to_list()]
    pairs = zip(out[LABEL].to_list(), out["usable"].to_list(), strict=True)
    return dict(zip(hours, pairs, strict=True))


def test_fault_found_is_the_failure_it_prevented_at_the_drain_time() -> None:
    got = labelled(inspections([("n0", 20, "fault_found", "gpu_xid", 26)]))
    # windows (t, t + 6 h] holding the drain at hour 20: t = 14 .. 19
    assert [h for h, (y, _) in got.items() if y == 1] == [14, 15, 16, 17, 18, 19]
    assert got[13] == (0, True)
    # down from the drain to the inspection's record, in service after it
    assert [h for h, (_, ok) in got.items() if not ok] == [20, 21, 22, 23, 24, 25]
    assert got[26] == (0, True)


def test_fault_found_carries_its_cause_as_a_failure_event() -> None:
    outcomes = outcomes_as_of(
        inspections([("n0", 20, "fault_found", "psu", 26), ("n0", 30, "fault_found", None, 31)]),
        CUTOFF,
    )
    ev = found_failures(outcomes).collect().sort("at")
    assert ev.select("kind", "at", "cause").rows() == [
        ("failure", at(20), "psu"),
        ("repair", at(26), "psu"),
        ("failure", at(30), "unknown"),
        ("repair", at(31), "unknown"),
    ]


def test_no_fault_found_is_a_negative_after_the_inspection() -> None:
    got = labelled(inspections([("n0", 20, "no_fault_found", None, 24)]))
    assert all(y == 0 for y, _ in got.values() if y is not None)
    assert [h for h, (y, _) in got.items() if y is None] == [43, 44, 45, 46, 47]  # past the cutoff
    assert [h for h, (_, ok) in got.items() if not ok] == [20, 21, 22, 23]  # under inspection


def test_no_fault_found_recorded_after_the_cutoff_is_still_censored() -> None:
    insp = inspections([("n0", 20, "no_fault_found", None, 30)])
    got = labelled(insp, cutoff=at(28))
    assert [h for h, (y, _) in got.items() if y is None and h + 6 <= 28] == [14, 15, 16, 17, 18, 19]
    # the record's time is unknown at the cutoff too: no unusable stretch is read from it
    assert all(ok for _, ok in got.values())
    later = labelled(insp, cutoff=CUTOFF)
    assert later[14] == (0, True)


def test_unknown_is_censored_not_a_negative() -> None:
    got = labelled(inspections([("n0", 20, "unknown", None, 20)]))
    assert [h for h, (y, _) in got.items() if y is None and h < 40] == [14, 15, 16, 17, 18, 19]
    assert got[13] == (0, True)
    assert got[20] == (0, True)  # the window after the drain no longer holds it
    # without inspections the same rows are negatives: what today's labels do
    today = labelled(None)
    assert all(today[h] == (0, True) for h in range(14, 20))


def test_a_failure_before_an_unknown_drain_still_makes_the_window_positive() -> None:
    ev = builders.events([("n0", "failure", at(17)), ("n0", "repair", at(18))]).lazy()
    got = labelled(inspections([("n0", 20, "unknown", None, 20)]), events=ev)
    assert [got[h][0] for h in range(11, 20)] == [1, 1, 1, 1, 1, 1, None, None, None]


def test_the_latest_record_at_the_cutoff_decides() -> None:
    insp = inspections([("n0", 20, "unknown", None, 20), ("n0", 20, "fault_found", "disk", 27)])
    assert labelled(insp, cutoff=at(26))[16][0] is None
    assert labelled(insp, cutoff=CUTOFF)[16][0] == 1
    out = outcomes_as_of(insp, at(26)).collect()
    assert out.select("outcome", "recorded_at").rows() == [("unknown", at(20))]


def test_a_drain_after_the_cutoff_is_not_read() -> None:
    insp = inspections([("n0", 30, "unknown", None, 30)])
    got = labelled(insp, cutoff=at(29))
    assert all(y == 0 for h, (y, _) in got.items() if h + 6 <= 29)


def test_other_nodes_are_untouched() -> None:
    got = labelled(inspections([("n1", 20, "fault_found", "disk", 26)]))
    assert all(ok and y in (0, None) for y, ok in got.values())


@pytest.mark.parametrize("outcome", ["fault_found", "no_fault_found", "unknown"])
def test_no_inspection_at_or_after_t_changes_nothing_before_it_but_its_window(outcome: str) -> None:
    base = labelled(None)
    got = labelled(inspections([("n0", 20, outcome, "gpu_ecc", 26)]))
    assert {h: v for h, v in got.items() if h < 14} == {h: v for h, v in base.items() if h < 14}
    assert {h: v for h, v in got.items() if h >= 26} == {h: v for h, v in base.items() if h >= 26}
