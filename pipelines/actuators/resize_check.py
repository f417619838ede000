"""The ``check`` every pool resizer runs (Cluster API, placeholders, Karpenter): resolve
the action against the cluster as it is now, keep what passed for the run that
follows in the same apply, and turn an API error into a ``revalidation_failed`` that
says what was being read."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from predops.core.actions import Action, ResizePool, SkipReason
from predops.pipelines.actuators.kube import api_error, client_errors
from predops.policy.guards import Verdict

R = TypeVar("R")


def checked_resize(
    action: Action,
    resolve: Callable[[ResizePool], R | Verdict],
    checked: dict[str, R],
    reading: str,
) -> Verdict | None:
    """None when ``action`` (a resize; other kinds pass) may run now, with what
    ``resolve`` found kept in ``checked`` under its key; else why not."""
    if not isinstance(action, ResizePool):
        return None
    checked.pop(action.idempotency_key, None)
    try:
        got = resolve(action)
    except client_errors() as exc:
        status, msg = api_error(exc)
        return Verdict(
            SkipReason.REVALIDATION_FAILED,
            f"pool {action.target}: reading {reading}: HTTP {status}: {msg}",
        )
    if isinstance(got, Verdict):
        return got
    checked[action.idempotency_key] = got
    return None
