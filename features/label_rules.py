"""The labeller's settings and records: :class:`LabelRules` (every rule's default), the
rule names in the order their causes win, one rule's evidence (:class:`Candidate`) and
one labelled failure (:class:`LabelledFailure`). The rules themselves are described in
:mod:`predops.features.labeller`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

NODE = "node_id"
RULES: tuple[str, ...] = (
    "ticket",
    "gpu_xid",
    "gpu_ecc",
    "node_problem",
    "ready",
    "gpu_xid_counter",
)
"""Every rule, most specific first: a merged failure takes the cause of the first."""
RULE_RANK = {r: len(RULES) - i for i, r in enumerate(RULES)}
SHIELD_KINDS = ("maintenance", "planned_drain", "predops")


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
        return 0 if self.cause == "unknown" else RULE_RANK[self.rule]


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


def minutes(d: timedelta) -> str:
    """A duration as an operator reads it: ``45 min``, ``3.5 h``."""
    m = d.total_seconds() / 60
    return f"{m:.0f} min" if m < 120 else f"{m / 60:.1f} h"
