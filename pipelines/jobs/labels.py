"""The labeller job: ``failure`` / ``repair`` events from the lake's raw signals, and
the label source training reads.

:func:`label_lake` reads the lake's telemetry (``node_ready``, ``ecc_dbe_total``,
``xid_errors_total``) and events of every source but the labeller's own, plus the
executed cordons, drains and uncordons of the audit log (predops' own actions: cause =
the owner), runs the rules of :mod:`predops.features.labeller` and writes the new
events to the lake under source ``labeller`` through the ingest path (validation, one
commit). Stored labeller events are compared first (:func:`~predops.features.
labelled_events.new_events`), so a re-run adds nothing.

Bounded memory: nodes go in chunks of ``chunk_nodes`` consecutive ids (the lake's files
are sorted by node, so a chunk's scan can skip other row groups by their statistics);
each chunk's rows are read lazily from ``since - rules.context``, reduced to Ready
changes and counter increases, labelled and handed to the writer before the next is
read. Peak memory is one chunk's telemetry, whatever the fleet size: about 150 bytes per
row read on top of the ~200 MB the imports take (``benchmarks/bench_labels.py``: 2,000
nodes x 7 days, 250-node chunks 284 MiB, one chunk 752 MiB). At 10,000 nodes of
5-minute samples with the default 250-node chunks that is ~200 MB + 11 MB per day read:
``since`` a day back reads ~50 h (with ``rules.context``), ~225 MB; a whole 90-day
history ~1.2 GB, so scheduled runs should pass ``since``.

The label source (:func:`label_source`): once the lake holds labeller events, features
and training labels read ``failure`` / ``repair`` events from source ``labeller`` only,
so ground truth a simulator wrote (source ``synthetic``) or tickets (already merged by
the labeller) are never counted twice; before that, every source's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.clock import Clock
from predops.core.schemas import EVENTS
from predops.features.label_rules import NODE, RULES, LabelRules
from predops.features.label_signals import TELEMETRY_COLUMNS
from predops.features.labelled_events import new_events
from predops.features.labeller import label_nodes
from predops.features.labels import select_label_events
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.lake import Lake

LABEL_SOURCE = "labeller"
CHUNK_NODES = 250
AUDIT_SOURCE = "audit"
NO_FUTURE_CHECK = timedelta(days=36500)
_ACTION_KINDS = ("cordon", "drain", "uncordon")


def label_source(lake: Lake) -> str | None:
    """The declared label source: ``labeller`` once the lake holds its events, else
    None (every source)."""
    return LABEL_SOURCE if lake.files("events", LABEL_SOURCE) else None


def training_events(lake: Lake) -> pl.LazyFrame:
    """The lake's events as features and labels read them (see :func:`label_source`)."""
    return select_label_events(lake.scan("events"), label_source(lake))


def predops_actions(entries: Iterable[dict[str, Any]], owner: str) -> pl.DataFrame:
    """Executed cordons, drains and uncordons of the audit log as events (cause =
    ``owner``, source ``audit``): ``started`` or ``done`` in ``execute`` mode."""
    rows = []
    for e in entries:
        what = e.get("what") or {}
        kind, target = what.get("kind"), what.get("target")
        if kind not in _ACTION_KINDS or not target or e.get("mode") != "execute":
            continue
        if e.get("outcome") not in ("started", "done"):
            continue
        try:
            at = datetime.fromisoformat(str(e["at"]))
        except (KeyError, ValueError):
            continue
        rows.append((target, kind, at, owner, f"predops {kind} (audit log)", AUDIT_SOURCE))
    schema = pl.Schema({**EVENTS.polars_schema(), "source": pl.String()})
    return pl.DataFrame(rows, schema=schema, orient="row").unique(keep="first")


@dataclass(slots=True)
class _Tally:
    chunks: int = 0
    nodes: int = 0
    failures: int = 0
    repairs_open: int = 0
    new_failures: int = 0
    new_repairs: int = 0
    unshielded: Counter[str] = field(default_factory=Counter)
    shielded: dict[str, Counter[str]] = field(default_factory=dict)
    causes: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)


EVENT_COLUMNS = (*EVENTS.names, "source")


def _raw_events(lake: Lake) -> pl.LazyFrame:
    return lake.scan("events").filter(pl.col("source") != LABEL_SOURCE).select(EVENT_COLUMNS)


def node_ids(lake: Lake, audit: pl.DataFrame, start: datetime | None = None) -> list[str]:
    """Every node with telemetry or raw events (at or after ``start``), sorted; the
    streaming engine holds only the distinct ids."""
    tel, ev = lake.scan("telemetry"), _raw_events(lake)
    if start is not None:
        tel, ev = tel.filter(pl.col("ts") >= start), ev.filter(pl.col("at") >= start)
    parts = [tel.select(NODE), ev.select(NODE), audit.lazy().select(NODE)]
    ids = pl.concat(parts).unique().collect(engine="streaming")
    return sorted(ids[NODE].to_list())


def _chunks(ids: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


def label_batches(
    lake: Lake,
    *,
    rules: LabelRules,
    since: datetime | None,
    audit: pl.DataFrame,
    chunk_nodes: int,
    tally: _Tally,
) -> Iterator[Batch]:
    """One ``events`` batch of new labeller rows per chunk of nodes."""
    start = None if since is None else since - rules.context
    ids = node_ids(lake, audit, start)
    for k, chunk in enumerate(_chunks(ids, chunk_nodes)):
        lo, hi = chunk[0], chunk[-1]
        mine = pl.col(NODE).is_between(pl.lit(lo), pl.lit(hi))
        tel = lake.scan("telemetry").filter(mine).select(TELEMETRY_COLUMNS)
        ev = pl.concat(
            [_raw_events(lake).filter(mine), audit.lazy().select(EVENT_COLUMNS).filter(mine)]
        )
        if start is not None:
            tel = tel.filter(pl.col("ts") >= start)
            ev = ev.filter(pl.col("at") >= start)
        res = label_nodes(tel, ev, rules)
        stored = lake.scan("events", LABEL_SOURCE).filter(mine).select(NODE, "kind", "at")
        new = new_events(res.failures, stored.collect(), rules, since=since)
        tally.chunks, tally.nodes = k + 1, tally.nodes + len(chunk)
        tally.ignored.update(res.ignored)
        for c in res.candidates:
            if c.shielded_by is None:
                tally.unshielded[c.rule] += 1
            else:
                tally.shielded.setdefault(c.rule, Counter())[c.shielded_by] += 1
        for f in res.failures:
            if since is None or f.at >= since:
                tally.failures += 1
                tally.causes[f.cause] += 1
                tally.repairs_open += f.repaired_at is None
        kinds = new["kind"].value_counts()
        counts = dict(zip(kinds["kind"].to_list(), kinds["count"].to_list(), strict=True))
        tally.new_failures += counts.get("failure", 0)
        tally.new_repairs += counts.get("repair", 0)
        yield Batch("events", new, origin=f"labeller chunk {k + 1} ({lo} .. {hi})")


def label_lake(
    lake: Lake,
    *,
    clock: Clock,
    rules: LabelRules | None = None,
    since: datetime | None = None,
    audit_entries: Iterable[dict[str, Any]] = (),
    chunk_nodes: int = CHUNK_NODES,
    write: bool = True,
) -> dict[str, Any]:
    """Label the lake's failures and repairs; write the new ones under ``labeller``
    (``write=False``: only report). ``since``: label failures starting at or after it
    (the inputs are read from ``since - rules.context``). Returns the JSON report."""
    if chunk_nodes < 1:
        raise ValueError("chunk_nodes must be at least 1")
    rules = rules or LabelRules()
    t0 = time.perf_counter()
    audit = predops_actions(audit_entries, rules.owner)
    tally = _Tally()
    batches = label_batches(
        lake, rules=rules, since=since, audit=audit, chunk_nodes=chunk_nodes, tally=tally
    )
    written: dict[str, Any] = {"rows_written": 0, "rows_already_present": 0}
    if write:
        report = ingest(
            lake,
            LABEL_SOURCE,
            batches,
            clock=clock,
            input_name=f"labeller:since={since.isoformat() if since else 'all'}",
            # The labels lie where the lake's data lies, which the ingest of that data
            # accepted (a simulated fleet may run past the wall clock).
            future_tolerance=NO_FUTURE_CHECK,
            check_entities=False,
        )
        t = report.tables.get("events")
        if t is not None:
            written = {
                "rows_written": t.rows_written,
                "rows_already_present": t.rows_already_present,
                "rows_quarantined": t.rows_quarantined,
            }
    else:
        for _ in batches:
            pass
    return {
        "source": LABEL_SOURCE,
        "rules": rules.to_dict(),
        "since": since.isoformat() if since else None,
        "chunk_nodes": chunk_nodes,
        "chunks": tally.chunks,
        "nodes": tally.nodes,
        "predops_actions": audit.height,
        "failures": tally.failures,
        "failures_open": tally.repairs_open,
        "failures_by_cause": dict(sorted(tally.causes.items())),
        "candidates": {
            r: {
                "unshielded": tally.unshielded.get(r, 0),
                "shielded": dict(tally.shielded.get(r, {})),
            }
            for r in RULES
        },
        "ignored_signals": dict(sorted(tally.ignored.items())),
        "new_events": {"failure": tally.new_failures, "repair": tally.new_repairs},
        "events": written,
        "written": write,
        "seconds": round(time.perf_counter() - t0, 2),
    }
