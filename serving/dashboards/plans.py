"""The plan pages' data: plan files in the workspace (as written by ``predops plan`` or
the scheduler), their audit trail, and the pool-sizing and buy views of a plan."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.plans import PLAN_ID, plan_path
from predops.serving.dashboards.formatting import times_in

HOLD = re.compile(
    r"hold (?P<current>\d+) nodes \(target (?P<target>\d+), usage floor (?P<floor>\d+)\)"
)
"""The detail of a ``resize_pool`` skip (``policy.sizing``): what the pool holds and needs."""


_created_at: dict[Path, tuple[tuple[int, int], str]] = {}
"""Each plan file's ``created_at`` by (modification time, size): a plan is written once
(atomically), and at 10,000 nodes each file is a few MB of JSON, so a listing parses a
file once per process, not once per page view. Holds only the files of the latest
listing."""
_created_lock = threading.Lock()


def plan_ids(plans_dir: Path) -> list[str]:
    """Plan ids in the workspace, newest first (ids start with their UTC creation time)."""
    if not plans_dir.exists():
        return []
    paths = [p for p in plans_dir.glob("*.json") if PLAN_ID.match(p.stem)]
    created = {p.stem: _created(p) for p in paths}
    with _created_lock:
        for gone in set(_created_at) - set(paths):
            if gone.parent == plans_dir:
                del _created_at[gone]
    return sorted(created, key=lambda i: (created[i], i), reverse=True)


def plan_ids_between(plans_dir: Path, since: datetime, until: datetime) -> tuple[list[str], int]:
    """The ids of the plans created in ``[since, until]``, newest first, and how many
    were created outside it (a plan whose time cannot be read is kept)."""
    kept, outside = [], 0
    for pid in plan_ids(plans_dir):
        try:
            at = datetime.fromisoformat(_created(plans_dir / f"{pid}.json"))
        except ValueError:
            kept.append(pid)
            continue
        at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
        if since <= at <= until:
            kept.append(pid)
        else:
            outside += 1
    return kept, outside


def _created(path: Path) -> str:
    try:
        st = path.stat()
        version = (st.st_mtime_ns, st.st_size)
        found = _created_at.get(path)
        if found is not None and found[0] == version:
            return found[1]
        created = str(json.loads(path.read_text())["created_at"])
    except (OSError, ValueError, KeyError, TypeError):  # TypeError: not a JSON object
        return ""
    with _created_lock:
        _created_at[path] = (version, created)
    return created


def read_plan_dict(plans_dir: Path, plan_id: str) -> dict[str, Any] | None:
    """The plan file as written (with its ``inputs`` notes), or None when there is none.
    ValueError for an id that is not a plan id."""
    path = plan_path(plans_dir, plan_id)
    if not path.exists():
        return None
    body = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(body, dict):
        raise ValueError(f"{path.name}: not a plan object")
    return body


def audit_trail(audit_log: Path, plan_id: str) -> list[dict[str, Any]]:
    """Audit entries of one plan (planned, approved, applied, ...), oldest first."""
    log = AuditLog(audit_log, who="dashboard")
    return [e for e in log.entries() if e.get("plan_id") == plan_id]


def pool_sizing(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Per pool: current and target nodes, what the plan does and why."""
    out = []
    for a in plan.get("actions", []):
        if a.get("kind") != "resize_pool":
            continue
        ev, params = a.get("evidence") or {}, a.get("params") or {}
        out.append(
            {
                "pool": a["target"],
                "current": params.get("from_nodes", ev.get("current")),
                "target": ev.get("target", params.get("to_nodes")),
                "to_nodes": params.get("to_nodes"),
                "usage_floor": ev.get("usage_floor"),
                "decision": "resize",
                "why": a.get("reason", ""),
                "evidence": ev,
            }
        )
    for s in plan.get("skips", []):
        if s.get("kind") != "resize_pool":
            continue
        m = HOLD.search(s.get("detail", ""))
        out.append(
            {
                "pool": s["target"],
                "current": int(m["current"]) if m else None,
                "target": int(m["target"]) if m else None,
                "to_nodes": int(m["current"]) if m else None,
                "usage_floor": int(m["floor"]) if m else None,
                "decision": f"hold ({s.get('reason')})",
                "why": s.get("detail", ""),
                "evidence": {},
            }
        )
    return sorted(out, key=lambda r: r["pool"])


def candidate_key(row: dict[str, Any]) -> str:
    """What names a plan candidate uniquely: its target, and for a buy action (whose
    target is the SKU) ``<sku>@<region>``, as its skips are named."""
    target = str(row.get("target"))
    region = (row.get("params") or {}).get("region")
    if row.get("kind") == "buy" and region and "@" not in target:
        return f"{target}@{region}"
    return target


def buys(plan: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan's buy actions (with their demand quantiles and stock) and buy skips."""
    actions = []
    for a in plan.get("actions", []):
        if a.get("kind") != "buy":
            continue
        ev, params = a.get("evidence") or {}, a.get("params") or {}
        worth = {k: a.get(k) for k in ("expected_benefit", "expected_cost")}
        actions.append(
            {
                "sku": a["target"],
                **params,
                "reason": a.get("reason", ""),
                **ev,
                **worth,
                "target": candidate_key(a),
            }
        )
    skips = [s for s in plan.get("skips", []) if s.get("kind") == "buy"]
    return actions, skips


def no_buy_reason(plan: dict[str, Any]) -> str:
    """Why a plan has no buy candidates at all, from its inputs notes."""
    fleet = (plan.get("inputs") or {}).get("fleet") or {}
    forecasts = (plan.get("inputs") or {}).get("forecasts") or {}
    parts = [
        "this plan considered no purchases: the buy policy sizes an order per SKU and "
        "region with a stock position (spares on hand, orders, nodes in repair), and the "
        "planner was given none"
    ]
    if "stock" not in fleet:
        parts.append("the fleet read from the lake carries no stock table")
    if forecasts.get("status") not in (None, "ok"):
        parts.append(f"demand forecasts: {forecasts.get('note', forecasts.get('status'))}")
    return "; ".join(parts) + "."


SKIPS_SHOWN = 50
"""Rows shown per skip group (the rest are counted): a 10,000-node plan stays a page."""


def skip_groups(
    plan: dict[str, Any], p_fail: dict[str, float], shown: int = SKIPS_SHOWN
) -> list[dict[str, Any]]:
    """The plan's skips grouped by (kind, reason), largest group first; within a group
    the closest calls first: node candidates by the node's current p_fail (highest
    first), the rest by target. Each group: ``kind``, ``reason``, ``count``, ``rows``
    (at most ``shown``, each with ``p_fail`` or None) and ``more`` (rows not shown)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in plan.get("skips", []):
        groups.setdefault((s["kind"], s["reason"]), []).append(s)
    out = []
    for (kind, reason), rows in groups.items():
        ranked = sorted(rows, key=lambda s: (-p_fail.get(s["target"], -1.0), s["target"]))
        out.append(
            {
                "kind": kind,
                "reason": reason,
                "count": len(rows),
                "rows": [{**s, "p_fail": p_fail.get(s["target"])} for s in ranked[:shown]],
                "more": max(0, len(rows) - shown),
            }
        )
    return sorted(out, key=lambda g: (-g["count"], g["kind"], g["reason"]))


_ISO = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(?:\+00:00|Z)")

ADVICE = (
    (
        "failure risk:",
        "No risk was fresh enough to act on, so no node was cordoned or drained. Check the "
        "scheduler's pipeline job (Models page, scheduled runs) or run "
        "`predops score failure`.",
    ),
    (
        "demand forecast:",
        "Pools were not resized and nothing was bought. Check the pipeline job's forecast "
        "step or run `predops forecast demand`; `predops models list` shows whether a "
        "demand model is served.",
    ),
    (
        "buy ",
        "Buys need forecasts that reach the SKU's lead time; train the weekly demand model "
        "(`predops train demand --config weekly`) or shorten the review period.",
    ),
    (
        "storm breaker:",
        "Open the pool's nodes on the risk board: many nodes crossing at once is more often "
        "a data or exporter fault, or one bad job, than real hardware failures.",
    ),
    (
        "slow start:",
        "Drains in the named domain are paced or paused while the others go on. A paused "
        "signal or driver version usually means an exporter, a crashed job or a rollout: "
        "check it; the probe drain's inspection resumes or stops the domain.",
    ),
)
"""What to do about an alert, by how its text starts."""


def alert_view(text: str) -> dict[str, str]:
    """A plan alert for people: times as ``YYYY-MM-DD HH:MM UTC`` in ``<time>`` elements
    (shown in the viewer's zone; not raw ISO with ``+00:00``) and the advice for its
    kind (empty when none applies)."""
    words = times_in(text, _ISO)
    advice = next((a for prefix, a in ADVICE if text.startswith(prefix)), "")
    return {"text": words, "advice": advice}
