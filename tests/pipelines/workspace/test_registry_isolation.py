"""Using the registry for one workspace must not point later workspaces of the same
process at that store (MLflow exports MLFLOW_*_URI into the environment)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from predops.pipelines.workspace import registry
from predops.pipelines.workspace.settings import load_settings


def test_registry_use_leaves_the_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    first = load_settings(tmp_path / "a")
    registry.list_models(uri=first.mlflow_uri)
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert "MLFLOW_REGISTRY_URI" not in os.environ
    second = load_settings(tmp_path / "b")
    assert second.mlflow_uri.endswith(str(tmp_path / "b" / "mlflow.db"))


def test_a_user_tracking_uri_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", user)
    registry.list_models(uri=f"sqlite:///{tmp_path / 'other.db'}")
    assert os.environ["MLFLOW_TRACKING_URI"] == user
    assert load_settings(tmp_path / "ws").mlflow_uri == user
