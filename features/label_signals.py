"""The labeller's signals: lazy reductions of a chunk's telemetry and events to what the
rules need (Ready changes, counter increases, last observations), and each rule's
candidates and shields per node (see :mod:`predops.features.labeller`)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import polars as pl

from predops.core.schemas import FAILURE_CAUSES
from predops.features.label_rules import NODE, Candidate, LabelRules, Window, minutes
from predops.features.signal_catalog import NODE_PROBLEMS, classify_problem, names_xid, xid_code

READY_REASONS = frozenset(k for k, v in NODE_PROBLEMS.items() if v.verdict == "ready")
COUNTER_RULES = {"ecc_dbe_total": "gpu_ecc", "xid_errors_total": "gpu_xid_counter"}
TELEMETRY_COLUMNS = ("ts", NODE, "node_ready", *COUNTER_RULES)


def _norm_reason(col: str) -> pl.Expr:
    return pl.col(col).str.to_lowercase().str.replace_all("[^a-z0-9]", "")


def _ready_class(events: pl.LazyFrame) -> pl.LazyFrame:
    """Ready / not_ready events that are the Ready condition itself (no problem reason)."""
    plain = pl.col("cause").is_null() | _norm_reason("cause").is_in(list(READY_REASONS))
    return events.filter(pl.col("kind").is_in(["ready", "not_ready"]) & plain)


def ready_observations(telemetry: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """Every change of a node's Ready state (node_id, at, ready, detail): telemetry
    ``node_ready`` samples and Ready events in one stream, the latest observation
    winning (at one instant, Ready last)."""
    tel = telemetry.filter(pl.col("node_ready").is_not_null()).select(
        NODE,
        pl.col("ts").alias("at"),
        pl.col("node_ready").alias("ready"),
        pl.lit(None, pl.String).alias("detail"),
    )
    ev = _ready_class(events).select(
        NODE, "at", (pl.col("kind") == "ready").alias("ready"), "detail"
    )
    both = pl.concat([tel, ev]).sort(NODE, "at", "ready")
    prev = pl.col("ready").shift(1).over(NODE)
    return both.filter(prev.is_null() | (prev != pl.col("ready")))


def counter_increases(telemetry: pl.LazyFrame) -> pl.LazyFrame:
    """Increases of the labelling counters between consecutive non-null samples of a
    node (node_id, counter, at, since, delta): ``since`` is the previous sample, so
    the errors happened in ``(since, at]``. A drop (reset) is never an increase."""
    parts = []
    for col in COUNTER_RULES:
        lf = (
            telemetry.select(NODE, "ts", col)
            .filter(pl.col(col).is_not_null())
            .sort(NODE, "ts")
            .with_columns(
                pl.col(col).shift(1).over(NODE).alias("__prev"),
                pl.col("ts").shift(1).over(NODE).alias("since"),
            )
            .filter(pl.col(col) > pl.col("__prev"))
        )
        parts.append(
            lf.select(
                NODE,
                pl.lit(col).alias("counter"),
                pl.col("ts").alias("at"),
                "since",
                (pl.col(col) - pl.col("__prev")).cast(pl.Int64).alias("delta"),
            )
        )
    return pl.concat(parts)


def observed_until(telemetry: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """Each node's last observation (telemetry sample or event)."""
    return (
        pl.concat(
            [
                telemetry.select(NODE, pl.col("ts").alias("until")),
                events.select(NODE, pl.col("at").alias("until")),
            ]
        )
        .group_by(NODE)
        .agg(pl.col("until").max())
    )


def planned_windows(rows: list[dict[str, Any]], rules: LabelRules) -> list[Window]:
    """Maintenance and cordon / drain windows of one node's events (time order)."""
    out: list[Window] = []
    cordon: tuple[datetime, bool] | None = None
    maint: datetime | None = None
    for r in rows:
        kind, at = r["kind"], r["at"]
        if kind in ("cordon", "drain"):
            ours = r["cause"] == rules.owner
            if cordon is None or (cordon[0] + rules.planned_max < at):
                if cordon is not None:
                    out.append(_cordon_window(cordon, cordon[0] + rules.planned_max))
                cordon = (at, ours)
            elif ours:
                cordon = (cordon[0], True)
        elif kind == "uncordon" and cordon is not None:
            out.append(_cordon_window(cordon, min(at, cordon[0] + rules.planned_max)))
            cordon = None
        elif kind == "maintenance_start" and maint is None:
            maint = at
        elif kind == "maintenance_end" and maint is not None:
            out.append(Window(maint, min(at, maint + rules.planned_max), "maintenance"))
            maint = None
    if cordon is not None:
        out.append(_cordon_window(cordon, cordon[0] + rules.planned_max))
    if maint is not None:
        out.append(Window(maint, maint + rules.planned_max, "maintenance"))
    return [Window(w.start, w.end + rules.planned_slack, w.kind) for w in out]


def _cordon_window(cordon: tuple[datetime, bool], end: datetime) -> Window:
    return Window(cordon[0], end, "predops" if cordon[1] else "planned_drain")


def shield(c: Candidate, windows: list[Window]) -> str | None:
    """The kind of planned window that explains ``c`` (None: it stands)."""
    if c.rule == "ticket":
        return None
    found = None
    for w in windows:
        if not w.start <= c.at <= w.end:
            continue
        if w.kind == "maintenance":
            return "maintenance"
        if c.rule == "ready" or c.reboot_like:
            found = found or w.kind
    return found


def ready_candidates(
    node: str, obs: list[dict[str, Any]], until: datetime, rules: LabelRules
) -> list[Candidate]:
    """NotReady intervals of at least ``grace`` (observations in time order)."""
    out = []
    start: dict[str, Any] | None = None

    def close(end: datetime | None) -> None:
        assert start is not None
        t0 = start["at"]
        lasted = (end or until) - t0
        if lasted < rules.grace:
            return
        why = f"NotReady {minutes(lasted)}" + ("" if end else " (still NotReady)")
        if start["detail"]:
            why += f" ({start['detail']})"
        out.append(Candidate(node, "ready", t0, t0, "unknown", why, until=end, point=False))

    for o in obs:
        if not o["ready"] and start is None:
            start = o
        elif o["ready"] and start is not None:
            close(o["at"])
            start = None
    if start is not None:
        close(None)
    return out


def event_candidates(
    node: str, rows: list[dict[str, Any]], rules: LabelRules, ignored: Counter[str]
) -> list[Candidate]:
    """Tickets (failure / repair of a ticket source) and failure-class node problems."""
    out: list[Candidate] = []
    open_ticket: Candidate | None = None
    for r in rows:
        kind, at, cause, detail = r["kind"], r["at"], r["cause"], r["detail"]
        if kind in ("failure", "repair") and r["source"] not in rules.ticket_sources:
            ignored[f"{kind}_not_from_a_ticket_source"] += 1  # e.g. a simulator's truth
            continue
        if kind in ("failure", "repair"):
            if kind == "failure":
                c = cause if cause in FAILURE_CAUSES else "unknown"
                text = f"ticket ({r['source']}): {detail or c}"
                open_ticket = Candidate(node, "ticket", at, at, c, text)
                out.append(open_ticket)
            elif open_ticket is not None and at >= open_ticket.at:
                open_ticket.repaired_at = at
                open_ticket = None
            else:
                ignored["ticket_repair_without_failure"] += 1
            continue
        if kind != "not_ready" or not cause:
            continue
        cls = classify_problem(cause, detail)
        if cls is None or cls.verdict == "ready":
            continue
        if cls.verdict != "failure":
            ignored[f"{'xid' if names_xid(cause) else 'problem'}_{cls.verdict}"] += 1
            continue
        if names_xid(cause):
            code = xid_code(detail) or xid_code(cause)
            text = f"DCGM XID {code} ({cls.text})" + (f": {detail}" if detail else "")
            rule = "gpu_xid"
        else:
            text = f"{cause} ({cls.text})" + (f": {detail}" if detail else "")
            rule = "node_problem"
        out.append(Candidate(node, rule, at, at, cls.cause, text, reboot_like=cls.reboot_like))
    return out


def counter_candidates(node: str, incs: list[dict[str, Any]]) -> list[Candidate]:
    """DBE and XID counter increases (``gpu_ecc`` / ``gpu_xid_counter``): by default they
    only name causes (:func:`predops.features.labeller.merge_candidates`)."""
    out = []
    for r in incs:
        col, d = r["counter"], r["delta"]
        if col == "ecc_dbe_total":
            out.append(
                Candidate(
                    node,
                    "gpu_ecc",
                    r["at"],
                    r["since"],
                    "gpu_ecc",
                    f"ecc_dbe_total +{d} (uncorrectable ECC, XID 48 class)",
                )
            )
        else:
            out.append(
                Candidate(
                    node,
                    "gpu_xid_counter",
                    r["at"],
                    r["since"],
                    "gpu_xid",
                    f"xid_errors_total +{d} (code not in telemetry)",
                )
            )
    return out
