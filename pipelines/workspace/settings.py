"""Settings from the environment, read in one place (a composition root)."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WORKSPACE = "workspace"
DEFAULT_SHARED_DATA = "../shared/data"


@dataclass(frozen=True, slots=True)
class Settings:
    """Where predops writes (the workspace) and where the public traces are."""

    workspace: Path
    shared_data: Path

    @property
    def lake_dir(self) -> Path:
        return self.workspace / "lake"

    @property
    def features_dir(self) -> Path:
        return self.workspace / "features"

    @property
    def mlflow_uri(self) -> str:
        return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{self.workspace / 'mlflow.db'}"

    @property
    def plans_dir(self) -> Path:
        return self.workspace / "plans"

    @property
    def audit_log(self) -> Path:
        return self.workspace / "audit.jsonl"

    @property
    def scheduler_db(self) -> Path:
        return self.workspace / "scheduler.db"


def load_settings(workspace: str | os.PathLike[str] | None = None) -> Settings:
    """``--workspace`` wins over ``PREDOPS_WORKSPACE``, which wins over ./workspace."""
    ws = workspace or os.environ.get("PREDOPS_WORKSPACE") or DEFAULT_WORKSPACE
    shared = os.environ.get("PREDOPS_SHARED_DATA") or DEFAULT_SHARED_DATA
    return Settings(workspace=Path(ws).expanduser().resolve(), shared_data=Path(shared).resolve())


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def operator_subject() -> str:
    """Who is acting, as approvals and four eyes compare it: $PREDOPS_OPERATOR, else the
    login name (what the shell says; see :mod:`predops.pipelines.workspace.approvals`)."""
    return os.environ.get("PREDOPS_OPERATOR") or _login()


def operator_identity() -> str:
    """Who is acting, for the audit log: $PREDOPS_OPERATOR, else the login name."""
    return os.environ.get("PREDOPS_OPERATOR") or f"{_login()} via predops"
