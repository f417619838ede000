"""Shared fixtures: the public traces beside the repo, a fixed clock, a fresh lake."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.workspace.lake import Lake

# The served workspace (both champions, one plan): registered here only, so the serving,
# browser and reliability tests share one build per session.
from tests.served_workspace import served_template, served_workspace  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("PREDOPS_SHARED_DATA") or REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public traces (never copied into the repo). Their absence is an error:
    CI has them beside the repo, and so must every developer."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"public traces not found at {SHARED_DATA}; set PREDOPS_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2026, 6, 1, tzinfo=UTC))


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake")
