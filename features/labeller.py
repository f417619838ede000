"""Failure and repair labels from what a real cluster records: the labeller's rules.

A real cluster records no ``failure`` events; it records signals. Each rule turns one
kind of signal into failure *candidates* (node, time, cause, what was seen); candidates
of one node that describe the same failure are merged into one labelled failure with a
repair time. Every rule and default is in
:class:`~predops.features.label_rules.LabelRules`.

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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.schemas import EVENTS
from predops.features.label_rules import (
    NODE,
    RULE_RANK,
    RULES,
    Candidate,
    LabelledFailure,
    LabelRules,
    minutes,
)
from predops.features.label_signals import (
    TELEMETRY_COLUMNS,
    counter_candidates,
    counter_increases,
    event_candidates,
    observed_until,
    planned_windows,
    ready_candidates,
    ready_observations,
    shield,
)

MAX_DETAIL = 400


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


@dataclass(slots=True)
class _Group:
    members: list[Candidate]

    @property
    def at(self) -> datetime:
        return min(c.at for c in self.members if not c.refines)

    def repair(self, quiet: timedelta) -> tuple[datetime | None, str, bool]:
        """(repair time or None while still on, what it rests on, whether it was seen
        rather than inferred from a quiet period), regardless of how far data reach."""
        tickets = [c.repaired_at for c in self.members if c.repaired_at is not None]
        if tickets:
            return max(tickets), "ticket closed", True
        spans = [c for c in self.members if not c.point]
        if any(c.until is None for c in spans):
            return None, "", True
        ready_end = max((c.until for c in spans if c.until is not None), default=None)
        last_signal = max((c.at for c in self.members if c.point and not c.refines), default=None)
        if ready_end is not None and (last_signal is None or last_signal <= ready_end):
            return ready_end, "Ready again", True
        assert last_signal is not None
        return last_signal + quiet, f"no failure signal for {minutes(quiet)}", False

    def joins(self, c: Candidate, rules: LabelRules) -> bool:
        if c.at - self.at <= rules.dedup_window:
            return True
        end, _, _ = self.repair(rules.signal_quiet)
        return end is None or c.since <= end


def _merged(g: _Group, until: datetime, rules: LabelRules) -> LabelledFailure:
    best = min(g.members, key=lambda c: (-c.rank, c.at))
    rules_seen = tuple(r for r in RULES if any(c.rule == r for c in g.members))
    others = [c.detail for c in sorted(g.members, key=lambda c: c.at) if c is not best]
    seen = "; ".join(dict.fromkeys([best.detail, *others]))
    detail = f"labeller [{', '.join(rules_seen)}]: {seen}"
    repaired, why, seen_repair = g.repair(rules.signal_quiet)
    if repaired is not None and repaired > until and not seen_repair:
        repaired = None  # the quiet period is not over yet
    at = g.at
    return LabelledFailure(
        g.members[0].node_id,
        at,
        best.cause,
        _cut(detail),
        rules_seen,
        repaired,
        _cut(f"labeller: {why}, {minutes(repaired - at)} after the failure") if repaired else "",
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
    for c in sorted(standalone, key=lambda c: (c.at, -RULE_RANK[c.rule])):
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
            c.shielded_by = shield(c, windows)
        result.candidates.extend(sorted(cands, key=lambda c: (c.at, c.rule)))
        kept = [c for c in cands if c.shielded_by is None]
        result.failures.extend(merge_candidates(kept, until, rules))
    return result
