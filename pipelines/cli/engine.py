"""``--engine local|dask``, ``--scheduler`` and ``--workers``: where a job runs.

The commands that take these (``features build``, ``train failure``, ``score failure``,
``eval demand``) run on the Dask cluster at ``--scheduler tcp://host:8786``, or on a
``LocalCluster`` of ``--workers`` processes started for the command when no address is
given (``features build`` needs the address); the results equal the local engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def engine_options(f: F) -> F:
    """The three options, passed as ``engine``, ``scheduler`` and ``workers``."""
    f = click.option(
        "--workers",
        type=click.IntRange(1),
        default=2,
        show_default=True,
        help="Workers of the local Dask cluster (--engine dask without --scheduler).",
    )(f)
    f = click.option(
        "--scheduler", default=None, help="Dask scheduler address, e.g. tcp://host:8786."
    )(f)
    return click.option(
        "--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True
    )(f)


@contextmanager
def engine_client(engine: str, scheduler: str | None, workers: int) -> Iterator[Any]:
    """None for the local engine; a ``distributed.Client`` for Dask (see module doc)."""
    if engine == "local":
        if scheduler is not None:
            raise click.BadParameter("--scheduler needs --engine dask", param_hint="--scheduler")
        yield None
        return
    from predops.pipelines.jobs.distributed import dask_client

    with dask_client(scheduler, workers=workers) as client:
        yield client
