"""Plans as files: ``<workspace>/plans/<plan_id>.json``, written atomically, read back.

A plan file is :meth:`core.actions.Plan.to_dict` as JSON. It is written to a temporary
file in the same directory, fsynced and renamed into place, so a reader (``predops
apply``) sees a whole plan or none. :func:`read_plan` rebuilds the typed actions and
checks that each rebuilt action has the idempotency key the file recorded — a plan
edited by hand, or written by a version that computes keys differently, is refused
rather than applied with keys that no longer match the audit log.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import date, datetime
from pathlib import Path
from typing import Any

from predops.core.actions import (
    Action,
    Buy,
    Cordon,
    Drain,
    LendNodes,
    Plan,
    ResizePool,
    Skip,
    SkipReason,
    Uncordon,
)
from predops.core.contracts import Provenance
from predops.pipelines.workspace.errors import PlanError, PlanNotFound

PLAN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def plan_path(plans_dir: Path, plan_id: str) -> Path:
    """Where plan ``plan_id`` lives; a clear error for ids that are not file names."""
    if not PLAN_ID.match(plan_id):
        raise ValueError(f"{plan_id!r} is not a plan id (letters, digits, '.', '_', '-')")
    return plans_dir / f"{plan_id}.json"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a fsynced temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


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


def _time(d: dict[str, Any], name: str, where: str) -> datetime | None:
    v = d.get(name)
    if v is None:
        return None
    try:
        return datetime.fromisoformat(v)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field {name} is not an ISO-8601 time: {v!r}") from None


def action_from_dict(d: dict[str, Any], where: str = "action") -> Action:
    """The typed action behind one ``Action.to_dict()`` (its key is checked)."""
    kind, params = d.get("kind"), d.get("params") or {}
    common: dict[str, Any] = {
        "target": d.get("target") or "",
        "reason": d.get("reason") or "",
        "evidence": d.get("evidence") or {},
        "not_before": _time(d, "not_before", where),
        "expires": _time(d, "expires", where),
        "expected_benefit": d.get("expected_benefit"),
        "expected_cost": d.get("expected_cost"),
    }
    try:
        action: Action
        if kind == "cordon":
            action = Cordon(**common)
        elif kind == "uncordon":
            action = Uncordon(**common)
        elif kind == "drain":
            action = Drain(**common, grace_period_s=int(params["grace_period_s"]))
        elif kind == "resize_pool":
            action = ResizePool(
                **common, from_nodes=int(params["from_nodes"]), to_nodes=int(params["to_nodes"])
            )
        elif kind == "lend_nodes":
            action = LendNodes(**common, to_pool=str(params["to_pool"]), nodes=int(params["nodes"]))
        elif kind == "buy":
            action = Buy(
                **common,
                region=str(params["region"]),
                quantity=int(params["quantity"]),
                by_date=date.fromisoformat(str(params["by_date"])),
            )
        else:
            raise ValueError(f"{where}: unknown action kind {kind!r}")
    except KeyError as exc:
        raise ValueError(f"{where}: params lack field {exc.args[0]}") from None
    recorded = d.get("idempotency_key")
    if recorded != action.idempotency_key:
        raise ValueError(
            f"{where}: idempotency key {recorded!r} does not match the action's content "
            f"({action.idempotency_key}); the plan was edited or written by another version"
        )
    return action


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
    where = str(path)
    actions = tuple(
        action_from_dict(a, f"{where} actions[{i}]") for i, a in enumerate(d.get("actions", []))
    )
    skips = tuple(
        Skip(s["kind"], s["target"], SkipReason(s["reason"]), s.get("detail", ""))
        for s in d.get("skips", [])
    )
    prov = tuple(
        Provenance(
            p["model_name"],
            p["model_version"],
            p["feature_set_hash"],
            datetime.fromisoformat(p["data_cutoff"]),
            p.get("run_id"),
        )
        for p in d.get("provenance", [])
    )
    created, cutoff = _time(d, "created_at", where), _time(d, "data_cutoff", where)
    if created is None or cutoff is None or not d.get("plan_id"):
        raise ValueError(f"{where}: plan_id, created_at and data_cutoff are required")
    return Plan(
        plan_id=str(d["plan_id"]),
        created_at=created,
        data_cutoff=cutoff,
        actions=actions,
        skips=skips,
        budgets_used={str(k): int(v) for k, v in (d.get("budgets_used") or {}).items()},
        provenance=prov,
        dry_run=bool(d.get("dry_run", True)),
        alerts=tuple(d.get("alerts") or ()),
    )
