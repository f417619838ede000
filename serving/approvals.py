"""Plan approvals kept in the workspace: ``<workspace>/plan_approvals/<plan_id>.json``.

One small JSON file per approved plan, written atomically (temporary file, fsync,
rename), so an approval survives a restart and a reader never sees half of one; files
0600 in a 0700 directory (:mod:`predops.pipelines.workspace.private`). Plan ids
are checked against the plan-file pattern and the resolved path must stay inside the
directory (no traversal through the id).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.plans import PLAN_ID
from predops.pipelines.workspace.private import private_dir, write_private_text

APPROVALS_DIR = "plan_approvals"


def checked_path(directory: Path, plan_id: str, suffix: str = ".json") -> Path:
    """``directory/<plan_id><suffix>`` for a valid id whose path resolves inside
    ``directory``; ValueError otherwise."""
    if not PLAN_ID.match(plan_id) or plan_id in (".", ".."):
        raise ValueError(f"{plan_id!r} is not a plan id (letters, digits, '.', '_', '-')")
    path = (directory / f"{plan_id}{suffix}").resolve()
    if path.parent != directory.resolve():
        raise ValueError(f"{plan_id!r} is not a plan id")
    return path


class ApprovalStore:
    """Who approved which plan, one file per plan."""

    def __init__(self, workspace: Path) -> None:
        self.root = workspace / APPROVALS_DIR

    def get(self, plan_id: str) -> dict[str, Any] | None:
        path = checked_path(self.root, plan_id)
        if not path.exists():
            return None
        record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return record

    def approve(
        self, plan_id: str, *, by: str, role: str, at: datetime, comment: str = ""
    ) -> dict[str, Any]:
        """Record the approval (a second approval replaces the first: the latest counts)."""
        record = {
            "plan_id": plan_id,
            "approved_by": by,
            "role": role,
            "approved_at": at.isoformat(),
            "comment": comment,
        }
        private_dir(self.root)
        write_private_text(checked_path(self.root, plan_id), json.dumps(record, sort_keys=True))
        return record
