"""What can go wrong in a workspace, one type per concern.

Every face maps these once (the CLI in :func:`predops.pipelines.cli.support.reports`, the
server in :func:`predops.serving.errors.install_error_handlers`, the scheduler in its run
table): never by a built-in exception type, so a corrupt lake file can never read as a
lock held by another process. Messages name the file, model or plan concerned.
"""

from __future__ import annotations


class WorkspaceError(Exception):
    """A workspace operation that cannot be done; the message says which and why."""


class LakeError(WorkspaceError):
    """A lake operation that cannot be done (bad source name, unreadable partition...)."""


class FeatureStoreError(WorkspaceError):
    """The feature store has no such frame, or its metadata does not match."""


class RegistryError(WorkspaceError):
    """A registry operation that cannot proceed (unknown model, missing alias, ...)."""


class RegistryUnavailable(RegistryError):
    """The MLflow store cannot be used now (locked, unreachable, failing); nothing was
    changed in it by the operation that raised this."""


class LockHeld(WorkspaceError):
    """Another process holds a workspace lock (an apply, the scheduler); try again."""


class PlanError(WorkspaceError):
    """A plan file that cannot be read (not JSON, a bad action); names file and field."""


class PlanNotFound(PlanError):
    """No plan file with that id in the workspace."""


class ApprovalRequired(WorkspaceError):
    """``apply --execute`` of a plan without a valid approval (none, or four eyes)."""
