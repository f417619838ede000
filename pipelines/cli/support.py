"""What every ``predops`` subcommand module shares: the workspace settings, ``--json``
output, error reporting, parsing.

Kept apart from :mod:`predops.pipelines.cli.main` so subcommand modules (allocator,
models, ...) can use it without importing the main command (which imports them).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from predops.core.redaction import redact_url
from predops.core.validation import SchemaError
from predops.pipelines.cli.text import render
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.workspace import timeparse
from predops.pipelines.workspace.errors import WorkspaceError
from predops.pipelines.workspace.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
EXPECTED_ERRORS: tuple[type[Exception], ...] = (
    IngestError,
    SchemaError,
    WorkspaceError,
    KeyError,
    ValueError,
    OSError,
)
"""Errors that are the input's or the environment's fault: one clear message, no trace."""

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def parse_duration(text: str) -> timedelta:
    """'30s', '5m', '1h', '2d', '1w' -> timedelta; a usage error otherwise."""
    try:
        return timeparse.parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_time(text: str) -> datetime:
    """ISO-8601 date or time; naive values are UTC; a usage error otherwise."""
    try:
        return timeparse.parse_time(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def current_settings() -> Settings:
    """The settings the ``predops`` group put on the context (or loaded fresh)."""
    obj = click.get_current_context().find_root().obj
    if isinstance(obj, Settings):
        return obj
    from predops.pipelines.workspace.settings import load_settings

    return load_settings()


def show_progress() -> bool:
    """Progress bars go to stderr, with ``--json`` or not, when stderr is a terminal (a
    pipe or a log file gets none: bars there are noise)."""
    return sys.stderr.isatty()


def lightgbm_env(cgroup: Path = Path("/sys/fs/cgroup")) -> None:
    """Call before lightgbm is first imported (the model jobs import it): OpenMP reads
    its environment once, when it loads.

    The thread count defaults to the CPU limit of the process's cgroup, rounded up,
    where one is set below the CPUs it may run on. OpenMP's default is those CPUs: in a
    pod limited to 2 CPUs on a 64-core node, 64 threads that the limit throttles.

    The wait policy is left to OpenMP: libgomp's default spins briefly at the end of a
    parallel region (a bounded count), then sleeps. ``passive`` (sleep at once) made
    every one of LightGBM's many small parallel regions per round a kernel wake-up: more
    CPU and more wall time for the same forecasts (docs/demand.md, "OpenMP"). A
    variable already set wins over both."""
    limit = cgroup_cpu_limit(cgroup)
    if limit is not None and limit < usable_cpus():
        os.environ.setdefault("OMP_NUM_THREADS", str(limit))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cgroup_cpu_limit(root: Path) -> int | None:
    """The CPU limit of the cgroup mounted at ``root`` in whole CPUs, rounded up: cgroup
    v2's ``cpu.max`` (``quota period``), else v1's ``cpu/cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``. None without a limit, or where the files are missing or
    unreadable (the caller then keeps OpenMP's default)."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
        else:
            v1 = root / "cpu"
            quota = (v1 / "cpu.cfs_quota_us").read_text().strip()
            period = (v1 / "cpu.cfs_period_us").read_text().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def emit(
    obj: dict[str, Any],
    as_json: bool,
    human: Callable[[dict[str, Any]], str] | None = None,
) -> None:
    """Exactly one JSON object on stdout with --json, else the human rendering (without
    one: the object as text, ``text.render``)."""
    if as_json:
        click.echo(json.dumps(obj, default=str, sort_keys=True))
    else:
        click.echo((human or render)(obj))


def reports(fn: F) -> F:
    """Turn expected errors into one clear message (and a JSON object with --json)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            msg = redact_url(str(msg))  # a URL given on the command line may hold a password
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": msg, "type": type(exc).__name__}))
            raise click.ClickException(msg) from exc

    return wrapper  # type: ignore[return-value]


def key_values(pairs: Sequence[str], param_hint: str = "--option") -> dict[str, str]:
    """``-o KEY=VALUE`` options as a dict (a later key wins), a clear error otherwise."""
    out: dict[str, str] = {}
    for kv in pairs:
        if "=" not in kv:
            raise click.BadParameter(f"{kv!r} is not KEY=VALUE", param_hint=param_hint)
        k, v = kv.split("=", 1)
        out[k.strip()] = v
    return out


def finite_json(obj: Any) -> Any:
    """``obj`` with NaN / inf (an undefined precision, no positives) as None, so the
    JSON a command prints is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj
