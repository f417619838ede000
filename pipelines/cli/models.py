"""``predops models``: the MLflow registry from the command line.

``predops models list --json`` shows every ``predops.*`` model with versions, aliases and
tags; ``predops models promote <demand|node_failure> --json`` backtests challenger and
champion the same way and moves ``champion`` only if the challenger is better;
``predops models rollback <name> --json`` restores the previous champion.
Errors exit non-zero with one message (and ``{"error", "type"}`` on stdout with --json).

The model verbs ``predops eval|train|forecast|score <model>`` are shared groups defined
here (:data:`MODEL_VERBS`); :mod:`predops.pipelines.cli.main` adds each model's command
to them explicitly, so two models never register rival ``train`` groups.
"""

from __future__ import annotations

from typing import Any

import click

from predops.pipelines.cli.support import current_settings, emit, json_option, reports
from predops.pipelines.cli.text import table


@click.group("models")
def models_group() -> None:
    """The model registry (MLflow): list, promote, roll back."""


@click.group("eval")
def eval_group() -> None:
    """Backtest a model and its baselines on a trace or the synthetic fleet."""


@click.group("train")
def train_group() -> None:
    """Train a model on the lake and register it in MLflow."""


@click.group("forecast")
def forecast_group() -> None:
    """Issue predictions from a registered model's champion."""


@click.group("score")
def score_group() -> None:
    """Score entities with a registered model's champion (e.g. ``score failure``)."""


MODEL_VERBS = (eval_group, train_group, forecast_group, score_group)


@models_group.command("list")
@json_option
@reports
def list_cmd(as_json: bool) -> None:
    """Every registered predops model with versions, aliases and tags."""
    from predops.pipelines.workspace import registry

    models = registry.list_models(uri=current_settings().mlflow_uri)
    emit({"models": models}, as_json, _human_models)


def _human_models(out: dict[str, Any]) -> str:
    """One table per model: its versions, with aliases, data cutoff and run."""
    if not out["models"]:
        return "no predops models registered (predops train failure|demand registers one)"
    blocks = []
    for m in out["models"]:
        rows = [
            {
                "version": v["version"],
                "aliases": ", ".join(v["aliases"]) or "-",
                "data cutoff": v["tags"].get("predops.data_cutoff", "-"),
                "run": v["run_id"],
            }
            for v in m["versions"]
        ]
        blocks.append("\n".join([f"{m['name']}:", *table(rows, "  ")]))
    return "\n\n".join(blocks)


@models_group.command("promote")
@click.argument("name")
@json_option
@reports
def promote_cmd(name: str, as_json: bool) -> None:
    """Backtest challenger vs champion of NAME; promote only a better challenger."""
    from predops.pipelines.jobs.promotion import promote

    emit(promote(name, current_settings()), as_json)


@models_group.command("rollback")
@click.argument("name")
@json_option
@reports
def rollback_cmd(name: str, as_json: bool) -> None:
    """Move NAME's champion back to the previous champion."""
    from predops.pipelines.workspace import registry

    emit(registry.rollback(name, uri=current_settings().mlflow_uri), as_json)
