"""Failure and repair labels from what a real cluster records: the labeller's rules.

A real cluster records no ``failure`` events; it records signals. Each rule turns one
kind of signal into failure *candidates* (node, time, cause, what was seen); candidates
of one node that describe the same failure are merged into one labelled failure with a
repair time. Every rule and default is in :class:`LabelRules`.

Rules (``rule`` names, in the order their causes win when sources disagree):

- ``ticket``: a ``failure`` event of a declared ticket source (a repair-ticket / RMA
  export ingested with ``predops ingest files --table events --source-name tickets``);
  its ``repair`` row, if any, is the repair. Tickets are never shielded (below).
- ``gpu_xid``: a node-problem report (a ``not_ready`` event whose ``cause`` names an XID)
  whose code the XID catalogue (:mod:`predops.features.signal_catalog`) calls a failure.
  Application (13, 31, 43, 45) and degraded (63, 92, 94) codes are counted, not labelled.
- ``gpu_ecc``: ``ecc_dbe_total`` grew between two consecutive samples of the node (an
  uncorrectable ECC error). A drop is a counter reset (a reboot or driver reload):
  never an increase; the next sample counts from the value after the drop. By default
  it names causes like ``gpu_xid_counter`` (below) and labels nothing alone
  (``dbe_labels_alone``): on Ampere and later the counter also counts *contained*
  errors (XID 94, which the GPU survives), and on the synthetic fleet labelling every
  DBE cost a fifth of the precision for no recall (``predops eval labels``). A DBE that
  failed the GPU arrives as XID 48 / 95 / 64 (the ``gpu_xid`` rule) or takes the node
  down (``ready``).
- ``node_problem``: a node-problem-detector condition or Kubernetes Event the catalogue
  calls a failure (``KernelDeadlock``, ``ReadonlyFilesystem``, ``Rebooted``).
- ``ready``: the Ready condition false or Unknown for at least ``grace``: from
  telemetry ``node_ready`` samples and ``not_ready`` / ``ready`` events together, the
  latest observation winning. An interval still open at the node's last observation
  counts once it has lasted ``grace``.
- ``gpu_xid_counter``: ``xid_errors_total`` grew. Telemetry carries no XID code, and
  application XIDs are the common case, so it never labels on its own: within
  ``cause_lookback`` before a failure of unknown cause it names the cause ``gpu_xid``
  (and moves no times; the cause-naming DBE does the same with ``gpu_ecc``).

Shields: a candidate starting inside a planned window is not a failure. Maintenance
windows (``maintenance_start`` .. ``maintenance_end``) shield every rule but tickets;
cordon / drain .. ``uncordon`` windows, predops' own (``cause`` = ``LabelRules.owner``,
as the actuators record it, or the audit log's executed cordons and drains) or anyone
else's, shield the Ready rule and reboot-like problems, the signals a planned drain and
reboot produce. Windows last at most ``planned_max`` when nothing ends them and reach
``planned_slack`` past their end (the node coming back).

Merging: candidates of a node are taken in time order; one joins the current failure
when it starts within ``dedup_window`` of the failure's start, or while the failure
is still on (before its provisional repair). The failure's time is the earliest
member's, its cause the most specific member's (the rule order above; ``unknown``
never wins), its detail lists every member's rule and what it saw. Its repair: the
ticket's repair when a ticket has one; else none while the node is still NotReady;
else the end of its NotReady interval (Ready again) when no GPU signal came later;
else ``signal_quiet`` after the last GPU signal (the signal stopped), once the node
has been observed that long.

Times are UTC; frames are polars. The functions here are pure: they see only the frames
they are given (one chunk of nodes at a time, see ``pipelines/jobs/labels.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.schemas import EVENTS, FAILURE_CAUSES
from predops.features.signal_catalog import NODE_PROBLEMS, classify_problem, names_xid, xid_code

NODE = "node_id"
RULES: tuple[str, ...] = (
    "ticket",
    "gpu_xid",
    "gpu_ecc",
    "node_problem",
    "ready",
    "gpu_xid_counter",
)
_RANK = {r: len(RULES) - i for i, r in enumerate(RULES)}
READY_REASONS = frozenset(k for k, v in NODE_PROBLEMS.items() if v.verdict == "ready")
SHIELD_KINDS = ("maintenance", "planned_drain", "predops")
COUNTER_RULES = {"ecc_dbe_total": "gpu_ecc", "xid_errors_total": "gpu_xid_counter"}
TELEMETRY_COLUMNS = ("ts", NODE, "node_ready", *COUNTER_RULES)
MAX_DETAIL = 400


@dataclass(frozen=True, slots=True)
class LabelRules:
    """The labeller's settings; every duration is a ``timedelta``."""

    grace: timedelta = timedelta(minutes=10)
    """A node NotReady (false or Unknown) at least this long has failed."""
    dedup_window: timedelta = timedelta(minutes=30)
    """Signals of one node starting this close to a failure's start are that failure."""
    signal_quiet: timedelta = timedelta(hours=1)
    """A GPU signal failure is repaired when no signal came for this long."""
    cause_lookback: timedelta = timedelta(minutes=30)
    """An XID counter increase this long before a failure names its cause."""
    planned_max: timedelta = timedelta(hours=24)
    """A cordon / drain or maintenance nothing ends shields at most this long."""
    planned_slack: timedelta = timedelta(minutes=10)
    """A planned window shields this long past its end."""
    owner: str = "predops"
    """The cordon owner predops' own actions carry (``cause`` of its cordon events)."""
    ticket_sources: tuple[str, ...] = ("tickets",)
    """Lake sources whose ``failure`` / ``repair`` events are repair tickets."""
    dbe_labels_alone: bool = False
    """A DBE increase labels a failure on its own (default: it only names causes)."""

    def __post_init__(self) -> None:
        for name in ("grace", "dedup_window", "signal_quiet", "cause_lookback", "planned_max"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"label rules: {name} must be positive")
        if self.planned_slack < timedelta(0):
            raise ValueError("label rules: planned_slack must not be negative")

    @property
    def context(self) -> timedelta:
        """How far before the first labelled time the inputs must reach (a window or an
        interval started earlier still decides)."""
        return self.planned_max + self.planned_slack + self.dedup_window + self.signal_quiet

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, timedelta):
                out[k] = f"{v.total_seconds():g}s"
        out["ticket_sources"] = list(self.ticket_sources)
        return out


# ---------------------------------------------------------------- lazy reductions
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


# ---------------------------------------------------------------- records
@dataclass(slots=True)
class Candidate:
    """One rule's evidence of a failure: seen at ``at``, possibly begun at ``since``,
    over at ``until`` (a NotReady interval's end; None while still on). ``point``
    signals (counters, reports, tickets) have no end of their own."""

    node_id: str
    rule: str
    at: datetime
    since: datetime
    cause: str
    detail: str
    until: datetime | None = None
    point: bool = True
    repaired_at: datetime | None = None
    reboot_like: bool = False
    shielded_by: str | None = None
    refines: bool = False
    """Joined a failure only to name its cause (it moves no times)."""

    @property
    def rank(self) -> int:
        return 0 if self.cause == "unknown" else _RANK[self.rule]


@dataclass(slots=True)
class LabelledFailure:
    """One failure of a node as the labeller sees it, and its repair (None: not yet)."""

    node_id: str
    at: datetime
    cause: str
    detail: str
    rules: tuple[str, ...]
    repaired_at: datetime | None
    repair_detail: str = ""


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime
    end: datetime
    kind: str  # one of SHIELD_KINDS


@dataclass(slots=True)
class LabelResult:
    """What :func:`label_nodes` found: the failures, every candidate (shielded ones
    with the window kind that shielded them) and signals that are not failures."""

    failures: list[LabelledFailure]
    candidates: list[Candidate]
    ignored: Counter[str] = field(default_factory=Counter)

    def candidates_frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {
                NODE: [c.node_id for c in self.candidates],
                "rule": [c.rule for c in self.candidates],
                "at": [c.at for c in self.candidates],
                "cause": [c.cause for c in self.candidates],
                "shielded_by": [c.shielded_by for c in self.candidates],
            },
            schema={
                NODE: pl.String,
                "rule": pl.String,
                "at": EVENTS.column("at").dtype,
                "cause": pl.String,
                "shielded_by": pl.String,
            },
        )


# ---------------------------------------------------------------- per node
def _minutes(d: timedelta) -> str:
    m = d.total_seconds() / 60
    return f"{m:.0f} min" if m < 120 else f"{m / 60:.1f} h"


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


def _shield(c: Candidate, windows: list[Window]) -> str | None:
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
        why = f"NotReady {_minutes(lasted)}" + ("" if end else " (still NotReady)")
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
        if r["source"] in rules.ticket_sources and kind in ("failure", "repair"):
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


@dataclass(slots=True)
class _Group:
    members: list[Candidate]

    @property
    def at(self) -> datetime:
        return min(c.at for c in self.members if not c.refines)

    def repair(self, quiet: timedelta) -> tuple[datetime | None, str]:
        """(repair time or None while still on, what it rests on), unbounded by data."""
        tickets = [c.repaired_at for c in self.members if c.repaired_at is not None]
        if tickets:
            return max(tickets), "ticket closed"
        spans = [c for c in self.members if not c.point]
        if any(c.until is None for c in spans):
            return None, ""
        ready_end = max((c.until for c in spans if c.until is not None), default=None)
        last_signal = max((c.at for c in self.members if c.point and not c.refines), default=None)
        if ready_end is not None and (last_signal is None or last_signal <= ready_end):
            return ready_end, "Ready again"
        assert last_signal is not None
        return last_signal + quiet, f"no failure signal for {_minutes(quiet)}"

    def joins(self, c: Candidate, rules: LabelRules) -> bool:
        if c.at - self.at <= rules.dedup_window:
            return True
        end, _ = self.repair(rules.signal_quiet)
        return end is None or c.since <= end


def _merged(g: _Group, until: datetime, rules: LabelRules) -> LabelledFailure:
    ms = sorted(g.members, key=lambda c: (-c.rank, c.at))
    best = ms[0]
    rules_seen = tuple(r for r in RULES if any(c.rule == r for c in g.members))
    others = [c.detail for c in sorted(g.members, key=lambda c: c.at) if c is not best]
    seen = "; ".join(dict.fromkeys([best.detail, *others]))
    detail = f"labeller [{', '.join(rules_seen)}]: {seen}"
    repaired, why = g.repair(rules.signal_quiet)
    if repaired is not None and repaired > until and why.startswith("no failure"):
        repaired = None  # the quiet period is not over yet
    at = g.at
    return LabelledFailure(
        g.members[0].node_id,
        at,
        best.cause,
        _cut(detail),
        rules_seen,
        repaired,
        _cut(f"labeller: {why}, {_minutes(repaired - at)} after the failure") if repaired else "",
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def merge_candidates(
    cands: list[Candidate], until: datetime, rules: LabelRules
) -> list[LabelledFailure]:
    """One node's unshielded candidates as failures (see the module docstring)."""
    refining = {"gpu_xid_counter"} | (set() if rules.dbe_labels_alone else {"gpu_ecc"})
    standalone = [c for c in cands if c.rule not in refining]
    refiners = [c for c in cands if c.rule in refining]
    groups: list[_Group] = []
    for c in sorted(standalone, key=lambda c: (c.at, -_RANK[c.rule])):
        if groups and groups[-1].joins(c, rules):
            groups[-1].members.append(c)
        else:
            groups.append(_Group([c]))
    for g in groups:
        start = g.at
        near = [r for r in refiners if start - rules.cause_lookback <= r.at <= start]
        if near and max(c.rank for c in g.members) == 0:  # only then do they add a cause
            for r in near:
                r.refines = True
            g.members.extend(near)
    return [_merged(g, until, rules) for g in groups]


def _by_node(frame: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in frame.iter_rows(named=True):
        out.setdefault(row[NODE], []).append(row)
    return out


def label_nodes(
    telemetry: pl.LazyFrame, events: pl.LazyFrame, rules: LabelRules | None = None
) -> LabelResult:
    """Every rule over the nodes in ``telemetry`` / ``events``.

    ``telemetry`` needs the :data:`TELEMETRY_COLUMNS`; ``events`` the EVENTS columns plus
    ``source`` (the lake source: tickets are recognised by it). The caller keeps the
    labeller's own output out of ``events``.
    """
    rules = rules or LabelRules()
    tel = telemetry.select(TELEMETRY_COLUMNS)
    ev = events.select(*EVENTS.names, "source")
    obs = _by_node(ready_observations(tel, ev).collect())
    incs = _by_node(counter_increases(tel).sort(NODE, "at").collect())
    seen = dict(observed_until(tel, ev).collect().iter_rows())
    rows = _by_node(ev.filter(~pl.col("kind").is_in(["ready"])).sort(NODE, "at", "kind").collect())
    result = LabelResult([], [])
    for node in sorted(seen):
        until = seen[node]
        node_rows = rows.get(node, [])
        windows = planned_windows(node_rows, rules)
        cands = (
            ready_candidates(node, obs.get(node, []), until, rules)
            + event_candidates(node, node_rows, rules, result.ignored)
            + counter_candidates(node, incs.get(node, []))
        )
        for c in cands:
            c.shielded_by = _shield(c, windows)
        result.candidates.extend(sorted(cands, key=lambda c: (c.at, c.rule)))
        kept = [c for c in cands if c.shielded_by is None]
        result.failures.extend(merge_candidates(kept, until, rules))
    return result
