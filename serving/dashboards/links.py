"""Where things link to on the pages: a node to its page, a pool to its capacity row, a
model version to its column on the models page, and a node to the newest plan's
decision about it."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from predops.pipelines.workspace import registry
from predops.pipelines.workspace.errors import RegistryError
from predops.serving.dashboards import plans, view
from predops.serving.dashboards.filtering import NODE_KINDS, POOL_KINDS


def node_href(node_id: str) -> str:
    return f"/nodes/{quote(node_id, safe='')}"


def capacity_href(pool: str) -> str:
    """The capacity page filtered to ``pool``, at its sizing row."""
    return f"{view.link('/capacity', {'pool': pool})}#sizing-{quote(pool, safe='')}"


def model_anchor(name: str, version: object | None = None) -> str:
    """The id of a model's section (or of one version's column) on the models page, by
    its registered name (``node_failure`` and ``predops.node_failure`` are one model)."""
    with suppress(RegistryError):  # not a registry name: the anchor as written
        name = registry.registered_name(name)
    return f"model-{name}" if version in (None, "") else f"model-{name}-v{version}"


def model_href(label: str | None) -> str | None:
    """``/models#...`` for a ``"<name> v<version>"`` label (as pages show the served
    model); None for no label."""
    if not label:
        return None
    name, _, version = label.rpartition(" v")
    if not name or not version.isdigit():
        return f"/models#{quote(model_anchor(label), safe='.-_')}"
    return f"/models#{quote(model_anchor(name, version), safe='.-_')}"


def candidate_anchor(kind: str, target: str) -> str:
    """The id of a plan candidate's row on the plan page."""
    return f"c-{kind}-{target}"


candidate_key = plans.candidate_key
"""(:func:`plans.candidate_key`, a template global from here.)"""


def buy_anchor(target: str) -> str:
    """The id of a buy candidate's row (``<sku>@<region>``) on the capacity page."""
    return f"buy-{target}"


def buy_href(target: str, plan_id: str | None = None) -> str:
    """The capacity page at a buy candidate's row, of ``plan_id`` (the newest plan when
    None)."""
    page = view.link("/capacity", {"plan_id": plan_id} if plan_id else {})
    return f"{page}#{quote(buy_anchor(target), safe='@.-_')}"


def plan_row_href(plan_id: str, kind: str, target: str) -> str:
    """The plan page at a candidate's row (an action or a skip)."""
    return f"/plans/{quote(plan_id, safe='')}#{quote(candidate_anchor(kind, target), safe='@.-_')}"


def target_href(kind: str, target: str, plan_id: str | None = None) -> str | None:
    """Where a plan candidate's target is shown: a node's page, a pool's capacity row,
    a buy's row on the capacity page (of ``plan_id``)."""
    if kind in NODE_KINDS:
        return node_href(target)
    if kind in POOL_KINDS:
        return capacity_href(target)
    if kind == "buy":
        return buy_href(target, plan_id)
    return None


def plan_decision(plans_dir: Path, node_id: str, rack: str | None) -> dict[str, Any] | None:
    """What the newest plan decided about ``node_id``: ``{"plan_id", "kind", "acted",
    "reason", "detail", "href"}`` (an action first, else a skip), or None when the plan
    names it nowhere (or there is no plan). ``href`` opens the plan at the row, filtered
    to the node's kind and rack so the row is listed."""
    ids = plans.plan_ids(plans_dir)
    plan = plans.read_plan_dict(plans_dir, ids[0]) if ids else None
    if plan is None:
        return None
    mine = [
        (acted, row)
        for acted, rows in ((True, plan.get("actions", [])), (False, plan.get("skips", [])))
        for row in rows
        if row.get("target") == node_id and row.get("kind") in NODE_KINDS
    ]
    if not mine:
        return None
    acted, row = mine[0]
    query = {"kind": str(row["kind"]), **({"rack": rack} if rack else {})}
    href = view.link(f"/plans/{quote(str(plan['plan_id']), safe='')}", query)
    return {
        "plan_id": plan["plan_id"],
        "created_at": plan.get("created_at"),
        "kind": row["kind"],
        "acted": acted,
        "reason": row.get("reason", ""),
        "detail": row.get("detail", ""),
        "href": f"{href}#{quote(candidate_anchor(str(row['kind']), node_id), safe='')}",
    }


TEMPLATE_GLOBALS = (
    "node_href",
    "capacity_href",
    "model_anchor",
    "model_href",
    "candidate_anchor",
    "target_href",
    "buy_anchor",
    "candidate_key",
    "plan_row_href",
)
"""The functions the templates call by these names."""


def served_href(loaded: Any) -> str | None:
    """The models-page link of a served model (``ModelSlot.current``) by its registered
    name from its provenance (``demand`` is served from ``predops.demand.hourly``)."""
    if loaded is None:
        return None
    return model_href(f"{loaded.provenance.model_name} v{loaded.version}")
