"""What every ``predops`` subcommand module shares: ``--json``, error reporting, parsing.

Kept apart from ``pipelines.cli`` so subcommand modules (allocator, models, ...) can use
it without importing the main command (which imports them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import wraps
from typing import Any, TypeVar

import click

from core.validation import SchemaError
from pipelines.ingest.batch import IngestError
from pipelines.lake import LakeError

F = TypeVar("F", bound=Callable[..., Any])
EXPECTED_ERRORS: tuple[type[Exception], ...] = (
    IngestError,
    SchemaError,
    LakeError,
    KeyError,
    ValueError,
    OSError,
)
"""Errors that are the input's or the environment's fault: one clear message, no trace."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def parse_duration(text: str) -> timedelta:
    """'30s', '5m', '1h', '2d', '1w' -> timedelta; a clear error otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration like 30s, 5m, 1h, 2d")
    return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])


def parse_time(text: str) -> datetime:
    """ISO-8601 date or time; naive values are UTC."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO-8601 time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def emit(obj: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], str]) -> None:
    """Exactly one JSON object on stdout with --json, else the human rendering."""
    if as_json:
        click.echo(json.dumps(obj, default=str, sort_keys=True))
    else:
        click.echo(human(obj))


def reports(fn: F) -> F:
    """Turn expected errors into one clear message (and a JSON object with --json)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": str(msg), "type": type(exc).__name__}))
            raise click.ClickException(str(msg)) from exc

    return wrapper  # type: ignore[return-value]
