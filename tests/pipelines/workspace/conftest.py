"""The registry tests' store: an MLflow SQLite file migrated once per session, copied
per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from predops.pipelines.workspace import registry


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its tables created once (the migrations take ~10 s)."""
    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    registry.list_models(uri=f"sqlite:///{db}")
    return db


@pytest.fixture
def uri(tmp_path: Path, empty_store: Path) -> str:
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"
