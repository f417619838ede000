"""The labeller's failures as ``events`` rows, what is new against what is stored, and
how well labels match a known truth.

- :func:`new_events`: ``failure`` / ``repair`` rows (EVENTS columns) for the labelled
  failures the stored labeller events do not hold yet. A failure overlapping a stored
  one of its node (starting within ``dedup_window`` of it, or while it is on) is that
  failure: nothing is added for it but its repair when the stored one has none. So a
  re-run adds nothing, and new inputs (a ticket exported later, with an earlier time)
  do not duplicate a failure already labelled.
- :func:`match_failures`: labelled vs true failures of the same nodes, one to one,
  within a tolerance: precision (labels matching a true failure) and recall (true
  failures matched).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.schemas import EVENTS
from predops.features.label_rules import NODE, LabelledFailure, LabelRules

_FAR = timedelta(days=36500)


def _stored_intervals(stored: pl.DataFrame) -> dict[str, list[list[Any]]]:
    """Per node, stored failures as [at, repaired_at or None] in time order."""
    out: dict[str, list[list[Any]]] = {}
    rows = stored.filter(pl.col("kind").is_in(["failure", "repair"])).sort(NODE, "at", "kind")
    for node, kind, at in rows.select(NODE, "kind", "at").iter_rows():
        spans = out.setdefault(node, [])
        if kind == "failure":
            spans.append([at, None])
        elif spans and spans[-1][1] is None and at >= spans[-1][0]:
            spans[-1][1] = at
    return out


def new_events(
    failures: list[LabelledFailure],
    stored: pl.DataFrame,
    rules: LabelRules,
    *,
    since: datetime | None = None,
) -> pl.DataFrame:
    """EVENTS rows to add: failures starting at or after ``since`` (None: all) that
    ``stored`` (the labeller's events already in the lake: node_id, kind, at) does not
    hold, with their repairs, and the repairs stored open failures were missing."""
    spans = _stored_intervals(stored)
    rows: list[tuple[str, str, datetime, str, str]] = []
    for f in sorted(failures, key=lambda f: (f.node_id, f.at)):
        f_end = f.repaired_at or f.at + _FAR
        match = None
        for s in spans.get(f.node_id, []):
            s_end = s[1] or s[0] + _FAR
            if (
                abs(f.at - s[0]) <= rules.dedup_window
                or (s[0] <= f.at <= s_end)
                or (f.at <= s[0] <= f_end)
            ):
                match = s
                break
        if match is not None:
            if match[1] is None and f.repaired_at is not None and f.repaired_at >= match[0]:
                rows.append((f.node_id, "repair", f.repaired_at, f.cause, f.repair_detail))
                match[1] = f.repaired_at
            continue
        if since is not None and f.at < since:
            continue
        rows.append((f.node_id, "failure", f.at, f.cause, f.detail))
        if f.repaired_at is not None:
            rows.append((f.node_id, "repair", f.repaired_at, f.cause, f.repair_detail))
    return pl.DataFrame(rows, schema=EVENTS.polars_schema(), orient="row")


def failures_frame(failures: list[LabelledFailure]) -> pl.DataFrame:
    """Labelled failures as a frame: node_id, at, cause, rules (comma-separated),
    repaired_at, detail."""
    return pl.DataFrame(
        {
            NODE: [f.node_id for f in failures],
            "at": [f.at for f in failures],
            "cause": [f.cause for f in failures],
            "rules": [",".join(f.rules) for f in failures],
            "repaired_at": [f.repaired_at for f in failures],
            "detail": [f.detail for f in failures],
        },
        schema={
            NODE: pl.String,
            "at": EVENTS.column("at").dtype,
            "cause": pl.String,
            "rules": pl.String,
            "repaired_at": EVENTS.column("at").dtype,
            "detail": pl.String,
        },
    )


@dataclass(frozen=True, slots=True)
class Match:
    """Labels vs truth: counts, precision, recall, and the matched pairs' indices."""

    labels: int
    truths: int
    matched: int
    pairs: tuple[tuple[int, int], ...]

    @property
    def precision(self) -> float:
        return self.matched / self.labels if self.labels else float("nan")

    @property
    def recall(self) -> float:
        return self.matched / self.truths if self.truths else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "truths": self.truths,
            "matched": self.matched,
            "precision": round(self.precision, 4) if self.labels else None,
            "recall": round(self.recall, 4) if self.truths else None,
        }


def match_failures(labels: pl.DataFrame, truth: pl.DataFrame, tolerance: timedelta) -> Match:
    """Match labels to true failures (both: node_id, at) of the same node within
    ``tolerance`` either way, one to one: each true failure in time order takes the
    closest unmatched label in reach. Indices in ``pairs`` are row numbers of the
    frames as given."""
    lab = labels.select(NODE, "at").with_row_index("__i")
    tru = truth.select(NODE, "at").with_row_index("__i")
    by_node: dict[str, list[tuple[datetime, int]]] = {}
    for i, node, at in lab.select("__i", NODE, "at").iter_rows():
        by_node.setdefault(node, []).append((at, i))
    used: set[int] = set()
    pairs = []
    for j, node, at in tru.sort("at").select("__i", NODE, "at").iter_rows():
        best = None
        for t, i in by_node.get(node, []):
            d = abs(t - at)
            if i not in used and d <= tolerance and (best is None or d < best[0]):
                best = (d, i)
        if best is not None:
            used.add(best[1])
            pairs.append((best[1], j))
    return Match(lab.height, tru.height, len(pairs), tuple(sorted(pairs)))
