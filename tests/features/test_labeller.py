"""The labeller's rules on hand-built timelines: each rule, each shield, merging, repairs,
and what is new against stored labels."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from predops.core.schemas import EVENTS
from predops.features.label_rules import LabelRules
from predops.features.labelled_events import match_failures, new_events
from predops.features.labeller import LabelResult, label_nodes
from predops.features.labels import select_label_events

T0 = datetime(2026, 3, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)


def at(minute: float) -> datetime:
    return T0 + minute * MIN


def tel(
    node: str = "n0",
    *,
    minutes: int = 300,
    step: int = 1,
    ready: Callable[[int], bool | None] = lambda m: True,
    dbe: Callable[[int], int | None] = lambda m: 0,
    xid: Callable[[int], int | None] = lambda m: 0,
) -> pl.DataFrame:
    """One node's samples every ``step`` minutes over ``minutes``."""
    ms = list(range(0, minutes, step))
    return pl.DataFrame(
        {
            "ts": [at(m) for m in ms],
            "node_id": [node] * len(ms),
            "node_ready": [ready(m) for m in ms],
            "ecc_dbe_total": [dbe(m) for m in ms],
            "xid_errors_total": [xid(m) for m in ms],
        },
        schema={
            "ts": pl.Datetime("us", "UTC"),
            "node_id": pl.String,
            "node_ready": pl.Boolean,
            "ecc_dbe_total": pl.Int64,
            "xid_errors_total": pl.Int64,
        },
    )


def ev(*rows: tuple[Any, ...]) -> pl.DataFrame:
    """(node, kind, minute[, cause[, detail[, source]]]) rows with a ``source`` column."""
    defaults = [None, None, "kube"]
    full = [(r[0], r[1], at(r[2]), *r[3:], *defaults[len(r) - 3 :]) for r in rows]
    schema = {**EVENTS.polars_schema(), "source": pl.String}
    return pl.DataFrame(full, schema=schema, orient="row")


def down(lo: int, hi: int) -> Callable[[int], bool]:
    return lambda m: not (lo <= m < hi)


def run(t: pl.DataFrame, e: pl.DataFrame | None = None, **rules: Any) -> LabelResult:
    events = e if e is not None else ev()
    return label_nodes(t.lazy(), events.lazy(), LabelRules(**rules))


def times(res: LabelResult) -> list[datetime]:
    return [f.at for f in res.failures]


# ---------------------------------------------------------------- the Ready rule
def test_not_ready_for_the_grace_period_is_a_failure_a_minute_less_is_not() -> None:
    assert times(run(tel(ready=down(60, 70)))) == [at(60)]  # first false 60, true at 70
    assert times(run(tel(ready=down(60, 69)))) == []
    f = run(tel(ready=down(60, 100))).failures[0]
    assert (f.cause, f.rules, f.repaired_at) == ("unknown", ("ready",), at(100))
    assert "NotReady 40 min" in f.detail and "Ready again" in f.repair_detail
    assert times(run(tel(ready=down(60, 80)), grace=timedelta(minutes=30))) == []


def test_ready_events_count_exactly_and_the_latest_observation_wins() -> None:
    none = tel(ready=lambda m: None)  # no Ready samples: the events alone decide
    e = ev(("n0", "not_ready", 60, None, "NodeStatusUnknown: kubelet stopped posting"))
    assert times(run(none, pl.concat([e, ev(("n0", "ready", 69.99))]))) == []
    res = run(none, pl.concat([e, ev(("n0", "ready", 70))]))
    assert times(res) == [at(60)] and "NodeStatusUnknown" in res.failures[0].detail
    # a Ready sample two minutes after the event ends the NotReady interval
    assert times(run(tel(), e)) == []


def test_a_not_ready_still_open_counts_once_it_has_lasted_the_grace_period() -> None:
    f = run(tel(minutes=75, ready=down(60, 999))).failures
    assert [(x.at, x.repaired_at) for x in f] == [(at(60), None)]
    assert run(tel(minutes=68, ready=down(60, 999))).failures == []  # not yet


# ---------------------------------------------------------------- shields
MAINTENANCE = (
    ("n0", "cordon", 30),
    ("n0", "drain", 40),
    ("n0", "maintenance_start", 50),
    ("n0", "maintenance_end", 120),
    ("n0", "uncordon", 130),
)


def test_maintenance_windows_shield_every_signal_but_tickets() -> None:
    t = tel(ready=down(50, 120), dbe=lambda m: int(m >= 100))
    e = pl.concat([ev(*MAINTENANCE), ev(("n0", "not_ready", 90, "XidError", "Xid 79"))])
    res = run(t, e, dbe_labels_alone=True)
    assert res.failures == []
    shielded = {(c.rule, c.shielded_by) for c in res.candidates}
    assert shielded == {
        ("ready", "maintenance"),
        ("gpu_xid", "maintenance"),
        ("gpu_ecc", "maintenance"),
    }
    # after the window (and its slack) the node is on its own again
    later = run(tel(ready=lambda m: not (50 <= m < 120 or 200 <= m < 230)), ev(*MAINTENANCE))
    assert times(later) == [at(200)]
    ticket = ev(("n0", "failure", 60, "psu", "INC-7", "tickets"))
    assert times(run(tel(ready=down(50, 120)), pl.concat([ev(*MAINTENANCE), ticket]))) == [at(60)]


@pytest.mark.parametrize(("owner", "kind"), [(None, "planned_drain"), ("predops", "predops")])
def test_a_drain_shields_the_ready_rule_but_not_a_failed_gpu(owner: str | None, kind: str) -> None:
    e = ev(("n0", "cordon", 30, owner), ("n0", "drain", 31, owner), ("n0", "uncordon", 200))
    res = run(tel(ready=down(60, 120)), e)
    assert res.failures == [] and [c.shielded_by for c in res.candidates] == [kind]
    gpu = pl.concat([e, ev(("n0", "not_ready", 90, "XidError", "NVRM: Xid (PCI:0): 79, pid=1"))])
    f = run(tel(ready=down(60, 120)), gpu).failures
    assert [(x.at, x.cause, x.rules) for x in f] == [(at(90), "gpu_xid", ("gpu_xid",))]


def test_a_cordon_nothing_ends_shields_at_most_planned_max() -> None:
    e = ev(("n0", "cordon", 0, "alice"))
    t = tel(ready=lambda m: not (30 <= m < 50 or 90 <= m < 110))
    assert times(run(t, e, planned_max=timedelta(hours=1))) == [at(90)]  # 60 + 10 min slack


def test_rebooted_is_a_failure_unless_a_drain_explains_it() -> None:
    reboot = ("n0", "not_ready", 100, "Rebooted", "Node n0 has been rebooted, boot id: x")
    f = run(tel(), ev(reboot)).failures
    assert [(x.at, x.cause, x.rules) for x in f] == [(at(100), "unknown", ("node_problem",))]
    drained = ev(("n0", "drain", 90, "predops"), reboot, ("n0", "uncordon", 150))
    assert run(tel(), drained).failures == []


def test_node_problem_reasons() -> None:
    e = ev(
        ("n0", "not_ready", 60, "KernelDeadlock", "task docker:7 blocked for more than 300 s"),
        ("n0", "not_ready", 200, "FrequentKubeletRestart", "kubelet restarted 5 times"),
    )
    res = run(tel(), e)
    assert [(f.at, f.cause) for f in res.failures] == [(at(60), "kernel")]
    assert res.failures[0].repaired_at == at(120)  # no signal for an hour, node Ready
    assert res.ignored == {"problem_info": 1}
    # a NodeNotReady Event is the Ready condition: the grace period applies
    short = ev(("n0", "not_ready", 60, "NodeNotReady", "Node n0 status is now: NodeNotReady"))
    assert (
        run(tel(ready=lambda m: None), pl.concat([short, ev(("n0", "ready", 65))])).failures == []
    )


# ---------------------------------------------------------------- GPU signals
def test_xid_codes_decide_failures() -> None:
    e = ev(
        ("n0", "not_ready", 60, "XidError", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234"),
        ("n0", "not_ready", 150, "XidError", "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception"),
        ("n0", "not_ready", 160, "XidError", "Xid 94: Contained ECC error"),
    )
    res = run(tel(minutes=400), e)
    assert [(f.at, f.cause) for f in res.failures] == [(at(60), "gpu_xid")]
    assert "DCGM XID 79 (GPU has fallen off the bus)" in res.failures[0].detail
    assert res.failures[0].repaired_at == at(120)
    assert res.ignored == {"xid_application": 1, "xid_degraded": 1}
    # observed for less than the quiet period: not repaired yet
    assert run(tel(minutes=100), e.head(1)).failures[0].repaired_at is None


def test_a_dbe_increase_names_the_cause_by_default_and_labels_alone_when_asked() -> None:
    alone = tel(dbe=lambda m: int(m >= 60))
    assert run(alone).failures == []
    f = run(alone, dbe_labels_alone=True).failures
    assert [(x.at, x.cause, x.repaired_at) for x in f] == [(at(60), "gpu_ecc", at(120))]
    before = tel(dbe=lambda m: int(m >= 50), ready=down(60, 100))
    f = run(before).failures
    assert [(x.at, x.cause, x.rules) for x in f] == [(at(60), "gpu_ecc", ("gpu_ecc", "ready"))]
    f = run(before, dbe_labels_alone=True).failures  # then the earliest signal is the start
    assert [(x.at, x.cause, x.repaired_at) for x in f] == [(at(50), "gpu_ecc", at(100))]


def test_a_counter_reset_after_a_reboot_is_not_an_increase() -> None:
    def ecc(res: LabelResult) -> list[datetime]:
        return [c.at for c in res.candidates if c.rule == "gpu_ecc"]

    assert ecc(run(tel(dbe=lambda m: 5 if m < 60 else 0))) == []
    assert ecc(run(tel(dbe=lambda m: 5 if m < 60 else (0 if m < 90 else 1)))) == [at(90)]
    # a gap (null counters while the node is down) compares with the last value seen
    gap = tel(dbe=lambda m: 3 if m < 60 else (None if m < 80 else 4))
    assert [(c.at, c.since) for c in run(gap).candidates if c.rule == "gpu_ecc"] == [
        (at(80), at(59))
    ]


def test_an_xid_counter_increase_only_names_the_cause() -> None:
    assert run(tel(xid=lambda m: int(m >= 50))).failures == []
    f = run(tel(xid=lambda m: int(m >= 50), ready=down(60, 100))).failures
    assert [(x.at, x.cause, x.rules) for x in f] == [
        (at(60), "gpu_xid", ("ready", "gpu_xid_counter"))
    ]
    far = run(tel(xid=lambda m: int(m >= 20), ready=down(60, 100))).failures  # 40 min before
    assert [x.cause for x in far] == ["unknown"]


# ---------------------------------------------------------------- merging and repairs
def test_two_sources_seeing_one_failure_make_one_event() -> None:
    e = ev(
        ("n0", "not_ready", 58, "XidError", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1"),
        ("n0", "failure", 70, "psu", "INC-1: PSU replaced", "tickets"),
        ("n0", "repair", 200, "psu", "INC-1 closed", "tickets"),
    )
    res = run(tel(ready=down(60, 140)), e)
    assert len(res.failures) == 1
    f = res.failures[0]
    assert (f.at, f.cause, f.rules) == (at(58), "psu", ("ticket", "gpu_xid", "ready"))
    assert "INC-1" in f.detail and "DCGM XID 79" in f.detail and "NotReady" in f.detail
    assert (f.repaired_at, f.repair_detail.split(",")[0]) == (
        at(200),
        "labeller: ticket closed",
    )


def test_a_ticket_hours_later_is_the_same_failure_while_the_node_is_down() -> None:
    e = ev(("n0", "failure", 240, "disk", "INC-2", "tickets"))
    f = run(tel(minutes=600, ready=down(60, 400)), e).failures
    assert [(x.at, x.cause, x.repaired_at) for x in f] == [(at(60), "disk", at(400))]


def test_repair_when_ready_again_and_the_gpu_signal_stopped() -> None:
    e = ev(
        ("n0", "not_ready", 60, "XidError", "Xid 79"),
        ("n0", "not_ready", 120, "XidError", "Xid 79"),
    )
    f = run(tel(minutes=400, ready=down(65, 100)), e).failures
    # the second XID comes after the node was Ready again and past the dedup window
    assert [(x.at, x.repaired_at) for x in f] == [(at(60), at(100)), (at(120), at(180))]
    two = run(tel(ready=lambda m: not (60 <= m < 80 or 200 <= m < 230))).failures
    assert [(x.at, x.repaired_at) for x in two] == [(at(60), at(80)), (at(200), at(230))]


def test_nodes_are_labelled_independently() -> None:
    t = pl.concat([tel("a", ready=down(60, 100)), tel("b", ready=down(61, 65))])
    res = run(t, ev(("b", "not_ready", 150, "KernelDeadlock")))
    assert [(f.node_id, f.at) for f in res.failures] == [("a", at(60)), ("b", at(150))]


# ---------------------------------------------------------------- against stored labels
def _stored(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select("node_id", "kind", "at")


def test_new_events_add_nothing_already_stored() -> None:
    rules = LabelRules()
    res = run(tel(ready=down(60, 100)), ev(("n0", "not_ready", 200, "KernelDeadlock")))
    first = new_events(res.failures, EVENTS.empty(), rules)
    assert first.sort("at")["kind"].to_list() == ["failure", "repair", "failure", "repair"]
    assert new_events(res.failures, _stored(first), rules).height == 0
    # a failure stored while still open gets only its repair
    open_one = first.filter(pl.col("at") < at(90))
    again = new_events(res.failures, _stored(open_one), rules)
    assert again.select("kind", "at").rows() == [
        ("repair", at(100)),
        ("failure", at(200)),
        ("repair", at(260)),
    ]
    # a ticket exported later with an earlier time does not duplicate the failure
    ticket = ev(("n0", "failure", 45, "psu", "INC-9", "tickets"))
    later = run(tel(ready=down(60, 100)), ticket)
    assert later.failures[0].at == at(45)
    assert new_events(later.failures, _stored(first), rules).height == 0
    assert new_events(res.failures, EVENTS.empty(), rules, since=at(150))["at"].to_list() == [
        at(200),
        at(260),
    ]


def test_match_failures_is_one_to_one_within_the_tolerance() -> None:
    def frame(rows: list[tuple[str, float]]) -> pl.DataFrame:
        return pl.DataFrame({"node_id": [r[0] for r in rows], "at": [at(r[1]) for r in rows]})

    labels = frame([("a", 60), ("a", 65), ("b", 60), ("a", 300)])
    truth = frame([("a", 62), ("b", 100), ("c", 60)])
    m = match_failures(labels, truth, timedelta(minutes=30))
    assert (m.labels, m.truths, m.matched) == (4, 3, 1)
    assert m.pairs == ((0, 0),)
    assert m.to_dict()["precision"] == 0.25


def test_one_label_source_is_read() -> None:
    e = pl.DataFrame(
        {
            "node_id": ["n0"] * 4,
            "kind": ["failure", "failure", "repair", "maintenance_start"],
            "at": [at(1), at(2), at(3), at(4)],
            "source": ["synthetic", "labeller", "labeller", "synthetic"],
        }
    ).lazy()
    assert select_label_events(e, "labeller").collect()["at"].to_list() == [at(2), at(3), at(4)]
    assert select_label_events(e, None).collect().height == 4
    assert "source" not in select_label_events(e, None).collect_schema().names()
