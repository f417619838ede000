"""``predops eval|train|forecast demand``: demand forecasting from the command line.

- ``predops eval demand --source helios --path Earth_vcs/ --json``: rolling-origin
  backtest of the model and every baseline on any file in the format of
  ``../shared/data`` (read through the ingest adapter and validated; no lake needed),
  metrics per horizon bucket. ``--holdout 14d`` instead fits once before the last 14
  days and forecasts across them (the Philly protocol).
- ``predops train demand --config hourly|weekly --json``: fit on the lake's ``demand``
  table, backtest, log and register ``predops.demand.hourly`` (pool sizing) or
  ``predops.demand.weekly`` (procurement) in MLflow.
- ``predops forecast demand --config hourly|weekly --json``: Forecasts (p10/p50/p90 per
  series and horizon) from that model's champion, each with its provenance.
"""

from __future__ import annotations

import json
from typing import Any

import click

from predops.pipelines.cli.engine import engine_client, engine_options
from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    lightgbm_env,
    parse_duration,
    reports,
)
from predops.pipelines.workspace.clock import SystemClock

SOURCE_CHOICES = ("synthetic", "helios", "philly", "datacenter", "azure-vm", "openb")


def _summary(report: dict[str, Any]) -> str:
    lines = [f"{report.get('config')} backtest, {report.get('n_cutoffs')} cutoffs"]
    for model, buckets in report.get("metrics", {}).items():
        b = buckets.get("all", {})
        lines.append(
            f"  {model:20s} MASE {b.get('mase', float('nan')):.3f}  "
            f"sMAPE {b.get('smape', float('nan')):.1f}%  wQL {b.get('wql', float('nan')):.3f}  "
            f"cover {b.get('coverage', float('nan')):.2f}  "
            f"under {b.get('under_provisioning', float('nan')):.2f}"
        )
    lines.append("targets: " + json.dumps(report.get("targets", {}), default=str))
    return "\n".join(lines)


@click.command("demand")
@click.option("--source", type=click.Choice(SOURCE_CHOICES), required=True)
@click.option("--path", default=None, help="File or folder in the source's format.")
@click.option("--config", "config_name", type=click.Choice(("hourly", "weekly")), default="hourly")
@click.option("--horizon", type=click.IntRange(1), default=None, help="Max horizon, in steps.")
@click.option("--cutoffs", type=click.IntRange(1), default=5, show_default=True)
@click.option("--every", default=None, help="Gap between cutoffs (default: 1 day / 4 weeks).")
@click.option("--holdout", default=None, help="Fit once before the last DURATION, e.g. 14d.")
@click.option("--models", default=None, help="Comma-separated subset of models.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--days", type=float, default=None, help="Synthetic: days to simulate.")
@click.option(
    "--drop-last",
    default=None,
    help="Validation: cut DURATION off the end of each trace first (e.g. 5d).",
)
@engine_options
@json_option
@reports
def eval_demand(
    source: str,
    path: str | None,
    config_name: str,
    horizon: int | None,
    cutoffs: int,
    every: str | None,
    holdout: str | None,
    models: str | None,
    seed: int,
    days: float | None,
    drop_last: str | None,
    engine: str,
    scheduler: str | None,
    workers: int,
    as_json: bool,
) -> None:
    """Backtest the demand model and the baselines on SOURCE data at PATH."""
    lightgbm_env()
    from predops.models.demand.config import config_named
    from predops.pipelines.cli.progress import stages
    from predops.pipelines.jobs.demand import evaluate, load_source, with_horizon

    synthetic: dict[str, Any] = {"seed": seed}
    if days is not None:
        synthetic["days"] = days
    if config_name == "weekly" and days is None:
        synthetic["days"] = 7 * 130.0
    bar = stages(f"[eval demand] {source}", ("read", "backtest"))
    with bar as stage, engine_client(engine, scheduler, workers) as client:
        stage(f"read {source}")
        data = load_source(source, path, clock=SystemClock(), synthetic=synthetic)
        default_h = 24 if config_name == "hourly" else None
        config = with_horizon(config_named(config_name), horizon or default_h)
        stage(f"backtest {config_name}, {cutoffs} cutoffs" if not holdout else "holdout backtest")
        report = evaluate(
            data,
            config=config,
            cutoffs=cutoffs,
            every=parse_duration(every) if every else None,
            holdout=parse_duration(holdout) if holdout else None,
            models=tuple(m.strip() for m in models.split(",")) if models else None,
            seed=seed,
            drop_last=parse_duration(drop_last) if drop_last else None,
            client=client,
        )
    report = {"source": source, "path": path, **report}
    emit(report, as_json, _summary)


@click.command("demand")
@click.option("--config", "config_name", type=click.Choice(("hourly", "weekly")), default="hourly")
@click.option("--source", "lake_source", default=None, help="Only this lake source.")
@click.option("--backtest-cutoffs", type=click.IntRange(0), default=3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--method",
    type=click.Choice(("auto", "selected", "lightgbm")),
    default="auto",
    show_default=True,
    help="selected: LightGBM, ETS, Theta and seasonal naive weighted per series and "
    "horizon on windows before the cutoff; lightgbm: LightGBM alone; auto: selected "
    "when the history holds its windows.",
)
@json_option
@reports
def train_demand(
    config_name: str,
    lake_source: str | None,
    backtest_cutoffs: int,
    seed: int,
    method: str,
    as_json: bool,
) -> None:
    """Fit on the lake's demand, backtest, log and register predops.demand.<config>."""
    lightgbm_env()
    from predops.models.demand.config import config_named
    from predops.pipelines.jobs.demand import train
    from predops.pipelines.workspace import registry

    settings = current_settings()
    registry.check_store(settings.mlflow_uri)  # fail before fitting, not after
    out = train(
        settings,
        config=config_named(config_name),
        source=lake_source,
        backtest_cutoffs=backtest_cutoffs,
        seed=seed,
        method=method,
    )
    emit(out, as_json, lambda o: json.dumps(o, indent=2, default=str))


@click.command("demand")
@click.option("--alias", default="champion", show_default=True, help="Alias or version.")
@click.option("--config", "config_name", type=click.Choice(("hourly", "weekly")), default="hourly")
@click.option("--source", "lake_source", default=None, help="Only this lake source.")
@json_option
@reports
def forecast_demand(alias: str, config_name: str, lake_source: str | None, as_json: bool) -> None:
    """Forecasts with provenance from the champion (or --alias) of predops.demand.<config>."""
    lightgbm_env()
    from predops.pipelines.jobs.demand import forecast

    out = forecast(current_settings(), alias=alias, source=lake_source, horizon=config_name)

    def human(o: dict[str, Any]) -> str:
        head = (
            f"{o['model']} v{o['version']}: {len(o['forecasts'])} forecasts, {o['series']} series"
        )
        return head

    emit(out, as_json, human)
