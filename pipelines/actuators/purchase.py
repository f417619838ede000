"""Purchase requests: ``buy`` actions written as files procurement picks up.

``<workspace>/purchases/<plan_id>.json`` (a list of requests) and ``.csv`` (the same
rows), both rewritten atomically as each request of the plan is executed. A request
carries SKU, region, quantity, need-by date, the idempotency key, the reason and the
newsvendor numbers that produced it; a key already in the file is not added twice.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from predops.core.actions import Action, Buy
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.plans import plan_path

COLUMNS = ("idempotency_key", "sku", "region", "quantity", "by_date", "requested_at", "reason")


class PurchaseRequestWriter:
    """Writes executed ``buy`` actions to ``<purchases_dir>/<plan_id>.json|csv``."""

    name = "purchase-file"

    def __init__(self, purchases_dir: Path, clock: Clock) -> None:
        self.dir = purchases_dir
        self.clock = clock

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, Buy):
            raise ActionFailed(f"the purchase writer does not run {action.kind} actions")
        path = plan_path(self.dir, plan_id)
        rows: list[dict[str, Any]] = json.loads(path.read_text()) if path.exists() else []
        key = action.idempotency_key
        if all(r["idempotency_key"] != key for r in rows):
            rows.append(
                {
                    "idempotency_key": key,
                    "sku": action.target,
                    "region": action.region,
                    "quantity": action.quantity,
                    "by_date": action.by_date.isoformat(),
                    "requested_at": self.clock.now().isoformat(),
                    "reason": action.reason,
                    "evidence": action.evidence,
                }
            )
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        atomic_write_text(path, json.dumps(rows, indent=2, sort_keys=True, default=str) + "\n")
        atomic_write_text(path.with_suffix(".csv"), buf.getvalue())
        return {"file": str(path), "csv": str(path.with_suffix(".csv")), "requests": len(rows)}
