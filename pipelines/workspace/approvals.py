"""Plan approvals, one record for every path: ``<workspace>/plan_approvals/<plan_id>.json``.

The REST API (``POST /v1/plans/{id}/approve``) and ``predops approve`` write the same
record, and every ``apply --execute`` — the CLI's and the API's — checks it through
:func:`check_approval` before any action runs. A plan id is the hash of the plan's
content, so an approval covers exactly the actions that were read; a changed plan has
another id and needs its own approval.

Four eyes (``[policy.approval] four_eyes = true``): the identity that applies must differ
from the one that approved. Identities are *subjects* — a token's ``subject`` in the
API (several tokens of one person share it), ``$PREDOPS_OPERATOR`` or the login name on
the command line. On the command line the subject is what the shell says, so there the
rule guards against mistakes, not against someone who can write the workspace (who can
also write approvals); the API, with its tokens, is where it is enforced against people.

Break glass (``predops apply --execute --break-glass REASON``, CLI only): applies
without an approval; the reason and who gave it are an audit entry of their own, written
before anything runs.

Records are written atomically, 0600 in a 0700 directory (temporary file, fsync, rename;
:mod:`predops.pipelines.workspace.private`), so an
approval survives a restart and a reader never sees half of one. Plan ids are checked
against the plan-file pattern and the resolved path must stay inside the directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.errors import ApprovalRequired
from predops.pipelines.workspace.plans import PLAN_ID
from predops.pipelines.workspace.private import private_dir, write_private_text

APPROVALS_DIR = "plan_approvals"


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """``[policy.approval]``: whether executing needs an approval, and four eyes."""

    required: bool = True
    four_eyes: bool = False


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
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ApprovalRequired(f"{path}: unreadable approval record ({exc})") from exc
        if not isinstance(record, dict) or record.get("plan_id") != plan_id:
            raise ApprovalRequired(f"{path}: not an approval of plan {plan_id!r}")
        return record

    def approve(
        self,
        plan_id: str,
        *,
        by: str,
        role: str,
        at: datetime,
        comment: str = "",
        subject: str | None = None,
    ) -> dict[str, Any]:
        """Record the approval (a second approval replaces the first: the latest counts).
        ``by`` names the credential (a token's name), ``subject`` the identity behind it
        (default ``by``), which four eyes compares."""
        record = {
            "plan_id": plan_id,
            "approved_by": by,
            "subject": subject or by,
            "role": role,
            "approved_at": at.isoformat(),
            "comment": comment,
        }
        private_dir(self.root)
        write_private_text(checked_path(self.root, plan_id), json.dumps(record, sort_keys=True))
        return record


def check_approval(
    workspace: Path,
    plan_id: str,
    *,
    applier: str,
    rule: ApprovalRule,
    break_glass: str | None,
    audit: AuditLog,
    at: datetime,
) -> dict[str, Any]:
    """What lets ``applier`` execute ``plan_id``: the approval record, or the break-glass
    reason (audited here). :class:`ApprovalRequired` when neither does."""
    if break_glass is not None:
        if not break_glass.strip():
            raise ApprovalRequired("--break-glass needs a reason (it goes to the audit log)")
        audit.append(
            at=at,
            outcome="break_glass",
            what={"kind": "plan", "target": plan_id, "params": {}},
            why=break_glass.strip(),
            plan_id=plan_id,
            mode="execute",
        )
        return {"break_glass": break_glass.strip(), "by": applier}
    record = ApprovalStore(workspace).get(plan_id)
    if not rule.required:
        return {"approval": record, "required": False}
    if record is None:
        raise ApprovalRequired(
            f"plan {plan_id!r} is not approved: approve it first (`predops approve "
            f"{plan_id}` or POST /v1/plans/{plan_id}/approve), or give --break-glass REASON"
        )
    approver = str(record.get("subject") or record.get("approved_by") or "")
    if rule.four_eyes and approver == applier:
        raise ApprovalRequired(
            f"plan {plan_id!r} was approved by {approver!r}, who may not also apply it "
            "(four eyes: [policy.approval] four_eyes = true); another identity must apply"
        )
    return {"approval": record, "required": True, "four_eyes": rule.four_eyes}
