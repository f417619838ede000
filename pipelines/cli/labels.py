"""``predops label`` and ``predops eval labels``: failure / repair labels from real signals.

- ``predops label [--since TS] [--dry-run] [--json]``: run the labeller over the
  workspace's lake (and its audit log) and write new ``failure`` / ``repair`` events
  under source ``labeller`` (:mod:`predops.pipelines.jobs.labels`).
- ``predops eval labels [--nodes N --days D --seed S] [--json]``: precision and recall of
  the labels on a simulated fleet against its true failures, per rule and overall
  (:mod:`predops.pipelines.jobs.label_evaluation`).

- ``predops inspect NODE [--outcome O --cause C --drained-at TS]``: record what the
  inspection of a drained node found, or list its records
  (:mod:`predops.pipelines.jobs.inspections`).

``predops.pipelines.cli.main`` registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import click

from predops.core.schemas import FAILURE_CAUSES, INSPECTION_OUTCOMES
from predops.features.label_rules import LabelRules
from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    parse_duration,
    parse_time,
    reports,
)

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULTS = LabelRules()


def _dur(td: timedelta) -> str:
    s = int(td.total_seconds())
    return f"{s // 3600}h" if s % 3600 == 0 else f"{s // 60}m"


def rule_options(fn: F) -> F:
    """The label rules' settings as options (defaults: :class:`LabelRules`)."""
    opts = [
        click.option("--grace", default=_dur(_DEFAULTS.grace), show_default=True,
                     help="NotReady at least this long is a failure."),
        click.option("--dedup-window", default=_dur(_DEFAULTS.dedup_window), show_default=True,
                     help="Signals of a node this close to a failure's start are that failure."),
        click.option("--signal-quiet", default=_dur(_DEFAULTS.signal_quiet), show_default=True,
                     help="A GPU signal failure is repaired after this long without one."),
        click.option("--planned-max", default=_dur(_DEFAULTS.planned_max), show_default=True,
                     help="A cordon or maintenance nothing ends shields at most this long."),
        click.option("--ticket-source", "ticket_sources", multiple=True,
                     default=_DEFAULTS.ticket_sources, show_default=True,
                     help="Lake source holding repair tickets (repeatable)."),
        click.option("--dbe-labels-alone", is_flag=True,
                     help="A DBE increase labels a failure on its own (default: it only "
                     "names the cause of one)."),
    ]  # fmt: skip
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _rules(kw: dict[str, Any]) -> LabelRules:
    return LabelRules(
        grace=parse_duration(kw.pop("grace")),
        dedup_window=parse_duration(kw.pop("dedup_window")),
        signal_quiet=parse_duration(kw.pop("signal_quiet")),
        planned_max=parse_duration(kw.pop("planned_max")),
        ticket_sources=tuple(kw.pop("ticket_sources")),
        dbe_labels_alone=kw.pop("dbe_labels_alone"),
    )


def _human_label(r: dict[str, Any]) -> str:
    lines = [
        f"labeller: {r['nodes']} nodes in {r['chunks']} chunk(s), {r['failures']} failures "
        f"({r['failures_open']} not repaired yet); new events {r['new_events']}; "
        f"{'written' if r['written'] else 'dry run'} ({r['seconds']} s)"
    ]
    for rule, c in r["candidates"].items():
        lines.append(f"  {rule:<16} candidates {c['unshielded']:>6}  shielded {c['shielded']}")
    if r["ignored_signals"]:
        lines.append(f"  not failures: {r['ignored_signals']}")
    return "\n".join(lines)


@click.command("label")
@click.option("--since", default=None, help="Label failures starting at or after (ISO-8601).")
@click.option("--chunk-nodes", type=click.IntRange(1), default=250, show_default=True,
              help="Nodes read and labelled at a time (bounds memory).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Report what would be written; write nothing.")
@rule_options
@json_option
@reports
def label_command(
    since: str | None, chunk_nodes: int, dry_run: bool, as_json: bool, **kw: Any
) -> None:
    """Label failures and repairs from the lake's raw signals (source ``labeller``)."""
    from predops.pipelines.jobs.labels import label_lake
    from predops.pipelines.workspace.audit import AuditLog
    from predops.pipelines.workspace.clock import SystemClock
    from predops.pipelines.workspace.lake import Lake

    settings = current_settings()
    rules = _rules(kw)
    audit = AuditLog(settings.audit_log, who="predops label")
    report = label_lake(
        Lake(settings.lake_dir),
        clock=SystemClock(),
        rules=rules,
        since=parse_time(since) if since else None,
        audit_entries=audit.entries(),
        chunk_nodes=chunk_nodes,
        write=not dry_run,
    )
    emit(report, as_json, _human_label)


def _human_eval(r: dict[str, Any]) -> str:
    o = r["overall"]
    lines = [
        f"{r['true_failures']} true failures, tolerance {r['tolerance_min']:g} min: "
        f"precision {o['precision']}, recall {o['recall']}, cause named {o['cause_named']} "
        f"(right {o['cause_right_when_named']})"
    ]
    for rule, m in r["per_rule"].items():
        lines.append(
            f"  {rule:<16} labels {m['labels']:>5}  precision {m['precision']}  "
            f"recall {m['recall']}"
        )
    return "\n".join(lines)


@click.command("labels")
@click.option("--nodes", type=click.IntRange(1), default=200, show_default=True)
@click.option("--days", type=click.FloatRange(min=1), default=14, show_default=True)
@click.option("--interval", default="5m", show_default=True, help="Telemetry interval.")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--start", default="2026-01-05", show_default=True)
@click.option("--tolerance", default="30m", show_default=True,
              help="A label within this of a true failure of the node matches it.")  # fmt: skip
@click.option("--no-variants", is_flag=True, help="Skip the grace sweep and the DBE variant.")
@rule_options
@json_option
@reports
def eval_labels(
    nodes: int,
    days: float,
    interval: str,
    seed: int,
    start: str,
    tolerance: str,
    no_variants: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """Precision and recall of the labeller on a simulated fleet, per rule and overall."""
    from predops.pipelines.jobs.label_evaluation import evaluate
    from predops.pipelines.synthetic.run import SimConfig

    cfg = SimConfig(
        nodes=nodes,
        days=days,
        interval=parse_duration(interval),
        seed=seed,
        start=parse_time(start),
    )
    report = evaluate(
        cfg, rules=_rules(kw), tolerance=parse_duration(tolerance), variants=not no_variants
    )
    emit(report, as_json, _human_eval)


def _human_inspect(r: dict[str, Any]) -> str:
    if "records" in r:
        lines = [f"{r['node_id']}: {len(r['records'])} inspection record(s)"]
        for x in r["records"]:
            lines.append(
                f"  {x['action']:<7} {x['drained_at']}  {x['outcome']:<15} "
                f"{x['cause'] or '':<10} recorded {x['recorded_at']} ({x['source']})"
            )
        return "\n".join(lines)
    return (
        f"{r['node_id']}: {r['action']} at {r['drained_at']} -> {r['outcome']}"
        f"{' (' + r['cause'] + ')' if r['cause'] else ''}, recorded {r['recorded_at']}"
    )


@click.command("inspect")
@click.argument("node")
@click.option("--outcome", type=click.Choice(sorted(INSPECTION_OUTCOMES)), default=None,
              help="What the inspection found. Without it: list the node's records.")  # fmt: skip
@click.option("--cause", type=click.Choice(sorted(FAILURE_CAUSES)), default=None,
              help="The fault found (with --outcome fault_found).")  # fmt: skip
@click.option("--drained-at", default=None,
              help="The drain inspected (ISO-8601). Default: the node's latest one.")  # fmt: skip
@click.option("--detail", default=None, help="Ticket id, what was done.")
@click.option("--at", default=None, help="Record as of this time (ISO-8601). Default: now.")
@json_option
@reports
def inspect_command(
    node: str,
    outcome: str | None,
    cause: str | None,
    drained_at: str | None,
    detail: str | None,
    at: str | None,
    as_json: bool,
) -> None:
    """Record what the inspection of NODE's drain or cordon found (the lake's
    ``inspections``, which failure labels read), or list NODE's records."""
    from predops.core.clock import FixedClock
    from predops.pipelines.jobs.inspections import node_records, record_outcome
    from predops.pipelines.workspace.clock import SystemClock
    from predops.pipelines.workspace.lake import Lake

    lake = Lake(current_settings().lake_dir)
    if outcome is None:
        if cause or drained_at or detail:
            raise click.UsageError("--cause, --drained-at and --detail go with --outcome")
        rows = node_records(lake, node)
        records = [
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items()}
            for r in rows.iter_rows(named=True)
        ]
        emit({"node_id": node, "records": records}, as_json, _human_inspect)
        return
    clock: Any = FixedClock(parse_time(at)) if at else SystemClock()
    report = record_outcome(
        lake,
        node,
        outcome,
        clock=clock,
        cause=cause,
        detail=detail,
        drained_at=parse_time(drained_at) if drained_at else None,
    )
    emit(report, as_json, _human_inspect)
