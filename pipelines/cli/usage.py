"""``predops train usage``: the per-node usage model from the command line.

``predops train usage [--window 2h] [--training-window 14d] [--no-backtest] --json``
fits the CPU (and, when the telemetry has it, memory) peak-usage quantile forecaster
on the lake's node telemetry, backtests the same settings on the last day, and
registers ``predops.usage`` in MLflow (:mod:`predops.pipelines.jobs.usage`);
``predops models promote usage`` moves ``champion`` only for a challenger with a lower
holdout pinball loss. ``predops plan`` serves the champion's p50 / p95 / p99 per node
into the reclaimable-capacity decision.
"""

from __future__ import annotations

from typing import Any

import click

from predops.pipelines.cli.support import (
    current_settings,
    emit,
    json_option,
    lightgbm_env,
    parse_duration,
    reports,
)


def _human(report: dict[str, Any]) -> str:
    bt = report.get("backtest")
    line = f"{report['model']} v{report['version']} on {report['nodes']} nodes"
    line += f", window {report['window_hours']:g} h, resources {', '.join(report['resources'])}"
    if isinstance(bt, dict):
        cover = ", ".join(f"{k} {v:.3f}" for k, v in bt["coverage"].items())
        line += f"\n  holdout pinball {bt['loss']:.5f}; coverage {cover}"
    return line


@click.command("usage")
@click.option("--window", default="2h", show_default=True, help="Forecast window (<= 1d).")
@click.option("--training-window", default="14d", show_default=True, help="History fitted on.")
@click.option("--backtest/--no-backtest", default=True, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--n-estimators", type=click.IntRange(1), default=200, show_default=True)
@json_option
@reports
def train_usage(
    window: str,
    training_window: str,
    backtest: bool,
    seed: int,
    n_estimators: int,
    as_json: bool,
) -> None:
    """Fit on the lake's node telemetry, log and register predops.usage."""
    lightgbm_env()
    from predops.pipelines.jobs import usage as usage_jobs
    from predops.pipelines.workspace import registry

    settings = current_settings()
    registry.check_store(settings.mlflow_uri)  # fail before fitting, not after
    report = usage_jobs.train(
        settings,
        window=parse_duration(window),
        training_window=parse_duration(training_window),
        backtest=backtest,
        seed=seed,
        params={"n_estimators": n_estimators},
    )
    emit(report, as_json, _human)
