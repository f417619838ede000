"""Why a node's risk is what it is, as the risk board and the node page word it: the
features that raise it first (largest contribution first), the ones that lower it apart.

The model ranks a node's reasons by absolute contribution (``models/failure/reasons.py``
``top_reasons``), which is right for the API's "what moved this score", but a node whose
three largest contributions all lower its risk would then be "explained" by reasons that
do not explain a high risk. So the pages ask the scoring pass for every contribution
above noise and sort them by sign here; the model's ranking (and the API's reasons) are
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from predops.core.contracts import Reason
from predops.serving.dashboards.risk import ALL_REASONS, FleetRisk

SHOWN = 3
"""Reasons listed on each side (raising, lowering)."""
NOISE = 0.05
"""Contributions (log-odds) below this are noise (the model's ``min_abs``)."""


@dataclass(frozen=True, slots=True)
class Why:
    raising: tuple[Reason, ...]
    """Up to :data:`SHOWN` features that raise the risk, largest first."""
    lowering: tuple[Reason, ...]
    """Up to :data:`SHOWN` features that lower it, most lowering first."""
    raising_total: int
    """How many features raise it by more than noise (``raising`` may show fewer)."""
    wanted: int = SHOWN

    @property
    def brief(self) -> str | None:
        """:attr:`note` short enough for a table cell."""
        if self.raising_total >= self.wanted:
            return None
        if self.raising_total == 0:
            return "no feature raises its risk: this is the model's starting level"
        one = self.raising_total == 1
        return f"only {self.raising_total} feature{'' if one else 's'} raise{'s' if one else ''} it"

    @property
    def note(self) -> str | None:
        """When fewer than :data:`SHOWN` features raise the risk, that fact in words."""
        if self.raising_total >= self.wanted:
            return None
        rest = (
            "the rest of its p_fail is the model's starting level at this horizon "
            "(before any feature of this node counts), not something this node shows"
        )
        if self.raising_total == 0:
            return (
                f"No feature raises this node's risk by more than noise ({NOISE} log-odds): {rest}."
            )
        one = self.raising_total == 1
        return (
            f"Only {self.raising_total} feature{'' if one else 's'} "
            f"raise{'s' if one else ''} this node's risk by more than noise "
            f"({NOISE} log-odds); {rest}."
        )


def split(reasons: tuple[Reason, ...], shown: int = SHOWN) -> Why:
    """``reasons`` (any order) as raising-first and lowering apart."""
    up = sorted((r for r in reasons if r.contribution > 0), key=lambda r: -r.contribution)
    down = sorted((r for r in reasons if r.contribution < 0), key=lambda r: r.contribution)
    return Why(tuple(up[:shown]), tuple(down[:shown]), len(up), shown)


def node_why(risk: FleetRisk, node_id: str) -> Why | None:
    """The node's reasons from this scoring pass, split by sign; None when the pass did
    not score it (stale, unknown)."""
    found = risk.explain([node_id], top=ALL_REASONS)
    return split(found[node_id]) if node_id in found else None


def explained(rows: list[dict[str, Any]], risk: FleetRisk) -> list[dict[str, Any]]:
    """Board rows (``fleet.top_nodes``) with ``why`` (a :class:`Why`, None when this pass
    did not score the node) and ``reasons`` the texts of what raises each risk; one
    TreeSHAP pass over the rows, whichever of the fleet's nodes they are."""
    found = risk.explain([r["node_id"] for r in rows], top=ALL_REASONS)
    out = []
    for r in rows:
        w = split(found[r["node_id"]]) if r["node_id"] in found else None
        out.append({**r, "why": w, "reasons": [x.text for x in w.raising] if w else []})
    return out
