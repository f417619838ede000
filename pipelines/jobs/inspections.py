"""Inspection outcomes of predops' drains and cordons, in the lake's ``inspections``
table (:data:`core.schemas.INSPECTIONS`; how labels read them: :mod:`features.inspections`).

- :func:`record_applied`: ``predops apply --execute`` records every drain and cordon it
  ran as ``unknown``, at the time it ran;
- :func:`record_outcome`: ``predops inspect NODE --outcome ...`` records what the
  inspection of the node's latest drain (or of the drain at ``drained_at``) found;
- a repair-ticket export in the table's columns goes in with ``predops ingest files
  FILE --table inspections --source-name tickets`` (bad rows quarantined with their
  file, row and field, as every ingest);
- :func:`training_inspections`: what features and labels read (None while the lake has
  none, so a lake without inspections labels exactly as before).

Records are never rewritten: each is a row of its own (key node, drain, record time),
and the latest record at or before a label cutoff is the drain's outcome then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import polars as pl

from predops.core.clock import Clock
from predops.core.schemas import FAILURE_CAUSES, INSPECTION_OUTCOMES, INSPECTIONS
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.lake import Lake

SOURCE = "predops"
"""The lake source of the records predops itself writes."""
TABLE = INSPECTIONS.name


class InspectionError(ValueError):
    """An outcome that cannot be recorded (no drain of the node, a bad value)."""


def training_inspections(lake: Lake) -> pl.LazyFrame | None:
    """Every source's inspection records, as labels read them; None when there are none."""
    if not lake.files(TABLE):
        return None
    return lake.scan(TABLE).drop("source")


def _write(lake: Lake, rows: list[dict[str, Any]], clock: Clock, origin: str) -> dict[str, Any]:
    frame = pl.DataFrame(rows, schema=INSPECTIONS.polars_schema())
    report = ingest(
        lake, SOURCE, [Batch(TABLE, frame, origin=origin)], clock=clock, input_name=origin
    )
    t = report.tables[TABLE]
    return {
        "rows_written": t.rows_written,
        "rows_already_present": t.rows_already_present,
        "rows_quarantined": t.rows_quarantined,
    }


def record_applied(
    lake: Lake, actions: Iterable[Mapping[str, Any]], at: datetime, clock: Clock
) -> dict[str, Any]:
    """``unknown`` records for the drains and cordons an apply ran (``actions``: its
    report's, those with outcome ``done``), drained at ``at``."""
    rows = [
        {
            "node_id": a["target"],
            "drained_at": at,
            "action": a["kind"],
            "outcome": "unknown",
            "cause": None,
            "recorded_at": at,
            "detail": f"predops apply: {a.get('why') or a['kind']}"[:500],
        }
        for a in actions
        if a.get("kind") in ("drain", "cordon") and a.get("outcome") == "done"
    ]
    if not rows:
        return {"rows_written": 0, "rows_already_present": 0, "rows_quarantined": 0}
    return _write(lake, rows, clock, f"predops apply at {at.isoformat()}")


def node_records(lake: Lake, node: str) -> pl.DataFrame:
    """The node's inspection records, every source's, oldest drain first."""
    if not lake.files(TABLE):
        return INSPECTIONS.empty().with_columns(pl.lit(None, pl.String).alias("source"))
    return (
        lake.scan(TABLE)
        .filter(pl.col("node_id") == node)
        .sort("drained_at", "recorded_at")
        .collect()
    )


def record_outcome(
    lake: Lake,
    node: str,
    outcome: str,
    *,
    clock: Clock,
    cause: str | None = None,
    detail: str | None = None,
    drained_at: datetime | None = None,
) -> dict[str, Any]:
    """Record what the inspection of ``node``'s drain found: the drain at
    ``drained_at``, else the node's latest recorded drain at or before now."""
    if outcome not in INSPECTION_OUTCOMES:
        raise InspectionError(
            f"outcome {outcome!r} is not one of {', '.join(sorted(INSPECTION_OUTCOMES))}"
        )
    if cause is not None and cause not in FAILURE_CAUSES:
        raise InspectionError(f"cause {cause!r} is not one of {', '.join(sorted(FAILURE_CAUSES))}")
    if cause is not None and outcome != "fault_found":
        raise InspectionError(f"a cause goes with outcome fault_found, not {outcome}")
    now = clock.now()
    records = node_records(lake, node)
    if drained_at is None:
        past = records.filter(pl.col("drained_at") <= now)
        if not past.height:
            raise InspectionError(
                f"no drain or cordon of {node} is recorded in the lake's {TABLE}; "
                "pass --drained-at for a drain predops did not record"
            )
        last = past.row(-1, named=True)
        drained_at, action = last["drained_at"], last["action"]
    else:
        if drained_at > now:
            raise InspectionError(f"drained_at {drained_at.isoformat()} is after now")
        same = records.filter(pl.col("drained_at") == drained_at)
        action = same["action"][0] if same.height else "drain"
    row = {
        "node_id": node,
        "drained_at": drained_at,
        "action": action,
        "outcome": outcome,
        "cause": cause,
        "recorded_at": now,
        "detail": detail,
    }
    written = _write(lake, [row], clock, f"predops inspect {node}")
    if written["rows_quarantined"]:
        raise InspectionError(f"the record of {node} was refused (see the lake's quarantine)")
    return {
        "node_id": node,
        "drained_at": drained_at.isoformat(),
        "action": action,
        "outcome": outcome,
        "cause": cause,
        "recorded_at": now.isoformat(),
        **written,
    }
