"""``predops bootstrap``: bring predops up on a real cluster, day one.

1. ingest the inventory (and Ready, pods, PDBs) from Kubernetes (``--kubeconfig``, a
   file or ``in-cluster``);
2. backfill ``--days`` of telemetry from Prometheus, one ingest (one lake commit) per
   ``--chunk`` of time, oldest first — an interrupted bootstrap re-run adds only what is
   missing, since rows already stored are not written again;
3. the scheduler's ``retrain`` job, run once now with the training window set to the
   backfilled days and labels from the labeller (failures and repairs from Ready,
   node problems, GPU signals, tickets: :mod:`predops.pipelines.jobs.labels`), so the
   first models are trained on what the cluster recorded;
4. the ``pipeline`` job once (online features, scores, forecasts, a dry-run plan).

Then ``predops serve`` and ``predops schedule start`` run it; ``/readyz`` is 200 from the
first minute (it reports which models are missing). Each step's result is in the JSON
report; a step that cannot run (no demand series on a cluster without them) says why.
Progress goes to stderr.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    key_values,
    parse_duration,
    reports,
)
from predops.pipelines.workspace.clock import SystemClock

KUBERNETES_SOURCE = "kubernetes"
"""The lake source the Kubernetes adapter writes (its inventory names the nodes)."""


def _progress(msg: str) -> None:
    click.echo(f"[bootstrap] {msg}", err=True)


def _ingest(settings: Any, source: str, path: str, opts: Any, *, input_name: str) -> dict[str, Any]:
    from predops.core.redaction import redact_url
    from predops.pipelines.ingest.identity import known_nodes
    from predops.pipelines.ingest.registry import adapter
    from predops.pipelines.ingest.run import ingest
    from predops.pipelines.workspace.lake import Lake

    mod = adapter(source)
    lake = Lake(settings.lake_dir)
    opts = replace(opts, source=mod.SOURCE, inventory=lambda name: known_nodes(lake, name))
    report = ingest(
        lake,
        mod.SOURCE,
        mod.read(path, opts),
        clock=opts.clock,
        input_name=redact_url(input_name),
    )
    return report.to_dict()


def bootstrap(
    *,
    kubeconfig: str,
    prometheus: str,
    days: float,
    step: timedelta,
    chunk: timedelta,
    options: dict[str, str],
    config_path: Path | None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Run the bootstrap (see the module docstring); returns its report."""
    from predops.pipelines.ingest.registry import IngestOptions
    from predops.pipelines.scheduler.config import load_config
    from predops.pipelines.scheduler.context import JobContext
    from predops.pipelines.scheduler.runner import data_cutoff, run_steps
    from predops.pipelines.scheduler.steps import PIPELINE_STEPS, RETRAIN_STEPS
    from predops.pipelines.workspace.runs import RunStore

    settings = current_settings()
    clock = SystemClock()
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    # Query at whole steps of wall time, like the scheduler's ingest, so chunks meet
    # exactly and samples scraped on the step are read, not their neighbours.
    end = epoch + ((now or clock.now()) - epoch) // step * step
    out: dict[str, Any] = {"workspace": str(settings.workspace), "steps": {}}

    t = time.perf_counter()
    _progress(f"inventory from Kubernetes ({kubeconfig})")
    k8s = IngestOptions(clock=clock)
    out["kubernetes"] = _ingest(settings, "kubernetes", kubeconfig, k8s, input_name=kubeconfig)
    out["steps"]["kubernetes"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    start = end - timedelta(days=days)
    # Prometheus series are matched to the nodes Kubernetes just listed.
    options = {"inventory_source": KUBERNETES_SOURCE, **options}
    chunks: list[dict[str, Any]] = []
    lo = start
    while lo < end:
        hi = min(lo + chunk, end)
        _progress(f"telemetry {lo.isoformat()} .. {hi.isoformat()} from Prometheus")
        opts = IngestOptions(
            clock=clock, start=lo, end=hi, step_s=step.total_seconds(), extra=dict(options)
        )
        rep = _ingest(settings, "prometheus", prometheus, opts, input_name=prometheus)
        tel = rep["tables"].get("telemetry", {})
        chunks.append(
            {
                "start": lo.isoformat(),
                "end": hi.isoformat(),
                "rows_written": tel.get("rows_written", 0),
                "rows_already_present": tel.get("rows_already_present", 0),
                "rows_quarantined": tel.get("rows_quarantined", 0),
                **({"identity": rep["identity"]} if "identity" in rep else {}),
            }
        )
        lo = hi
    out["prometheus"] = {
        "chunks": chunks,
        "rows_written": sum(c["rows_written"] for c in chunks),
    }
    out["steps"]["prometheus"] = round(time.perf_counter() - t, 2)

    config = load_config(config_path, {})
    window = timedelta(days=days)
    config = replace(
        config,
        features=replace(config.features, training_window=window),
        retrain=replace(config.retrain, labels="labeller"),
    )
    ctx = JobContext(
        settings=settings, config=config, runs=RunStore(settings.scheduler_db), clock=clock
    )
    cutoff = data_cutoff(settings)
    if cutoff is None:
        raise click.ClickException(
            "Prometheus gave no telemetry for the backfilled days; check the URL, "
            "the node labels (-o node_label=...) and --days"
        )
    out["cutoff"] = cutoff.isoformat()
    out["jobs"] = {}
    for job, steps in (("retrain", RETRAIN_STEPS), ("pipeline", PIPELINE_STEPS)):
        t = time.perf_counter()
        _progress(f"{job} job as of {cutoff.isoformat()}")
        result = run_steps(ctx, job, cutoff, steps)
        out["steps"][job] = round(time.perf_counter() - t, 2)
        out["jobs"][job] = {
            "status": result["status"],
            "steps": {
                r.get("step", "?"): {k: r[k] for k in ("status", "rows", "error") if k in r}
                for r in result.get("steps", [])
            },
        }
    out["next"] = [
        "predops serve --config predops.toml   # API, dashboards, /metrics; /readyz is 200",
        "predops schedule start --config predops.toml   # the pipeline every few minutes",
    ]
    return out


@click.command("bootstrap")
@click.option(
    "--kubeconfig",
    required=True,
    help="Kubeconfig file or 'in-cluster': where the inventory, pods and PDBs come from.",
)
@click.option("--prometheus", required=True, help="Prometheus base URL to backfill from.")
@click.option("--days", type=float, default=14.0, show_default=True, help="Days to backfill.")
@click.option("--step", default="5m", show_default=True, help="Telemetry resolution.")
@click.option(
    "--chunk", default="1d", show_default=True, help="Backfill this much per ingest (commit)."
)
@click.option(
    "-o",
    "--option",
    "extra",
    multiple=True,
    metavar="KEY=VALUE",
    help="Prometheus adapter options (see `predops ingest --help`), repeatable.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="predops.toml (its [features], [retrain], [policy] apply; the training window "
    "is set to --days and labels come from the labeller).",
)
@json_option
@reports
def bootstrap_command(
    kubeconfig: str,
    prometheus: str,
    days: float,
    step: str,
    chunk: str,
    extra: tuple[str, ...],
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Day one on a real cluster: inventory from Kubernetes, DAYS of telemetry from
    Prometheus, labels, the first models, a first (dry-run) plan.

    Example: predops bootstrap --kubeconfig in-cluster --prometheus
    http://prometheus.monitoring:9090 --days 14
    """
    if days <= 0:
        raise click.BadParameter("must be positive", param_hint="--days")
    options = key_values(extra)
    out = bootstrap(
        kubeconfig=kubeconfig,
        prometheus=prometheus,
        days=days,
        step=parse_duration(step),
        chunk=parse_duration(chunk),
        options=options,
        config_path=config_path,
    )
    emit(out, as_json, _human)
    failed = [j for j, r in out["jobs"].items() if r["status"] not in ("done", "not_started")]
    if failed:
        sys.exit(2)


def _human(o: dict[str, Any]) -> str:
    lines = [f"bootstrapped {o['workspace']} (data up to {o.get('cutoff')})"]
    inv = o["kubernetes"]["tables"].get("inventory", {})
    lines.append(f"  inventory: {inv.get('rows_written', 0)} new rows from Kubernetes")
    lines.append(f"  telemetry: {o['prometheus']['rows_written']} new rows from Prometheus")
    for job, r in o["jobs"].items():
        lines.append(f"  {job}: {r['status']}")
        for name, s in r["steps"].items():
            lines.append(f"    {name:<18} {s.get('status')}")
    lines += ["next:", *(f"  {n}" for n in o["next"])]
    return "\n".join(lines)
