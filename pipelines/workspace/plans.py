"""Plans as files: ``<workspace>/plans/<plan_id>.json``, written atomically, read back.

A plan file is :meth:`core.actions.Plan.to_dict` as JSON. It is written to a temporary
file in the same directory, fsynced and renamed into place
(:mod:`predops.pipelines.workspace.atomic`), so a reader (``predops apply``) sees a
whole plan or none. :func:`read_plan` rebuilds the typed plan with
:meth:`core.actions.Plan.from_dict`, which checks that each rebuilt action has the
idempotency key the file recorded — a plan edited by hand, or written by a version that
computes keys differently, is refused rather than applied with keys that no longer
match the audit log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from predops.core.actions import Plan
from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.errors import PlanError, PlanNotFound

PLAN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def plan_path(plans_dir: Path, plan_id: str) -> Path:
    """Where plan ``plan_id`` lives; a clear error for ids that are not file names."""
    if not PLAN_ID.match(plan_id):
        raise ValueError(f"{plan_id!r} is not a plan id (letters, digits, '.', '_', '-')")
    return plans_dir / f"{plan_id}.json"


def write_plan(plans_dir: Path, plan: Plan, extra: dict[str, Any] | None = None) -> Path:
    """Write ``plan`` (plus ``extra`` top-level fields, e.g. input notes) atomically."""
    body = plan.to_dict()
    for k, v in (extra or {}).items():
        if k in body:
            raise ValueError(f"plan file: extra field {k!r} would overwrite the plan's own")
        body[k] = v
    path = plan_path(plans_dir, plan.plan_id)
    atomic_write_text(path, json.dumps(body, indent=2, sort_keys=True, default=str) + "\n")
    return path


def read_plan(path: Path) -> Plan:
    """The :class:`Plan` in a plan file. :class:`PlanNotFound` when there is none,
    :class:`PlanError` naming the file and field when it cannot be read."""
    if not path.exists():
        raise PlanNotFound(f"no plan file {path}; run `predops plan` first")
    try:
        return _read_plan(path)
    except KeyError as exc:
        raise PlanError(f"{path}: field {exc.args[0]!r} is missing") from None
    except (ValueError, TypeError) as exc:
        raise PlanError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None


def _read_plan(path: Path) -> Plan:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    return Plan.from_dict(d, str(path))
