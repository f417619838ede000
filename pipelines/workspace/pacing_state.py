"""Slow-start pacing's state between planning rounds: ``<workspace>/policy/pacing.json``.

Every plan made in the workspace (``predops plan``, the scheduler's plan step, the
incremental cycle) reads the state the previous plan left and writes the state its own
plan carries (:attr:`core.actions.Plan.pacing`, :class:`policy.pacing.PacingState`),
atomically (:mod:`predops.pipelines.workspace.atomic`): a crash leaves the old state or
the new one. The state is bounded by construction (``pacing_max_domains`` domains, one
drain in flight per node). With ``pacing`` 'breaker' nothing is read or written. A plan
that is never applied leaves its drains in the state only until their actions expire.
"""

from __future__ import annotations

import json
from pathlib import Path

from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.errors import WorkspaceError
from predops.policy.pacing import PacingState


class PacingStateError(WorkspaceError):
    """The pacing state file cannot be read."""


def pacing_path(workspace: Path) -> Path:
    return workspace / "policy" / "pacing.json"


def read_pacing(path: Path) -> PacingState | None:
    """The state in ``path``; None when there is none yet. A file that cannot be read is
    a :class:`PacingStateError` naming it and the field (planning on without it would
    reopen every paused domain)."""
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PacingStateError(
            f"{path}: not a pacing state ({exc}); delete it to start pacing afresh"
        ) from None
    try:
        return PacingState.from_dict(body, str(path))
    except ValueError as exc:
        raise PacingStateError(f"{exc}; delete the file to start pacing afresh") from None


def write_pacing(path: Path, state: PacingState) -> None:
    atomic_write_text(path, json.dumps(state.to_dict(), indent=1, sort_keys=True) + "\n")
