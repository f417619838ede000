"""The ``predops`` command.

Every subcommand that reports something takes ``--json`` and then prints exactly one
JSON object on stdout (progress goes to stderr). Failures exit non-zero with a message
that names the file, row or field; with ``--json`` the message is also the object
``{"error": ..., "type": ...}`` on stdout.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import polars as pl

from predops.pipelines.cli import colocation, demand, failure, labels, spares, text, usage
from predops.pipelines.cli.allocator import allocator_group
from predops.pipelines.cli.bootstrap import bootstrap_command
from predops.pipelines.cli.lake import LAKE_COMMANDS
from predops.pipelines.cli.models import (
    MODEL_VERBS,
    eval_group,
    forecast_group,
    models_group,
    score_group,
    train_group,
)
from predops.pipelines.cli.plan import PLAN_COMMANDS
from predops.pipelines.cli.schedule import schedule_group
from predops.pipelines.cli.serve import serve_command
from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    key_values,
    lightgbm_env,
    parse_duration,
    parse_time,
    reports,
    show_progress,
)
from predops.pipelines.cli.whatif import simulate_ops_command
from predops.pipelines.workspace.clock import SystemClock
from predops.pipelines.workspace.errors import LakeError
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import load_settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    default=None,
    help="Where predops writes (lake, MLflow store, plans, audit log). "
    "Default: $PREDOPS_WORKSPACE or ./workspace.",
)
@click.pass_context
def main(ctx: click.Context, workspace: str | None) -> None:
    """predops: predictive operations for large compute clusters."""
    lightgbm_env()  # every command may train or score (demo, schedule, simulate-ops, plan)
    ctx.obj = load_settings(workspace)


# ---------------------------------------------------------------- simulate
@main.command()
@click.option("--nodes", type=click.IntRange(1), default=200, show_default=True)
@click.option("--days", type=click.FloatRange(min=0, min_open=True), default=14, show_default=True)
@click.option("--interval", default="5m", show_default=True, help="Telemetry interval.")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--start", default="2026-01-05", show_default=True, help="First simulated instant (UTC)."
)
@json_option
@reports
def simulate(nodes: int, days: float, interval: str, seed: int, start: str, as_json: bool) -> None:
    """Simulate a fleet (topology, telemetry, failures, pods, demand) into the lake."""
    from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake

    cfg = SimConfig(
        nodes=nodes,
        days=days,
        interval=parse_duration(interval),
        seed=seed,
        start=parse_time(start),
    )
    lake = Lake(current_settings().lake_dir)
    summary = simulate_to_lake(lake, cfg, clock=SystemClock(), progress=show_progress())
    emit(summary, as_json, lambda s: json.dumps(s, indent=2, default=str))


# ---------------------------------------------------------------- ingest
class IngestCommand(click.Command):
    """``ingest --help`` ends with every source: the PATH it expects, an example and
    the -o keys the adapter itself declares (read from the adapter, so they never drift)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from predops.core.schemas import SCHEMAS
        from predops.pipelines.ingest.registry import ADAPTERS, USAGE, option_keys

        with formatter.section("Sources (SOURCE: the PATH it expects)"):
            for name in ADAPTERS:
                what, example = USAGE[name]
                formatter.write_text(f"{name}: {what}")
                with formatter.indentation():
                    keys = option_keys(name)
                    if name == "files":
                        formatter.write_text(f"--table: {', '.join(sorted(SCHEMAS))}")
                    if keys:
                        formatter.write_text(f"-o keys: {', '.join(keys)}")
                    formatter.write_text(f"e.g. {example}")


@main.command(cls=IngestCommand)
@click.argument("source")
@click.argument("path")
@click.option("--table", default=None, help="Table the input holds (files source).")
@click.option("--source-name", default=None, help="Lake source name (default: the adapter's).")
@click.option("--start", default=None, help="Range start (Prometheus), ISO-8601.")
@click.option("--end", default=None, help="Range end (Prometheus), ISO-8601.")
@click.option("--step", default=None, help="Range step (Prometheus), e.g. 5m.")
@click.option(
    "--earliest",
    default=None,
    help="Oldest timestamp accepted, ISO-8601; older rows are quarantined. Default: 1990-01-01.",
)
@click.option(
    "-o",
    "--option",
    "extra",
    multiple=True,
    metavar="KEY=VALUE",
    help="Adapter-specific option; repeatable.",
)
@json_option
@reports
def ingest(
    source: str,
    path: str,
    table: str | None,
    source_name: str | None,
    start: str | None,
    end: str | None,
    step: str | None,
    earliest: str | None,
    extra: tuple[str, ...],
    as_json: bool,
) -> None:
    """Validate SOURCE at PATH (file, directory or URL) and write it to the lake.

    Each source, the PATH it expects and its -o options are listed below.

    Prometheus limits: -o request_deadline=2m (one request's whole answer; at
    least twice -o timeout), -o ingest_deadline=15m (all requests of this ingest
    together), -o max_response_bytes=64MiB (one answer); -o timeout=60s is the
    longest silence.
    Credentials in the URL (user:password@, ?token=) are used, and masked in every
    message and record. Prometheus node names are reconciled with the source's
    inventory (-o node_map=FILE.csv of alias,node_id; -o inventory_source=SOURCE);
    the report's identity says how.
    """
    from predops.core.redaction import redact_url
    from predops.core.validation import EARLIEST_TS
    from predops.pipelines.cli.progress import ingest_batches
    from predops.pipelines.ingest.identity import known_nodes
    from predops.pipelines.ingest.registry import IngestOptions, adapter
    from predops.pipelines.ingest.run import file_digest
    from predops.pipelines.ingest.run import ingest as run_ingest

    mod = adapter(source)
    pairs = key_values(extra)
    clock = SystemClock()
    lake = Lake(current_settings().lake_dir)
    writes = source_name or mod.SOURCE
    opts = IngestOptions(
        clock=clock,
        table=table,
        start=parse_time(start) if start else None,
        end=parse_time(end) if end else None,
        step_s=parse_duration(step).total_seconds() if step else None,
        extra=pairs,
        source=writes,
        inventory=lambda name: known_nodes(lake, name),
    )
    name = redact_url(path)  # the report, the ingest log and quarantine rows quote it
    read = ingest_batches(mod.read(path, opts), f"[ingest {source}] {Path(name).name}")
    report = run_ingest(
        lake,
        writes,
        read,
        clock=clock,
        input_name=name,
        earliest=parse_time(earliest) if earliest else EARLIEST_TS,
    )
    out = report.to_dict()
    written = {t for t, r in report.tables.items() if r.rows_written}
    if written & {"telemetry", "demand", "events", "inventory"}:
        out["online"] = _refresh_online(lake)
    local = Path(path)
    if local.exists():
        out["input_sha256"] = file_digest(local)
    emit(out, as_json, _human_ingest)


def _refresh_online(lake_: Lake) -> dict[str, Any]:
    """Materialise the online latest features after new data lands."""
    from predops.pipelines.jobs.features import materialise_online
    from predops.pipelines.workspace.feature_store import FeatureStore

    t = lake_.scan("telemetry").select(pl.col("ts").max()).collect().item()
    d = lake_.scan("demand").select(pl.col("ts").max()).collect().item()
    as_of = max((x for x in (t, d) if x is not None), default=None)
    if as_of is None:
        return {}
    return materialise_online(lake_, FeatureStore(current_settings().features_dir), as_of=as_of)


def _human_ingest(r: dict[str, Any]) -> str:
    lines = [f"ingested {r['input']} as source {r['source']}"]
    for name, t in r["tables"].items():
        lines.append(
            f"  {name:<15} in {t['rows_in']:>10,}  written {t['rows_written']:>10,}  "
            f"already present {t['rows_already_present']:>10,}  "
            f"quarantined {t['rows_quarantined']:>8,}"
        )
    if ident := r.get("identity"):
        inv = f"inventory {ident['inventory']!r}" if ident["inventory"] else "no inventory"
        lines.append(
            f"  identity ({inv}): {ident['mapped']:,} label value(s) mapped to "
            f"{ident['nodes']:,} node(s), {ident['unmatched']:,} unmatched"
        )
        lines += [f"    e.g. {e['labels']}: {e['why']}" for e in ident["examples"]]
    return "\n".join(lines)


# ---------------------------------------------------------------- lake
@main.group()
def lake() -> None:
    """Inspect and maintain the Parquet lake."""


@lake.command("stats")
@json_option
@reports
def lake_stats(as_json: bool) -> None:
    """Rows, partitions, sources, time range and quarantined rows per table."""
    settings = current_settings()
    stats = Lake(settings.lake_dir).stats()
    emit({"lake": str(settings.lake_dir), "tables": stats}, as_json, _human_stats)


def _human_stats(s: dict[str, Any]) -> str:
    lines = [f"lake at {s['lake']}"]
    if not s["tables"]:
        lines.append("  (empty)")
    for name, t in s["tables"].items():
        lines.append(
            f"  {name:<15} rows {t['rows']:>12,}  partitions {t['partitions']:>5}  "
            f"quarantined {t['quarantined_rows']:>8,}  {t['time_min']} .. {t['time_max']}  "
            f"sources: {', '.join(t['sources'])}"
        )
        for c in t.get("corrupt_files", []):
            lines.append(f"    CORRUPT {c['file']} -> {c['moved_to']}: {c['reason']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- features
@main.group()
def features() -> None:
    """Build and read feature frames (offline for training, online latest values)."""


@features.command("build")
@click.option(
    "--as-of",
    "as_of",
    default=None,
    help="Cutoff (ISO-8601). Default: the latest telemetry time in the lake.",
)
@click.option("--every", default="1h", show_default=True, help="Training row cadence.")
@click.option("--since", default=None, help="First training row time (ISO-8601).")
@click.option(
    "--ingestion-delay",
    default="0s",
    show_default=True,
    help="How long after ts a sample is assumed visible.",
)
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True)
@click.option("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://host:8786.")
@click.option(
    "--negative-rate",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=None,
    help="Share of label-negative node rows kept outside the last 9 days (seeded rule; "
    "1 keeps every row). Default: 1, or the failure model's 0.2 above 2,000,000 rows.",
)
@json_option
@reports
def features_build(
    as_of: str | None,
    every: str,
    since: str | None,
    ingestion_delay: str,
    engine: str,
    scheduler: str | None,
    negative_rate: float | None,
    as_json: bool,
) -> None:
    """Write the node training frame (features + labels) and demand features as of a
    cutoff, then materialise the online latest values."""
    from predops.features.definitions import NodeFeatureSpec
    from predops.pipelines.jobs.features import build_features
    from predops.pipelines.workspace.feature_store import FeatureStore

    settings = current_settings()
    lake_ = Lake(settings.lake_dir)
    cutoff = parse_time(as_of) if as_of else _latest_telemetry(lake_)
    spec = NodeFeatureSpec(ingestion_delay=parse_duration(ingestion_delay))
    report = build_features(
        lake_,
        FeatureStore(settings.features_dir),
        as_of=cutoff,
        spec=spec,
        eval_every=parse_duration(every),
        since=parse_time(since) if since else None,
        engine=engine,
        scheduler=scheduler,
        negative_rate=negative_rate,
    )
    emit(report, as_json, _human_features)


def _latest_telemetry(lake_: Lake) -> datetime:
    t = lake_.scan("telemetry").select(pl.col("ts").max()).collect().item()
    if t is None:
        raise LakeError("the lake has no telemetry; run `predops simulate` or `predops ingest`")
    assert isinstance(t, datetime)
    return t


def _human_features(r: dict[str, Any]) -> str:
    lines = [f"features as of {r['as_of']} ({r['engine']}, {r['seconds']} s)"]
    if "nodes" in r:
        n = r["nodes"]
        lines.append(
            f"  nodes   {n['rows']:>10,} rows x {n['columns']} columns  "
            f"hash {n['feature_set_hash']}  labels {n['positive_rate']}"
        )
        rule = n.get("negative_sampling") or {}
        if rule.get("rate", 1.0) < 1.0:
            lines.append(
                f"          negatives kept at rate {rule['rate']} (seed {rule['seed']}) "
                f"before {rule['keep_from']}; every positive kept"
            )
    if "demand" in r:
        d = r["demand"]
        lines.append(
            f"  demand  {d['rows']:>10,} rows x {d['columns']} columns  "
            f"hash {d['feature_set_hash']}"
        )
    lines.append(f"  online  {r['online']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- demo
@main.command()
@click.option("--nodes", type=click.IntRange(1), default=200, show_default=True)
@click.option("--days", type=click.FloatRange(min=12), default=14, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--start",
    default=None,
    help="First simulated instant (UTC). Default: --days before now, so the "
    "simulated fleet is live and the served data fresh.",
)
@click.option(
    "--serve/--no-serve",
    default=True,
    show_default=True,
    help="Then serve the API and dashboards until Ctrl-C.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@json_option
@reports
def demo(
    nodes: int,
    days: float,
    seed: int,
    start: str | None,
    serve: bool,
    host: str,
    port: int,
    as_json: bool,
) -> None:
    """The main job on the embedded default: simulate a fleet into the lake, train and
    register both models, score, forecast and plan (the scheduled jobs, run once), then
    serve the dashboards."""
    from predops.pipelines.cli.demo import DemoFailed, run_demo

    settings = current_settings()
    if not as_json:
        click.echo(f"workspace: {settings.workspace}", err=True)
    try:
        out = run_demo(
            settings,
            nodes=nodes,
            days=days,
            seed=seed,
            progress=show_progress(),
            start=None if start is None else parse_time(start),
        )
    except DemoFailed as exc:
        raise click.ClickException(str(exc)) from None
    emit(out, as_json, _human_demo)
    if serve:
        from predops.pipelines.cli.serve import demo_server_config, run_server

        config, token_file = demo_server_config(settings)
        if token_file is not None:
            click.echo(
                f"predops: to approve plans in the dashboard, paste the operator token "
                f"from {token_file}",
                err=True,
            )
        run_server(settings, host=host, port=port, config=config)


def _human_demo(o: dict[str, Any]) -> str:
    lines = [f"data cutoff {o['cutoff']}"]
    for job, summary in o["jobs"].items():
        steps = ", ".join(f"{k} {v['status']}" for k, v in summary["steps"].items())
        lines.append(f"{job}: {summary['status']} ({steps})")
        if "plan" in summary:
            words = text.plan_summary(summary["plan"]["summary"])
            lines.append(f"  plan {summary['plan']['plan_id']}: {words}")
    lines.append("seconds: " + ", ".join(f"{k} {v}" for k, v in o["steps"].items()))
    return "\n".join(lines)


main.add_command(allocator_group)
for _cmd in LAKE_COMMANDS:
    lake.add_command(_cmd)
main.add_command(models_group)
main.add_command(schedule_group)
main.add_command(serve_command)
main.add_command(simulate_ops_command)
main.add_command(labels.label_command)
main.add_command(labels.inspect_command)
main.add_command(bootstrap_command)
# eval / train / forecast / score are shared by every model: each model's command is
# added to its verb here, explicitly.
eval_group.add_command(demand.eval_demand)
eval_group.add_command(failure.eval_failure)
eval_group.add_command(labels.eval_labels)
eval_group.add_command(spares.eval_spares)
eval_group.add_command(colocation.eval_colocation)
train_group.add_command(demand.train_demand)
train_group.add_command(failure.train_failure)
train_group.add_command(usage.train_usage)
forecast_group.add_command(demand.forecast_demand)
score_group.add_command(failure.score_failure)
for verb in MODEL_VERBS:
    main.add_command(verb)
for command in PLAN_COMMANDS:  # plan, apply
    main.add_command(command)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
