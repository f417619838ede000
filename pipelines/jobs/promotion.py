"""Promotion: each model's backtest, and the challenger-vs-champion decision by it.

``predops models promote <name>`` and the scheduler's ``promote_*`` steps call
:func:`promote`; the registry (:func:`predops.pipelines.workspace.registry.promote`)
scores challenger and champion with the backtest given here and moves ``champion`` only
for a strictly better challenger, writing on it the promotion record (the metric, both
scores, the champion it beat) without which no server or plan uses a version
(:mod:`predops.pipelines.workspace.promotion_records`). The champion judged against is
the version predops last promoted, not wherever the alias may have been moved by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from predops.pipelines.jobs import demand as demand_jobs
from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.jobs import usage as usage_jobs
from predops.pipelines.workspace import registry
from predops.pipelines.workspace.errors import RegistryError
from predops.pipelines.workspace.registry import Backtest
from predops.pipelines.workspace.settings import Settings

BACKTESTS: dict[str, Callable[[Settings], Backtest]] = {
    "demand": demand_jobs.backtest_for_registry,  # the legacy single demand model
    "demand.hourly": demand_jobs.backtest_for_registry,
    "demand.weekly": demand_jobs.backtest_for_registry,
    "node_failure": failure_jobs.backtest_for_registry,
    "usage": usage_jobs.backtest_for_registry,
}
"""Per-model backtest factories: ``factory(settings)`` gives the :class:`Backtest` (or a
plain ``callable(model_uri) -> float``, lower is better) a challenger must win. Each
demand horizon is its own gate: a challenger of ``demand.weekly`` is refit and scored on
the weekly configuration's rolling origins against the weekly champion only."""


def backtest_for(name: str, settings: Settings) -> Backtest:
    """The promotion backtest of model ``name`` (``demand.hourly``, ``node_failure``, ...)."""
    short = registry.registered_name(name).removeprefix(registry.PREFIX)
    factory = BACKTESTS.get(short)
    if factory is None:
        raise RegistryError(f"no backtest known for model {short!r}; known: {sorted(BACKTESTS)}")
    made: Any = factory(settings)
    return made if isinstance(made, Backtest) else Backtest(score=made)


def promote(name: str, settings: Settings) -> dict[str, Any]:
    """Backtest challenger and champion of ``name``; promote only a better challenger."""
    return registry.promote(name, backtest_for(name, settings), uri=settings.mlflow_uri)
