"""``predops models``: the MLflow registry from the command line.

``predops models list --json`` shows every ``predops.*`` model with versions, aliases and
tags; ``predops models promote <demand|node_failure> --json`` backtests challenger and
champion the same way and moves ``champion`` only if the challenger is better;
``predops models rollback <name> --json`` restores the previous champion.
Errors exit non-zero with one message (and ``{"error", "type"}`` on stdout with --json).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from core.validation import SchemaError
from pipelines.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
EXPECTED = (SchemaError, ValueError, KeyError, OSError)

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def reports(fn: F) -> F:
    """Expected errors become one clear message (and ``{"error", "type"}`` with --json).

    A copy of ``pipelines.cli.reports``: this module is imported by ``pipelines.cli``.
    """

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EXPECTED as exc:
            msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": msg, "type": type(exc).__name__}))
            raise click.ClickException(msg) from exc

    return wrapper  # type: ignore[return-value]


def current_settings() -> Settings:
    """The settings the ``predops`` group put on the context (or loaded fresh)."""
    obj = click.get_current_context().find_root().obj
    if isinstance(obj, Settings):
        return obj
    from pipelines.settings import load_settings

    return load_settings()


def emit(obj: Any, as_json: bool) -> None:
    click.echo(json.dumps(obj, default=str, sort_keys=True, indent=None if as_json else 2))


@click.group("models")
def models_group() -> None:
    """The model registry (MLflow): list, promote, roll back."""


@models_group.command("list")
@json_option
@reports
def list_cmd(as_json: bool) -> None:
    """Every registered predops model with versions, aliases and tags."""
    from pipelines import registry

    models = registry.list_models(uri=current_settings().mlflow_uri)
    emit({"models": models}, as_json)


@models_group.command("promote")
@click.argument("name")
@json_option
@reports
def promote_cmd(name: str, as_json: bool) -> None:
    """Backtest challenger vs champion of NAME; promote only a better challenger."""
    from pipelines import registry

    settings = current_settings()
    backtest = registry.backtest_for(name, settings)
    decision = registry.promote(name, backtest, uri=settings.mlflow_uri)
    emit(decision, as_json)


@models_group.command("rollback")
@click.argument("name")
@json_option
@reports
def rollback_cmd(name: str, as_json: bool) -> None:
    """Move NAME's champion back to the previous champion."""
    from pipelines import registry

    emit(registry.rollback(name, uri=current_settings().mlflow_uri), as_json)
