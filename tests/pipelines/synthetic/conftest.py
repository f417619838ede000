"""Fleets shared by the synthetic-fleet tests (built once per session: they are pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from predops.pipelines.synthetic.run import SimConfig, Simulation, build

START = datetime(2026, 1, 5, tzinfo=UTC)


def config(
    nodes: int = 200, days: float = 14, minutes: int = 5, seed: int = 7, **kw: Any
) -> SimConfig:
    """The CLI's default fleet unless told otherwise."""
    return SimConfig(
        nodes=nodes, days=days, interval=timedelta(minutes=minutes), seed=seed, start=START, **kw
    )


@pytest.fixture(scope="session")
def default_sim() -> Simulation:
    """200 nodes x 14 days at 5 min, seed 7 (what `predops simulate` makes by default)."""
    return build(config())


@pytest.fixture(scope="session")
def default_frames(default_sim: Simulation) -> dict[str, pl.DataFrame]:
    return {
        "inventory": default_sim.inventory(),
        "telemetry": default_sim.telemetry(),
        "events": default_sim.events(),
        "pods": default_sim.pods_frame,
        "demand": default_sim.demand_table(),
        "calendar": default_sim.calendar(),
        "stock": default_sim.stock(),
        "purchase_orders": default_sim.purchase_orders(),
    }


@pytest.fixture(scope="session")
def wide_sim() -> Simulation:
    """1,000 nodes x 7 days at 5 min, seed 11: enough failures for per-mode statistics."""
    return build(config(nodes=1000, days=7, seed=11))


@pytest.fixture(scope="session")
def wide_frames(wide_sim: Simulation) -> dict[str, pl.DataFrame]:
    return {
        "telemetry": wide_sim.telemetry(),
        "events": wide_sim.events(),
        "inventory": wide_sim.inventory(),
    }
