"""``predops eval|train|score failure``: node failure prediction from the command line.

- ``predops eval failure --source synthetic|backblaze-daily|backblaze-hds|nab --path P
  --json``: model vs logistic regression vs reactive rule (or, for ``nab``, the NAB
  score of the label-free detector), every metric, time-ordered splits.
- ``predops train failure --json``: fit on the workspace's node training frame, log and
  register ``predops.node_failure`` (alias ``challenger``).
- ``predops score failure --as-of TS --json``: the champion's risk for every node in the
  online store.

Importing this module attaches the ``failure`` subcommands to the shared verb groups;
``predops.pipelines.cli.main`` registers the shared verb groups of
:mod:`predops.pipelines.cli.models`.
"""

from __future__ import annotations

import json
from typing import Any

import click

from predops.pipelines.cli.engine import engine_client, engine_options
from predops.pipelines.cli.support import (
    current_settings,
    emit,
    finite_json,
    json_option,
    lightgbm_env,
    parse_duration,
    parse_time,
    reports,
)
from predops.pipelines.workspace.clock import SystemClock


def _human(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str)


@click.command("failure")
@click.option(
    "--source",
    type=click.Choice(
        ("synthetic", "backblaze-daily", "backblaze-hds", "nab", "lanl", "grid5000", "titan")
    ),
    required=True,
)
@click.option(
    "--path",
    default=None,
    help="Input in the source's format (synthetic: a workspace lake; default: simulate).",
)
@click.option("--nodes", type=click.IntRange(1), default=2000, show_default=True)
@click.option("--days", type=click.FloatRange(min=1), default=60, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--horizon", default=None, help="Backblaze label horizon (default 30d).")
@click.option("--stride", default=None, help="Backblaze row spacing (default 1d daily, 7d hds).")
@click.option(
    "--validation",
    is_flag=True,
    help="Backblaze, lanl, grid5000, titan: evaluate on a window inside the training rows "
    "(for tuning).",
)
@click.option(
    "--compare-strategies",
    is_flag=True,
    help="Synthetic: also fit one stacked model (horizon as a feature) and compare.",
)
@json_option
@reports
def eval_failure(
    source: str,
    path: str | None,
    nodes: int,
    days: float,
    seed: int,
    horizon: str | None,
    stride: str | None,
    validation: bool,
    compare_strategies: bool,
    as_json: bool,
) -> None:
    """Evaluate the failure model against both baselines (or NAB-score the detector)."""
    lightgbm_env()
    from predops.pipelines.cli.progress import stages
    from predops.pipelines.jobs import evaluation as fe

    clock = SystemClock()
    report: dict[str, Any]
    if source != "synthetic" and not path:
        raise click.BadParameter(f"--path is required for {source}", param_hint="--path")
    names = {"synthetic": ("read", "evaluate"), "nab": ("score",)}.get(source, ("read", "fit"))
    if source not in ("synthetic", "nab", "lanl", "grid5000", "titan"):
        names = ("read", "time split", "cohort split")  # Backblaze: both splits
    with stages(f"[eval failure] {source}", names) as stage:
        if source == "synthetic":
            stage("simulate" if not path else "read the lake")
            if path:
                from pathlib import Path

                from predops.pipelines.workspace.lake import Lake

                lake_root = Path(path) / "lake" if (Path(path) / "lake").is_dir() else Path(path)
                data = fe.lake_nodes(Lake(lake_root), source="synthetic")
            else:
                data = fe.synthetic_nodes(nodes=nodes, days=days, seed=seed)
            stage("fit and score per horizon")
            report = fe.evaluate_nodes(data, compare_strategies=compare_strategies)
        elif source in ("lanl", "grid5000", "titan"):
            from predops.pipelines.jobs.node_failure_evaluation import evaluate_node_failures

            report = evaluate_node_failures(source, path or "", validation=validation, stage=stage)
        elif source == "nab":
            stage("score the detector")
            report = fe.evaluate_nab(path or "", clock=clock)
        else:
            report = fe.evaluate_drives(
                source,
                path or "",
                clock=clock,
                horizon=parse_duration(horizon) if horizon else fe.DRIVE_HORIZON,
                stride=parse_duration(stride) if stride else None,
                validation=validation,
                stage=stage,
            )
    emit(finite_json({"source": source, "path": path, **report}), as_json, _human)


@click.command("failure")
@click.option("--strategy", type=click.Choice(("per_horizon", "stacked")), default=None)
@click.option("--backtest-days", type=click.FloatRange(min=1), default=7, show_default=True)
@engine_options
@click.option(
    "--max-rows",
    type=click.IntRange(1),
    default=None,
    help="Dask: fit on whole nodes (chosen by a stable hash) whose training rows fit N; "
    "the report says how many nodes and rows were kept.",
)
@json_option
@reports
def train_failure(
    strategy: str | None,
    backtest_days: float,
    engine: str,
    scheduler: str | None,
    workers: int,
    max_rows: int | None,
    as_json: bool,
) -> None:
    """Fit on the node training frame, log and register predops.node_failure."""
    lightgbm_env()
    from predops.models.failure.config import STRATEGY
    from predops.pipelines.jobs import failure as fj
    from predops.pipelines.workspace import registry

    settings = current_settings()
    registry.check_store(settings.mlflow_uri)  # fail before fitting, not after
    if max_rows is not None and engine != "dask":
        raise click.BadParameter("--max-rows needs --engine dask", param_hint="--max-rows")
    with engine_client(engine, scheduler, workers) as client:
        if client is None:
            report = fj.train(settings, strategy=strategy or STRATEGY, backtest_days=backtest_days)
        else:
            from predops.pipelines.jobs.distributed import train_failure as train_dask

            report = train_dask(
                settings,
                client,
                strategy=strategy or STRATEGY,
                backtest_days=backtest_days,
                max_rows=max_rows,
            )
    emit(finite_json(report), as_json, _human)


@click.command("failure")
@click.option("--as-of", "as_of", required=True, help="Scoring time (ISO-8601, UTC).")
@click.option("--max-age", default="30m", show_default=True, help="Older features are stale.")
@click.option(
    "--reasons-for",
    type=click.IntRange(0),
    default=200,
    show_default=True,
    help="Explain the N riskiest nodes per horizon (TreeSHAP costs ~1 ms per node and "
    "horizon); 0 = none; at least the node count = every node.",
)
@engine_options
@json_option
@reports
def score_failure(
    as_of: str,
    max_age: str,
    reasons_for: int,
    engine: str,
    scheduler: str | None,
    workers: int,
    as_json: bool,
) -> None:
    """Failure risk (with reasons) for every node from the champion."""
    lightgbm_env()
    from predops.pipelines.jobs import failure as fj

    with engine_client(engine, scheduler, workers) as client:
        report = fj.score(
            current_settings(),
            as_of=parse_time(as_of),
            max_age=parse_duration(max_age),
            reasons_for=reasons_for,
            client=client,
        )
    emit(finite_json(report), as_json, _human)
